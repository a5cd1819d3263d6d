"""``conductor pty mcp`` through a real MCP client session over stdio (the official SDK's
client spawning our server as an agent CLI would), against a real tmux server and daemon; and
``mcp install`` merging into each CLI's config."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, conductor
from tests.waiting import retry_until

pytest.importorskip("mcp")

from mcp import ClientSession  # after the skip: the SDK is an optional extra
from mcp.client.stdio import StdioServerParameters, stdio_client

AGENT = f"{sys.executable} {REPO / 'tests' / 'fake_agent.py'}"


def screen(pane: Any) -> str:
    return "\n".join(pane.capture_pane())


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def tmux_env(server: Any) -> str:
    """$TMUX as tmux sets it in the panes of ``server``: socket path, server pid, session."""
    socket_path = server.cmd("display-message", "-p", "#{socket_path}").stdout[0]
    pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    return f"{socket_path},{pid},0"


@contextlib.asynccontextmanager
async def mcp_session(server: Any, workers_dir: Path, pane_id: str, tmux: str | None = None
                      ) -> AsyncIterator[ClientSession]:
    """Our server as an agent CLI in pane ``pane_id`` starts it (``tmux``: its $TMUX, by
    default that of ``server``), with the official client's session on its stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app", "-L", server.socket_name, "--workers-dir", str(workers_dir), "pty",
              "mcp"],
        env={"TMUX_PANE": pane_id, "TMUX": tmux_env(server) if tmux is None else tmux,
             "CONDUCTOR_CONFIG": str(workers_dir.parent / "config.toml"),
             "PYTHONPATH": str(REPO)},
        cwd=str(REPO),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def session_calls(server: Any, workers_dir: Path, pane_id: str,
                        calls: list[tuple[str, dict[str, Any]]], tmux: str | None = None
                        ) -> tuple[list[str], list[Any]]:
    async with mcp_session(server, workers_dir, pane_id, tmux) as session:
        tools = sorted(t.name for t in (await session.list_tools()).tools)
        results = [await session.call_tool(name, args) for name, args in calls]
    return tools, results


@pytest.mark.slow
def test_an_agent_reports_through_mcp_and_gets_its_directive(
        server: Any, session: Any, watcher_process: Any, tmp_path: Path,
        isolated_env: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "[watch]\ninterval = 0.3\n\n[cycle]\nwait = 0.5\nidle = 0.5\nspin_max = 5.0\n")
    window = session.new_window(window_name="agent", window_shell=AGENT, attach=False)
    pane = window.active_pane
    retry_until(lambda: "? for shortcuts" in screen(pane), 10)
    watcher_process("-v")

    def state() -> str:
        done = conductor("-L", server.socket_name, "pty", "status", "--json")
        rows = json.loads(done.stdout) if done.returncode == 0 else []
        return next((w["state"] for w in rows if w["name"] == "agent"), "")

    retry_until(lambda: state() == "READY", 20, interval=0.2)

    tools, results = asyncio.run(session_calls(server, isolated_env, pane.pane_id, [
        ("set_goal", {"goal": "make the check pass"}),
        ("report", {"status_report": "I wrote the parser",
                    "wait_cmd": "echo 'E   assert 2 == 3'; exit 1"}),
        ("wait", {"pane": "agent", "until": "READY", "timeout": 30}),
        ("status", {}),
        ("send", {"pane": "nosuchpane", "text": "hi"}),
    ]))
    assert tools == ["report", "send", "set_goal", "status", "wait"]
    goal, report, waited, status, bad_send = results
    assert not goal.is_error and "make the check pass" in text_of(goal)
    assert not report.is_error and "cycle job" in text_of(report)
    assert not waited.is_error and text_of(waited).startswith("reached")
    [row] = [w for w in json.loads(text_of(status)) if w["name"] == "agent"]
    assert row["goal"] == "make the check pass"
    assert bad_send.is_error and "no pane" in text_of(bad_send)

    # The daemon runs the cycle the report queued: the failing check's directive is typed.
    retry_until(lambda: "failed with exit status 1: E assert 2 == 3" in screen(pane), 30,
                interval=0.2)
    done = conductor("-L", server.socket_name, "pty", "queue", "--all", "--json")
    [job] = [j for j in json.loads(done.stdout) if j["kind"] == "cycle"]
    assert (job["state"], job["origin"]) == ("STANDBY", "mcp")

    # send keeps send's refusals: a pane asking for confirmation is not typed into.
    retry_until(lambda: state() == "READY", 20, interval=0.2)
    pane.send_keys("ask", enter=True)
    retry_until(lambda: "Do you want to proceed?" in screen(pane), 10)
    _, [refused] = asyncio.run(session_calls(server, isolated_env, pane.pane_id, [
        ("send", {"pane": pane.pane_id, "text": "say hello"})]))
    assert refused.is_error and "waiting for confirmation" in text_of(refused)
    assert "say hello" not in screen(pane)


def test_report_outside_tmux_is_a_tool_error_not_a_crash(server: Any, isolated_env: Path
                                                         ) -> None:
    _, [report, status] = asyncio.run(session_calls(server, isolated_env, "", [
        ("report", {"status_report": "done"}), ("status", {})], tmux=""))
    assert report.is_error and "$TMUX_PANE" in text_of(report)
    assert status.is_error and "no status store" in text_of(status)


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini"])
def test_mcp_install_merges_once_and_keeps_the_rest(cli: str, tmp_path: Path) -> None:
    # Not tmp_path / "config.toml": that is conductor's own config file in these tests.
    path = tmp_path / "agent" / ("config.toml" if cli == "codex" else "settings.json")
    path.parent.mkdir()
    path.write_text('model = "o3"\n' if cli == "codex" else '{"theme": "dark"}\n')
    first = conductor("--workers-dir", str(tmp_path / "w"), "pty", "mcp", "install", "--cli", cli,
                      "--path", str(path))
    assert first.returncode == 0 and "added MCP server 'conductor'" in first.stdout
    again = conductor("--workers-dir", str(tmp_path / "w"), "pty", "mcp", "install", "--cli",
                      cli, "--path", str(path))
    assert again.returncode == 0 and "already in" in again.stdout
    text = path.read_text()
    if cli == "codex":
        import tomlkit

        data = tomlkit.parse(text).unwrap()
        assert data["model"] == "o3"
        entry = data["mcp_servers"]["conductor"]
    else:
        data = json.loads(text)
        assert data["theme"] == "dark"
        entry = data["mcpServers"]["conductor"]
    assert entry["args"][-2:] == ["pty", "mcp"] and str(tmp_path / "w") in entry["args"]
    assert len(list(path.parent.glob("*.bak-*"))) == 1
    shown = conductor("pty", "mcp", "install", "--cli", cli, "--print", "--path", str(path))
    assert shown.returncode == 0 and shown.stdout.startswith(f"# {path}")
