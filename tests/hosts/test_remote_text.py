"""Text from another host stays data (issue 29): a tmux reached over ssh gets our text as it is,
its rows cannot be forged by a program's argv[0], and a remote window's name, chosen by the
program running there, runs nothing here when `switch` names a local window after it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.adapters.ssh import HostConfig
from app.adapters.tmux import Tmux
from app.base.errors import PaneNotFound
from app.run.hosts import switch_to_remote
from tests.adapters.test_tmux_text import FORGED_ARGV0, HOSTILE, hostile, ran_nothing
from tests.conftest import REPO, conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.hosts.test_ssh import via_for
from tests.hosts.test_watch_hosts import agent_on, rows
from tests.support.waiting import retry_until


def host_panes(tmux: Tmux) -> dict[str, Any]:
    return {p.pane_id: p for p in tmux.list_panes().panes}


def test_a_remote_tmux_gets_names_and_folders_as_they_are(ssh_host: Callable[[str], SshHost],
                                                          tmp_path: Path) -> None:
    host = ssh_host("alpha")
    assert host.tmux("new-session", "-d", "-s", "s1", "cat").returncode == 0
    tmux = Tmux(via=via_for(host, tmp_path))
    canary = tmp_path / "canary"
    made = {}
    for template in HOSTILE:
        name = hostile(template, canary)
        folder = tmp_path / name.replace("/", "-")
        folder.mkdir()
        made[tmux.new_window(str(folder), name, "sleep 1000", remain_on_exit=True).pane_id] = \
            (name, str(folder))
    listed = host_panes(tmux)
    assert {p: (listed[p].window_name, listed[p].cwd) for p in made} == made
    assert ran_nothing(canary)


def test_a_forged_argv0_on_a_host_changes_no_other_row(ssh_host: Callable[[str], SshHost],
                                                       tmp_path: Path) -> None:
    host = ssh_host("alpha")
    assert host.tmux("new-session", "-d", "-s", "main", "-n", "person", "-c", str(tmp_path),
                     "cat").returncode == 0
    script = f"import os; os.execv('/bin/sleep', [{FORGED_ARGV0!r}, '1000'])"
    assert host.tmux("new-window", "-t", "main", f"exec {sys.executable} -c \"{script}\""
                     ).returncode == 0
    tmux = Tmux(via=via_for(host, tmp_path))

    def forged() -> bool:
        return FORGED_ARGV0 in {p.current_command for p in host_panes(tmux).values()}

    retry_until(forged, 15)
    listed = host_panes(tmux)
    assert len(listed) == 2
    person = [p for p in listed.values() if p.window_name == "person"]
    assert [(p.cwd, p.session_name) for p in person] == [(str(tmp_path), "main")]


@pytest.mark.slow  # an sshd, its tmux, a watcher and a local client window
def test_switch_to_a_remote_pane_named_like_a_command_runs_nothing(
        ssh_host: Callable[[str], SshHost], server: Any, session: Any, tmp_path: Path,
        watcher_process: Any) -> None:
    alpha = ssh_host("alpha")
    agent_on(alpha)
    canary = tmp_path / "AUTOX"
    # The name is the program's: tmux's automatic-rename takes it from argv[0].
    program = f"#(id>{canary})"
    agent = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"
    done = alpha.tmux("new-window", "-t", "work", "-c", str(tmp_path),
                      f"exec bash -c 'exec -a \"$0\" {agent}' '{program}'")
    assert done.returncode == 0, done.stderr
    write_hosts(tmp_path / "config.toml", alpha)
    watcher_process("--interval", "1", "--no-notify")
    key = f"alpha:{program}"
    retry_until(lambda: rows(server).get(key, {}).get("state") == "READY", 60, interval=0.3)
    # It asks a question: `switch --next` takes it before any pane that is only READY.
    alpha.tmux("send-keys", "-t", "work:1", "ask", "Enter")
    retry_until(lambda: rows(server)[key]["state"] == "NEEDS_CONFIRMATION", 30, interval=0.3)

    local = Tmux(socket_name=server.socket_name)
    window = f"{program}@alpha"
    done = conductor("-L", server.socket_name, "pty", "switch", "--next", timeout=60)
    assert done.returncode == 0 and "new window" in done.stdout, done.stdout + done.stderr
    assert [p.window_name for p in local.list_panes().panes].count(window) == 1
    again = conductor("-L", server.socket_name, "pty", "switch", key, timeout=60)
    assert again.returncode == 0 and "new window" not in again.stdout, again.stderr
    assert [p.window_name for p in local.list_panes().panes].count(window) == 1
    assert ran_nothing(canary)


def test_a_pane_id_from_the_store_is_checked_before_it_reaches_ssh() -> None:
    host = HostConfig(name="alpha", ssh="alpha")
    with pytest.raises(PaneNotFound):
        switch_to_remote(Tmux(socket_name="unused"), (host,),
                         {"host": "alpha", "name": "w", "pane_id": "%1;touch x"})
