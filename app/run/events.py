"""The hooks' and sends' events as evidence for the panes they name: ``EventReader`` folds the
store's new event rows, and the hook marks control mode heard, into the panes' signals."""

from __future__ import annotations

from collections.abc import Mapping

from app.adapters.store import StoreWriter
from app.base.model import Pane
from app.observe.assess import absorb
from app.observe.pane import Tracked


class EventReader:
    def __init__(self, store: StoreWriter, started: float) -> None:
        self.store = store
        self.started = started  # marks from before are history the store told us
        self._event_seq = 0
        self._events_read = False

    def read_events(self, current: Mapping[str, Pane], tracked_by_id: Mapping[str, Tracked],
                     server_pid: int, marks: Mapping[str, tuple[float, str]]) -> set[str]:
        """Fold new hook and send events into the signals of the panes they name, and the
        hook marks (pane id -> (ts, event)) control mode heard; the worker ids that got one."""
        first_read, self._events_read = not self._events_read, True
        rows = self.store.events.events_after(self._event_seq)
        if rows:
            self._event_seq = rows[-1]["seq"]
        by_pane = {pane.pane_id: wid for wid, pane in current.items()}
        evented: set[str] = set()
        for row in rows:
            wid = by_pane.get(row["pane_id"] or "")
            if wid is None or row["server_pid"] not in (server_pid, None, 0):
                continue  # another server's pane, or one gone since
            tracked = tracked_by_id[wid]
            tracked.signals = tracked.signals.with_event(
                row["kind"], row["event"] or "", row["name"] or "", row["ts"] or 0.0)
            evented.add(wid)
        for pane_id, (ts, event) in marks.items():
            wid = by_pane.get(pane_id)
            # A mark from before we started is history the store told us (or nobody needs).
            # A mark no newer than the pane's last hook row is that row (a local hook).
            if wid is not None and ts >= self.started \
                    and ts > tracked_by_id[wid].signals.last_hook_ts + 0.001:
                tracked = tracked_by_id[wid]
                tracked.signals = tracked.signals.with_event("hook", event, event, ts)
                evented.add(wid)
        if first_read:
            # The states restored from the store were judged with these events already.
            for tracked in tracked_by_id.values():
                if tracked.assessment is not None:
                    tracked.assessment = absorb(tracked.assessment, tracked.signals)
        return evented
