"""Handing a pane its next instruction: ``send`` and ``wait``.

``wait`` always looks at the pane itself, every ``poll_s`` (0.5 s by default), with the watcher's
own rules (``PaneObserver``) plus the pane's hook and send events from the store. It therefore
works whether or not the watcher runs, and it sees a turn end within one short poll instead of
one watcher interval. The two classic failures of such waits are guarded against by the rules in
``app.assess``: a lost Stop hook cannot keep the pane BUSY once its screen has settled, and a
Stop or an idle screen from the previous turn cannot end a wait that began with a send.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app import store
from app.assess import Assessment
from app.classify.packs import Pack
from app.config import WatchSettings
from app.configfile import DEFAULT_WAIT_POLL_S
from app.errors import ConductorError, PaneDead, PaneNotFound, StoreError
from app.model import Pane, State
from app.status import find_worker
from app.tmux import Tmux
from app.watch import PaneObserver, Tracked, worker_id

TIMEOUT_EXIT = 124  # what timeout(1) returns, so scripts can tell a timeout from an error


class Refused(ConductorError):
    """The gate (``app.gate``) will not type into a pane as it is: one line naming the reason."""


# What `send` will type: printable text, newlines and tabs. Any other control character is
# refused, not stripped: ESC starts the bracketed-paste end marker (ESC [201~), after which the
# rest of the text would run as typed keys, and CSI/OSC sequences move the cursor or retitle the
# terminal. Stripping would silently send something other than what the caller asked for.
_ALLOWED_CONTROLS = frozenset("\n\t")


def check_text(text: str) -> None:
    """Refuse text holding terminal control characters (ESC, CSI, BEL, C1, DEL...)."""
    for index, char in enumerate(text):
        code = ord(char)
        if (code < 0x20 or 0x7F <= code <= 0x9F) and char not in _ALLOWED_CONTROLS:
            if char == "\r" and text[index + 1:index + 2] == "\n":
                continue  # a CRLF line end from a file piped in
            raise Refused(f"not sent: the text holds a control character (U+{code:04X} at "
                          f"position {index}); send types plain text, newlines and tabs only")


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
        reader = store.StoreReader(workers_dir)
    except StoreError:
        reader = None
    if reader is not None:
        try:
            workers = [w for w in reader.workers()
                       if (reader.pty(w["id"]) or {}).get("server_pid") == listing.server_pid]
            try:
                stored = find_worker(workers, ident)
            except PaneNotFound:
                if not ident.startswith("%"):
                    raise
            if stored is not None and stored["state"] == "EXITED":
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
                 settings: WatchSettings, workers_dir: Path) -> None:
        self.tmux = tmux
        self.target = target
        self.workers_dir = workers_dir
        self.observer = PaneObserver(packs, settings)
        self.tracked = Tracked(worker_id=target.worker_id, pane=target.pane, name=target.name,
                               named_by_user=True, cli_forced=target.cli_forced)
        self._event_seq = 0
        self._watcher_row: dict[str, Any] | None = None
        self.started = time.time()

    def poll(self, now: float | None = None) -> Assessment:
        now = time.time() if now is None else now
        pane_id = self.target.pane.pane_id
        listing = self.tmux.list_panes()
        pane = next((p for p in listing.panes if p.pane_id == pane_id), None)
        if pane is None or listing.server_pid != self.target.server_pid:
            raise PaneNotFound(f"pane {self.target.label} is gone")
        screens = self.tmux.capture([pane_id])
        if pane_id not in screens:
            raise PaneNotFound(f"pane {self.target.label} is gone")
        self.tracked.pane = pane
        self.observer.classify(self.tracked, screens[pane_id])
        watcher_row = self._watcher_row = self._read_store()
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
                watcher_row, self.tracked, self.started):
            # A watcher on control mode saw this very screen go quiet: no need to wait out our
            # own stability window.
            assessment = replace(
                assessment, state=State.READY,
                reasons=(*assessment.reasons, "watcher_verdict"),
                summary=(watcher_row or {}).get("summary") or assessment.summary)
        return assessment

    def seconds_in_state(self, result: WaitResult, now: float | None = None) -> float:
        """How long the pane has been in its final state: the watcher's account when it saw
        the same state for longer (it may have watched for hours), else this wait's own."""
        now = time.time() if now is None else now
        seen = max(result.state_seen_s, result.assessment.seconds_in_state(now))
        row = self._watcher_row
        if row is not None and row.get("state") == result.assessment.state.value and \
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
            reader = store.StoreReader(self.workers_dir)
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
    older READY may be the idle screen still up right after Enter. Our own verdict of the
    screen must be READY too (only the stability window is taken from the watcher)."""
    if row is None or row.get("state") != State.READY.value or tracked.verdict is None:
        return False
    signals = row.get("signals") or ""
    codes = signals.split() if isinstance(signals, str) else list(signals)
    return ("watch=events" in codes and tracked.verdict.state is State.READY
            and row.get("last_snapshot_hash") == tracked.stability_hash
            and (row.get("state_entered_ts") or 0.0) > max(
                since, tracked.signals.sent, tracked.signals.turn_start))


def send(tmux: Tmux, target: Target, text: str, packs: Mapping[str, Pack],
         settings: WatchSettings, workers_dir: Path, *, enter: bool = True,
         force: bool = False, origin: str = "send", expect_screen: str | None = None,
         answer_dialog: bool = False, agent_only: bool = False) -> None:
    """Type ``text`` into the pane literally (then Enter) through the gate in front of every
    keystroke (``app.gate.type_text``, which has the refusals); record the send so ``wait`` and
    the watcher know a new turn was asked for.

    ``origin`` names the sender in the events table ("herd" for a nudge: a person's sends reset
    the herd's counters, its own do not). ``expect_screen`` (the stability hash a decision was
    made on) refuses when the pane shows anything else by the time we look. ``answer_dialog``
    lets text into a NEEDS_CONFIRMATION pane whose options cannot be read; a menu is answered
    with ``app.gate.answer``. ``agent_only`` (prose) refuses anything but an agent CLI at its
    own prompt.
    """
    from app import gate  # the gate builds on PaneWatch, defined here

    gate.type_text(tmux, target, text, packs, settings, workers_dir, enter=enter, force=force,
                   origin=origin, expect_screen=expect_screen, answer_dialog=answer_dialog,
                   agent_only=agent_only)


@dataclass(frozen=True)
class WaitResult:
    reached: bool
    assessment: Assessment
    waited_s: float
    # How long this wait saw the final state without a break (all of it when it never changed).
    state_seen_s: float = 0.0


def _exited(reasons: tuple[str, ...], summary: str, started: float,
            on_change: Callable[[Assessment], None] | None) -> WaitResult:
    now = time.time()
    assessment = Assessment(state=State.EXITED, state_entered=now, last_change=now,
                            reasons=reasons, summary=summary, confidence=100)
    if on_change is not None:
        on_change(assessment)
    return WaitResult(True, assessment, time.monotonic() - started)


def wait(watch: PaneWatch, until: Collection[State], timeout_s: float | None,
         poll_s: float = DEFAULT_WAIT_POLL_S,
         on_change: Callable[[Assessment], None] | None = None) -> WaitResult:
    """Poll until the pane's reported state is one of ``until``, or the timeout passes. A pane
    that ends (gone, or dead and kept by remain-on-exit) ends the wait at once: reached when
    ``until`` holds EXITED, else :class:`PaneNotFound` (:class:`PaneDead` with its status)."""
    started = time.monotonic()
    last: State | None = None
    since = started
    settling = False
    while True:
        try:
            assessment = watch.poll()
        except PaneNotFound:
            if State.EXITED not in until:
                raise PaneNotFound(f"pane {watch.target.label} exited while waiting") from None
            return _exited(("pane_gone",), "exited", started, on_change)
        pane = watch.tracked.pane
        if pane.dead:
            # Kept by remain-on-exit, its program over: as final as a pane that is gone.
            status = f"exited with status {pane.dead_status}" if pane.dead_status is not None \
                else "exited"
            if State.EXITED not in until:
                raise PaneDead(f"pane {watch.target.label} {status}")
            return _exited(("pane_dead",), status, started, on_change)
        if assessment.state is not last:
            if last is not None and not settling:
                since = time.monotonic()
            last = assessment.state
            if on_change is not None:
                on_change(assessment)
        # UNKNOWN while first settling is no state of the pane's: the next one began before.
        settling = assessment.reasons[-1:] == ("settling",)
        now = time.monotonic()
        waited = now - started
        if assessment.state in until:
            return WaitResult(True, assessment, waited, now - since)
        if timeout_s is not None and waited >= timeout_s:
            return WaitResult(False, assessment, waited, now - since)
        pause = poll_s if timeout_s is None else min(poll_s, max(0.0, timeout_s - waited))
        time.sleep(pause)
