"""Tokens and cost of another host's pane (issue 33), end to end with a real watcher and a real
sshd on loopback: the agent's hook there (the line ``hooks install --host`` puts in its settings,
run by ``sh`` with a Claude Code payload on stdin) names a transcript at a hostile path on the
host; the watcher reads it there through the host's connection, and `status`, `status --json`
and `cost --by host` show the sums written. The host going away leaves the figures and the
watcher; back, what was written meanwhile is counted once."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.install.remote_hooks import hook_line
from tests.conftest import conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.hosts.test_watch_hosts import agent_on, rows
from tests.support.waiting import retry_until

pytestmark = pytest.mark.slow  # an sshd, its tmux server and a watcher

SID = "7f1c2a4e-0d3b-4c55-9a61-3e2f8b9c0d11"
MODEL = "claude-opus-4-5"  # $5 / $25 per million in, out


def _claude(message_id: str, inp: int, out: int, read: int = 0, write: int = 0) -> str:
    """An assistant line as Claude Code writes it (trimmed to the fields that matter)."""
    return json.dumps({
        "type": "assistant", "timestamp": "2026-11-28T02:31:00.000Z",
        "message": {"id": message_id, "model": MODEL, "role": "assistant",
                    "usage": {"input_tokens": inp, "output_tokens": out,
                              "cache_read_input_tokens": read,
                              "cache_creation_input_tokens": write}}}) + "\n"


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


def _hook(host: SshHost, pane_id: str, event: str, payload: dict[str, Any]) -> None:
    """What Claude Code on the host runs for one hook event, in the agent's pane."""
    env = {**host.tmux_env(), "TMUX_PANE": pane_id, "HOME": str(host.home)}
    done = subprocess.run(["sh", "-c", hook_line("claude", event)], env=env, timeout=20,
                          input=json.dumps(payload, separators=(",", ":")).encode(),
                          capture_output=True, check=False)
    assert (done.returncode, done.stderr) == (0, b"")


def _usage(server: Any) -> dict[str, Any] | None:
    found: dict[str, Any] | None = rows(server).get("alpha:agent", {}).get("usage")
    return found


def _tokens(server: Any) -> tuple[int, int, int, int] | None:
    usage = _usage(server)
    if usage is None:
        return None
    return (usage["input"], usage["output"], usage["cache_read"], usage["cache_write"])


def test_a_remote_panes_tokens_are_read_on_its_host_and_shown_everywhere(
        ssh_host: Callable[[str], SshHost], server: Any, session: Any, tmp_path: Path,
        isolated_env: Path, watcher_process: Any) -> None:
    alpha = ssh_host("alpha")
    agent_on(alpha)
    write_hosts(tmp_path / "config.toml", alpha)
    watcher = watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: rows(server).get("alpha:agent", {}).get("state") == "READY", 60,
                interval=0.3)
    pane_id = rows(server)["alpha:agent"]["pane_id"]
    # A transcript on the host at a path a shell would run: it must only ever be read.
    folder = alpha.home / ".claude" / "projects" / "-w"
    folder.mkdir(parents=True)
    transcript = folder / "it's $(touch canary) \"q\" `touch canary` *.jsonl"
    transcript.write_text(json.dumps({"type": "user", "message": {"content": "hi"}}) + "\n"
                          + _claude("msg_1", 100, 40, 11, 7) + _claude("msg_1", 100, 40, 11, 7)
                          + _claude("msg_2", 5, 6))
    _hook(alpha, pane_id, "SessionStart", {
        "session_id": SID, "transcript_path": str(transcript), "cwd": str(tmp_path),
        "hook_event_name": "SessionStart", "source": "startup"})
    retry_until(lambda: _tokens(server) == (105, 46, 11, 7), 60, interval=0.3,
                message=f"alpha:agent usage: {_usage(server)}")
    assert rows(server)["alpha:agent"]["session"] == {
        "id": SID, "transcript": str(transcript), "cli": "claude", "ended": False}

    _append(transcript, _claude("msg_3", 1000, 2000) + _claude("msg_4", 1, 2)[:40])
    retry_until(lambda: _tokens(server) == (1105, 2046, 11, 7), 30, interval=0.3)
    usage = _usage(server)
    assert usage is not None and usage["cost_usd"] == pytest.approx(
        (1105 * 5 + 2046 * 25 + 11 * 0.5 + 7 * 6.25) / 1e6, rel=0.01)
    table = conductor("-L", server.socket_name, "pty", "status", "--width", "200").stdout
    [line] = [ln for ln in table.splitlines() if " alpha " in ln and "agent" in ln]
    assert "COST" in table.splitlines()[0] and "$0.057" in line, table
    by_host = conductor("-L", server.socket_name, "pty", "cost", "--by", "host", "--json")
    assert by_host.returncode == 0, by_host.stderr
    [alpha_cost] = [h for h in json.loads(by_host.stdout) if h["host"] == "alpha"]
    assert (alpha_cost["input"], alpha_cost["output"]) == (1105, 2046)

    # The host goes away: the figures and the watcher stay.
    alpha.stop()
    retry_until(lambda: rows(server)["alpha:agent"].get("stale_reason") == "host_unreachable",
                60, interval=0.3)
    assert _tokens(server) == (1105, 2046, 11, 7) and watcher.poll() is None
    # Written while it was away (the line cut above ends now): counted once it is back.
    _append(transcript, _claude("msg_4", 1, 2)[40:] + _claude("msg_5", 10, 20))
    alpha.start()
    retry_until(lambda: _tokens(server) == (1116, 2068, 11, 7), 90, interval=0.5,
                message=f"alpha:agent usage: {_usage(server)}")
    assert not rows(server)["alpha:agent"].get("stale")
    assert list(tmp_path.rglob("canary")) == [] and watcher.poll() is None
