"""`explain` of a pane on another host, with a real sshd on loopback and a real watcher: the
live check is made on that host, with the watcher's rules, and agrees with the stored state."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.hosts.test_watch_hosts import agent_on, rows
from tests.support.waiting import retry_until


@pytest.mark.slow
def test_explain_checks_a_remote_pane_on_its_host(
        ssh_host: Callable[[str], SshHost], server: Any, session: Any, watcher_process: Any,
        tmp_path: Path) -> None:
    alpha = ssh_host("alpha")
    agent_on(alpha)
    write_hosts(tmp_path / "config.toml", alpha)
    watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: rows(server).get("alpha:agent", {}).get("state") == "READY", 60,
                interval=0.3, message=f"rows: {rows(server)}")
    row = rows(server)["alpha:agent"]
    done = conductor("-L", server.socket_name, "pty", "explain", row["id"])
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    assert "the pane is gone" not in done.stdout
    live = [line for line in done.stdout.splitlines() if line.startswith("live ")]
    assert live[0].startswith("live screen, pack claude: READY")
    assert live[1].startswith("live state: READY [")
