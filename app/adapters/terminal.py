"""What the program in the foreground of a local pane's terminal is doing, from /proc and the
terminal's own mode: whether it waits for input at all, and whether a shell's line editor has
the terminal.

Keys pressed into a program that is not reading wait in the terminal and go to whoever reads it
next: a menu printed by a command that then sleeps leaves ``Up Enter`` for bash, which runs the
previous command. The screen cannot tell that apart from a live menu; the kernel can: a process
waiting for input sleeps in a read, select, poll or epoll wait, one that sleeps or waits for a
child does not.

Another host's panes are looked at the same way over its ssh connection
(:func:`remote_look`), once.
"""

from __future__ import annotations

import os
import platform
import subprocess
import termios
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Kernel functions a task sleeps in while it waits for input (``/proc/TID/wchan``): a plain
# read of a terminal (``wait_woken`` under ``n_tty_read``), select, poll and epoll waits.
_INPUT_WAITS = frozenset({"wait_woken", "n_tty_read", "tty_read", "do_select",
                          "core_sys_select", "do_sys_poll", "ep_poll", "do_epoll_wait"})
_INPUT_WAIT_PREFIXES = ("poll_schedule_timeout",)
# Where wchan is hidden ("0"), the system call a task is blocked in says the same:
# read, poll, select, pselect6, ppoll, epoll_wait, epoll_pwait, epoll_pwait2.
_INPUT_SYSCALLS = {
    "x86_64": frozenset({0, 7, 23, 232, 270, 271, 281, 441}),
    "aarch64": frozenset({63, 72, 73, 22, 441}),
}
# How long a foreground caught between a draw and its next read (running) is looked at again.
READING_WITHIN_S = 0.3
_LOOK_GAP_S = 0.02


@dataclass(frozen=True)
class Foreground:
    """The foreground process group of a pane's terminal, as seen at one moment."""

    pids: tuple[int, ...]
    reading: bool | None  # one of its tasks waits for input; None: the kernel did not say


def _stat_fields(pid: int | str) -> list[bytes] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # "pid (comm) S ppid pgrp session tty_nr tpgid ...": comm may hold spaces and parentheses.
    return stat[stat.rfind(b")") + 2:].split()


def _group_members(pgrp: int) -> tuple[int, ...]:
    try:
        names = [entry.name for entry in Path("/proc").iterdir() if entry.name.isdecimal()]
    except OSError:
        return ()
    members = []
    for name in names:
        fields = _stat_fields(name)
        if fields is not None and len(fields) > 2 and fields[2] == str(pgrp).encode():
            members.append(int(name))
    return tuple(sorted(members))


def _task_waits_for_input(pid: int, tid: str) -> bool | None:
    base = Path(f"/proc/{pid}/task/{tid}")
    try:
        wchan = (base / "wchan").read_text().strip()
    except OSError:
        wchan = ""
    if wchan and wchan != "0":
        return wchan in _INPUT_WAITS or wchan.startswith(_INPUT_WAIT_PREFIXES)
    numbers = _INPUT_SYSCALLS.get(platform.machine())
    try:
        call = (base / "syscall").read_text().split()
    except OSError:
        return None
    if not call or numbers is None:
        return None
    if call[0] == "running":
        return False
    return call[0].lstrip("-").isdecimal() and int(call[0]) in numbers


def _group_reads(pids: tuple[int, ...]) -> bool | None:
    """Whether a task of the group waits for input now; None when no task could be read."""
    known = False
    for pid in pids:
        try:
            tids = [entry.name for entry in Path(f"/proc/{pid}/task").iterdir()]
        except OSError:
            continue
        for tid in tids:
            waits = _task_waits_for_input(pid, tid)
            if waits:
                return True
            known = known or waits is not None
    return False if known else None


def foreground(pane_pid: int, within_s: float = READING_WITHIN_S) -> Foreground | None:
    """The foreground of the terminal whose session ``pane_pid`` leads, or None when it cannot
    be read (the process is gone). A group seen running or sleeping elsewhere is looked at
    again for ``within_s``: a program between drawing its menu and its next read is reading."""
    fields = _stat_fields(pane_pid)
    if fields is None or len(fields) < 6:
        return None
    tpgid = int(fields[5])
    if tpgid <= 0:
        return None
    deadline = time.monotonic() + within_s
    while True:
        pids = _group_members(tpgid)
        reading = _group_reads(pids)
        if reading is not False or time.monotonic() >= deadline:
            return Foreground(pids, reading)
        time.sleep(_LOOK_GAP_S)


def line_editor_mode(tty: str) -> bool | None:
    """Whether the terminal is in the mode a shell's line editor sets at its prompt (readline,
    zle, fish): no line discipline and no echo, the editor draws each key itself. ``read -p``
    keeps the terminal's line mode (``read -n 1`` drops it but keeps the echo). None when the
    terminal cannot be opened."""
    if not tty.startswith("/dev/"):
        return None
    try:
        fd = os.open(tty, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        lflag = termios.tcgetattr(fd)[3]
    except termios.error:
        return None
    finally:
        os.close(fd)
    return not lflag & termios.ICANON and not lflag & termios.ECHO


# The same two looks on another host, in one ssh round trip: the wchan of every task of the
# terminal's foreground process group ("W name"), then the terminal's modes ("M" and `stty -a`).
# The fields split after the command name's last ")" are numbers and a state letter.
_REMOTE_LOOK = r"""p=$1 t=$2
s=$(cat "/proc/$p/stat" 2>/dev/null) || exit 3
set -- ${s##*) }
g=$6
for d in /proc/[0-9]*; do
  s=$(cat "$d/stat" 2>/dev/null) || continue
  set -- ${s##*) }
  [ "$3" = "$g" ] || continue
  for k in "$d"/task/*; do
    w=$(cat "$k/wchan" 2>/dev/null)
    printf 'W %s\n' "${w:-0}"
  done
done
printf 'M %s\n' "$(stty -a < "$t" 2>/dev/null | tr '\n;' '  ')"
"""


@dataclass(frozen=True)
class RemoteLook:
    """What :data:`_REMOTE_LOOK` saw on another host."""

    reading: bool | None
    line_editor: bool | None


def remote_look(wrap: Callable[[Sequence[str]], list[str]], pane_pid: int, tty: str,
                timeout_s: float = 20.0) -> RemoteLook | None:
    """Read a remote pane's foreground and terminal mode through ``wrap`` (a host's ssh command
    line); None when the host did not answer. The host's answer is data: only lines of the
    expected shape count, anything else is no answer."""
    if not tty.startswith("/dev/"):
        return None
    try:
        done = subprocess.run(wrap(["sh", "-c", _REMOTE_LOOK, "sh", str(pane_pid), tty]),
                              capture_output=True, text=True, errors="replace",
                              timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    waits = [line[2:].strip() for line in done.stdout.splitlines()[:10000]
             if line.startswith("W ")]
    modes = [line[2:].split() for line in done.stdout.splitlines() if line.startswith("M ")]
    known = [w for w in waits if w and w != "0"]
    reading = (any(w in _INPUT_WAITS or w.startswith(_INPUT_WAIT_PREFIXES) for w in known)
               if known else None)
    words = set(modes[-1]) if modes else set()
    editor = None if not {"icanon", "-icanon"} & words else (
        "-icanon" in words and "-echo" in words)
    return RemoteLook(reading, editor)
