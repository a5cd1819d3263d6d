"""DONE (unseen), issue 34: a turn that ended while nobody looked reads DONE in `status`, the
status line and `switch --next` (ahead of idle panes) until an attached client shows the pane;
to scripts and `wait` it is READY. Real tmux, a real attached client in a pty, the watcher with
its seen step, and an agent that draws Claude Code's screens (tests/fake_agent.py)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from app.base.model import State
from tests.conftest import REPO, conductor
from tests.tmux_client import AttachedClient
from tests.waiting import STARTS_WITHIN_S, retry_until

AGENT = f"{sys.executable} {REPO / 'tests' / 'fake_agent.py'}"


class Lab:
    """The real watcher (its seen step among its steps) on the test's server, read as a script
    would read it."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def row(self, pane: Any) -> dict[str, Any]:
        """The pane's row as `status --json` gives it; {} before the watcher made its store."""
        done = conductor("-L", self.server.socket_name, "pty", "status", "--json")
        rows: list[dict[str, Any]] = json.loads(done.stdout) if done.returncode == 0 else []
        return next((r for r in rows if r["pane_id"] == pane.pane_id), {})

    def status(self, *args: str) -> str:
        done = conductor("-L", self.server.socket_name, "pty", "status", *args)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def settle(self, pane: Any, state: State, **fields: Any) -> dict[str, Any]:
        found: dict[str, Any] = {}

        def there() -> bool:
            found.update(self.row(pane))
            return found.get("state") == state.value and all(
                found.get(key) == value for key, value in fields.items())

        retry_until(there, STARTS_WITHIN_S, interval=0.2)
        return found


@pytest.fixture
def lab(server: Any, watcher_process: Any) -> Lab:
    watcher_process("--interval", "1")
    return Lab(server)


def agent(session: Any, name: str) -> Any:
    pane = session.new_window(window_name=name, window_shell=AGENT, attach=False).active_pane
    retry_until(lambda: "? for shortcuts" in "\n".join(pane.capture_pane()), 10)
    return pane


def test_a_turn_that_ends_unseen_reads_done_until_its_pane_is_shown(
        server: Any, lab: Lab) -> None:
    session = server.new_session(session_name="work", window_name="home")
    idle = agent(session, "idle")
    worker = agent(session, "worker")
    session.select_window("home")
    client = AttachedClient(["-L", server.socket_name], "work", "xterm")
    try:
        lab.settle(idle, State.READY)
        # An agent that started up idle has finished no turn: plain READY.
        lab.settle(worker, State.READY, seen=True)

        worker.send_keys("work 3")
        lab.settle(worker, State.BUSY)
        lab.settle(worker, State.READY, seen=False)
        table = lab.status()
        assert any("worker" in line and "DONE" in line for line in table.splitlines()), table
        assert "[worker: DONE]" in lab.status("--short")
        # Scripts wait on READY: a DONE pane is READY to them.
        waited = conductor("-L", server.socket_name, "pty", "wait", worker.pane_id,
                           "--until", "READY", "--timeout", "5")
        assert waited.returncode == 0, waited.stderr

        # The idle pane has waited longer, but the finished turn comes first.
        went = conductor("-L", server.socket_name, "pty", "switch", "--next")
        assert went.returncode == 0 and "worker" in went.stdout, went.stdout + went.stderr

        # The client now shows it: seen.
        lab.settle(worker, State.READY, seen=True)
        assert "[worker: READY]" in lab.status("--short")
    finally:
        client.close()


def test_a_turn_that_ends_on_the_shown_pane_is_seen_at_once(server: Any, lab: Lab) -> None:
    session = server.new_session(session_name="work", window_name="home")
    worker = agent(session, "worker")
    session.select_window("worker")
    client = AttachedClient(["-L", server.socket_name], "work", "xterm")
    try:
        lab.settle(worker, State.READY)
        worker.send_keys("work 3")
        lab.settle(worker, State.BUSY)
        lab.settle(worker, State.READY)

        assert lab.row(worker)["seen"] is True
    finally:
        client.close()
