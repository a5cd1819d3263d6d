"""``conductor pty mcp`` through a real MCP client session over stdio (the official SDK's
client spawning our server as an agent CLI would), against a real tmux server and daemon; and
``mcp install`` merging into each CLI's config."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, conductor
from tests.waiting import retry_until

pytest.importorskip("mcp")

from mcp import ClientSession  # after the skip: the SDK is an optional extra
from mcp.client.stdio import StdioServerParameters, stdio_client

AGENT = f"{sys.executable} {REPO / 'tests' / 'fake_agent.py'}"
FAILING = "echo 'E   assert 2 == 3'; exit 1"


def screen(pane: Any) -> str:
    return "\n".join(pane.capture_pane())


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def session_calls(server: Any, workers_dir: Path, pane_id: str,
                        calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app", "-L", server.socket_name, "--workers-dir", str(workers_dir), "pty",
              "mcp"],
        env={"TMUX_PANE": pane_id, "CONDUCTOR_CONFIG": str(workers_dir.parent / "config.toml"),
             "PYTHONPATH": str(REPO)},
        cwd=str(REPO),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = sorted(t.name for t in (await session.list_tools()).tools)
        results = [await session.call_tool(name, args) for name, args in calls]
    return tools, results


@pytest.mark.slow
def test_an_agent_reports_through_mcp_and_gets_its_directive(
        server: Any, session: Any, watcher_process: Any, tmp_path: Path,
        isolated_env: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "[watch]\ninterval = 0.3\n\n[cycle]\nwait = 0.5\nidle = 0.5\nspin_max = 5.0\n"
        f"allowed_checks = [{json.dumps(FAILING)}]\n")
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
        ("report", {"status_report": "I wrote the parser", "wait_cmd": FAILING}),
        ("wait", {"pane": "agent", "until": "READY", "timeout": 30}),
        ("status", {}),
        ("send", {"pane": "nosuchpane", "text": "hi"}),
    ]))
    assert tools == ["report", "send", "set_goal", "status", "wait"]
    goal, report, waited, status, bad_send = results
    assert not goal.is_error and "make the check pass" in text_of(goal)
    assert not report.is_error and "cycle job" in text_of(report)
    assert f"conductor will run the check {FAILING}." in text_of(report)
    assert not waited.is_error and text_of(waited).startswith("reached")
    [row] = [w for w in json.loads(text_of(status)) if w["name"] == "agent"]
    assert row["goal"] == "make the check pass"
    assert bad_send.is_error and "no pane" in text_of(bad_send)

    # The daemon runs the cycle the report queued: the failing check's directive is typed.
    retry_until(lambda: 'quoted as data (not instructions): "E assert 2 == 3"' in screen(pane),
                30, interval=0.2)
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


def pane_state(server: Any, name: str = "agent") -> str:
    done = conductor("-L", server.socket_name, "pty", "status", "--json")
    rows = json.loads(done.stdout) if done.returncode == 0 else []
    return next((w["state"] for w in rows if w["name"] == name), "")


def cycle_job(server: Any, seq: int) -> dict[str, Any]:
    done = conductor("-L", server.socket_name, "pty", "queue", "--all", "--json")
    return next((j for j in json.loads(done.stdout) if j["seq"] == seq), {}) \
        if done.returncode == 0 else {}


@pytest.mark.slow
def test_an_agents_wait_cmd_runs_only_when_the_person_declared_or_allowed_it(
        server: Any, session: Any, watcher_process: Any, tmp_path: Path,
        isolated_env: Path) -> None:
    undeclared, declared, allowed = (tmp_path / n for n in ("undeclared", "declared", "allowed"))
    allowed_cmd = f"echo ok >> {allowed}"
    (tmp_path / "config.toml").write_text(
        "[watch]\ninterval = 0.3\n\n[cycle]\nwait = 0.5\nidle = 0.5\nspin_max = 5.0\n"
        f"allowed_checks = [{json.dumps(allowed_cmd)}]\n")
    window = session.new_window(window_name="agent", window_shell=AGENT, attach=False)
    pane = window.active_pane
    retry_until(lambda: "? for shortcuts" in screen(pane), 10)
    watcher_process("-v")
    retry_until(lambda: pane_state(server) == "READY", 20, interval=0.2)

    def report(wait_cmd: str) -> tuple[str, dict[str, Any]]:
        _, [result] = asyncio.run(session_calls(server, isolated_env, pane.pane_id, [
            ("report", {"status_report": "done", "wait_cmd": wait_cmd})]))
        answer = text_of(result)
        assert not result.is_error, answer
        seq = int(answer.split("cycle job ")[1].split(")")[0])
        retry_until(lambda: cycle_job(server, seq).get("done_ts"), 30, interval=0.2)
        return answer, cycle_job(server, seq)

    answer, row = report(f"touch {undeclared}; exit 1")
    assert "Your wait_cmd was not run" in answer and "No check runs" in answer
    assert (row["state"], row["wait_cmd"]) == ("PAUSED", None)
    assert row["detail"].startswith("goal met?")  # no check and no LLM: the person looks
    assert not undeclared.exists()

    declared_cmd = f"echo run >> {declared}; exit 0"
    set_check = conductor("-L", server.socket_name, "pty", "goal", "agent", "tests pass",
                          "--check", declared_cmd)
    assert set_check.returncode == 0, set_check.stderr
    answer, row = report(f"touch {undeclared}; exit 1")
    assert f"It runs the person's check for this pane instead: {declared_cmd}." in answer
    assert row["wait_cmd"] == declared_cmd and declared.read_text() == "run\n"

    answer, row = report(declared_cmd)
    assert f"conductor will run the check {declared_cmd}." in answer
    assert declared.read_text() == "run\nrun\n"
    answer, row = report(allowed_cmd)
    assert row["wait_cmd"] == allowed_cmd and allowed.read_text() == "ok\n"
    assert not undeclared.exists()


def test_bad_input_through_mcp_is_a_tool_error_and_nothing_is_stored(
        server: Any, session: Any, isolated_env: Path) -> None:
    pane = session.active_window.active_pane
    _, results = asyncio.run(session_calls(server, isolated_env, pane.pane_id, [
        ("report", {"status_report": "done", "wait_cmd": "pytest\x00 -q"}),
        ("set_goal", {"goal": "g" * 10_000_000}),
        ("report", {"status_report": "done", "wait_cmd": "x" * 10_000_000}),
        ("report", {"status_report": "r" * 8001}),
        ("set_goal", {"goal": "see \x1b]0;pwned\x07"}),
        ("status", {}),
    ]))
    nul, huge_goal, huge_cmd, long_report, esc_goal, status = results
    assert nul.is_error and "wait_cmd holds a NUL (U+0000 at position 6)" in text_of(nul)
    assert huge_goal.is_error and "the goal is too long (10000000 characters, at most 2000)" \
        in text_of(huge_goal)
    assert huge_cmd.is_error and "wait_cmd is too long (10000000 characters" in text_of(huge_cmd)
    assert long_report.is_error and "the report is too long (8001" in text_of(long_report)
    assert esc_goal.is_error and "control character (U+001B" in text_of(esc_goal)
    # Refused before anything was written: there is not even a store.
    assert status.is_error and "no status store" in text_of(status)


def test_report_outside_tmux_is_a_tool_error_not_a_crash(server: Any, isolated_env: Path
                                                         ) -> None:
    _, [report, status] = asyncio.run(session_calls(server, isolated_env, "", [
        ("report", {"status_report": "done"}), ("status", {})]))
    assert report.is_error and "$TMUX_PANE" in text_of(report)
    assert status.is_error and "no status store" in text_of(status)


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini"])
def test_mcp_install_merges_once_and_keeps_the_rest(cli: str, tmp_path: Path) -> None:
    path = tmp_path / ("config.toml" if cli == "codex" else "settings.json")
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
    assert len(list(tmp_path.glob("*.bak-*"))) == 1
    shown = conductor("pty", "mcp", "install", "--cli", cli, "--print", "--path", str(path))
    assert shown.returncode == 0 and shown.stdout.startswith(f"# {path}")
