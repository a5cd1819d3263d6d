"""The status segment with a real tmux, a real client and a real watcher: the client's width
decides its room, agents come before idle shells, the user's `#{conductor_status}` placeholder
puts it where they want it; and `switch --next` takes every waiting pane in turn."""

from __future__ import annotations

import functools
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.adapters.store_read import StoreReader
from app.run.watcher import Watcher
from tests.conftest import REPO, conductor
from tests.install.test_tmux_plugin import CONDUCTOR, ITEM, QUESTION, Terminal, option, run_plugin
from tests.support.waiting import retry_until, stop_process

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"
pytestmark = pytest.mark.skipif(not Path(CONDUCTOR).exists(),
                                reason="no conductor command on PATH or in the checkout's .venv")


def shows_prompt(pane: Any) -> bool:
    return "? for shortcuts" in "\n".join(pane.capture_pane())


def states(workers_dir: Path) -> dict[str, str]:
    if not (workers_dir / "status.db").exists():
        return {}  # the watcher has not made its store yet
    reader = StoreReader(workers_dir)
    try:
        return {w["name"]: w["state"] for w in reader.workers()}
    finally:
        reader.close()


@pytest.mark.slow
def test_13_panes_on_a_250_column_client_show_8_whole_items_agents_before_idle_shells(
        server: Any, session: Any, watcher_process: Any, isolated_env: Path) -> None:
    server.cmd("set-option", "-g", "status-interval", "1")
    mine = "MINE " + "x" * 35  # the user's own 41 columns, as in the report
    server.cmd("set-option", "-g", "status-right", mine)
    for window in list(server.windows):
        if window != session.active_window:
            window.kill()
    for n in range(9):
        session.new_window(window_name=f"sh-{n}", attach=False)
    watcher = watcher_process("--interval", "0.5")
    # The shells are idle first; the agents finish after them.
    retry_until(lambda: sum(s == "READY" for s in states(isolated_env).values()) >= 9, 30,
                interval=0.2, message=f"{states(isolated_env)}")
    for n in range(3):
        window = session.new_window(window_name=f"agent-{n}", window_shell=AGENT, attach=False)
        retry_until(functools.partial(shows_prompt, window.active_pane), 10)
    assert len(server.panes) == 13
    run_plugin(server)
    term = Terminal(server, session, width=250)
    try:
        def segment() -> str:
            line = term.status_line().rstrip()
            return line.split(mine + " ", 1)[1] if mine + " " in line else ""

        def agents_first() -> bool:
            items = ITEM.findall(segment())
            return len(items) >= 3 and all(i.startswith("[agent-") and i.endswith(": READY]")
                                           for i in items[:3])

        retry_until(agents_first, 30, interval=0.2, message=f"segment: {segment()!r}")
        shown = segment()
        print(f"250 columns: {shown!r}")
        items = ITEM.findall(shown)
        assert len(items) >= 8, shown
        more = re.fullmatch(r".*\] \+(\d+)", shown)
        assert len(items) + (int(more[1]) if more else 0) == 13
        assert len(shown) <= 250 - 10 - len(mine) - 1
    finally:
        term.close()
        stop_process(watcher)


def test_the_placeholder_puts_the_segment_where_the_user_wrote_it_once(
        server: Any, session: Any) -> None:
    server.cmd("set-option", "-g", "status-right", "A #{conductor_status} B %H:%M")
    run_plugin(server)
    run_plugin(server)  # a reload: already placed
    right = option(server, "status-right")
    assert right.startswith("A #(") and right.endswith(") B %H:%M"), right
    assert right.count("pty status --short --colour --width #{") == 1
    assert "conductor_status" not in right
    assert option(server, "status-right-length") == "1000"

    # On the left too, whatever @conductor-status says; the right part is then left alone.
    server.cmd("set-option", "-g", "status-right", "MINE")
    server.cmd("set-option", "-g", "status-left", "#{conductor_status} [#S]")
    server.cmd("set-option", "-g", "status-left-length", "10")
    right_before = option(server, "status-right")
    for line in server.cmd("show-options", "-g").stdout:
        assert "conductor-pty-rest" not in line  # the helper option is gone again
    # (a fresh server: the plugin's mark is in neither part)
    run_plugin(server)
    assert option(server, "status-right") == right_before
    left = option(server, "status-left")
    assert left.startswith("#(") and left.endswith(") [#S]"), left
    assert int(option(server, "status-left-length")) >= 60


def test_switch_next_visits_every_waiting_pane_in_turn(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> None:
    names = ["ask-a", "ask-b", "ask-c"]
    for name in names:
        session.new_window(window_name=name, window_shell=QUESTION, attach=False)

    def all_asking() -> bool:
        watcher.tick(time.time())
        return all(states(isolated_env).get(n) == "NEEDS_CONFIRMATION" for n in names)

    retry_until(all_asking, 30, interval=0.2, message=f"{states(isolated_env)}")
    visited = []
    current = session.active_window.active_pane.pane_id
    for _ in range(6):
        done = conductor("-L", server.socket_name, "pty", "switch", "--next", "--from", current)
        assert done.returncode == 0, done.stderr
        window = session.active_window
        visited.append(window.window_name)
        current = window.active_pane.pane_id
    # Every one before any again, then the same round again: never back and forth.
    assert sorted(visited[:3]) == names, visited
    assert visited[3:] == visited[:3], visited
