"""A tmux status line redrawn every second by a command (the new user's set-up in issue 31: a
`#(...)` in status-right, status-interval 1, a client showing it) is no output of any pane: it
wakes nothing and costs no capture, so it cannot delay a pane's READY or make it look busy."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from app.adapters.control import ControlMode
from tests.run.test_control_mode import session_ids
from tests.support.tmux_client import AttachedClient
from tests.support.waiting import retry_until


def test_a_status_line_refreshed_every_second_reports_no_pane_output(
        server: Any, session: Any, control: tuple[ControlMode, threading.Event],
        tmp_path: Path) -> None:
    runs = tmp_path / "status-runs"
    server.cmd("set-option", "-g", "status", "on")
    server.cmd("set-option", "-g", "status-interval", "1")
    server.cmd("set-option", "-g", "status-right", f"#(echo run >> {runs}; date +%s%N)")
    pane = session.new_window(window_name="idle", window_shell="cat", attach=False).active_pane
    client = AttachedClient(["-L", server.socket_name], session.session_name, "xterm-256color")
    mode, woken = control
    try:
        mode.follow(session_ids(server))
        retry_until(lambda: session.session_id in mode.watching(), 10)
        retry_until(lambda: runs.exists(), 10)  # tmux runs the status command: a client shows it
        mode.take()
        woken.clear()
        seen: dict[str, float] = {}

        def reported() -> bool:
            seen.update(mode.take()[0])
            return pane.pane_id in seen

        before = len(runs.read_text().splitlines())
        # Two redraws of the status line, and nothing of them reaches us as output.
        retry_until(lambda: reported() or len(runs.read_text().splitlines()) >= before + 2, 20)
        assert not reported()
        pane.send_keys("typed", enter=True)
        retry_until(reported, 10)  # while output of the pane itself is reported at once
    finally:
        client.close()
