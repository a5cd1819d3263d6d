"""Hosts read again while the watcher runs, with a real sshd on loopback and a real watcher
process: a config file that changes is noticed, a SIGHUP rereads it even when its mtime did not
move, and `hosts` says "not watched yet" for a host the watcher has not reached."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.hosts.test_watch_hosts import agent_on, rows
from tests.support.waiting import retry_until


def watch_column(name: str) -> str:
    table = conductor("pty", "hosts").stdout.splitlines()
    line = next((line for line in table if line.startswith(f"{name} ")), "")
    return "not watched yet" if "not watched yet" in line else line


@pytest.mark.slow
def test_a_host_added_to_the_config_is_watched_without_a_restart_and_a_sighup_rereads(
        ssh_host: Callable[[str], SshHost], server: Any, session: Any, watcher_process: Any,
        tmp_path: Path) -> None:
    alpha, beta = ssh_host("alpha"), ssh_host("beta")
    agent_on(alpha)
    agent_on(beta)
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    # Configured with no watcher running: reachable, but nobody watches it.
    write_hosts(config, alpha)
    assert watch_column("alpha") == "not watched yet"
    config.write_text("", encoding="utf-8")

    watcher = watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: bool(rows(server)), 30, interval=0.3)
    write_hosts(config, alpha)  # the file changed: its mtime says so
    retry_until(lambda: "alpha:agent" in rows(server), 60, interval=0.3,
                message=f"rows: {rows(server).keys()}")
    retry_until(lambda: watch_column("alpha") != "not watched yet", 30, interval=0.5)

    # beta added with the file's mtime kept: only the SIGHUP makes the watcher look. The new
    # file gets the old mtime before it takes the config's place, so the watcher cannot stat
    # the config in between and see it move.
    before = config.stat()
    staged = tmp_path / "config.staged.toml"
    write_hosts(staged, alpha, beta)
    os.utime(staged, ns=(before.st_atime_ns, before.st_mtime_ns))
    staged.replace(config)
    assert watch_column("beta") == "not watched yet"
    watcher.send_signal(signal.SIGHUP)
    retry_until(lambda: "beta:agent" in rows(server), 60, interval=0.3,
                message=f"rows: {rows(server).keys()}")
    assert watcher.poll() is None  # SIGHUP does not stop it
