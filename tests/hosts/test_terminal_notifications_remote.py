"""Terminal notifications for a pane on another host: the clients of that host's tmux get them,
written to their terminal through the ssh link, and a pane's text runs nothing there."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.adapters.termnotify import Terminals
from app.adapters.tmux import Tmux, client_terminals
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.hosts.test_ssh import via_for
from tests.hosts.test_watch_hosts import agent_on, rows
from tests.support.tmux_client import AttachedClient
from tests.support.waiting import retry_until


@pytest.fixture
def clients() -> Iterator[list[AttachedClient]]:
    attached: list[AttachedClient] = []
    yield attached
    for client in attached:
        client.close()


def test_a_remote_hosts_client_gets_the_notification_and_the_text_stays_data(
        ssh_host: Callable[[str], SshHost], tmp_path: Path,
        clients: list[AttachedClient]) -> None:
    host = ssh_host("alpha")
    for session in ("work", "other"):
        assert host.tmux("new-session", "-d", "-s", session, "cat").returncode == 0
    assert host.tmux("set-option", "-g", "status", "off").returncode == 0
    tmux = Tmux(via=via_for(host, tmp_path))
    panes = {p.session_name: p.pane_id for p in tmux.list_panes().panes}
    # The host's clients: attached there (here, on loopback) to that host's own server.
    mine = AttachedClient([], "work", "xterm-256color", env=host.tmux_env())
    clients.append(mine)
    theirs = AttachedClient([], "other", "xterm-256color", env=host.tmux_env())
    clients.append(theirs)
    retry_until(lambda: len(client_terminals(tmux, panes["work"])) == 1
                and len(client_terminals(tmux, panes["other"])) == 1, 30)
    # Relative: a command it ran would make it in the login's folder, the host's home.
    canary = host.home / "canary"
    body = "Approve: 100% $(touch canary) `touch canary` \\033]52;c;eA==\\007 '\" %s %n"

    told = Terminals(tmux).tell(tmux.host, panes["work"], "api: NEEDS_CONFIRMATION", body,
                                bell=True, timeout=30.0)
    assert told == 1
    # As sent: ";" is a field separator of OSC 777 and 99, so it travels as ",".
    shown = body.replace(";", ",")
    expected = f"\x1b]9;api: NEEDS_CONFIRMATION — {shown}\x07".encode()
    retry_until(lambda: expected in mine.seen, 30)
    assert b"\x07\x07" in mine.seen.split(expected, 1)[1]  # the bell after OSC 777
    assert not canary.exists()
    # The other session's client hears of its own pane only (writes are in order).
    Terminals(tmux).tell(tmux.host, panes["other"], "db: READY", "", bell=False, timeout=30.0)
    retry_until(lambda: b"\x1b]9;db: READY\x07" in theirs.seen, 30)
    assert b"NEEDS_CONFIRMATION" not in theirs.seen


@pytest.mark.slow
def test_the_watcher_tells_a_remote_hosts_client_of_its_question(
        ssh_host: Callable[[str], SshHost], session: Any, server: Any, tmp_path: Path,
        watcher_process: Any, clients: list[AttachedClient]) -> None:
    alpha = ssh_host("alpha")
    agent_on(alpha)
    write_hosts(tmp_path / "config.toml", alpha, extra=(
        "\n[notify]\nmin_interval = 0\n\n[notify.tmux]\nenabled = false\n\n"
        "[notify.desktop]\nenabled = false\n\n[notify.terminal]\nenabled = true\n"))
    client = AttachedClient([], "work", "xterm-256color", env=alpha.tmux_env())
    clients.append(client)
    retry_until(lambda: "work" in alpha.tmux("list-clients", "-F", "#{session_name}").stdout, 30)
    watcher_process("--interval", "1")
    retry_until(lambda: rows(server).get("alpha:agent", {}).get("state") == "READY", 60,
                interval=0.3)
    alpha.tmux("send-keys", "-t", "work:agent", "ask", "Enter")
    retry_until(lambda: b"\x1b]9;agent: NEEDS_CONFIRMATION" in client.seen, 60, interval=0.2,
                message=f"nothing told: {client.seen[-300:]!r}")
