"""The watcher over several hosts: this machine's tmux plus two real sshd on loopback, each with
its own tmux server whose pane ids collide with the others'."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.support.waiting import retry_until

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"


def rows(server: Any) -> dict[str, dict[str, Any]]:
    """status --json by HOST:NAME."""
    done = conductor("-L", server.socket_name, "pty", "status", "--json")
    if done.returncode != 0:
        return {}
    return {f"{w['host']}:{w['name']}": w for w in json.loads(done.stdout)}


def agent_on(host: SshHost) -> None:
    """Session "work" with window "agent" running the fake Claude Code, on that host's tmux."""
    done = host.tmux("new-session", "-d", "-s", "work", "-n", "agent", "-x", "160", "-y", "40",
                     AGENT)
    assert done.returncode == 0, done.stderr

    def idle() -> bool:
        return "? for shortcuts" in host.tmux("capture-pane", "-p", "-t", "work:agent").stdout

    retry_until(idle, 15)


@pytest.fixture
def two_hosts(ssh_host: Callable[[str], SshHost], session: Any, tmp_path: Path
              ) -> tuple[SshHost, SshHost]:
    alpha, beta = ssh_host("alpha"), ssh_host("beta")
    agent_on(alpha)
    agent_on(beta)
    session.new_window(window_name="agent", window_shell=AGENT, attach=False)
    write_hosts(tmp_path / "config.toml", alpha, beta)
    return alpha, beta


@pytest.mark.slow
def test_rows_from_every_host_a_remote_question_and_a_host_lost_and_back(
        two_hosts: tuple[SshHost, SshHost], server: Any, watcher_process: Any) -> None:
    alpha, beta = two_hosts
    watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: {"local:agent", "alpha:agent", "beta:agent"} <= rows(server).keys() and
                all(w["state"] == "READY" for k, w in rows(server).items() if k.endswith("agent")),
                60, interval=0.3, message=f"rows: {rows(server)}")
    first = rows(server)
    ids = {key: w["id"] for key, w in first.items()}
    assert len(set(ids.values())) == len(ids)  # pane ids collide, conductor's ids do not
    assert first["alpha:agent"]["pane_id"] == first["beta:agent"]["pane_id"] == "%0"
    assert first["alpha:agent"]["socket"] == "alpha:default"

    # A question on a remote pane.
    alpha.tmux("send-keys", "-t", "work:agent", "ask", "Enter")
    retry_until(lambda: rows(server)["alpha:agent"]["state"] == "NEEDS_CONFIRMATION", 30,
                interval=0.2)

    # The table names each pane's host; the status line writes NAME@HOST.
    table = conductor("-L", server.socket_name, "pty", "status").stdout
    assert table.splitlines()[0].split()[:3] == ["ID", "NAME", "HOST"]
    short = conductor("-L", server.socket_name, "pty", "status", "--short").stdout
    assert "[agent@alpha: NEEDS_CONF]" in short and "[agent: READY]" in short

    # One host gone: its rows stale, never EXITED; the others carry on.
    beta.stop()
    retry_until(lambda: rows(server)["beta:agent"].get("stale_reason") == "host_unreachable",
                30, interval=0.3)
    now = rows(server)
    # Never READY while its host does not answer: the state seen last is kept apart.
    assert now["beta:agent"]["state"] == "UNKNOWN" and now["beta:agent"]["stale"]
    assert now["beta:agent"]["last_state"] == "READY"
    assert not now["beta:agent"]["eligible_for_herd"]
    assert not now["alpha:agent"]["stale"] and not now["local:agent"]["stale"]
    alpha.tmux("send-keys", "-t", "work:agent", "Escape")
    retry_until(lambda: rows(server)["alpha:agent"]["state"] != "NEEDS_CONFIRMATION", 30,
                interval=0.2)
    assert "UNKNOWN (host unreachable)" in conductor("-L", server.socket_name, "pty",
                                                     "status").stdout
    assert "[agent@beta: host unreachable]" in conductor("-L", server.socket_name, "pty",
                                                         "status", "--short").stdout
    refused = conductor("-L", server.socket_name, "pty", "send", "beta:agent", "hello")
    assert refused.returncode == 1 and "unreachable" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1

    # Back: the same ids, fresh again.
    beta.start()
    retry_until(lambda: not rows(server)["beta:agent"].get("stale"), 60, interval=0.3)
    assert {key: w["id"] for key, w in rows(server).items()} == ids


@pytest.mark.slow
def test_a_remote_tmux_server_that_restarts_shows_new_panes_and_ends_the_old(
        ssh_host: Callable[[str], SshHost], server: Any, session: Any, tmp_path: Path,
        watcher_process: Any) -> None:
    alpha = ssh_host("alpha")
    assert alpha.tmux("new-session", "-d", "-s", "work", "-n", "old", "cat").returncode == 0
    write_hosts(tmp_path / "config.toml", alpha)
    watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: "alpha:old" in rows(server), 60, interval=0.3)
    old_id = rows(server)["alpha:old"]["id"]
    alpha.kill_tmux()
    # The old server may still be on its way out: "server exited unexpectedly" until it is gone.
    retry_until(lambda: alpha.tmux("new-session", "-d", "-s", "work", "-n", "new",
                                   "cat").returncode == 0, 15, interval=0.1)

    def ended() -> bool:
        done = conductor("-L", server.socket_name, "pty", "status", "--json", "--all")
        every = {w["id"]: w for w in json.loads(done.stdout or "[]")}
        return every.get(old_id, {}).get("state") == "EXITED" and \
            every[old_id]["summary"] == "tmux server ended" and "alpha:new" in rows(server)

    retry_until(ended, 60, interval=0.3)
    new = rows(server)["alpha:new"]
    assert new["id"] != old_id and new["pane_id"] == "%0" and not new.get("stale")
