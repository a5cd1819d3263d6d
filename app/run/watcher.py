"""One poll cycle over every pane of a tmux server: ``Watcher.tick(now)``.

List panes (one tmux call), capture only what may have changed (one batched call), classify,
assess stability, then write the store in one transaction and each changed ``status.json``. No
sleeping and no signals here (that is ``daemon.py``), so tests drive ticks directly against a real
tmux server.

With control mode (``app.adapters.tmux.ControlMode``) the watcher also runs light ticks between
polls:
``tick(now, full=False)`` captures only the panes that printed (each at most once per
``min_capture_s``) and looks again at panes whose screen went quiet, so READY comes from the time
since the last output instead of from a count of polls. A pane that prints nothing costs nothing
there; the full poll stays as the safety net.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.act.steps import Step
from app.adapters import statusfile
from app.adapters.status import pid_alive
from app.adapters.store import StoreWriter, public_row
from app.adapters.tmux import QUIET_S, ControlMode, Tmux
from app.base.errors import ConductorError, TmuxServerNotRunning
from app.base.model import Pane, State, Transition, Verdict
from app.base.render import SERVER_ENDED, clean_text
from app.base.settings import WatchSettings
from app.base.termsignals import TermSignal
from app.observe import views
from app.observe.assess import (
    TURN_END_ARM_S,
    Assessment,
    absorb,
    awaits_end_mark_settling,
)
from app.observe.llm import AsyncLLM
from app.observe.packs import GENERIC_PACK, Pack, plain_program
from app.observe.pane import EVENTS, POLL, PaneObserver, Tracked, panes_by_id

log = logging.getLogger(__name__)

WORKER_ID_RE = re.compile(r"^[0-9a-f]{10}$")
_PRUNE_EVERY = 200  # cycles
_STABLE_COUNT_CAP = 10
# A pane's first state must hold this many looks, and FIRST_HOLD_INTERVALS poll intervals, before
# anything about the pane is notified: a program starting up (Claude Code draws its box, a hint,
# its prompt) passes through states that are not news.
FIRST_HOLD_LOOKS = 2
FIRST_HOLD_INTERVALS = 2.0
# Status columns that move with every capture of a moving screen; a light tick writes a row whose
# other columns did not change only at the next full poll.
_VOLATILE = ("last_snapshot_hash", "last_change_ts", "stable_count")
# A pane that went quiet is looked at again this often (seconds) until nothing can change any
# more without new output.
_RECHECK_S = 0.5
# A pane printing nonstop is captured once a second at first, then less often the longer it
# streams (half the stream's age, at most STREAM_CAPTURE_MAX_S): it reads BUSY all along,
# and what ends that is its output stopping, which is seen at once whatever the interval: a pane
# is captured as soon as it is quiet (app.adapters.tmux.QUIET_S), so a dialog or an idle prompt
# drawn at the end of a stream waits for nothing.
STREAM_CAPTURE_S = 1.0
STREAM_CAPTURE_MAX_S = 5.0
# A streaming pane due within this long (seconds) rides along with a capture made now.
STREAM_RIDE_S = 1.0
# A pane whose turn ended (or that asks) since its last capture is captured again this soon.
URGENT_S = 0.05


@dataclass
class CycleReport:
    panes: int = 0
    captured: int = 0
    transitions: list[Transition] = field(default_factory=list)
    exited: list[str] = field(default_factory=list)  # panes that got their final EXITED row
    removed: list[str] = field(default_factory=list)  # rows and folders deleted (retention)
    server_running: bool = True
    full: bool = True  # a full poll (else a light tick over the panes that printed)


@dataclass
class _Judged:
    """What judging the panes of one tick changed."""

    status_rows: list[dict[str, Any]] = field(default_factory=list)
    pty_rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Written:
    """What one tick's transaction put in the store."""

    status_rows: list[dict[str, Any]]
    exits: list[FinalRow]
    transitions: list[Transition]
    removed: list[str]  # rows and folders deleted: orphans and pruned history


