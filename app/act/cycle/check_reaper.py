"""One check's own reaper: runs ``sh -c CHECK`` as its child and, whatever the check does, leaves
no process of it behind (Linux).

The watcher starts ``python -I -S check_reaper.py CHECK`` in a new session, environment marker
``CONDUCTOR_CHECK`` set, and reads the check's output from the pipe this process and the shell
share. This process makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``): a descendant
whose parent exits, one that ran ``setsid`` and forked away included, is re-parented to it rather
than to init, so every process the check started stays in this process's tree, and following
parent pids in /proc from here finds them all, whatever their session or environment.

- The shell exits: every process still in the tree is killed and reaped, then this process exits
  with the shell's status (128+N when a signal N ended it), which closes the pipe.
- SIGTERM, SIGINT or SIGHUP (the watcher's deadline or stop), or the watcher's thread that started
  us ending (``PR_SET_PDEATHSIG``): the same, exit 143.

Why a process per check and not the watcher as the subreaper: a subreaper must reap every orphan
that reaches it, and the watcher has other children (tmux control-mode clients, notification
commands) whose exit statuses their ``subprocess`` owners wait for; a catch-all ``waitpid(-1)``
there would steal them. Here every child is the check's. And a watcher killed with SIGKILL still
takes its checks with it, through the parent-death signal.

Imports only the standard library, so it starts with ``-I -S`` (about 40 ms). The /proc helpers
are shared with the watcher side (``app.act.cycle.checks``), which scans for the marker as a second
net. Every signal goes through a pidfd opened before the last look, so a pid reused in between
is never signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType

MARKER = "CONDUCTOR_CHECK"  # KEY=VALUE in every check process's environment; VALUE is unique
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_STOPPED = 128 + signal.SIGTERM
_KILL_ROUNDS = 100
_REAP_WAIT_S = 2.0


class Stopped(Exception):
    """A stop signal arrived."""


def prctl(option: int, value: int) -> bool:
    """``prctl(option, value)``; False where there is none (not Linux) or it failed."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _stat(pid: int | str) -> tuple[int, str] | None:
    """(parent pid, state letter) of ``pid``, None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # "pid (comm) S ppid ...": comm may hold spaces and parentheses; the last ")" ends it.
    fields = stat[stat.rfind(b")") + 2:].split()
    if len(fields) < 2:
        return None
    return int(fields[1]), fields[0].decode("ascii", "replace")


def parent(pid: int) -> int | None:
    stat = _stat(pid)
    return stat[0] if stat else None


def processes() -> dict[int, tuple[int, str]]:
    """Every process in /proc: pid -> (parent pid, state letter)."""
    try:
        names = [entry.name for entry in Path("/proc").iterdir()]
    except OSError:
        return {}
    table = {}
    for name in names:
        if name.isdigit() and (stat := _stat(name)) is not None:
            table[int(name)] = stat
    return table


def descendants(root: int, table: dict[int, tuple[int, str]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def carries(pid: int, needle: bytes) -> bool:
    """Whether ``pid``'s environment has an entry starting with ``needle`` (``KEY=...``)."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, another user's, or not dumpable
        return False
    return (b"\0" + env).find(b"\0" + needle) >= 0


def marked(needle: bytes) -> list[int]:
    """This user's processes whose environment has an entry starting with ``needle``."""
    uid, me = os.getuid(), os.getpid()
    found = []
    for pid in processes():
        if pid == me:
            continue
        try:
            if Path(f"/proc/{pid}").stat().st_uid != uid:
                continue
        except OSError:
            continue
        if carries(pid, needle):
            found.append(pid)
    return found


def signal_if(pid: int, signum: int, still: Callable[[int], bool]) -> bool:
    """Send ``signum`` to ``pid`` if ``still(pid)`` holds once a pidfd pins the process; True
    when sent. Without pidfds (old kernels) the check and the kill are a moment apart."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except (OSError, AttributeError):
        if not still(pid):
            return False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)
            return True
        return False
    try:
        if not still(pid):
            return False
        signal.pidfd_send_signal(fd, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        os.close(fd)


def kill_marked(needle: bytes, keep: Iterable[int] = ()) -> int:
    """SIGKILL this user's processes whose environment has an entry starting with ``needle``
    (except ``keep``); how many were signalled."""
    spare = set(keep)
    return sum(signal_if(pid, signal.SIGKILL, lambda p: carries(p, needle))
               for pid in marked(needle) if pid not in spare)


def _below(tree: set[int]) -> Callable[[int], bool]:
    return lambda pid: parent(pid) in tree


def _reap_ready() -> None:
    """Reap every child that has exited, without waiting."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def end_tree() -> None:
    """Kill every process below this one and reap them; re-parenting brings each orphan here."""
    me = os.getpid()
    for _ in range(_KILL_ROUNDS):
        table = processes()
        tree = descendants(me, table)
        alive = [pid for pid in tree if table[pid][1] != "Z"]
        still_below = _below({me, *tree})
        # Stopped first, all of them: none forks or reports a sibling's death meanwhile.
        for signum in (signal.SIGSTOP, signal.SIGKILL):
            for pid in alive:  # still below us when pinned: not a pid reused since the look
                signal_if(pid, signum, still_below)
        _reap_ready()
        if not tree:
            break
        time.sleep(0.005)  # let the killed exit and their orphans arrive here
    deadline = time.monotonic() + _REAP_WAIT_S  # a process stuck in the kernel is left to init
    while time.monotonic() < deadline:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.01)
        except ChildProcessError:
            return


_stopping = False


def _stop(signum: int, frame: FrameType | None) -> None:
    global _stopping
    if not _stopping:  # once: the cleanup that follows must not be cut short by a second stop
        _stopping = True
        raise Stopped


def _ignore_stops() -> None:
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def _run(command: str, parent: int) -> int:
    """Start the shell and reap children until it exits; its status as a shell reports it."""
    prctl(_PR_SET_CHILD_SUBREAPER, 1)
    prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the watcher went before the death signal was armed
        return _STOPPED
    try:
        shell = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", command], os.environ,
                               setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    except OSError as exc:
        print(f"cannot run the check: {exc}", file=sys.stderr)
        return 127
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == shell:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_reaper.py CHECK", file=sys.stderr)
        return 2
    parent = os.getppid()
    for signum in _STOP_SIGNALS:
        signal.signal(signum, _stop)
    code = _STOPPED
    try:
        code = _run(argv[1], parent)
        _ignore_stops()
    except Stopped:  # raised at most once, so none can come from here on
        _ignore_stops()
    end_tree()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
