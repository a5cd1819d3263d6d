"""When to capture a pane and when to look at it again: ``CaptureClock``.

Control mode (app.adapters.control.ControlMode) reports facts: a pane printed at t, it is quiet at
t (or flooded, never quiet). The clock decides from them, and from what the pane's last look
found, when the pane is captured next (at once after a still spell, once its frame is drawn,
never more often than ``min_capture_s``, at the streaming pace while it prints nonstop) and when
a quiet pane is looked at again without a capture. Every method takes ``now`` (epoch seconds),
so the rules are tested with plain numbers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from app.adapters.control import QUIET_S
from app.base.model import Pane, State
from app.base.settings import WatchSettings
from app.observe.assess import TURN_END_ARM_S, awaits_end_mark_settling
from app.observe.exits import SHELL_COULD_NOT_RUN, shell_complaint
from app.observe.pane import EVENTS, Tracked

# A pane that went quiet is looked at again this often (seconds) until nothing can change any
# more without new output.
_RECHECK_S = 0.5
# How long a pane that died with 126/127 is looked at again for the shell's words (above).
DEAD_SETTLE_S = 3.0
# A pane printing nonstop is captured once a second at first, then less often the longer it
# streams (half the stream's age, at most STREAM_CAPTURE_MAX_S): it reads BUSY all along,
# and what ends that is its output stopping, which is seen at once whatever the interval: a pane
# is captured as soon as it is quiet (app.adapters.control.QUIET_S), so a dialog or an idle prompt
# drawn at the end of a stream waits for nothing.
STREAM_CAPTURE_S = 1.0
STREAM_CAPTURE_MAX_S = 5.0
# A streaming pane due within this long (seconds) rides along with a capture made now.
STREAM_RIDE_S = 1.0
# A pane whose turn ended (or that asks) since its last capture is captured again this soon.
URGENT_S = 0.05


class Hearing(Protocol):
    """What the clock asks of control mode: a fact about a pane's output at ``now``."""

    def quiet(self, pane_id: str, now: float) -> bool:
        """Whether the pane printed nothing for QUIET_S (a pane paused for flooding never is)."""


@dataclass(frozen=True)
class Resumed:
    """The panes a capture takes from the clock's pending ones (their next output is reported
    again), and of those the streams the clock comes back for on its own."""

    panes: list[str]
    streams: Collection[str]