class Watcher:
    def __init__(
        self,
        tmux: Tmux,
        store: StoreWriter,
        packs: Mapping[str, Pack],
        settings: WatchSettings | None = None,
        on_transition: Callable[[Transition, Tracked], None] | None = None,
        llm: AsyncLLM | None = None,
        control: ControlMode | None = None,
        steps: Sequence[Step] = (),
    ) -> None:
        self.tmux = tmux
        self.store = store
        self.packs = packs
        self.settings = settings or WatchSettings()
        self.on_transition = on_transition
        self.llm = llm
        # Herding, the report cycle: each adds its columns to the status rows, then acts.
        self.steps = tuple(steps)
        self.observer = PaneObserver(packs, self.settings, llm)
        self._event_seq = 0
        self._events_read = False
        self.tracked: dict[str, Tracked] = {}
        self._restored = store.statuses()
        self._cycles = 0
        self._cleaned_at_start = False
        self._unwritten: list[Transition] = []  # transitions whose cycle failed to commit
        self._released: list[Transition] = []  # held back in a pane's first seconds, now news
        self.control = control
        self._server_pid = 0
        self._watched: set[str] = set()  # session ids whose output control mode reports
        self._pending: dict[str, float] = {}  # pane id -> when it printed, not yet captured
        # Pane id -> (when it began printing nonstop, when it was last seen still printing).
        self._streaming: dict[str, tuple[float, float]] = {}
        # Pane id -> when its next capture is due, for panes captured while streaming: control
        # mode does not wake us for the stream going on (ControlMode.resume), so we come back.
        self._stream_due: dict[str, float] = {}
        # The terminal's signals control mode read since the last tick, and the titles the
        # last capture read (pane id -> ...): evidence folded in before judging.
        self._heard: dict[str, list[tuple[float, TermSignal]]] = {}
        self._titles: dict[str, str] = {}
        # Hooks' marks on panes (pane id -> (ts, event)) and the panes that got a hook event
        # this tick: looked at in a light tick too, so a turn end counts at once.
        self._marks: dict[str, tuple[float, str]] = {}
        self._evented: set[str] = set()
        self._started = time.time()
        self._views: dict[str, str] = {}  # worker id -> the conductor view it shows
        self._own_marker: tuple[str, str] | None = None  # (pane id, marker) of our own pane

    @property
    def workers_dir(self) -> Path:
        return self.store.workers_dir

    def tick(self, now: float | None = None, *, full: bool = True) -> CycleReport:
        """One poll cycle (``full``), or a light tick over the panes control mode reported and
        the quiet ones due a second look; a light tick turns full when panes may have come or
        gone. An unreachable server is reported in ``CycleReport.server_running``; a bad pane is
        logged and skipped; only a store failure raises (StoreError).

        The phases, in order: which panes there are, which to capture and look at, capture,
        judge each pane, write the store in one transaction, then (only once it is written)
        files, notifications and the steps."""
        now = time.time() if now is None else now
        full = self._full_or_light(now, full)
        report = CycleReport(full=full)
        current = self._list_panes(report) if full else \
            {wid: t.pane for wid, t in self.tracked.items()}
        if current is None:
            if not self._server_ended():
                return report  # unreachable for now: its panes keep their states (stale)
            current = {}  # every pane of the server that ended gets its final row
        report.panes = len(current)
        gone, orphans = self._arrivals_and_departures(current)
        self._read_events(current, self._server_pid)
        self._fold_heard(current)
        to_capture, look = self._choose_looks(current, now, full)
        screens = self._capture(current, to_capture, report, now)
        if screens is None:
            return report
        report.captured = len(screens)
        self._fold_terminal(current, screens, now, full)
        judged = self._judge(current, look, screens, to_capture, now, full, report)
        written = self._write(judged, report, current, gone, orphans, now)
        if written is None:
            # A light tick that changed nothing the store shows: only a step that asked for a
            # turn (a check it runs may be done) gets one.
            self._run_due_steps(now)
        else:
            self._after_write(judged, written, current, gone, report, now)
        released, self._released = self._released, []
        for transition in released:
            if transition.pane_key in self.tracked:
                self._notify(transition, held=True)
        return report

    def _run_due_steps(self, now: float) -> None:
        due = [step for step in self.steps
               if (when := step.next_due(now)) is not None and when <= now]
        if due:
            self._act_steps(due, [], now)

    def _act_steps(self, steps: Sequence[Step], gone: list[str], now: float) -> None:
        """Let ``steps`` act; a status column a step moved (the cycle's state) reaches
        status.json too, as the store already holds it."""
        before = {wid: dict(t.status_row or {}) for wid, t in self.tracked.items()}
        for step in steps:
            step.act(self.tracked, gone, now)
        for wid, tracked in self.tracked.items():
            if wid not in gone and (tracked.status_row or {}) != before.get(wid, {}):
                self._write_status_file(tracked)

    # --- the phases of a tick ------------------------------------------------------------------

    def _full_or_light(self, now: float, full: bool) -> bool:
        """Take control mode's news; a light tick turns full when panes may have come or gone."""
        if self.control is None:
            return full
        dirty, changed = self.control.take()
        self._heard = self.control.take_signals()
        self._marks = self.control.take_hook_marks()
        reported_at = time.monotonic()
        for pane_id, first in dirty.items():
            # When it printed, not when we heard: a stream that went on reports without a wake.
            self._pending.setdefault(pane_id, now - max(0.0, reported_at - first))
        self._stream_due = {p: due for p, due in self._stream_due.items()
                            if due > now and p not in self._pending}
        known = {t.pane.pane_id for t in self.tracked.values()}
        return (full or changed or not self.tracked or not self._cleaned_at_start
                or not self._pending.keys() <= known)

    def _list_panes(self, report: CycleReport) -> dict[str, Pane] | None:
        """Every pane of the server by worker id (None: the server is not running)."""
        try:
            listing = self.tmux.list_panes()
        except TmuxServerNotRunning:
            report.server_running = False
            return None
        self._server_pid = listing.server_pid
        if self.control is not None:
            # A session that goes away when its last client detaches must stay polled: our
            # client would keep it alive.
            self.control.follow({p.session_id for p in listing.panes
                                 if p.session_id and not p.destroy_unattached})
            self._watched = self.control.watching()
        socket = self.tmux.label
        listed = {p.pane_id for p in listing.panes}
        self._pending = {p: t for p, t in self._pending.items() if p in listed}
        self._streaming = {p: t for p, t in self._streaming.items() if p in listed}
        self._stream_due = {p: t for p, t in self._stream_due.items() if p in listed}
        current = panes_by_id(socket, listing.server_pid, listing.panes)
        self._views = self._conductor_views(current)
        return current

    def _server_ended(self) -> bool:
        """Whether the server that did not answer is gone for good: no process left of the
        servers this socket's panes were on (a busy server can fail to answer a connection)."""
        rows = set() if self._cleaned_at_start else self.store.live_ids(self.tmux.label)
        if not self.tracked and not rows:
            return False  # nothing to end
        if self.tmux.via is not None:
            return True  # the host answered, its tmux did not: a remote pid is not ours to test
        pids = {self._server_pid}
        pids.update(int((t.pty_row or {}).get("server_pid") or 0) for t in self.tracked.values())
        pids.update(int((self.store.pty(wid) or {}).get("server_pid") or 0) for wid in rows)
        return not any(pid_alive(pid) for pid in pids if pid > 0)

    def _arrivals_and_departures(self, current: Mapping[str, Pane]
                                 ) -> tuple[list[str], list[str]]:
        """Track new panes; the ids that ended, and folders no row owns (first tick only)."""
        gone = [wid for wid in self.tracked if wid not in current]
        orphans: list[str] = []
        if not self._cleaned_at_start:
            # Panes that vanished while no watcher ran still get their final row; folders no
            # row owns are a killed daemon's leftovers.
            # Only this server's: another socket's panes are for a watcher of that socket.
            gone = sorted(set(gone) | (self.store.live_ids(self.tmux.label) - set(current)))
            orphans = sorted(self._folders() - self.store.known_ids() - set(current))
        for wid in current.keys() - self.tracked.keys():
            self.tracked[wid] = self._track(wid, current[wid])
        return gone, orphans

    def _choose_looks(self, current: Mapping[str, Pane], now: float, full: bool
                      ) -> tuple[list[str], set[str]]:
        """The panes to capture, and the panes to judge (captured or due a second look)."""
        to_capture = []
        look = set(current) if full else set()
        for wid, pane in current.items():
            tracked = self.tracked[wid]
            tracked.pane = pane
            if not tracked.named_by_user:
                tracked.name = pane.default_name
            if full:
                tracked.mode = EVENTS if pane.session_id in self._watched else POLL
            if self._leave_alone(tracked):
                # It is not taken from _pending, so its output only moves control mode's clock
                # until it is an ordinary pane again.
                if full:
                    look.add(wid)
                continue
            if self._needs_capture(tracked, pane, now, full):
                to_capture.append(wid)
            elif tracked.recheck_at and tracked.recheck_at <= now:
                look.add(wid)
            elif wid in self._evented and tracked.captured_at:
                look.add(wid)  # a hook just spoke: its word counts now, not at the next look
            if pane.pane_id in self._pending:
                look.discard(wid)  # it printed since its last capture: not quiet, not judged yet
        if to_capture:
            to_capture += self._riders(current, to_capture, now)
        look.update(to_capture)
        return to_capture, look

    def _riders(self, current: Mapping[str, Pane], chosen: list[str], now: float) -> list[str]:
        """Streaming panes due a capture soon, taken along with this one: one tmux call for
        them all instead of one each a moment apart."""
        riders = []
        for wid, pane in current.items():
            tracked = self.tracked[wid]
            if pane.pane_id in self._pending and wid not in chosen \
                    and not tracked.view and pane.pane_id in self._streaming \
                    and self._capture_due(tracked, now) <= now + STREAM_RIDE_S:
                riders.append(wid)
        return riders

    def _capture(self, current: Mapping[str, Pane], to_capture: list[str],
                 report: CycleReport, now: float) -> dict[str, str] | None:
        """One batched capture (None: the server went away)."""
        if not to_capture:
            return {}
        for wid in to_capture:
            self._stream_due.pop(current[wid].pane_id, None)
        resumed = [current[w].pane_id for w in to_capture
                   if self._pending.pop(current[w].pane_id, None) is not None]
        if resumed and self.control is not None:
            # Before the capture: output from now on is reported again, so nothing printed
            # after the capture goes unnoticed. A stream going on is no news: its next
            # capture is due at the streaming pace.
            # A pane whose turn end was heard is drawing its idle screen: its next frame
            # wakes us, whatever it streamed before (_awaits_idle_screen).
            drawing = {current[w].pane_id for w in to_capture
                       if self._awaits_idle_screen(self.tracked[w], now)}
            streams = {p: now + _stream_pace(self._streaming[p][0], now)
                       for p in resumed if p in self._streaming and p not in drawing}
            self._stream_due.update(streams)
            self.control.resume(resumed, streams.keys())
        self._titles = {}
        try:
            by_pane = self.tmux.capture([current[w].pane_id for w in to_capture],
                                        self._titles)
        except TmuxServerNotRunning:
            report.server_running = False
            return None
        return {w: by_pane[current[w].pane_id] for w in to_capture
                if current[w].pane_id in by_pane}

    def _fold_heard(self, current: Mapping[str, Pane]) -> None:
        """The terminal's signals control mode heard, as evidence (before choosing what to
        capture: a turn end heard makes its pane due at once)."""
        heard, self._heard = self._heard, {}
        for wid, pane in current.items():
            if pane.pane_id in heard:
                self.tracked[wid].take_signals(heard[pane.pane_id])

    def _fold_terminal(self, current: Mapping[str, Pane], screens: Mapping[str, str],
                       now: float, full: bool) -> None:
        """The titles as tmux holds them, after what control mode heard: the listing's (a full
        tick), the one read with the capture."""
        for wid, pane in current.items():
            tracked = self.tracked[wid]
            if wid in screens and pane.pane_id in self._titles:
                tracked.take_title(self._titles[pane.pane_id], now)
            elif full:
                tracked.take_title(pane.title, now)

    def _judge(self, current: Mapping[str, Pane], look: set[str], screens: Mapping[str, str],
               to_capture: list[str], now: float, full: bool, report: CycleReport) -> _Judged:
        """Classify and assess each pane looked at; the rows that changed."""
        judged = _Judged()
        for wid, pane in current.items():
            if wid not in look:
                continue
            tracked = self.tracked[wid]
            try:
                if tracked.view:
                    transition = _as_view(tracked, now)
                elif wid in screens:
                    tracked.captured_at, tracked.hint = now, pane.change_hint
                    self.observer.classify(tracked, screens[wid])
                    transition = self.observer.assess(tracked, now)
                elif wid in to_capture:
                    continue  # vanished mid-capture: it will be gone from the next listing
                else:
                    transition = self.observer.assess(tracked, now)
                tracked.recheck_at = self._recheck_at(tracked, now) \
                    if tracked.mode == EVENTS and not tracked.view else 0.0
            except Exception:  # one bad pane must never stop the others
                log.exception("pane %s (%s): skipped this cycle", pane.pane_id, tracked.name)
                continue
            if transition is not None:
                report.transitions.append(transition)
            self._settle(tracked, now)
            a = tracked.assessment
            row = _status_row(wid, a, tracked.mode) if a is not None else None
            if row is not None:
                for step in self.steps:
                    row.update(step.observe(tracked, now))
            if row is not None and row != tracked.status_row and (
                    full or transition is not None
                    or _material(row) != _material(tracked.status_row)):
                judged.status_rows.append(row)
            pty = self._pty_row(tracked, self._server_pid)
            if pty != tracked.pty_row:
                judged.pty_rows.append(pty)
        return judged

    def _write(self, judged: _Judged, report: CycleReport, current: Mapping[str, Pane],
               gone: list[str], orphans: list[str], now: float) -> _Written | None:
        """One transaction: rows, history, final rows of ended panes, pruning (None: nothing
        to write on a light tick)."""
        server_pid = self._server_pid if report.server_running else None
        exits = [exit_row(wid, self.tracked.get(wid), self.store, now, server_pid)
                 for wid in gone]
        # Transitions of a cycle whose write failed are written (and notified) with this one.
        transitions = [t for t in self._unwritten if t.pane_key in current]
        transitions += report.transitions
        full = report.full
        history_rows = [_history_row(t) for t in transitions]
        history_rows += [_history_row(final.transition) for final in exits]
        status_rows = judged.status_rows + [final.status_row for final in exits]
        if not (full or status_rows or judged.pty_rows or history_rows or orphans):
            return None
        self._cycles += full
        pruned: list[str] = []
        try:
            with self.store.transaction() as conn:
                self.store.remove(conn, orphans)
                for pty in judged.pty_rows:
                    self.store.upsert_pty(conn, {**pty, "last_seen_ts": now})
                self.store.upsert_status(conn, status_rows)
                self.store.add_history(conn, history_rows)
                if full and report.server_running and self.tmux.via is None:
                    # Only the local loop's: another host's thread must not hide a hung one.
                    self.store.heartbeat(conn, last_cycle_ts=now)
                if full and self._cycles % _PRUNE_EVERY == 1:
                    cutoff = now - self.settings.history_days * 86400
                    pruned = self.store.prune_exited(conn, cutoff)
                    self.store.prune_history(conn, self.settings.history_rows_per_pane, cutoff)
        except BaseException:
            # Nothing of this cycle reached the store: the next cycle writes its transitions. Gone
            # panes stay tracked and the start-up sweep is redone, so their final rows come then;
            # the "last written" rows stay as they were, so they differ again.
            self._unwritten = transitions
            raise
        return _Written(status_rows, exits, transitions, orphans + pruned)

    def _after_write(self, judged: _Judged, written: _Written, current: Mapping[str, Pane],
                     gone: list[str], report: CycleReport, now: float) -> None:
        """Only now is it true that the store holds the rows: remember them, write the files,
        notify, and run the steps."""
        self._unwritten = []
        self._cleaned_at_start = True
        for row in written.status_rows:
            if row["id"] in current:
                self.tracked[row["id"]].status_row = row
        for pty in judged.pty_rows:
            self.tracked[pty["id"]].pty_row = pty
        for wid in gone:
            self.tracked.pop(wid, None)
            if self.llm is not None:
                self.llm.forget(wid)
        report.exited = [final.worker_id for final in written.exits]
        report.removed = written.removed
        for wid in report.removed:
            self._remove_folder(wid)
        # status.json holds a subset of the two rows: only a changed row can change it.
        changed = {r["id"] for r in written.status_rows} | {r["id"] for r in judged.pty_rows}
        for wid in changed - set(gone):
            self._write_status_file(self.tracked[wid])
        for final in written.exits:
            self._write_final_file(final)
            # A server that ended took every pane with it, most often on purpose: logged, and
            # one line per server in `status`, never a notification per pane.
            self._notify(final.transition, None if final.server_ended else final.tracked,
                         final.name)
        for transition in written.transitions:
            self._notify(transition)
        self._act_steps(self.steps, gone, now)

    # --- per pane ------------------------------------------------------------------------------

    def _track(self, wid: str, pane: Pane) -> Tracked:
        registered = self.store.pty(wid)
        tracked = Tracked(
            worker_id=wid,
            pane=pane,
            name=(registered or {}).get("name") or pane.default_name,
            named_by_user=bool(registered and registered.get("created_by") == "create"),
            cli_forced=(registered or {}).get("cli_forced") or None,
        )
        restored = self._restored.get(wid)
        # An EXITED row with a live pane is one `restore` brought back: judged anew.
        if restored and restored.get("state") and restored["state"] != State.EXITED.value:
            tracked.assessment = Assessment(
                state=State(restored["state"]),
                state_entered=restored.get("state_entered_ts") or 0.0,
                last_change=restored.get("last_change_ts") or 0.0,
                screen_hash=restored.get("last_snapshot_hash"),
                stable_count=restored.get("stable_count") or 0,
                summary=restored.get("summary") or "",
                actions_needed=restored.get("actions_needed") or "",
                confidence=restored.get("confidence") or 0,
            )
            # Known before this watcher started: its first seconds are long past.
            tracked.settled, tracked.told = True, tracked.assessment.state
        return tracked

    def _conductor_views(self, current: Mapping[str, Pane]) -> dict[str, str]:
        """The panes showing conductor's own views: this watcher's own (its log's terminal), which
        it marks for other conductor processes, and every pane a live view marked."""
        found: dict[str, str] = {}
        if self.tmux.via is not None:
            return found  # another host's ttys and pids are not ours to compare with
        mine = views.own_terminals()
        for wid, pane in current.items():
            if pane.tty and pane.tty in mine:
                found[wid] = "this watcher's log"
                self._mark_own(pane)
            elif pane.view:
                what = views.live_view(pane.view)
                if what:
                    found[wid] = what
        return found

    def _mark_own(self, pane: Pane) -> None:
        value = views.marker(views.WATCHER)
        if pane.view == value:
            return
        try:
            self.tmux.set_pane_option(pane.pane_id, views.VIEW_OPTION, value)
        except ConductorError as exc:
            log.debug("cannot mark our own pane %s: %s", pane.pane_id, exc)
            return
        self._own_marker = (pane.pane_id, value)

    def close(self) -> None:
        """Unmark our own pane, so it is an ordinary pane again once we are gone."""
        if self._own_marker is not None:
            views.unmark(self.tmux, *self._own_marker)
            self._own_marker = None

    def _leave_alone(self, tracked: Tracked) -> bool:
        """Whether the pane shows a conductor view now; a pane that just stopped showing one is
        judged from scratch, as if first seen."""
        view = self._views.get(tracked.worker_id, "")
        if view == tracked.view:
            return bool(view)
        if not tracked.view:
            log.info("%s (%s): conductor's own view (%s); left alone", tracked.name,
                     tracked.worker_id, view)
        elif not view:
            log.info("%s (%s): no longer conductor's view; watched again", tracked.name,
                     tracked.worker_id)
            tracked.assessment = None  # first sight again: its first state is no news
        tracked.forget_screen()
        tracked.view = view
        if self.llm is not None:
            self.llm.forget(tracked.worker_id)
        return bool(view)

    def _read_events(self, current: Mapping[str, Pane], server_pid: int) -> None:
        """Fold new hook and send events into the signals of the panes they name."""
        first_read, self._events_read = not self._events_read, True
        rows = self.store.events_after(self._event_seq)
        if rows:
            self._event_seq = rows[-1]["seq"]
        by_pane = {pane.pane_id: wid for wid, pane in current.items()}
        self._evented = set()
        for row in rows:
            wid = by_pane.get(row["pane_id"] or "")
            if wid is None or row["server_pid"] not in (server_pid, None, 0):
                continue  # another server's pane, or one gone since
            tracked = self.tracked[wid]
            tracked.signals = tracked.signals.with_event(
                row["kind"], row["event"] or "", row["name"] or "", row["ts"] or 0.0)
            self._evented.add(wid)
        marks, self._marks = self._marks, {}
        for pane_id, (ts, event) in marks.items():
            wid = by_pane.get(pane_id)
            # A mark from before we started is history the store told us (or nobody needs).
            # A mark no newer than the pane's last hook row is that row (a local hook).
            if wid is not None and ts >= self._started \
                    and ts > self.tracked[wid].signals.last_hook_ts + 0.001:
                tracked = self.tracked[wid]
                tracked.signals = tracked.signals.with_event("hook", event, event, ts)
                self._evented.add(wid)
        if first_read:
            # The states restored from the store were judged with these events already.
            for tracked in self.tracked.values():
                if tracked.assessment is not None:
                    tracked.assessment = absorb(tracked.assessment, tracked.signals)

    def next_due(self) -> float | None:
        """When (epoch seconds) a light tick has something to do: a pane that printed may be
        captured again, a quiet pane is due a second look, or a step asked for a turn. None:
        nothing until new output."""
        # A pane that printed is not looked at again before its next capture.
        times = [t.recheck_at for t in self.tracked.values()
                 if t.recheck_at and t.pane.pane_id not in self._pending]
        now = time.time()
        if self._pending:
            # A conductor view that printed waits for no capture: it is never captured.
            # Control mode wakes us when a pane goes quiet.
            times += [self._capture_due(t, now) for t in self.tracked.values()
                      if not t.view and t.pane.pane_id in self._pending]
        times += self._stream_due.values()
        for step in self.steps:
            due = step.next_due(now)
            if due is not None:
                times.append(due)
        return min(times) if times else None

    def _capture_due(self, tracked: Tracked, now: float) -> float:
        """When a pane that printed since its last capture is due one: at once after a still
        spell, or when a turn end or a question (a hook, the terminal's signal) came since the
        last (URGENT_S after it at the soonest: the screen may follow a moment later, and the
        quiet capture after it then finds it); min_capture_s after the last once it is quiet or
        when a stream began since; else at the streaming pace."""
        pane_id, captured_at = tracked.pane.pane_id, tracked.captured_at
        if max(tracked.signals.turn_end, tracked.signals.permission) > captured_at \
                or self._awaits_idle_screen(tracked, now):
            return captured_at + URGENT_S
        still = self._pending.get(pane_id, now) - captured_at >= QUIET_S
        if still or self.control is None or self.control.quiet(pane_id, now):
            self._streaming.pop(pane_id, None)
            return captured_at + self.settings.min_capture_s
        began, seen = self._streaming.get(pane_id, (now, now))
        if now - seen > STREAM_CAPTURE_MAX_S + 1.0:
            began = now  # it stopped in between: a new stream
        self._streaming[pane_id] = (began, now)
        if captured_at < began:
            # A stream that began since the last look (a prompt just submitted, the agent's
            # spinner drawn) is news: one look min_capture_s after the last, not a second later
            # with the idle screen's READY standing all along; the stream's pace from then on.
            return captured_at + self.settings.min_capture_s
        return captured_at + _stream_pace(began, captured_at)

    @staticmethod
    def _awaits_idle_screen(tracked: Tracked, now: float) -> bool:
        """A turn end was heard (a hook, the terminal's signal) and the pane has not read READY
        since: the idle screen it vouches for is being drawn now (Claude Code redraws only after
        its Stop hooks return), so each frame is worth a look without waiting for QUIET_S."""
        turn_end, a = tracked.signals.turn_end, tracked.assessment
        return (0 < now - turn_end < TURN_END_ARM_S and a is not None
                and a.state is not State.READY and turn_end >= tracked.signals.turn_start)

    def _recheck_at(self, tracked: Tracked, now: float) -> float:
        """When to look again at a pane without new output, for the assessment rules that move
        with time alone (the READY window, the send grace, a turn end's arming, anti-flap
        holds); 0 once none of them can change anything."""
        a = tracked.assessment
        if a is None or tracked.pane.dead:
            return 0.0
        settles = awaits_end_mark_settling(a, tracked.signals)
        if settles > now - _RECHECK_S:
            # A turn end on a screen with no end mark: READY once that screen has settled (if
            # that moment passed without it, the ordinary pace below).
            return max(settles + 0.01, now + 0.02)
        quiet = now - a.stable_since
        settings = self.settings
        horizon = max(settings.ready_min_s, settings.send_grace_s, TURN_END_ARM_S) + _RECHECK_S
        if quiet >= horizon and a.candidate is a.state and a.stable_count >= 2:
            return 0.0
        step = _RECHECK_S
        if quiet < settings.ready_min_s:
            step = min(step, settings.ready_min_s - quiet + 0.01)
        return now + max(step, 0.02)

    def _needs_capture(self, tracked: Tracked, pane: Pane, now: float, full: bool = True
                       ) -> bool:
        if pane.pane_id in self._pending:
            # Control mode said it printed: capture it at once after a still spell, else once
            # its output went quiet (the frame is drawn in full), never more often than
            # min_capture_s; while it streams nonstop, at the streaming pace (_capture_due).
            return now >= self._capture_due(tracked, now)
        if not full:
            return False
        if pane.pane_id in self._stream_due and tracked.mode == EVENTS \
                and now - tracked.captured_at < self.settings.force_capture_s:
            # A stream control mode follows, its next capture set: the listing's hint moved
            # with the output of the last moments, already told or about to be.
            return False
        if tracked.hint != pane.change_hint:
            return True
        if now - tracked.captured_at >= self.settings.force_capture_s:
            return True
        # window_activity has one-second resolution: output later in the same second as the last
        # capture would not move it.
        return pane.activity >= int(tracked.captured_at) - 1

    # --- output --------------------------------------------------------------------------------

    def _pty_row(self, tracked: Tracked, server_pid: int) -> dict[str, Any]:
        pane = tracked.pane
        return {
            "id": tracked.worker_id,
            "name": tracked.name,
            "socket": self.tmux.label,
            "host": self.tmux.host,
            "server_pid": server_pid,
            "pane_id": pane.pane_id,
            "tmux_session": pane.session_name,
            "tmux_window": pane.window_name,
            "window_index": pane.window_index,
            "pane_index": pane.pane_index,
            "cwd": pane.cwd,
            "cli_type": self._cli_label(tracked),
            "command": pane.current_command,
        }

    def _cli_label(self, tracked: Tracked) -> str:
        """What the CLI column calls the pane, one word that does not change while the program
        stays: ``shell`` for a shell (also while a program it started runs), the agent's pack
        name, the program's own name for a plain program; never None or ``generic``. A pane whose
        screen was just forgotten keeps the word it had."""
        if tracked.view:
            return views.VIEW_CLI
        if tracked.pack is not None and tracked.pack.name != GENERIC_PACK:
            return tracked.pack.name
        command = tracked.pane.current_command
        claimed = next((p.name for p in self.packs.values()
                        if p.name != GENERIC_PACK and p.detect.matches_command(command)), "")
        if tracked.pack is None:
            earlier = (tracked.pty_row or {}).get("cli_type")
            if claimed or earlier:
                return str(claimed or earlier)
        return tracked.program or plain_program(self.packs, command) or claimed \
            or tracked.cli_forced or Path(command).name or "unknown"

    def _settle(self, tracked: Tracked, now: float) -> None:
        """End a pane's first seconds once one state held FIRST_HOLD_LOOKS looks and
        FIRST_HOLD_INTERVALS intervals; what was held back is news only if it ends elsewhere
        than where it began."""
        a = tracked.assessment
        if tracked.settled or a is None or a.candidate is not a.state \
                or a.candidate_count < FIRST_HOLD_LOOKS \
                or a.seconds_in_state(now) < FIRST_HOLD_INTERVALS * self.settings.interval_s:
            return
        tracked.settled = True
        tracked.told = a.state if a.state is not State.UNKNOWN else None
        held, tracked.held_back = tracked.held_back, None
        if held is not None and held.state is a.state and held.previous is not a.state:
            self._released.append(held)

    def _news(self, transition: Transition, tracked: Tracked) -> bool:
        """Whether a transition of a live pane is handed to the notifier: not in the pane's first
        seconds (held back, see _settle), not a return from UNKNOWN to the state it left."""
        if transition.state is State.EXITED:
            return True
        if not tracked.settled and transition.state is State.NEEDS_CONFIRMATION:
            # A question is told at once, first seconds or not: a missed one costs more than
            # a flap, and questions do not flicker the way a fresh agent's READY does.
            tracked.settled, tracked.held_back = True, None
        if not tracked.settled:
            first = tracked.held_back.previous if tracked.held_back else transition.previous
            tracked.held_back = replace(transition, previous=first)
            return False
        if transition.state is State.UNKNOWN:
            return True
        if transition.previous is State.UNKNOWN and transition.state is tracked.told:
            return False
        tracked.told = transition.state
        return True

    def _write_status_file(self, tracked: Tracked) -> None:
        if tracked.assessment is None or tracked.status_row is None or tracked.pty_row is None:
            return
        folder = self.workers_dir / tracked.worker_id
        data = public_row({**tracked.pty_row, **tracked.status_row})
        try:
            tracked.status_json = statusfile.write_status(folder, data, tracked.status_json)
        except OSError as exc:
            log.error("cannot write %s: %s", folder / statusfile.STATUS_FILE, exc)

    def _folders(self) -> set[str]:
        try:
            return {p.name for p in self.workers_dir.iterdir()
                    if p.is_dir() and WORKER_ID_RE.match(p.name)}
        except OSError:
            return set()

    def _remove_folder(self, wid: str) -> None:
        if WORKER_ID_RE.match(wid):
            folder = self.workers_dir / wid
            if folder.is_symlink():
                folder.unlink(missing_ok=True)  # the link itself, never what it points at
            else:
                shutil.rmtree(folder, ignore_errors=True)

    def _write_final_file(self, final: FinalRow) -> None:
        folder = self.workers_dir / final.worker_id
        try:
            statusfile.write_status(folder, public_row(final.public), None)
        except OSError as exc:
            log.error("cannot write %s: %s", folder / statusfile.STATUS_FILE, exc)

    def _notify(self, transition: Transition, tracked: Tracked | None = None,
                name: str = "", *, held: bool = False) -> None:
        # A pane that exited while no watcher ran has no Tracked: logged, never notified (a
        # restarted tmux server would otherwise ping once per pane it had).
        tracked = tracked or self.tracked.get(transition.pane_key)
        # A transition held back in the pane's first seconds was logged when it happened.
        log.log(
            logging.DEBUG if held else logging.INFO,
            "%s%s (%s): %s -> %s after %.1f s [%s] %s", "told after holding: " if held else "",
            tracked.name if tracked else name or transition.pane_key, transition.pane_key,
            transition.previous.value if transition.previous else "-", transition.state.value,
            transition.previous_lasted_s, ", ".join(transition.verdict.reasons),
            transition.verdict.summary,
        )
        if tracked is not None and tracked.view:
            return  # conductor's own view: nobody is told about it
        if tracked is not None and not held and not self._news(transition, tracked):
            return
        if self.on_transition is not None and tracked is not None:
            try:
                self.on_transition(transition, tracked)
            except ConductorError as exc:
                log.error("transition handler failed: %s", exc)
            except Exception:
                log.exception("transition handler failed")


