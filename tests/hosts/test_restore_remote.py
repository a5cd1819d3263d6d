"""`restore` on another host (issue 33): a pane whose remote tmux server went away comes back
on that host, through its ssh connection, keeping its row."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.hosts.test_watch_hosts import rows
from tests.waiting import retry_until

pytestmark = pytest.mark.slow  # an sshd, its tmux server and a watcher
SHELL = "env -i PATH=/usr/bin:/bin HOME=/tmp PS1='lab$ ' bash --norc --noprofile"


def test_a_remote_pane_comes_back_on_its_host_with_its_row(
        ssh_host: Callable[[str], SshHost], server: Any, session: Any, tmp_path: Path,
        watcher_process: Any) -> None:
    alpha = ssh_host("alpha")
    made = alpha.tmux("new-session", "-d", "-s", "work", "-n", "term", "-c", str(tmp_path),
                      SHELL)
    assert made.returncode == 0, made.stderr
    write_hosts(tmp_path / "config.toml", alpha)
    watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: rows(server).get("alpha:term", {}).get("cli_type") == "shell", 60,
                interval=0.3)
    wid = rows(server)["alpha:term"]["id"]
    alpha.kill_tmux()
    retry_until(lambda: rows(server)["alpha:term"]["state"] == "EXITED", 60, interval=0.3)

    plan = conductor("-L", server.socket_name, "pty", "restore", "--dry-run", "alpha:term")
    assert plan.returncode == 0, plan.stderr
    assert f"term ({wid})  alpha:work:term  shell (was a shell)  in {tmp_path}" in plan.stdout

    done = conductor("-L", server.socket_name, "pty", "restore", "alpha:term", timeout=60)
    assert done.returncode == 0, done.stderr
    listed = alpha.tmux("list-panes", "-a", "-F",
                        "#{session_name} #{window_name} #{pane_current_path} #{@conductor-id}")
    assert listed.stdout.split("\n")[0] == f"work term {tmp_path} {wid}"
    retry_until(lambda: rows(server)["alpha:term"]["state"] not in ("EXITED", "UNKNOWN"), 60,
                interval=0.3)
    assert rows(server)["alpha:term"]["id"] == wid
