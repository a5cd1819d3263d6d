"""``app.front.commands``: the CLI and the MCP server do send, wait, report and goal through the
same commands, so the same pane sees the same effects and the same refusals from either front.
A real tmux server, the real CLI, and the real MCP server over stdio with the official client."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import conductor
from tests.support.waiting import retry_until

pytest.importorskip("mcp")

from tests.front.test_mcp_server import (  # after the skip: needs the SDK
    mcp_session,
    shell_pane,
    text_of,
    touch,
)


def rows(workers_dir: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{workers_dir / 'status.db'}?mode=ro", uri=True) as conn:
        return conn.execute(sql, params).fetchall()


def test_the_cli_and_mcp_send_wait_report_and_set_goals_through_one_set_of_commands(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path) -> None:
    alpha = shell_pane(session, tmp_path / "a", "alpha")
    assert conductor("-L", server.socket_name, "pty", "watch", "--once").returncode == 0

    def cli(*args: str) -> Any:
        return conductor("-L", server.socket_name, "pty", *args)

    async def calls() -> None:
        async with mcp_session(server, isolated_env, alpha.pane_id) as mcp:
            # send: both type into the pane, each recorded with its front as the origin.
            sent = cli("send", "alpha", f"touch {tmp_path / 'by-cli'}")
            assert sent.returncode == 0, sent.stderr
            retry_until((tmp_path / "by-cli").exists, 10)
            by_mcp = await mcp.call_tool("send", {"pane": "alpha",
                                                  **touch(tmp_path / "by-mcp")})
            assert not by_mcp.is_error, text_of(by_mcp)
            retry_until((tmp_path / "by-mcp").exists, 10)
            origins = [r[0] for r in rows(isolated_env, "SELECT name FROM events WHERE kind = "
                                          "'send' AND pane_id = ? ORDER BY seq", alpha.pane_id)]
            assert origins == ["send", "mcp"]

            # The same refusal, word for word: the CLI prints it, MCP returns it.
            evil = "ls\x1b[201~; touch x"
            refused = cli("send", "alpha", evil)
            tool_error = await mcp.call_tool("send", {"pane": "alpha", "text": evil})
            assert refused.returncode == 1 and tool_error.is_error
            assert refused.stderr == f"Error: {text_of(tool_error)}\n"
            assert "control character (U+001B" in refused.stderr

            # wait: the states parsed once, named as each front names its parameter.
            no_state = cli("wait", "alpha", "--until", ",")
            assert no_state.returncode == 2  # the command line is wrong: usage
            assert no_state.stderr == ("Error: --until needs a state: READY, BUSY, "
                                       "NEEDS_CONFIRMATION or ERROR (see `conductor pty wait "
                                       "--help`)\n")
            no_state_mcp = await mcp.call_tool("wait", {"pane": "alpha", "until": ","})
            assert text_of(no_state_mcp) == ("until needs a state: READY, BUSY, "
                                             "NEEDS_CONFIRMATION or ERROR")
            waited = cli("wait", "alpha", "--timeout", "30")
            assert waited.returncode == 0, waited.stderr
            assert waited.stdout.startswith(f"alpha ({alpha.pane_id}): READY after ")
            waited_mcp = await mcp.call_tool("wait", {"pane": "alpha", "timeout": 30})
            assert text_of(waited_mcp).startswith(f"reached: alpha ({alpha.pane_id}) is READY")

            # goal and report: the person's check is declared by the CLI and runs as given;
            # the agent's is declined and the person's runs instead.
            goal = cli("goal", "alpha", "ship it", "--check", "exit 0")
            assert goal.returncode == 0, goal.stderr
            set_goal = await mcp.call_tool("set_goal", {"goal": "ship it today"})
            assert text_of(set_goal) == "goal of alpha: ship it today"
            reported = cli("report", "alpha", "done", "--wait-cmd", "echo person")
            assert reported.returncode == 0, reported.stderr
            assert reported.stdout.endswith("queued with check: echo person\n")
            by_agent = await mcp.call_tool("report", {"status_report": "done too",
                                                      "wait_cmd": "echo agent"})
            assert "Your wait_cmd was not run" in text_of(by_agent)
            assert "the person's check for this pane instead: exit 0." in text_of(by_agent)

    asyncio.run(calls())
    assert rows(isolated_env, "SELECT goal, check_cmd FROM herd") == [("ship it today",
                                                                       "exit 0")]
    assert rows(isolated_env, "SELECT origin, state, wait_cmd, text FROM jobs ORDER BY seq") == [
        ("report", "superseded", "echo person", "done"), ("mcp", "queued", "exit 0", "done too")]


def test_a_paused_pane_is_paused_for_both_fronts_and_no_store_is_no_pause(
        server: Any, session: Any, tmp_path: Path, isolated_env: Path) -> None:
    from app.adapters.tmux import Tmux
    from app.front import commands

    alpha = shell_pane(session, tmp_path / "a", "alpha")
    assert not commands.paused(tmp_path / "no-store", "abc")
    assert conductor("-L", server.socket_name, "pty", "watch", "--once").returncode == 0
    target = commands.resolve(Tmux(socket_name=server.socket_name), isolated_env, "alpha")
    assert not commands.paused(isolated_env, target.worker_id)
    paused = conductor("-L", server.socket_name, "pty", "pause", "alpha")
    assert paused.returncode == 0, paused.stderr
    assert commands.paused(isolated_env, target.worker_id)

    async def calls() -> None:
        async with mcp_session(server, isolated_env, alpha.pane_id) as mcp:
            refused = await mcp.call_tool("send", {"pane": "alpha",
                                                   **touch(tmp_path / "while-paused")})
            assert text_of(refused).startswith(f"not sent: the cycle of {target.label} is "
                                               "paused")

    asyncio.run(calls())
    resumed = conductor("-L", server.socket_name, "pty", "resume", "alpha")
    assert resumed.returncode == 0, resumed.stderr
    assert not commands.paused(isolated_env, target.worker_id)
    assert not (tmp_path / "while-paused").exists()