def _as_view(tracked: Tracked, now: float) -> Transition | None:
    """The assessment of a pane showing a conductor view, made without looking at its screen:
    UNKNOWN, so nothing treats it as READY or asking; the transition when it just became one."""
    summary = f"conductor's own view: {tracked.view}"
    previous = tracked.assessment
    if previous is not None and previous.summary == summary and \
            previous.reasons == (views.VIEW_REASON,):
        return None
    verdict = Verdict(state=State.UNKNOWN, confidence=100, reasons=(views.VIEW_REASON,),
                      rule_id="conductor-view", summary=summary, classifier=views.VIEW_CLI)
    # A view restored after a restart keeps its time.
    entered = previous.state_entered if previous is not None and \
        previous.state is State.UNKNOWN and previous.summary == summary else now
    tracked.assessment = Assessment(
        state=State.UNKNOWN, state_entered=entered, last_change=entered, verdict=verdict,
        reasons=verdict.reasons, summary=summary, confidence=100, signals=("view=conductor",))
    before = previous.state if previous is not None else None
    if before is None or before is State.UNKNOWN:
        return None
    return Transition(tracked.worker_id, now, before, State.UNKNOWN, verdict,
                      previous.seconds_in_state(now) if previous is not None else 0.0)


def _stream_pace(began: float, captured_at: float) -> float:
    """How long after its last capture a pane printing nonstop since ``began`` is captured
    again: half the stream's age at that capture, within STREAM_CAPTURE_S and
    STREAM_CAPTURE_MAX_S. Read off the capture, not the clock: a due time that moved on with
    the clock would recede each time it is reached, and the watcher would wake again and again
    for one capture."""
    return min(STREAM_CAPTURE_MAX_S, max(STREAM_CAPTURE_S, (captured_at - began) / 2))


