"""`answer` on another host's shell panes (real sshd on loopback): the program in front is
looked at over ssh as it is here, so a menu left by a sleeping command and a prompt that ends
like a question get no key, and a real `read -p` question still gets its answer."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.hosts.test_watch_hosts import agent_on, rows
from tests.support.waiting import retry_until

pytestmark = pytest.mark.slow  # an sshd, its tmux server and a watcher
SHELL = "env -i PATH=/usr/bin:/bin HOME=/tmp PS1='lab$ ' bash --norc --noprofile"
ASKING_PROMPT = ("env -i PATH=/usr/bin:/bin HOME=/tmp PS1='Delete everything? [y/N] ' "
                 "bash --norc --noprofile")
WINDOWS = {"sleeper": SHELL, "asks": ASKING_PROMPT, "reads": SHELL}


def pty(server: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return conductor("-L", server.socket_name, "pty", *args, timeout=60)


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return str(lines[0])


@pytest.fixture
def alpha(ssh_host: Callable[[str], SshHost], server: Any, session: Any, tmp_path: Path,
          watcher_process: Any) -> SshHost:
    host = ssh_host("alpha")
    agent_on(host)
    for name, command in WINDOWS.items():
        host.tmux("new-window", "-t", "work", "-n", name, "-c", str(tmp_path), command)
    write_hosts(tmp_path / "config.toml", host)
    watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: {f"alpha:{name}" for name in WINDOWS} <= rows(server).keys(), 60,
                interval=0.3)
    return host


def test_answer_on_another_hosts_shell_panes_presses_only_into_a_reading_question(
        alpha: SshHost, server: Any) -> None:
    def screen(window: str) -> str:
        return str(alpha.tmux("capture-pane", "-p", "-t", f"work:{window}").stdout)

    def command(window: str) -> str:
        return str(alpha.tmux("display-message", "-p", "-t", f"work:{window}",
                              "#{pane_current_command}").stdout.strip())

    alpha.tmux("send-keys", "-t", "work:sleeper",
               "clear; printf 'Do you want to proceed?\\n❯ 1. Yes\\n  2. No\\n'; sleep 600",
               "Enter")
    retry_until(lambda: command("sleeper") == "sleep" and screen("sleeper").rstrip()
                .endswith("2. No"), 15)
    line = one_line(pty(server, "answer", "alpha:sleeper", "approve"))
    assert "not reading its input" in line and "nothing pressed" in line, line

    retry_until(lambda: screen("asks").rstrip().endswith("[y/N]"), 15)
    line = one_line(pty(server, "answer", "alpha:asks", "approve"))
    assert "shell's own prompt" in line, line

    alpha.tmux("send-keys", "-t", "work:reads",
               "read -p 'Delete everything? (y/N) ' a; echo \"got:$a\"", "Enter")
    retry_until(lambda: screen("reads").rstrip().endswith("(y/N)"), 15)
    done = pty(server, "answer", "alpha:reads", "refuse")
    assert done.returncode == 0, done.stderr
    retry_until(lambda: "got:n" in screen("reads"), 15)

    alpha.tmux("send-keys", "-t", "work:sleeper", "C-c", "")
    retry_until(lambda: screen("sleeper").rstrip().endswith("lab$"), 15,
                message=screen("sleeper"))  # nothing typed ahead: an empty prompt
