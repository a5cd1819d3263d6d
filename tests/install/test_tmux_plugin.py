"""The tmux plugin (conductor-pty.tmux) on a real tmux server: sourced as TPM would run it, its
options, bindings and status line read back, and a real client's screen read cell by cell.

The client's terminal is a pane of a second ("outer") tmux server: ``capture-pane -e`` on it
returns exactly what a person would see, colours included.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, conductor
from tests.support.tmux_sockets import reap
from tests.support.waiting import retry_until, stop_process

PLUGIN = REPO / "conductor-pty.tmux"
QUESTION = "bash --norc --noprofile -c \"read -p 'Overwrite? (y/N) ' a; sleep 60\""
SGR = re.compile(r"\x1b\[([0-9;]*)m")

# What the plugin finds: conductor on PATH, else the checkout's venv (the tmux server here has
# the tests' environment).
CONDUCTOR = shutil.which("conductor") or str(REPO / ".venv" / "bin" / "conductor")
pytestmark = pytest.mark.skipif(not Path(CONDUCTOR).exists(),
                                reason="no conductor command on PATH or in the checkout's .venv")


def run_plugin(server: Any) -> None:
    done = server.cmd("run-shell", str(PLUGIN))
    assert not done.stderr, done.stderr


def option(server: Any, name: str) -> str:
    out = server.cmd("show-option", "-gqv", name).stdout
    return out[0] if out else ""


def key(server: Any, name: str) -> str:
    return " ".join(server.cmd("list-keys", "-T", "prefix", name).stdout)


def test_the_segment_is_appended_to_the_users_status_right_once(server: Any, session: Any
                                                                ) -> None:
    server.cmd("set-option", "-g", "status-right", "MINE %H:%M")
    assert option(server, "status-right-length") == "40"

    run_plugin(server)
    run_plugin(server)  # a config reload runs it again

    right = option(server, "status-right")
    assert right.startswith("MINE %H:%M #(")
    assert right.count("pty status --short --colour") == 1
    # This server's panes only, in the room the line has (a format tmux expands per client).
    assert f"'{CONDUCTOR}' -L '{server.socket_name}' pty status --short --colour --width #{{" \
        in right
    # Raised far enough that the client's width decides the room (the format takes the smaller).
    assert option(server, "status-right-length") == "1000"
    assert option(server, "status-interval") == "15"  # the user's, untouched


def test_before_tmux_3_2_the_segment_gets_the_room_reserved_for_it(
        server: Any, session: Any, tmp_path: Path) -> None:
    # No tmux older than 3.2 here: one that says it is 3.1c stands in front of the real one.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = shutil.which("tmux")
    fake = bin_dir / "tmux"
    fake.write_text(f'#!/bin/sh\n[ "$1" = -V ] && {{ echo "tmux 3.1c"; exit 0; }}\n'
                    f'exec {real} "$@"\n')
    fake.chmod(0o755)
    server.cmd("set-environment", "-g", "PATH", f"{bin_dir}:{os.environ['PATH']}")
    server.cmd("set-option", "-g", "status-right", "MINE %H:%M")
    run_plugin(server)
    right = option(server, "status-right")
    assert "pty status --short --colour --width 60;" in right  # no format math before 3.2
    assert "#{e|" not in right


def test_a_longer_status_right_length_is_left_alone_and_left_or_off_work(
        server: Any, session: Any) -> None:
    server.cmd("set-option", "-g", "status-right-length", "1200")
    server.cmd("set-option", "-g", "@conductor-status-length", "30")
    run_plugin(server)
    assert option(server, "status-right-length") == "1200"

    server.cmd("set-option", "-g", "status-left", "[#S]")
    server.cmd("set-option", "-g", "@conductor-status", "left")
    server.cmd("set-option", "-g", "@conductor-status-interval", "2")
    run_plugin(server)
    assert option(server, "status-left").startswith("#(")
    assert option(server, "status-left").endswith(" [#S]")
    assert option(server, "status-left-length") == "35"  # 4 + 1 + 30: raised only that far
    assert option(server, "status-interval") == "2"


def test_bindings_and_a_key_the_user_bound_is_left_alone(server: Any, session: Any) -> None:
    server.cmd("bind-key", "-T", "prefix", "S", "display-message", "mine")
    run_plugin(server)

    assert "pty switch --next --from '#{pane_id}'" in key(server, "N")
    assert f"-L '{server.socket_name}'" in key(server, "N")
    assert "display-message mine" in key(server, "S")

    server.cmd("set-option", "-g", "@conductor-popup-key", "W")
    server.cmd("set-option", "-g", "@conductor-next-key", "none")
    server.cmd("unbind-key", "-T", "prefix", "N")
    run_plugin(server)
    assert "display-popup" in key(server, "W") and "pty status --watch" in key(server, "W")
    assert key(server, "N") == ""


def test_hostile_option_values_never_reach_tmux_or_a_shell(server: Any, session: Any,
                                                           tmp_path: Path) -> None:
    sentinel = tmp_path / "pwned"
    server.cmd("set-option", "-g", "@conductor-colour-ready",
               f"fg=red#[bg=blue]$(touch {sentinel})")
    server.cmd("set-option", "-g", "@conductor-colour-error", "fg=black,bg=white")
    run_plugin(server)
    right = option(server, "status-right")
    assert "CONDUCTOR_STATUS_STYLE='ERROR=fg=black,bg=white;'" in right
    assert "touch" not in right and "bg=blue" not in right

    server.cmd("set-option", "-g", "status-right", "")
    server.cmd("set-option", "-g", "@conductor-bin", f"/tmp/x#(touch {sentinel})")
    run_plugin(server)
    assert option(server, "status-right") == ""
    assert not sentinel.exists()


class Terminal:
    """A person's terminal showing a client attached to ``server``: an outer tmux pane."""

    def __init__(self, server: Any, session: Any, width: int = 160) -> None:
        self.socket = f"{server.socket_name}-outer"
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", "new-session", "-d",
                        "-x", str(width), "-y", "16",
                        f"tmux -L {server.socket_name} attach -t {session.session_id}"],
                       check=True, env=env, timeout=30)
        try:
            retry_until(lambda: server.cmd("list-clients").stdout != [], 10)
        except BaseException:
            self.close()
            raise

    def screen(self, styled: bool = False) -> list[str]:
        done = subprocess.run(["tmux", "-L", self.socket, "capture-pane", "-p",
                               *(["-e"] if styled else [])],
                              capture_output=True, text=True, check=False, timeout=30)
        return done.stdout.rstrip("\n").split("\n")

    def status_line(self, styled: bool = False) -> str:
        return self.screen(styled)[-1]

    def resize(self, width: int) -> None:
        subprocess.run(["tmux", "-L", self.socket, "resize-window", "-x", str(width)],
                       check=True, timeout=30)

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-L", self.socket, "send-keys", *keys], check=True, timeout=30)

    def close(self) -> None:
        reap(self.socket)


