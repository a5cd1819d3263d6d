"""One pane as this process sees it: the pane a name on the command line means (``resolve``),
and ``PaneWatch``, which captures, classifies and assesses it with the watcher's own rules plus the
pane's events from the store, and takes what the watcher knows of the very same screen.

``send``, ``answer`` and ``wait`` look through it, so they judge a pane as the watcher would,
whether or not a watcher runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.adapters import store_read
from app.adapters.status import find_worker
from app.adapters.tmux import Tmux
from app.base.errors import PaneNotFound, StoreError
from app.base.model import Pane, State
from app.base.screen import Cursor
from app.base.settings import WatchSettings
from app.observe.assess import Assessment, Signals
from app.observe.packs import Pack
from app.observe.pane import PaneObserver, Tracked, worker_id


@dataclass(frozen=True)
class Target:
    """A pane as named on the command line, checked against the live tmux server."""

    pane: Pane
    server_pid: int
    worker_id: str
    name: str
    cli_forced: str | None

    @property
    def label(self) -> str:
        return f"{self.name} ({self.pane.pane_id})"


def resolve(tmux: Tmux, workers_dir: Path, ident: str) -> Target:
    """Find a pane by id, name or id prefix in the store, or by tmux pane id (``%3``), which
    works with no store at all."""
    listing = tmux.list_panes()
    live = {p.pane_id: p for p in listing.panes}
    stored: dict[str, Any] | None = None
    registered: dict[str, Any] | None = None
    try:
        reader = store_read.StoreReader(workers_dir)
    except StoreError:
        reader = None
    if reader is not None:
        try:
            # Only this server's rows: another host's server may have the same pid.
            workers = [w for w in reader.workers()
                       if (w.get("host") or "local") == tmux.host
                       and (reader.pty(w["id"]) or {}).get("server_pid") == listing.server_pid]
            try:
                stored = find_worker(workers, ident)
            except PaneNotFound:
                if not ident.startswith("%"):
                    raise
            # A dead pane tmux keeps (remain-on-exit; EXITED after status 0) is still a pane:
            # `wait --until EXITED` reaches it, `send` says it exited with its status.
            if stored is not None and stored["state"] == "EXITED" \
                    and stored["pane_id"] not in live:
                raise PaneNotFound(f"pane {ident!r} has exited ({stored['summary']}); see "
                                   f"`conductor pty tail {stored['id']}`")
            if stored is not None:
                registered = reader.pty(stored["id"])
        finally:
            reader.close()
    pane_id = stored["pane_id"] if stored else ident
    pane = live.get(pane_id)
    if pane is None:
        raise PaneNotFound(f"no pane {ident!r} on tmux server {tmux.label}; "
                           "see `conductor pty status`")
    wid = stored["id"] if stored else worker_id(tmux.label, listing.server_pid, pane.pane_id)
    return Target(
        pane=pane, server_pid=listing.server_pid, worker_id=wid,
        name=(stored or {}).get("name") or pane.default_name,
        cli_forced=(registered or {}).get("cli_forced") or None,
    )


class PaneWatch:
    """One pane, observed by this process: capture, classify, fold in events, assess."""

    def __init__(self, tmux: Tmux, target: Target, packs: Mapping[str, Pack],
                 settings: WatchSettings, workers_dir: Path,
                 turn_asked_at: float | None = None) -> None:
        """``turn_asked_at``: when a turn was just asked for in a way the store does not record
        (a READY the watcher saw before it is the idle screen still up, not the turn's end);
        sends and turn starts the store records are guarded against without it."""
        self.tmux = tmux
        self.target = target
        self.workers_dir = workers_dir
        self.observer = PaneObserver(packs, settings)
        self.tracked = Tracked(worker_id=target.worker_id, pane=target.pane, name=target.name,
                               named_by_user=True, cli_forced=target.cli_forced)
        self._event_seq = 0
        self._watcher_row: dict[str, Any] | None = None
        self.turn_asked_at = turn_asked_at or 0.0
        # The assessment the first look starts from, given the signals read from the store
        # (None: first sight, "settling"); explain starts from the stored one.
        self.seed: Callable[[Signals], Assessment] | None = None

    def poll(self, now: float | None = None) -> Assessment:
        now = time.time() if now is None else now
        pane_id = self.target.pane.pane_id
        listing = self.tmux.list_panes()
        pane = next((p for p in listing.panes if p.pane_id == pane_id), None)
        if pane is None or listing.server_pid != self.target.server_pid:
            raise PaneNotFound(f"pane {self.target.label} is gone")
        styled = self.tracked.wants_styled
        cursors: dict[str, Cursor] = {}
        screens = self.tmux.capture([pane_id], styled=[pane_id] if styled else (),
                                    cursors=cursors)
        if pane_id not in screens:
            raise PaneNotFound(f"pane {self.target.label} is gone")
        self.tracked.pane = pane
        # The terminal's own signals, as the listing's title holds them (app.observe.signals).
        self.tracked.take_title(pane.title, now)
        self.observer.classify(self.tracked, screens[pane_id], styled=styled,
                               cursor=cursors.get(pane_id))
        watcher_row = self._watcher_row = self._read_store()
        if self.seed is not None and self.tracked.assessment is None:
            self.tracked.assessment = self.seed(self.tracked.signals)
        self.observer.assess(self.tracked, now)
        assessment = self.tracked.assessment
        assert assessment is not None  # a classified screen is always assessed
        if assessment.state is not State.NEEDS_CONFIRMATION and \
                watcher_asks(watcher_row, self.tracked.stability_hash):
            # The watcher knows more about this very screen (an LLM verdict, a permission hook
            # we did not see); a question is never overruled into READY.
            assessment = replace(
                assessment, state=State.NEEDS_CONFIRMATION,
                reasons=(*assessment.reasons, "watcher_verdict"),
                summary=(watcher_row or {}).get("summary") or assessment.summary)
        elif assessment.state in (State.BUSY, State.UNKNOWN) and watcher_vouches(
                watcher_row, self.tracked, self.turn_asked_at):
            # A watcher on control mode saw this very screen go quiet (a minute ago or just
            # now): no need to wait out our own stability window (nor to say we settle).
            assessment = replace(
                assessment, state=State.READY,
                reasons=(*(r for r in assessment.reasons if r != "settling"), "watcher_verdict"),
                summary=(watcher_row or {}).get("summary") or assessment.summary)
        return assessment

    def seconds_in_state(self, assessment: Assessment, seen_s: float,
                         now: float | None = None) -> float:
        """How long the pane has been in ``assessment``'s state: the watcher's account when it
        saw the same state for longer (it may have watched for hours), else ours (``seen_s``: how
        long a wait saw it without a break)."""
        now = time.time() if now is None else now
        seen = max(seen_s, assessment.seconds_in_state(now))
        row = self._watcher_row
        if row is not None and row.get("state") == assessment.state.value and \
                row.get("state_entered_ts"):
            seen = max(seen, now - float(row["state_entered_ts"]))
        return seen

    @property
    def pack(self) -> Pack | None:
        return self.tracked.pack

    @property
    def text(self) -> str:
        return self.tracked.text

    def _read_store(self) -> dict[str, Any] | None:
        """Fold in the pane's new events; return the watcher's status row for it, if any."""
        try:
            reader = store_read.StoreReader(self.workers_dir)
        except StoreError:
            return None  # no store yet: no hooks have fired and nothing was sent
        try:
            rows = reader.events(self.target.pane.pane_id, self.target.server_pid,
                                 self._event_seq)
            # Even a stopped watcher's verdict holds while its screen is still up.
            watcher_row = reader.status(self.target.worker_id)
        finally:
            reader.close()
        for row in rows:
            self.tracked.signals = self.tracked.signals.with_event(
                row["kind"], row["event"] or "", row["name"] or "", row["ts"] or 0.0)
            self._event_seq = row["seq"]
        return watcher_row


def watcher_asks(row: Mapping[str, Any] | None, stability_hash: str | None) -> bool:
    """The watcher's row says NEEDS_CONFIRMATION about the screen that is up now."""
    return row is not None and row.get("state") == State.NEEDS_CONFIRMATION.value and \
        row.get("last_snapshot_hash") == stability_hash


def watcher_vouches(row: Mapping[str, Any] | None, tracked: Tracked, since: float) -> bool:
    """The watcher's row says READY about the screen that is up now, judged on output (control
    mode), and it became READY after ``since`` and after the last send and turn start: an
    older READY may be the idle screen still up right after Enter. A READY from before the wait
    began does count when no turn was asked for since: the same screen is still up, so the
    pane has been idle all along. Our own verdict of the screen must be READY too (only the
    stability window is taken from the watcher)."""
    if row is None or row.get("state") != State.READY.value or tracked.verdict is None:
        return False
    signals = row.get("signals") or ""
    codes = signals.split() if isinstance(signals, str) else list(signals)
    return ("watch=events" in codes and tracked.verdict.state is State.READY
            and row.get("last_snapshot_hash") == tracked.stability_hash
            and (row.get("state_entered_ts") or 0.0) > max(
                since, tracked.signals.sent, tracked.signals.turn_start))


def target_of(tracked: Tracked) -> Target:
    """The pane the watcher tracks, named as ``resolve`` names one: what the steps type into."""
    server_pid = (tracked.pty_row or {}).get("server_pid") or 0
    return Target(pane=tracked.pane, server_pid=int(server_pid), worker_id=tracked.worker_id,
                  name=tracked.name, cli_forced=tracked.cli_forced)
