"""Issue 20 on a real tmux server: one stable word in the CLI column (`shell` for a shell, the
program's own name for a plain program), and a pane's first seconds do not flap."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from app.run.watcher import Watcher
from tests.conftest import conductor
from tests.observe.test_shells_and_plain_programs import row, screen, shell_pane, tick_until
from tests.waiting import retry_until


def ticks(watcher: Watcher, workers: Path, pane_id: str, count: int) -> list[dict[str, Any]]:
    seen = []
    for _ in range(count):
        watcher.tick(time.time())
        seen.append(row(workers, pane_id))
        time.sleep(0.2)
    return seen


def test_a_shell_is_called_shell_and_a_plain_program_by_its_name_all_along(
        server: Any, session: Any, tmp_path: Path, watcher: Watcher, isolated_env: Path) -> None:
    pane = shell_pane(session, tmp_path / "sh")
    plain = session.new_window(window_name="nap", window_shell="exec sleep 600",
                               attach=False).active_pane
    retry_until(lambda: plain.cmd("display-message", "-p", "#{pane_current_command}").stdout
                == ["sleep"], 10, message="sleep never in the foreground")
    names: dict[str, set[str | None]] = {pane.pane_id: set(), plain.pane_id: set()}

    def look(count: int) -> None:
        for pane_id in names:
            names[pane_id] |= {r["cli_type"] for r in ticks(watcher, isolated_env, pane_id, count)}
    look(3)
    pane.send_keys("sleep 3", enter=True)  # a program the shell started: still a shell pane
    look(4)
    pane.send_keys("echo typed-not-run", enter=False)
    retry_until(lambda: screen(pane).rstrip().endswith("typed-not-run"), 15)
    look(3)

    assert names == {pane.pane_id: {"shell"}, plain.pane_id: {"sleep"}}
    listed = json.loads(conductor("-L", server.socket_name, "pty", "status", "--json").stdout)
    assert {w["pane_id"]: w["cli_type"] for w in listed if w["pane_id"] in names} == {
        pane.pane_id: "shell", plain.pane_id: "sleep"}


def test_the_mcp_status_tool_names_a_shell_shell(
        server: Any, session: Any, tmp_path: Path, watcher: Watcher, isolated_env: Path) -> None:
    pytest.importorskip("mcp")
    from tests.front.test_mcp_server import session_calls, text_of

    pane = shell_pane(session, tmp_path / "sh")
    tick_until(watcher, isolated_env, pane.pane_id, "READY")
    _, [status] = asyncio.run(session_calls(server, isolated_env, pane.pane_id, [("status", {})]))

    assert not status.is_error, text_of(status)
    [mine] = [w for w in json.loads(text_of(status)) if w["pane_id"] == pane.pane_id]
    assert mine["cli_type"] == "shell"
