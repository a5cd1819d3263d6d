"""DONE (unseen), issue 34: a turn that ended while nobody looked reads DONE in `status`, the
status line and `switch --next` (ahead of idle panes) until an attached client shows the pane;
to scripts and `wait` it is READY. Real tmux, a real attached client in a pty, the watcher with
its seen step, and an agent that draws Claude Code's screens (tests/support/fake_agent.py)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, conductor
from tests.support.tmux_client import AttachedClient
from tests.support.waiting import STARTS_WITHIN_S, retry_until

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"


class Lab:
    """The real watcher (its seen step among its steps) on the test's server. Waits read the
    store itself (a CLI start per look can outlast a short turn on a loaded machine); what a
    person or a script sees is checked with the real CLI."""

    def __init__(self, server: Any, workers: Path) -> None:
        self.server = server
        self.db = workers / "status.db"

    def stored(self, pane: Any) -> tuple[str, int] | None:
        """The pane's (state, seen) in the store; None before the watcher wrote it."""
        found = self._query("SELECT s.state, s.seen FROM ptys p JOIN status s ON s.id = p.id "
                            "WHERE p.pane_id = ?", pane.pane_id)
        return (str(found[0]), int(found[1])) if found else None

    def turns_ended(self, pane: Any) -> int:
        """How many BUSY -> READY transitions of the pane the store holds."""
        found = self._query(
            "SELECT COUNT(*) FROM status_history h JOIN ptys p ON p.id = h.id WHERE "
            "p.pane_id = ? AND h.state = 'READY' AND h.previous_state = 'BUSY'", pane.pane_id)
        return int(found[0]) if found else 0

    def _query(self, sql: str, *params: str) -> tuple[Any, ...] | None:
        """One row, or None while the watcher has not made the store and its tables yet."""
        if not self.db.exists():
            return None
        try:
            with sqlite3.connect(self.db) as conn:
                row: tuple[Any, ...] | None = conn.execute(sql, params).fetchone()
                return row
        except sqlite3.OperationalError:  # no such table: the schema is being made
            return None

    def settle(self, pane: Any, state: str, seen: int | None = None) -> None:
        def there() -> bool:
            found = self.stored(pane)
            return found is not None and found[0] == state and seen in (None, found[1])
        retry_until(there, STARTS_WITHIN_S, interval=0.1)

    def work(self, pane: Any) -> None:
        """One turn of the agent, ended (its BUSY -> READY is in the store)."""
        before = self.turns_ended(pane)
        pane.send_keys("work 2")
        retry_until(lambda: self.turns_ended(pane) > before, STARTS_WITHIN_S, interval=0.1)

    def row(self, pane: Any) -> dict[str, Any]:
        rows: list[dict[str, Any]] = json.loads(self.status("--json"))
        return next(r for r in rows if r["pane_id"] == pane.pane_id)

    def status(self, *args: str) -> str:
        done = conductor("-L", self.server.socket_name, "pty", "status", *args)
        assert done.returncode == 0, done.stderr
        return done.stdout


@pytest.fixture
def lab(server: Any, watcher_process: Any, isolated_env: Path) -> Lab:
    watcher_process("--interval", "1")
    return Lab(server, isolated_env)


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
        lab.settle(idle, "READY")
        # An agent that started up idle has finished no turn: plain READY.
        lab.settle(worker, "READY", seen=1)

        lab.work(worker)

        lab.settle(worker, "READY", seen=0)
        row = lab.row(worker)
        assert (row["state"], row["seen"]) == ("READY", False)
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
        lab.settle(worker, "READY", seen=1)
        assert "[worker: READY]" in lab.status("--short")
    finally:
        client.close()


def test_a_turn_that_ends_on_the_shown_pane_is_seen_at_once(server: Any, lab: Lab) -> None:
    session = server.new_session(session_name="work", window_name="home")
    worker = agent(session, "worker")
    session.select_window("worker")
    client = AttachedClient(["-L", server.socket_name], "work", "xterm")
    try:
        lab.settle(worker, "READY")
        lab.work(worker)

        assert lab.stored(worker) == ("READY", 1)
        assert lab.row(worker)["seen"] is True
    finally:
        client.close()
