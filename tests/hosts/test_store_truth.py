"""What the watcher decides is what every reader sees (issue 28), with a host configured and after
sends and hooks from other processes; and a store whose files change under the watcher is
reopened by a watcher started anew, with nothing lost."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.adapters.store import db_path
from app.adapters.store_read import StoreReader
from tests.conftest import conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.support.processes import deleted_store_files
from tests.support.waiting import STARTS_WITHIN_S, retry_until

BASH = "env -i PATH=/usr/bin:/bin HOME={home} TERM=screen PS1='lab$ ' bash --norc --noprofile"


def _states(server: Any) -> dict[str, str]:
    done = conductor("-L", server.socket_name, "pty", "status", "--json")
    if done.returncode != 0:
        return {}
    return {w["name"]: w["state"] for w in json.loads(done.stdout) if w["host"] == "local"}




def _hook(server: Any, pane_id: str) -> None:
    """What an agent's hook runs: its own process writes one row to the store."""
    server_pid = server.cmd("display-message", "-p", "#{pid}").stdout[0]
    payload = json.dumps({"hook_event_name": "Notification", "session_id": "s",
                          "message": "Claude needs your permission"})
    done = conductor("pty", "hook", "--cli", "claude", input_text=payload,
                     env={"TMUX_PANE": pane_id, "TMUX": f"/tmp/x,{server_pid},0"})
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_with_a_host_configured_sends_and_hooks_leave_the_watchers_writes_visible(
        ssh_host: Callable[[str], SshHost], session: Any, server: Any, tmp_path: Path,
        watcher_process: Any, isolated_env: Path) -> None:
    """The issue's reproduction: one [hosts.gpu]; a send and hooks from other processes used to
    unlink the WAL under the watcher, after which `status` kept the old states."""
    write_hosts(tmp_path / "config.toml", ssh_host("gpu"))
    pane = session.new_window(window_name="bash", attach=False,
                              window_shell=BASH.format(home=tmp_path)).active_pane
    proc = watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: _states(server).get("bash") == "READY", STARTS_WITHIN_S, interval=0.3)

    sent = conductor("-L", server.socket_name, "pty", "send", "bash", "clear")
    assert sent.returncode == 0, sent.stderr
    for _ in range(5):
        _hook(server, "%999")  # a pane of no one's: what matters is the other process's write
    retry_until(lambda: _states(server).get("bash") == "READY", STARTS_WITHIN_S, interval=0.3)
    assert deleted_store_files(proc.pid) == []

    pane.send_keys("ls /nope", enter=True)
    retry_until(lambda: _states(server).get("bash") == "ERROR", STARTS_WITHIN_S, interval=0.3)
    assert deleted_store_files(proc.pid) == []


@pytest.mark.slow
def test_a_wal_deleted_under_the_watcher_makes_it_start_anew_and_write_again(
        session: Any, server: Any, tmp_path: Path, watcher_process: Any,
        isolated_env: Path) -> None:
    pane = session.new_window(window_name="bash", attach=False,
                              window_shell=BASH.format(home=tmp_path)).active_pane
    proc = watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: _states(server).get("bash") == "READY", STARTS_WITHIN_S, interval=0.3)

    # What another process that took the watcher's connection for gone would do.
    Path(db_path(isolated_env) + "-wal").unlink()
    Path(db_path(isolated_env) + "-shm").unlink()
    pane.send_keys("ls /nope", enter=True)

    retry_until(lambda: _states(server).get("bash") == "ERROR", STARTS_WITHIN_S, interval=0.3)
    log = (isolated_env / "watch.log").read_text(encoding="utf-8")
    assert "-wal file was deleted or replaced" in log
    assert "starting the watcher anew" in log
    assert proc.poll() is None  # the same process, started anew in place
    reader = StoreReader(isolated_env)
    try:
        assert (reader.daemon() or {}).get("pid") == proc.pid
        assert [row.state for row in reader.history(_id_of(server, "bash"))][-1] == "ERROR"
    finally:
        reader.close()
    assert not (isolated_env / "replay.json").exists()


def _id_of(server: Any, name: str) -> str:
    done = conductor("-L", server.socket_name, "pty", "status", "--json")
    return str(next(w["id"] for w in json.loads(done.stdout) if w["name"] == name))
