"""DONE (unseen): a turn that ended while the person was not looking at the pane.

The stored state stays READY (scripts, ``wait`` and the gate see READY); the status row's
``seen`` column says whether the person has looked at the pane since its turn ended: 0 from the
READY that ends a turn (BUSY or a dialog before it) until an attached tmux client shows the pane
(its active pane of its active window, read on each full look, so `conductor pty switch` to it
counts too). A turn is one that began at the idle prompt: an agent starting up has ended none.
`status`, the status segment and `switch --next` show such a pane as DONE, ahead of idle ones.
A step of the watcher's (app/act/steps.py) that only observes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from app.act.steps import Moved
from app.adapters.store import StoreWriter
from app.base.model import State
from app.observe.pane import Tracked

# What a turn was doing before it ended.
_WORKING = frozenset((State.BUSY, State.NEEDS_CONFIRMATION))


class SeenStep:
    def __init__(self, store: StoreWriter) -> None:
        # A restarted watcher keeps what the person has not seen yet.
        self._unseen = {wid for wid, row in store.statuses().items()
                        if row.get("state") == State.READY.value and row.get("seen") == 0}
        self._last: dict[str, State] = {}  # the last state other than UNKNOWN, per pane
        # Panes seen idle (READY) since this watcher started: a turn is one that began there.
        # A program starting up (BUSY while it loads, then READY) has finished no turn.
        self._idled: set[str] = set()

    def observe(self, tracked: Tracked, now: float) -> dict[str, Any]:
        wid = tracked.worker_id
        a = tracked.assessment
        state = a.state if a is not None else State.UNKNOWN
        before = self._last.get(wid)
        if state is not State.UNKNOWN:
            self._last[wid] = state
        if state is State.READY:
            if before in _WORKING and wid in self._idled:
                self._unseen.add(wid)
            self._idled.add(wid)
            if tracked.pane.focused:
                self._unseen.discard(wid)
        elif state is not State.UNKNOWN:
            self._unseen.discard(wid)  # a new turn, a dialog, an error: not "done" any more
        return {"seen": 0 if wid in self._unseen else 1}

    def act(self, panes: Mapping[str, Tracked], gone: Collection[str], now: float) -> Moved:
        for wid in gone:
            self._unseen.discard(wid)
            self._idled.discard(wid)
            self._last.pop(wid, None)
        return {}

    def next_due(self, now: float) -> float | None:
        return None

    def close(self) -> None:
        return None