def wait_for_switches_to_finish(server: Any) -> None:
    """Until no ``pty switch`` started by the binding (``run-shell -b``) is still running.

    The window changes at its select-window, before its switch-client. tmux counts a
    switch-client as session activity, and keys arriving within ``assume-paste-time`` (1 ms) of
    the last activity are taken as pasted: sent to the pane, bindings skipped. Keys typed while
    the switch is still landing could reach the shell as a literal ``^B``."""
    def running() -> bool:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                args = cmdline.read_bytes().split(b"\0")
            except OSError:
                continue  # ended while we looked
            if b"switch" in args and server.socket_name.encode() in args:
                return True
        return False

    retry_until(lambda: not running(), 15, interval=0.05)


def cell_styles(styled_line: str, text: str) -> set[str]:
    """The SGR parameters in force where ``text`` starts on a captured line."""
    before = styled_line[:styled_line.index(text)]
    params: list[str] = []
    for match in SGR.finditer(before):
        codes = match.group(1)
        params = [] if codes in ("", "0") else params + codes.split(";")
    return set(params)


@pytest.mark.slow
def test_a_new_user_sees_the_states_on_the_status_line_and_the_keys_work(
        server: Any, session: Any, watcher_process: Any, isolated_env: Path) -> None:
    server.cmd("set-option", "-g", "status-interval", "1")
    session.new_window(window_name="asks", window_shell=QUESTION, attach=False)
    session.new_window(window_name="idle", attach=False)
    for window in list(server.windows):
        if window.window_name not in ("asks", "idle"):
            window.kill()
    session.windows.get(window_name="idle").select()
    watcher = watcher_process("--interval", "0.5")
    run_plugin(server)
    term = Terminal(server, session)
    try:
        retry_until(lambda: "[asks: NEEDS_CONF] [idle: READY]" in term.status_line(), 20,
                    interval=0.2, message=f"status line: {term.status_line()!r}")
        styled = term.status_line(styled=True)
        print("status line as shown:", term.status_line().strip())
        print("with its colours:", styled.encode("unicode_escape").decode())
        left = term.status_line()[:4]  # the session name at the bar's left end
        bar = cell_styles(styled, left)
        assert "42" in bar  # tmux's default green bar
        # Each state that asks for you has its own fg *and* bg: readable on green and on dark.
        assert {"30", "43", "1"} <= cell_styles(styled, "[asks: NEEDS_CONF]")
        assert {"37", "44", "1"} <= cell_styles(styled, "[idle: READY]")

        def person_windows() -> list[str]:
            # The watcher's own control-mode clients are listed too; only the person's counts.
            lines = server.cmd("list-clients", "-F", "#{client_control_mode} #{window_name}")
            return [line[2:] for line in lines.stdout if line.startswith("0 ")]

        # prefix N: to the pane that needs you; again: on to the next (the READY one).
        term.keys("C-b", "N")
        retry_until(lambda: person_windows() == ["asks"], 10)
        wait_for_switches_to_finish(server)
        term.keys("C-b", "N")
        retry_until(lambda: person_windows() == ["idle"], 10)
        wait_for_switches_to_finish(server)

        # prefix S: status --watch in a popup, closed with Ctrl-C.
        term.keys("C-b", "S")
        retry_until(lambda: any("conductor pty status" in line for line in term.screen()), 15,
                    interval=0.2, message=f"screen: {term.screen()}")
        assert any("asks" in line and "NEEDS_CONFIRMATION" in line for line in term.screen())
        term.keys("C-c")
        retry_until(lambda: not any("conductor pty status" in line for line in term.screen()),
                    10)

        # A dark theme: the states keep their own colours.
        server.cmd("set-option", "-g", "status-style", "bg=black,fg=white")
        retry_until(lambda: "40" in cell_styles(term.status_line(styled=True), left), 10)
        assert {"37", "44"} <= cell_styles(term.status_line(styled=True), "[idle: READY]")
    finally:
        term.close()
        stop_process(watcher)


