"""send, wait, answer, dispatch and switch on other hosts' panes, named HOST:NAME or not, with
hostile names and texts; a dead remote pane is never typed into."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.install.remote_hooks import hook_line
from tests.conftest import REPO, conductor
from tests.hosts.conftest import write_hosts
from tests.hosts.sshd import SshHost
from tests.hosts.test_watch_hosts import agent_on, rows
from tests.support.waiting import retry_until

pytestmark = pytest.mark.slow  # two sshd, their tmux servers and a watcher per test
SHELL = "env -i PATH=/usr/bin:/bin HOME=/tmp PS1='lab$ ' bash --norc --noprofile"


def pty(server: Any, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return conductor("-L", server.socket_name, "pty", *args, timeout=timeout)


@pytest.fixture
def hosts(ssh_host: Callable[[str], SshHost], server: Any, session: Any, tmp_path: Path,
          watcher_process: Any) -> tuple[SshHost, SshHost]:
    alpha, beta = ssh_host("alpha"), ssh_host("beta")
    agent_on(alpha)
    agent_on(beta)
    hostile = f"w;$(touch {tmp_path / 'canary'})'\""
    alpha.tmux("new-window", "-t", "work", "-n", hostile, "-c", str(tmp_path), SHELL)
    beta.tmux("set-option", "-g", "remain-on-exit", "on")
    beta.tmux("new-window", "-t", "work", "-n", "dead", "sh -c 'exit 3'")
    write_hosts(tmp_path / "config.toml", alpha, beta)
    watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: {"alpha:agent", "beta:agent", f"alpha:{hostile}", "beta:dead"}
                <= rows(server).keys(), 60, interval=0.3)
    return alpha, beta


def test_send_wait_answer_and_dispatch_on_remote_panes(hosts: tuple[SshHost, SshHost],
                                                       server: Any) -> None:
    alpha, beta = hosts
    retry_until(lambda: rows(server)["alpha:agent"]["state"] == "READY", 30, interval=0.3)
    done = pty(server, "send", "alpha:agent", "work 1")
    assert done.returncode == 0, done.stderr
    done = pty(server, "wait", "alpha:agent", "--timeout", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "work 1" in alpha.tmux("capture-pane", "-p", "-t", "work:agent").stdout

    assert pty(server, "send", "alpha:agent", "ask").returncode == 0
    done = pty(server, "wait", "alpha:agent", "--until", "NEEDS_CONFIRMATION", "--timeout", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    done = pty(server, "answer", "alpha:agent", "approve")
    assert done.returncode == 0, done.stderr
    assert "answered" in done.stdout

    # Unqualified: only beta has it, once alpha's is named apart.
    done = pty(server, "dispatch", "beta:agent", "hello there", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    retry_until(lambda: "hello there" in beta.tmux("capture-pane", "-p", "-t",
                                                   "work:agent").stdout, 15)


def test_names_are_local_first_then_unique_else_listed(hosts: tuple[SshHost, SshHost],
                                                       server: Any, session: Any) -> None:
    done = pty(server, "send", "agent", "hi")
    assert done.returncode == 1
    assert "alpha:agent" in done.stderr and "beta:agent" in done.stderr
    done = pty(server, "send", "dead", "hi")  # only beta has one: found there, and refused
    assert done.returncode == 1 and "exited" in done.stderr, done.stderr
    # The store's commands take HOST:NAME too: herding is opted in for alpha's agent only.
    done = pty(server, "herd", "on", "alpha:agent", "--dry-run")
    assert done.returncode == 0, done.stderr
    herded = pty(server, "herd", "list", "--json")
    assert rows(server)["alpha:agent"]["id"] in herded.stdout
    assert rows(server)["beta:agent"]["id"] not in herded.stdout


def test_hostile_names_and_texts_stay_data(hosts: tuple[SshHost, SshHost], server: Any,
                                          tmp_path: Path) -> None:
    alpha, _ = hosts
    hostile = f"w;$(touch {tmp_path / 'canary'})'\""
    retry_until(lambda: rows(server)[f"alpha:{hostile}"]["state"] == "READY", 30, interval=0.3)
    text = f"echo '$(touch {tmp_path / 'canary2'})' \"`id`\" ; echo done"
    done = pty(server, "send", f"alpha:{hostile}", text)
    assert done.returncode == 0, done.stderr
    retry_until(lambda: "done" in alpha.tmux("capture-pane", "-p", "-t", "work:1").stdout
                .split("echo done", 1)[-1], 15)
    assert not (tmp_path / "canary").exists() and not (tmp_path / "canary2").exists()


def test_switch_opens_a_local_window_attached_to_the_remote_pane(
        hosts: tuple[SshHost, SshHost], server: Any, session: Any) -> None:
    done = pty(server, "switch", "beta:agent")
    assert done.returncode == 0, done.stderr
    [window] = [w for w in session.windows if w.window_name == "agent@beta"]
    pane = window.active_pane

    def shows_agent() -> bool:
        shown = server.cmd("display-message", "-p", "-t", pane.pane_id, "#{pane_dead}").stdout
        screen = "\n".join(pane.capture_pane())
        # ssh ended: its window keeps what it said, and that is the failure to show.
        assert shown == ["0"], f"the window's ssh ended:\n{screen}"
        return "? for shortcuts" in screen

    retry_until(shows_agent, 20)
    again = pty(server, "switch", "beta:agent")
    assert again.returncode == 0 and "new window" not in again.stdout
    assert len([w for w in session.windows if w.window_name == "agent@beta"]) == 1
    # The window shows beta's pane: conductor's own view here, not a second pane of this
    # machine (its dialog would be asked twice: status, notifications, the answer page).
    retry_until(lambda: rows(server).get("local:agent@beta", {}).get("cli_type") == "conductor",
                30, interval=0.3)
    short = pty(server, "status", "--short")
    # beta's agent is "agent@beta" there once; the window is not listed beside it.
    assert short.returncode == 0 and short.stdout.count("[agent@beta:") == 1, short.stdout


def test_a_cycle_check_runs_on_the_panes_host_in_its_folder(hosts: tuple[SshHost, SshHost],
                                                           server: Any, tmp_path: Path) -> None:
    alpha, _ = hosts
    folder = tmp_path / "project"
    folder.mkdir()
    alpha.tmux("new-window", "-t", "work", "-n", "coder", "-c", str(folder),
               f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}")
    retry_until(lambda: rows(server).get("alpha:coder", {}).get("state") == "READY", 60,
                interval=0.3)
    check = 'echo "on=${SSH_CONNECTION:+ssh} in=$(pwd) key=${OPENROUTER_API_KEY:-none}" > seen'
    done = pty(server, "goal", "alpha:coder", "make it work", "--check", check)
    assert done.returncode == 0, done.stderr
    done = conductor("-L", server.socket_name, "pty", "report", "alpha:coder", "done",
                     env={"OPENROUTER_API_KEY": ""})
    assert done.returncode == 0, done.stderr
    retry_until(lambda: (folder / "seen").exists(), 60, interval=0.3)
    assert (folder / "seen").read_text().split() == ["on=ssh", f"in={folder}", "key=none"]


def test_a_remote_hook_reaches_the_watcher_through_the_pane_option(
        hosts: tuple[SshHost, SshHost], server: Any, isolated_env: Path) -> None:
    alpha, _ = hosts
    # A shell that keeps tmux's TMUX_PANE, as an agent CLI's hooks see it.
    alpha.tmux("new-window", "-t", "work", "-n", "hooked", "bash --norc --noprofile")
    retry_until(lambda: "alpha:hooked" in rows(server), 30, interval=0.3)
    pane = rows(server)["alpha:hooked"]
    alpha_pid = alpha.tmux("display-message", "-p", "#{pid}").stdout.strip()
    # What the CLI's Stop hook runs there: one shell line, in the agent's pane.
    alpha.tmux("send-keys", "-t", pane["pane_id"], "-l", hook_line("claude", "Stop"))
    alpha.tmux("send-keys", "-t", pane["pane_id"], "Enter")

    def recorded() -> list[tuple[Any, ...]]:
        with sqlite3.connect(isolated_env / "status.db") as conn:
            return list(conn.execute(
                "SELECT kind, event, name, cli, pane_id, server_pid, socket FROM events "
                "WHERE kind = 'hook'"))

    retry_until(recorded, 30, interval=0.2)
    assert recorded() == [("hook", "turn_end", "Stop", "claude", pane["pane_id"],
                           int(alpha_pid), "alpha:default")]


def test_hooks_install_on_a_host_keeps_the_rest_with_a_backup(
        hosts: tuple[SshHost, SshHost], server: Any, tmp_path: Path) -> None:
    settings = tmp_path / "claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"theme": "dark", "hooks": {"Stop": [
        {"hooks": [{"type": "command", "command": "notify-me"}]}]}}), encoding="utf-8")
    done = pty(server, "hooks", "install", "--cli", "claude", "--host", "alpha",
               "--path", str(settings))
    assert done.returncode == 0, done.stderr
    assert f"alpha:{settings}" in done.stdout and "backup" in done.stdout
    written = json.loads(settings.read_text(encoding="utf-8"))
    assert written["theme"] == "dark"
    stop = [h["command"] for g in written["hooks"]["Stop"] for h in g["hooks"]]
    assert stop == ["notify-me", hook_line("claude", "Stop")]
    assert "PermissionRequest" in written["hooks"]
    backups = list(settings.parent.glob("settings.json.conductor-backup-*"))
    assert len(backups) == 1 and "notify-me" in backups[0].read_text(encoding="utf-8")
    again = pty(server, "hooks", "install", "--cli", "claude", "--host", "alpha",
                "--path", str(settings))
    assert again.returncode == 0 and "already" in again.stdout
    # Without --path: the CLI's settings in the home folder of the host's login.
    _, beta = hosts
    done = pty(server, "hooks", "install", "--cli", "gemini", "--host", "beta")
    assert done.returncode == 0, done.stderr
    written = json.loads((beta.home / ".gemini" / "settings.json").read_text(encoding="utf-8"))
    assert written["hooks"]["AfterAgent"][0]["hooks"][0]["command"] == \
        hook_line("gemini", "AfterAgent")
    refused = pty(server, "hooks", "install", "--cli", "codex", "--host", "alpha")
    assert refused.returncode == 1 and "Codex" in refused.stderr


def test_switch_keeps_a_window_whose_ssh_ended_and_makes_it_anew_next_time(
        ssh_host: Callable[[str], SshHost], server: Any, session: Any, tmp_path: Path,
        watcher_process: Any) -> None:
    alpha = ssh_host("alpha")
    agent_on(alpha)
    write_hosts(tmp_path / "config.toml", alpha)
    watcher_process("--interval", "1", "--no-notify")
    retry_until(lambda: "alpha:agent" in rows(server), 60, interval=0.3)
    alpha.stop()  # the host goes away: the window's ssh is refused

    done = pty(server, "switch", "alpha:agent")
    assert done.returncode == 0, done.stderr
    [window] = [w for w in session.windows if w.window_name == "agent@alpha"]
    pane_id = window.active_pane.pane_id

    def dead(pane: str) -> bool:
        shown: list[str] = server.cmd("display-message", "-p", "-t", pane, "#{pane_dead}").stdout
        return shown == ["1"]

    def said() -> str:
        return "\n".join(server.cmd("capture-pane", "-p", "-t", pane_id).stdout)

    retry_until(lambda: dead(pane_id), 30, interval=0.2)
    # What ssh said, kept on the screen a person sees (not only in its history). tmux's own
    # "Pane is dead (status 255 …)" line is not waited for: a loaded tmux sometimes marks the
    # pane dead and never draws it (CI, twice).
    retry_until(lambda: "Connection refused" in said(), 10, interval=0.1,
                message="ssh's words are not on the window's screen")
    # The window is conductor's mirror of that pane, not a pane of its own that exited.
    retry_until(lambda: rows(server).get("local:agent@alpha", {}).get("summary", "")
                == "conductor's own view: mirror of agent@alpha", 30, interval=0.3)

    again = pty(server, "switch", "alpha:agent")
    assert again.returncode == 0 and "new window" in again.stdout
    windows = [w for w in session.windows if w.window_name == "agent@alpha"]
    assert len(windows) == 1 and windows[0].active_pane.pane_id != pane_id