def _history_row(transition: Transition) -> dict[str, Any]:
    verdict = transition.verdict
    return {
        "id": transition.pane_key,
        "ts": transition.ts,
        "state": transition.state.value,
        "previous_state": transition.previous.value if transition.previous else None,
        "summary": clean_text(verdict.summary),
        "actions_needed": clean_text(verdict.actions_needed),
        "reasons": list(verdict.reasons),
        "rule_id": verdict.rule_id,
        "classifier": verdict.classifier,
        "confidence": verdict.confidence,
    }


def _material(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if row is None else {k: v for k, v in row.items() if k not in _VOLATILE}


def _status_row(worker: str, a: Assessment, mode: str = POLL) -> dict[str, Any]:
    verdict = a.verdict
    return {
        "id": worker,
        "state": a.state.value,
        "summary": clean_text(a.summary),
        "actions_needed": clean_text(a.actions_needed),
        "confidence": a.confidence,
        "reasons": list(a.reasons),
        "rule_id": verdict.rule_id if verdict else None,
        "classifier": verdict.classifier if verdict else None,
        "last_snapshot_hash": a.screen_hash,
        "state_entered_ts": a.state_entered,
        "last_change_ts": a.last_change,
        # Capped so a long-stable pane stops rewriting its row every poll.
        "stable_count": min(a.stable_count, _STABLE_COUNT_CAP),
        "signals": [*a.signals, f"watch={mode}"],
    }


# What a notification calls the program that ended: "api: Claude Code exited".
_CLI_LABELS = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI",
               "aider": "aider", "opencode": "opencode", "shell": "the shell"}


