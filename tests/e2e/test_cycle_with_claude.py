"""The post-report cycle with the real Claude Code: our MCP server in its config (put there by
`conductor pty mcp install`), the fake model scripting the `report` tool calls, the real daemon
watching Claude's tmux server.

The check fails on the first report, so the directive is typed into Claude and its next turn
starts (it reports again); then the check passes and the pane is PAUSED with "goal met?".
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, conductor
from tests.support.agents import ClaudeInTmux, Install
from tests.support.scripted_model import CallTool, Say
from tests.support.waiting import retry_until, stop_process

pytestmark = [pytest.mark.slow, pytest.mark.agent]

pytest.importorskip("mcp")

# Fails the first time (and leaves the file behind), passes from then on: the agent "fixed" it.
CHECK = "test -f done.txt || { touch done.txt; exit 1; }"


class ClaudeWithMCP(ClaudeInTmux):
    """Claude Code with our MCP server configured (user scope) and its report tool allowed."""

    def __init__(self, root: Path, binary: Path, workers_dir: Path, config: Path) -> None:
        super().__init__(root, binary, env={"CONDUCTOR_WORKERS_DIR": str(workers_dir),
                                            "CONDUCTOR_CONFIG": str(config)})
        self.workers_dir = workers_dir

    def _prepare(self) -> None:
        super()._prepare()
        done = conductor("-L", self.socket_name, "--workers-dir", str(self.workers_dir),
                         "pty", "mcp", "install", "--cli", "claude", "--path",
                         str(self.home / ".claude.json"))
        assert done.returncode == 0, done.stderr
        self.settings_path.write_text(json.dumps(
            {"permissions": {"allow": ["mcp__conductor__report"]}}))


@pytest.fixture
def claude(claude_install: Install, tmp_path: Path, isolated_env: Path
           ) -> Iterator[ClaudeWithMCP]:
    lab = ClaudeWithMCP(tmp_path / "agent", claude_install.binary, isolated_env,
                        tmp_path / "config.toml")
    yield lab
    lab.close()


def job_rows(workers_dir: Path) -> list[dict[str, Any]]:
    done = conductor("--workers-dir", str(workers_dir), "pty", "queue", "--all", "--json")
    return [j for j in json.loads(done.stdout) if j["kind"] == "cycle"] \
        if done.returncode == 0 else []


def test_claude_reports_through_mcp_gets_one_directive_then_pauses_when_the_check_passes(
        claude: ClaudeWithMCP, tmp_path: Path, isolated_env: Path) -> None:
    # An agent's check runs only when the person allowed it.
    (tmp_path / "config.toml").write_text(
        "[watch]\ninterval = 0.5\n\n[cycle]\nwait = 0.5\nidle = 1.0\nspin_max = 20.0\n"
        f"allowed_checks = [{json.dumps(CHECK)}]\n")
    fake = claude.server
    fake.queue(
        CallTool("mcp__conductor__report", {"status_report": "Parser written", "wait_cmd": CHECK}),
        Say("Reported; waiting for the check."),
        CallTool("mcp__conductor__report", {"status_report": "Created done.txt",
                                            "wait_cmd": CHECK}),
        Say("Reported again."),
    )
    with claude:
        # Claude connects MCP servers in the background (ours took 9.5 s on a loaded machine,
        # mostly importing the SDK); its own log says when, and a prompt before that finds no
        # tool.
        logs = claude.home / ".cache" / "claude-cli-nodejs"
        retry_until(lambda: any("Successfully connected" in p.read_text()
                                for p in logs.glob("*/mcp-logs-conductor/*.jsonl")), 90,
                    interval=0.3, message="Claude never connected our MCP server")
        daemon = subprocess.Popen(
            [sys.executable, "-m", "app", "-L", claude.socket_name, "pty", "watch", "-v"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO)
        try:
            claude.type_text("write the parser, then report")
            claude.send_keys("Enter")
            # 1. The report arrives through MCP; the check fails; one directive is typed.
            try:
                retry_until(lambda: any(j["state"] == "STANDBY"
                                        for j in job_rows(isolated_env)), 90, interval=0.3)
            except AssertionError:
                tools = [t.get("name") for t in (fake.requests[-1].get("tools") or [])] \
                    if fake.requests else []
                results = [b for body in fake.requests for m in body.get("messages", [])
                           if isinstance(m.get("content"), list) for b in m["content"]
                           if b.get("type") == "tool_result"]
                schema = [t for t in (fake.requests[-1].get("tools") or [])
                          if t.get("name") == "WaitForMcpServers"] if fake.requests else []
                raise AssertionError(f"jobs {job_rows(isolated_env)}; tools {tools[-8:]}; "
                                     f"schema {schema}; "
                                     f"results {results}; "
                                     f"screen:\n{claude.capture()}") from None
            first = job_rows(isolated_env)[0]
            assert first["origin"] == "mcp" and first["exit_code"] == 1
            assert first["directive"].startswith(
                f"The check {json.dumps(CHECK)} failed with exit status 1")
            # 2. The directive starts Claude's next turn: it reports again, the check passes.
            retry_until(lambda: len(job_rows(isolated_env)) == 2 and
                        job_rows(isolated_env)[1]["state"] == "PAUSED", 90, interval=0.3,
                        message=f"jobs: {job_rows(isolated_env)}")
            second = job_rows(isolated_env)[1]
            assert second["exit_code"] == 0 and second["detail"].startswith("goal met?")
            prompts = [m for body in fake.requests for m in body.get("messages", [])
                       if m.get("role") == "user"]
            typed = json.dumps(first["directive"][:80])[1:-1]  # as the request escapes it
            assert any(typed in json.dumps(m) for m in prompts)
            sends = conductor("--workers-dir", str(isolated_env), "pty", "queue", "--all")
            assert sends.returncode == 0
            for row in (first, second):
                start = row["timeline"][0][1]
                print(f"cycle {row['seq']}: " + ", ".join(
                    f"{state} +{ts - start:.2f}s" for state, ts in row["timeline"]))
        finally:
            stop_process(daemon, seconds=10)
        log = (isolated_env / "watch.log").read_text() if (isolated_env / "watch.log").exists() \
            else daemon.stderr.read() if daemon.stderr else ""
        assert "goal met?" in log


@pytest.mark.parametrize("hooks", [False, True], ids=["screen", "hooks"])
def test_dispatch_with_clear_then_wait_returns_only_after_the_real_turn(
        claude_install: Install, tmp_path: Path, isolated_env: Path, hooks: bool) -> None:
    lab = ClaudeInTmux(tmp_path / "agent", claude_install.binary,
                       env={"CONDUCTOR_WORKERS_DIR": str(isolated_env)})
    if hooks:
        done = conductor("-L", lab.socket_name, "pty", "hooks", "install", "--cli", "claude",
                         "--path", str(lab.settings_path))
        assert done.returncode == 0, done.stderr
    with lab:
        lab.server.queue(Say("First answer, the one to clear."),
                         Say.words(24, delay=0.25, prefix="Slow answer:"))
        first = conductor("-L", lab.socket_name, "pty", "send", lab.pane_id, "first task")
        assert first.returncode == 0, first.stderr
        lab.server.wait_for_turn_end(1)
        done = conductor("-L", lab.socket_name, "pty", "dispatch", lab.pane_id, "--clear",
                         "--timeout", "60", "write a slow answer", timeout=90)
        assert done.returncode == 0, done.stderr + lab.capture()
        assert "cleared with /clear, then sent" in done.stdout
        waited = conductor("-L", lab.socket_name, "pty", "wait", lab.pane_id, "--timeout", "60",
                           timeout=90)
        returned = time.time()
        assert waited.returncode == 0, waited.stderr
        ends = lab.server.turn_ends()
        assert len(ends) == 2, f"wait returned before the dispatched turn ended: {ends}"
        print(f"dispatch ({'hooks' if hooks else 'screen'}): wait returned "
              f"{returned - ends[1]:.2f}s after the turn's last byte")
        assert returned > ends[1]
        assert "First answer" not in lab.capture()  # the conversation was cleared