class CaptureClock:
    """The pacing of captures and second looks for the panes of one tmux server."""

    def __init__(self, settings: WatchSettings, hearing: Hearing | None = None) -> None:
        self.settings = settings
        self.hearing = hearing  # None: no control mode, nothing is ever heard printing
        self._pending: dict[str, float] = {}  # pane id -> when it printed, not yet captured
        # Pane id -> (when it began printing nonstop, when it was last seen still printing).
        self._streaming: dict[str, tuple[float, float]] = {}
        # Pane id -> when its next capture is due, for panes captured while streaming: control
        # mode does not wake us for the stream going on (ControlMode.resume), so we come back.
        self._stream_due: dict[str, float] = {}

    # --- what control mode and the listing told ------------------------------------------------

    def heard(self, printed: Mapping[str, float], now: float) -> None:
        """Panes that printed (pane id -> when, epoch seconds) since the last tick."""
        for pane_id, when in printed.items():
            self._pending.setdefault(pane_id, when)
        self._stream_due = {p: due for p, due in self._stream_due.items()
                            if due > now and p not in self._pending}

    def listed(self, pane_ids: Collection[str]) -> None:
        """The panes a full listing found: the clock forgets the others."""
        self._pending = {p: t for p, t in self._pending.items() if p in pane_ids}
        self._streaming = {p: t for p, t in self._streaming.items() if p in pane_ids}
        self._stream_due = {p: t for p, t in self._stream_due.items() if p in pane_ids}

    def printed(self, pane_id: str) -> bool:
        """Whether the pane printed since its last capture."""
        return pane_id in self._pending

    def printing(self) -> set[str]:
        return set(self._pending)

    def streams(self, pane_id: str) -> bool:
        """Whether the pane was last seen printing nonstop."""
        return pane_id in self._streaming

    # --- deciding ------------------------------------------------------------------------------

    def needs_capture(self, tracked: Tracked, pane: Pane, now: float, full: bool = True
                      ) -> bool:
        if pane.pane_id in self._pending:
            # Control mode said it printed: capture it at once after a still spell, else once
            # its output went quiet (the frame is drawn in full), never more often than
            # min_capture_s; while it streams nonstop, at the streaming pace (capture_due).
            return now >= self.capture_due(tracked, now)
        looks = tracked.looks
        if pane.dead and now - looks.captured_at >= _RECHECK_S \
                and self._dead_words_missing(tracked, now):
            return True
        if not full:
            return False
        if pane.pane_id in self._stream_due and tracked.mode == EVENTS \
                and now - looks.captured_at < self.settings.force_capture_s:
            # A stream control mode follows, its next capture set: the listing's hint moved
            # with the output of the last moments, already told or about to be.
            return False
        if looks.hint != pane.change_hint:
            return True
        if now - looks.captured_at >= self.settings.force_capture_s:
            return True
        # window_activity has one-second resolution: output later in the same second as the last
        # capture would not move it.
        return pane.activity >= int(looks.captured_at) - 1

    def riders(self, candidates: Iterable[Tracked], now: float) -> list[str]:
        """Of ``candidates`` (panes not chosen), the streaming panes due a capture soon, taken
        along with this one: one tmux call for them all instead of one each a moment apart."""
        return [t.worker_id for t in candidates
                if t.pane.pane_id in self._pending and not t.view
                and t.pane.pane_id in self._streaming
                and self.capture_due(t, now) <= now + STREAM_RIDE_S]

    def capture_due(self, tracked: Tracked, now: float) -> float:
        """When a pane that printed since its last capture is due one: at once after a still
        spell, or when a turn end or a question (a hook, the terminal's signal) came since the
        last (URGENT_S after it at the soonest: the screen may follow a moment later, and the
        quiet capture after it then finds it); min_capture_s after the last once it is quiet or
        when a stream began since; else at the streaming pace."""
        pane_id, captured_at = tracked.pane.pane_id, tracked.looks.captured_at
        if max(tracked.signals.turn_end, tracked.signals.permission) > captured_at \
                or awaits_idle_screen(tracked, now):
            return captured_at + URGENT_S
        still = self._pending.get(pane_id, now) - captured_at >= QUIET_S
        if still or self.hearing is None or self.hearing.quiet(pane_id, now):
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

    def recheck_at(self, tracked: Tracked, now: float) -> float:
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

    @staticmethod
    def _dead_words_missing(tracked: Tracked, now: float) -> bool:
        """A dead pane's screen no longer changes, but tmux may say the pane is dead before it
        draws the shell's last words ("not found"), which are a 126/127's summary: captured
        again for DEAD_SETTLE_S while they are missing; never after."""
        a = tracked.assessment
        return a is not None and tracked.pane.dead_status in SHELL_COULD_NOT_RUN \
            and not shell_complaint(tracked.screen.text) and now - a.state_entered < DEAD_SETTLE_S

    def next_due(self, panes: Iterable[Tracked], now: float) -> float | None:
        """When (epoch seconds) one of ``panes`` has something for a light tick: one that
        printed may be captured again, or a quiet one is due a second look. None: nothing until
        new output."""
        panes = list(panes)
        # A pane that printed is not looked at again before its next capture.
        times = [t.looks.recheck_at for t in panes
                 if t.looks.recheck_at and t.pane.pane_id not in self._pending]
        if self._pending:
            # A conductor view that printed waits for no capture: it is never captured.
            # Control mode wakes us when a pane goes quiet.
            times += [self.capture_due(t, now) for t in panes
                      if not t.view and t.pane.pane_id in self._pending]
        times += self._stream_due.values()
        return min(times) if times else None

    # --- what was done -------------------------------------------------------------------------

    def capturing(self, panes: Collection[Tracked], now: float) -> Resumed:
        """``panes`` are about to be captured: they are no longer pending, and those that
        stream are due again at the streaming pace."""
        resumed = []
        for tracked in panes:
            pane_id = tracked.pane.pane_id
            self._stream_due.pop(pane_id, None)
            if self._pending.pop(pane_id, None) is not None:
                resumed.append(tracked)
        # A pane whose turn end was heard is drawing its idle screen: its next frame wakes us,
        # whatever it streamed before (awaits_idle_screen).
        streams = {t.pane.pane_id: now + _stream_pace(self._streaming[t.pane.pane_id][0], now)
                   for t in resumed if t.pane.pane_id in self._streaming
                   and not awaits_idle_screen(t, now)}
        self._stream_due.update(streams)
        return Resumed([t.pane.pane_id for t in resumed], streams.keys())

    def captured(self, tracked: Tracked, now: float) -> None:
        """The pane's screen was captured at ``now`` (its listing as it stands)."""
        tracked.looks.captured_at, tracked.looks.hint = now, tracked.pane.change_hint

    def look_soon(self, tracked: Tracked, now: float) -> None:
        """Something besides its screen moved for the pane (a teammate's state): look again at
        the next light tick."""
        if tracked.captured_at:
            tracked.looks.recheck_at = now

    def looked(self, tracked: Tracked, now: float) -> None:
        """The pane was judged at ``now``: when to look at it again without new output."""
        tracked.looks.recheck_at = self.recheck_at(tracked, now) \
            if tracked.mode == EVENTS and not tracked.view else 0.0


def awaits_idle_screen(tracked: Tracked, now: float) -> bool:
    """A turn end was heard (a hook, the terminal's signal) and the pane has not read READY
    since: the idle screen it vouches for is being drawn now (Claude Code redraws only after
    its Stop hooks return), so each frame is worth a look without waiting for QUIET_S."""
    turn_end, a = tracked.signals.turn_end, tracked.assessment
    return (0 < now - turn_end < TURN_END_ARM_S and a is not None
            and a.state is not State.READY and turn_end >= tracked.signals.turn_start)


def _stream_pace(began: float, captured_at: float) -> float:
    """How long after its last capture a pane printing nonstop since ``began`` is captured
    again: half the stream's age at that capture, within STREAM_CAPTURE_S and
    STREAM_CAPTURE_MAX_S. Read off the capture, not the clock: a due time that moved on with
    the clock would recede each time it is reached, and the watcher would wake again and again
    for one capture."""
    return min(STREAM_CAPTURE_MAX_S, max(STREAM_CAPTURE_S, (captured_at - began) / 2))
