"""The read side of the store for every command: workers, the watcher's liveness, lookup by id or
name. Stdlib only, because the status line runs through here every few seconds."""

from __future__ import annotations

import os
from collections.abc import Mapping

from app.errors import PaneNotFound
from app.store import StoreReader

TYPE_CHECKING = False  # typing costs ~5 ms; this is on the status-line path
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


# The status is stale when the watcher's last finished cycle is older than this many intervals
# (and at least STALE_MIN_S): hung, unable to write, or without a tmux server to poll.
STALE_INTERVALS = 4
STALE_MIN_S = 10.0


class Snapshot:
    __slots__ = ("interval", "last_cycle_ts", "watcher_pid", "watcher_problem", "workers")

    def __init__(self, workers: list[dict[str, Any]], watcher_pid: int | None,
                 watcher_problem: str | None, last_cycle_ts: float | None = None,
                 interval: float | None = None) -> None:
        self.workers = workers
        self.watcher_pid = watcher_pid  # None: no live watcher
        self.watcher_problem = watcher_problem
        self.last_cycle_ts = last_cycle_ts
        self.interval = interval

    def stale_for(self, now: float) -> float | None:
        """Seconds since the last cycle when that is too long ago for a live watcher; None while
        fresh. A stopped watcher's states are always stale (since its last cycle)."""
        if self.last_cycle_ts is None:
            return None if self.watcher_pid is not None else 0.0
        age = max(0.0, now - self.last_cycle_ts)
        if self.watcher_pid is None:
            return age
        limit = max(STALE_MIN_S, STALE_INTERVALS * (self.interval or 0.0))
        return age if age > limit else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watcher_pid(daemon: Mapping[str, Any] | None) -> int | None:
    if not daemon or daemon.get("stopped_ts") or not daemon.get("pid"):
        return None
    pid = int(daemon["pid"])
    return pid if _pid_alive(pid) else None


def snapshot(workers_dir: str | Path) -> Snapshot:
    reader = StoreReader(workers_dir)
    try:
        daemon = reader.daemon() or {}
        return Snapshot(reader.workers(), watcher_pid(daemon), daemon.get("problem") or None,
                        daemon.get("last_cycle_ts"), daemon.get("interval"))
    finally:
        reader.close()


def find_worker(workers: list[dict[str, Any]], ident: str) -> dict[str, Any]:
    """A worker by id, id prefix, tmux pane id (``%3``) or name; ambiguity is an error."""
    for key in ("id", "pane_id", "name"):
        exact = [w for w in workers if w.get(key) == ident]
        if len(exact) == 1:
            return exact[0]
        if len(exact) > 1:
            ids = ", ".join(w["id"] for w in exact)
            raise PaneNotFound(f"{ident!r} names several panes ({ids}); use an id")
    prefixed = [w for w in workers if str(w.get("id", "")).startswith(ident)] if ident else []
    if len(prefixed) == 1:
        return prefixed[0]
    raise PaneNotFound(f"no pane with id or name {ident!r}; see `conductor pty status`")


def short_line(workers_dir: str | Path, colour: bool = False) -> str:
    """The tmux status-right line; never raises, so the status line stays clean."""
    from app import render
    from app.errors import ConductorError
    from app.store import StoreMissing

    try:
        snap = snapshot(workers_dir)
    except StoreMissing:
        return "[conductor: no store]"
    except ConductorError:
        return "[conductor: store unreadable]"
    if snap.watcher_pid is None:
        return "[conductor: watcher stopped]"
    import time

    stale = snap.stale_for(time.time())
    if stale is not None:
        # Old states are worse than none on a status line: a READY there may be long over.
        return f"[conductor: stale {render.coarse(stale)}]"
    return render.short_line(snap.workers, colour=colour) or "[conductor: no panes]"
