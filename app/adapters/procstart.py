"""When the program in the foreground of a local pane's terminal started, from /proc.

A pane's agent can be replaced without the pane changing: it exits and the person starts it again
at the shell prompt, or tmux respawns the pane. The foreground process group's leader and its
start time tell one process from the next. Linux only; elsewhere nothing is known.
"""

from __future__ import annotations

import os
from pathlib import Path


def _stat_fields(pid: int) -> list[bytes] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # "pid (comm) S ppid pgrp session tty_nr tpgid ...": comm may hold spaces and parentheses.
    return stat[stat.rfind(b")") + 2:].split()


def boot_time() -> float | None:
    """The epoch time the system booted, to 10 ms (/proc/stat's btime is whole seconds: a
    process started just after an event could read as started before it)."""
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    import time

    return time.time() - uptime


def foreground_start(pane_pid: int, booted: float) -> tuple[int, float] | None:
    """The foreground process group of the terminal ``pane_pid`` leads: its leader's pid and the
    epoch time that leader started; None when /proc does not say (the pane is gone, not Linux)."""
    fields = _stat_fields(pane_pid)
    if fields is None or len(fields) < 6:
        return None
    try:
        leader = int(fields[5])  # tpgid
    except ValueError:
        return None
    if leader <= 0:
        return None
    own = fields if leader == pane_pid else _stat_fields(leader)
    # starttime is field 22 of the line, the 20th after comm: clock ticks since boot.
    if own is None or len(own) < 20:
        return None
    try:
        ticks = int(own[19])
    except ValueError:
        return None
    return leader, booted + ticks / os.sysconf("SC_CLK_TCK")
