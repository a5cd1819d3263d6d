"""Reading /proc in tests: whether a process still runs, and which processes carry a store's
check marker (``app.act.cycle.checks``)."""

from __future__ import annotations

from pathlib import Path

from app.act.cycle import check_reaper
from app.act.cycle.check_reaper import MARKER

HUNG = "sleep 100000"
ESCAPE = "setsid sleep 100000 &"  # a new session, and stdout still the check's pipe


def marked_processes(tag: str) -> list[int]:
    """This user's processes started by a check of the store named ``tag``."""
    return check_reaper.marked(f"{MARKER}={tag}:".encode())


def running(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def pids_in(path: Path) -> list[int]:
    """The numbers a check wrote to ``path``, one a line."""
    return [int(word) for word in path.read_text().split()] if path.exists() else []


def deleted_store_files(pid: int | str = "self") -> list[str]:
    """Files of a store the process still holds open though they were unlinked: a watcher
    writing into a WAL that another process deleted (issue 28)."""
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if "status.db" in target and target.endswith("(deleted)"):
            found.append(target)
    return found