def program_label(cli: str | None) -> str:
    return _CLI_LABELS.get(cli or "", "the program")


@dataclass
class FinalRow:
    """A pane that is gone, as it is kept: its last status row (EXITED) and the transition."""

    worker_id: str
    name: str
    transition: Transition
    status_row: dict[str, Any]
    public: dict[str, Any]  # status.json: the pty row as last seen plus the final status
    tracked: Tracked | None
    server_ended: bool = False  # the pane went with its tmux server


def exit_row(wid: str, tracked: Tracked | None, store: StoreWriter, now: float,
             server_pid: int | None = None) -> FinalRow:
    """The final row of a pane that left the server. ``tracked`` is None for a pane that vanished
    while no watcher ran: what it was is then read back from the store. ``server_pid`` is the
    server's now, None when none answers: a pane of another (earlier) server went with it."""
    if tracked is not None:
        a = tracked.assessment
        previous, entered = (a.state, a.state_entered) if a is not None else (None, now)
        cli = tracked.pack.name if tracked.pack else None
        name = tracked.name
        pty = tracked.pty_row or {}
        last_hash = a.screen_hash if a is not None else None
    else:
        pty = store.pty(wid) or {}
        row = store.statuses().get(wid) or {}
        previous = State(row["state"]) if row.get("state") in State.__members__ else None
        entered = row.get("state_entered_ts") or now
        cli, name = pty.get("cli_type"), pty.get("name") or wid
        last_hash = row.get("last_snapshot_hash")
    was_on = int(pty.get("server_pid") or 0)
    server_ended = server_pid is None or bool(was_on and was_on != server_pid)
    verdict = Verdict(state=State.EXITED, confidence=100, reasons=("pane_gone",),
                      rule_id="pane-gone", summary=f"{program_label(cli)} exited",
                      classifier="tmux")
    if server_ended:
        verdict = replace(verdict, reasons=(SERVER_ENDED,), rule_id="server-ended",
                          summary="tmux server ended")
    transition = Transition(wid, now, previous, State.EXITED, verdict,
                            max(0.0, now - entered) if previous is not None else 0.0)
    status_row = {
        "id": wid, "state": State.EXITED.value, "summary": verdict.summary, "actions_needed": "",
        "confidence": 100, "reasons": list(verdict.reasons), "rule_id": verdict.rule_id,
        "classifier": verdict.classifier, "last_snapshot_hash": last_hash,
        "state_entered_ts": now, "last_change_ts": now, "stable_count": 0, "signals": [],
    }
    return FinalRow(wid, name, transition, status_row, {**pty, **status_row}, tracked,
                    server_ended)


def rest(next_full: float, due: float | None, wake: threading.Event, stop: threading.Event,
         gather_s: float) -> None:
    """Sleep until the next full tick (``next_full``, monotonic), the moment the watcher asked to
    look again (``due``, epoch seconds), or a wake; after a wake, let news that comes in a burst
    gather for ``gather_s`` so one tick takes it all."""
    timeout = next_full - time.monotonic()
    if due is not None:
        timeout = min(timeout, due - time.time())
    if wake.wait(max(0.0, timeout)) and not stop.is_set():
        stop.wait(gather_s)
