"""One poll cycle over every pane of a tmux server: ``Watcher.tick(now)``.

List panes (one tmux call), capture only what may have changed (one batched call), classify,
assess stability, then write the store in one transaction and each changed ``status.json``. No
sleeping and no signals here (that is ``daemon.py``), so tests drive ticks directly against a real
tmux server.

With control mode (``app.adapters.control.ControlMode``) the watcher also runs light ticks between
polls:
``tick(now, full=False)`` captures only the panes that printed (each at most once per
``min_capture_s``) and looks again at panes whose screen went quiet, so READY comes from the time
since the last output instead of from a count of polls. A pane that prints nothing costs nothing
there; the full poll stays as the safety net.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.act.steps import Step
from app.adapters import statusfile
from app.adapters.control import ControlMode
from app.adapters.remote_tails import RemoteTails
from app.adapters.status import pid_alive
from app.adapters.store import StoreWriter
from app.adapters.store_read import public_row
from app.adapters.tmux import Tmux, capture_with_history
from app.base.errors import PaneNotFound, TmuxServerNotRunning
from app.base.model import Pane, State, Transition
from app.base.screen import Cursor
from app.base.settings import WatchSettings
from app.base.termsignals import TermSignal
from app.observe import views
from app.observe.agent_starts import AgentStarts
from app.observe.exits import HISTORY_LINES, SHELL_COULD_NOT_RUN
from app.observe.llm import AsyncLLM
from app.observe.packs import Pack
from app.observe.pane import EVENTS, POLL, PaneObserver, Tracked, panes_by_id, worker_id
from app.observe.usage import UsageReader
from app.run import teammates
from app.run.clock import CaptureClock
from app.run.events import EventReader
from app.run.folders import folders, remove_folder, write_final_file
from app.run.rows import (
    FinalRow,
    _history_row,
    _material,
    _pty_row,
    _status_row,
    exit_row,
    restored_assessment,
)
from app.run.telling import Teller

log = logging.getLogger(__name__)

_PRUNE_EVERY = 200  # cycles


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
        settings = settings or WatchSettings()
        self.clock = CaptureClock(settings, control)
        self.teller = Teller(settings)
        self.settings = settings
        self.on_transition = on_transition
        self.llm = llm
        # Herding, the report cycle: each adds its columns to the status rows, then acts.
        self.steps = tuple(steps)
        self.observer = PaneObserver(packs, self.settings, llm)
        self.tracked: dict[str, Tracked] = {}
        self._restored = store.statuses()
        self._cycles = 0
        self._cleaned_at_start = False
        self._unwritten: list[Transition] = []  # transitions whose cycle failed to commit
        self._undropped: list[str] = []  # passing ids whose cycle failed to commit (below)
        self._server_up = True  # the last listing found the server (next_due)
        self.control = control
        self._server_pid = 0
        self._watched: set[str] = set()  # session ids whose output control mode reports
        # The terminal's signals control mode read since the last tick, and the titles the
        # last capture read (pane id -> ...): evidence folded in before judging.
        self._heard: dict[str, list[tuple[float, TermSignal]]] = {}
        self._titles: dict[str, str] = {}
        # The panes (worker ids) the last capture kept the colours of (Tracked.wants_styled),
        # and where it left each pane's cursor (pane id -> ...).
        self._styled: set[str] = set()
        self._cursors: dict[str, Cursor] = {}
        # Hooks' marks on panes (pane id -> (ts, event)) and the panes that got a hook event
        # this tick: looked at in a light tick too, so a turn end counts at once.
        self._marks: dict[str, tuple[float, str]] = {}
        self._evented: set[str] = set()
        self.events = EventReader(store, time.time())
        self.own_views = views.WatcherViews(tmux)
        # Tokens per pane, from each agent's own records: another host's over its connection.
        self.usage = UsageReader(store) if tmux.via is None else \
            UsageReader(store, tmux.host, RemoteTails(tmux.via))
        self.agent_starts = AgentStarts(store)  # a replaced agent forgets the old session

    @property
    def settings(self) -> WatchSettings:
        return self._settings

    @settings.setter
    def settings(self, settings: WatchSettings) -> None:
        # Settings given to a running watcher (a bench, a test) pace it from its next tick, as
        # they did when the watcher read its own for every decision.
        self._settings = self.clock.settings = self.teller.settings = settings

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
        marks, self._marks = self._marks, {}
        self._evented = self.events.read_events(current, self.tracked, self._server_pid, marks)
        self._fold_heard(current)
        to_capture, look = self._choose_looks(current, now, full)
        self._count_teammates(current, look, full)
        screens = self._capture(current, to_capture, report, now)
        if screens is None:
            return report
        report.captured = len(screens)
        self._fold_terminal(current, screens, now, full)
        judged = self._judge(current, look, screens, to_capture, now, full, report)
        if full:
            # Before usage: a new agent process must not have the old conversation's file read.
            self.agent_starts.look(self.tracked, now)
            try:
                self.usage.read(self.tracked, now)  # before the steps: their budgets count it
            except Exception:  # tokens are an extra: every pane's state is stored regardless
                log.exception("usage: not stored this cycle")
        for lead in teammates.stale_counts(self.tracked):
            # A teammate judged now moved its lead's count: the lead is looked at again at
            # once, not at its own next output.
            self.clock.look_soon(lead, now)
        written = self._write(judged, report, current, gone, orphans, now)
        if written is None:
            # A light tick that changed nothing the store shows: only a step that asked for a
            # turn (a check it runs may be done) gets one.
            self._run_due_steps(now)
        else:
            self._after_write(judged, written, current, gone, report, now)
        for transition in self.teller.take_released():
            if transition.pane_key in self.tracked:
                self._notify(transition, held=True)
        return report

    def _run_due_steps(self, now: float) -> None:
        due = [step for step in self.steps
               if (when := step.next_due(now)) is not None and when <= now]
        if due:
            self._act_steps(due, [], now)

    def _act_steps(self, steps: Sequence[Step], gone: list[str], now: float) -> None:
        """Let ``steps`` act; a status column a step moved (the cycle's state) is remembered
        and reaches status.json too, as the store already holds it."""
        moved: dict[str, dict[str, Any]] = {}
        for step in steps:
            for wid, columns in step.act(self.tracked, gone, now).items():
                moved.setdefault(wid, {}).update(columns)
        for wid, columns in moved.items():
            tracked = self.tracked.get(wid)
            if tracked is None or wid in gone or tracked.stored.status_row is None:
                continue
            row = {**tracked.stored.status_row, **columns}
            if row != tracked.stored.status_row:
                tracked.stored.status_row = row
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
        # When it printed, not when we heard: a stream that went on reports without a wake.
        self.clock.heard({pane_id: now - max(0.0, reported_at - first)
                          for pane_id, first in dirty.items()}, now)
        known = {t.pane.pane_id for t in self.tracked.values()}
        return (full or changed or not self.tracked or not self._cleaned_at_start
                or not self.clock.printing() <= known)

    def _list_panes(self, report: CycleReport) -> dict[str, Pane] | None:
        """Every pane of the server by worker id (None: the server is not running)."""
        try:
            listing = self.tmux.list_panes()
        except TmuxServerNotRunning:
            report.server_running = self._server_up = False
            return None
        self._server_up = True
        self._server_pid = listing.server_pid
        if self.control is not None:
            # A session that goes away when its last client detaches must stay polled: our
            # client would keep it alive.
            self.control.follow({p.session_id for p in listing.panes
                                 if p.session_id and not p.destroy_unattached})
            self._watched = self.control.watching()
        socket = self.tmux.label
        self.clock.listed({p.pane_id for p in listing.panes})
        current = panes_by_id(socket, listing.server_pid, listing.panes)
        self.own_views.conductor_views(current)
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
        # Dropped, not ended: see marked_since.
        marked = marked_since(self.tracked, gone, current, self.tmux.label, self._server_pid)
        for wid in marked:
            gone.remove(wid)
            self.tracked.pop(wid)
        orphans = sorted(set(marked) | set(self._undropped))
        if not self._cleaned_at_start:
            # Panes that vanished while no watcher ran still get their final row; folders no
            # row owns are a killed daemon's leftovers.
            # Only this server's: another socket's panes are for a watcher of that socket.
            gone = sorted(set(gone) | (self.store.live_ids(self.tmux.label) - set(current)))
            orphans += sorted(folders(self.workers_dir) - self.store.known_ids() - set(current)
                              - set(orphans))
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
                # It is not taken from the clock's printed panes, so its output only moves
                # control mode's clock until it is an ordinary pane again.
                if full:
                    look.add(wid)
                continue
            if self.clock.needs_capture(tracked, pane, now, full):
                to_capture.append(wid)
            elif tracked.looks.recheck_at and tracked.looks.recheck_at <= now:
                look.add(wid)
            elif wid in self._evented and tracked.captured_at:
                look.add(wid)  # a hook just spoke: its word counts now, not at the next look
            if self.clock.printed(pane.pane_id):
                look.discard(wid)  # it printed since its last capture: not quiet, not judged yet
        if to_capture:
            # Streaming panes due soon ride along: one tmux call for them all.
            to_capture += self.clock.riders(
                (self.tracked[wid] for wid in current if wid not in to_capture), now)
        look.update(to_capture)
        return to_capture, look

    def _count_teammates(self, current: Mapping[str, Pane], look: set[str], full: bool) -> None:
        """Each pane's count of teammates at work; a lead whose count moved is judged now."""
        if full:
            teammates.read_leads(self.store, self.tracked)
        look.update(wid for wid in teammates.recount(self.tracked, current)
                    if self.tracked[wid].captured_at)

    def _capture(self, current: Mapping[str, Pane], to_capture: list[str],
                 report: CycleReport, now: float) -> dict[str, str] | None:
        """One batched capture (None: the server went away)."""
        if not to_capture:
            return {}
        resumed = self.clock.capturing([self.tracked[w] for w in to_capture], now)
        if resumed.panes and self.control is not None:
            # Before the capture: output from now on is reported again, so nothing printed
            # after the capture goes unnoticed. A stream going on is no news: its next
            # capture is due at the streaming pace.
            self.control.resume(resumed.panes, resumed.streams)
        self._titles, self._cursors = {}, {}
        try:
            self._styled = {w for w in to_capture if self.tracked[w].wants_styled}
            by_pane = self.tmux.capture([current[w].pane_id for w in to_capture], self._titles,
                                        styled={current[w].pane_id for w in self._styled},
                                        cursors=self._cursors)
        except TmuxServerNotRunning:
            report.server_running = False
            return None
        for w in to_capture:
            pane = current[w]
            if pane.dead and pane.dead_status in SHELL_COULD_NOT_RUN and pane.pane_id in by_pane:
                try:
                    by_pane[pane.pane_id] = capture_with_history(self.tmux, pane.pane_id,
                                                                 HISTORY_LINES)
                except PaneNotFound:
                    del by_pane[pane.pane_id]
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
                    transition = views.as_view(tracked, now)
                elif wid in screens:
                    self.clock.captured(tracked, now)
                    self.observer.classify(tracked, screens[wid], styled=wid in self._styled,
                                           cursor=self._cursors.get(pane.pane_id))
                    transition = self.observer.assess(tracked, now)
                elif wid in to_capture:
                    continue  # vanished mid-capture: it will be gone from the next listing
                else:
                    transition = self.observer.assess(tracked, now)
                self.clock.looked(tracked, now)
            except Exception:  # one bad pane must never stop the others
                log.exception("pane %s (%s): skipped this cycle", pane.pane_id, tracked.name)
                continue
            if transition is not None:
                report.transitions.append(transition)
            self.teller.settle(tracked, now)
            a = tracked.assessment
            row = _status_row(wid, a, tracked.mode) if a is not None else None
            if row is not None:
                for step in self.steps:
                    row.update(step.observe(tracked, now))
            if row is not None and row != tracked.status_row and (
                    full or transition is not None
                    or _material(row) != _material(tracked.status_row)):
                judged.status_rows.append(row)
            pty = _pty_row(tracked, self._server_pid, self.tmux, self.packs)
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
            self._undropped = [wid for wid in orphans if wid not in current]
            raise
        return _Written(status_rows, exits, transitions, orphans + pruned)

    def _after_write(self, judged: _Judged, written: _Written, current: Mapping[str, Pane],
                     gone: list[str], report: CycleReport, now: float) -> None:
        """Only now is it true that the store holds the rows: remember them, write the files,
        notify, and run the steps."""
        self._unwritten = []
        self._undropped = []
        self._cleaned_at_start = True
        for row in written.status_rows:
            if row["id"] in current:
                self.tracked[row["id"]].stored.status_row = row
        for pty in judged.pty_rows:
            self.tracked[pty["id"]].stored.pty_row = pty
        for wid in gone:
            self.tracked.pop(wid, None)
            if self.llm is not None:
                self.llm.forget(wid)
        report.exited = [final.worker_id for final in written.exits]
        report.removed = written.removed
        for wid in report.removed:
            remove_folder(self.workers_dir, wid)
        # status.json holds a subset of the two rows: only a changed row can change it.
        changed = {r["id"] for r in written.status_rows} | {r["id"] for r in judged.pty_rows}
        for wid in changed - set(gone):
            self._write_status_file(self.tracked[wid])
        for final in written.exits:
            write_final_file(self.workers_dir, final)
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
            tracked.assessment = restored_assessment(restored)
            self.teller.known_before(tracked, tracked.assessment.state)
        return tracked

    def close(self) -> None:
        """Unmark our own pane, so it is an ordinary pane again once we are gone."""
        self.own_views.close()

    def _leave_alone(self, tracked: Tracked) -> bool:
        """Whether the pane shows a conductor view now (app.observe.views.leave_alone)."""
        if views.leave_alone(tracked, self.own_views.found.get(tracked.worker_id, "")) \
                and self.llm is not None:
            self.llm.forget(tracked.worker_id)
        return bool(tracked.view)

    def next_due(self) -> float | None:
        """When (epoch seconds) a light tick has something to do: a pane that printed may be
        captured again, a quiet pane is due a second look, or a step asked for a turn. None:
        nothing until new output."""
        if not self._server_up:
            # Nothing to look at or act on until a server is there, which only a full tick
            # (every interval) can find: a step's own hurry would be a busy loop of listings.
            return None
        now = time.time()
        times = [when for when in (self.clock.next_due(self.tracked.values(), now),
                                   *(step.next_due(now) for step in self.steps))
                 if when is not None]
        return min(times) if times else None

    # --- output --------------------------------------------------------------------------------

    def _write_status_file(self, tracked: Tracked) -> None:
        if tracked.assessment is None or tracked.status_row is None or tracked.pty_row is None:
            return
        folder = self.workers_dir / tracked.worker_id
        data = public_row({**tracked.pty_row, **tracked.status_row})
        try:
            tracked.stored.status_json = statusfile.write_status(folder, data,
                                                                 tracked.stored.status_json)
        except OSError as exc:
            log.error("cannot write %s: %s", folder / statusfile.STATUS_FILE, exc)

    def _notify(self, transition: Transition, tracked: Tracked | None = None,
                name: str = "", *, held: bool = False) -> None:
        self.teller.notify(transition, tracked or self.tracked.get(transition.pane_key),
                           self.on_transition, name, held=held)


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


def marked_since(tracked: Mapping[str, Tracked], gone: list[str], current: Mapping[str, Pane],
                 socket_label: str, server_pid: int) -> list[str]:
    """Ids panes had only until `restore` marked them with their rows' ids: tmux lists a
    recreated pane between the command that makes it and the one that marks it. The pane lives
    on as its row, so the passing id is dropped rather than ended (an EXITED twin in `status`,
    and a second `restore` of the same pane)."""
    marked = {pane.pane_id for wid, pane in current.items() if pane.conductor_id == wid}
    return [wid for wid in gone if tracked[wid].pane.pane_id in marked
            and worker_id(socket_label, server_pid, tracked[wid].pane.pane_id) == wid]