@pytest.mark.slow
def test_the_plugin_can_start_the_watcher(server: Any, session: Any, isolated_env: Path) -> None:
    server.cmd("set-option", "-g", "@conductor-start-watcher", "on")
    run_plugin(server)
    lock = isolated_env / "watch.lock"
    retry_until(lambda: lock.exists() and lock.read_text().strip() != "", 20)
    pid = int(lock.read_text())
    try:
        retry_until(lambda: conductor("pty", "status", "--short").stdout.startswith("[sh: "),
                    20, interval=0.2)
    finally:
        os.kill(pid, 15)
        retry_until(lambda: conductor("pty", "status", "--short").stdout.strip() ==
                    "[conductor: watcher stopped]", 20, interval=0.2)


ITEM = re.compile(r"\[[^\]]*\]")


@pytest.mark.slow
def test_the_segment_shows_whole_items_and_a_count_in_the_room_tmux_gives_it(
        server: Any, session: Any, watcher_process: Any, isolated_env: Path) -> None:
    server.cmd("set-option", "-g", "status-interval", "1")
    server.cmd("set-option", "-g", "status-right", "MINE")
    for n in range(12):
        session.new_window(window_name=f"agent-{n}", attach=False)
    panes = len(server.panes)  # ours and the fixtures' own shells
    watcher = watcher_process("--interval", "0.5")
    run_plugin(server)
    # The client's width less status-left-length (10), less the user's part and a space (5).
    rooms = {160: 160 - 10 - 5, 60: 60 - 10 - 5}
    term = Terminal(server, session, width=160)
    try:
        for width, room in rooms.items():
            term.resize(width)

            def segment() -> str:
                line = term.status_line().rstrip()
                return line.split("MINE ", 1)[1] if "MINE " in line else ""

            def all_counted() -> bool:  # every pane READY, shown or counted in +N
                shown = segment()
                more = re.fullmatch(r".*\] \+(\d+)", shown)
                items = ITEM.findall(shown)
                return more is not None and len(items) + int(more[1]) == panes and \
                    all(item.endswith(": READY]") for item in items)

            retry_until(all_counted, 30, interval=0.2)
            shown = segment()
            print(f"client {width} columns, room {room}: {shown!r}")
            assert len(shown) <= room
            assert ITEM.sub("", shown).replace(" ", "").startswith("+")  # whole items, then +N
            one_more = len(shown) + len("[agent-0: READY] ")
            assert one_more > room or shown.endswith("+1")
    finally:
        term.close()
        stop_process(watcher)
