"""The capture clock's pacing rules, with plain numbers for ``now`` and a fake control mode: no
tmux, no sleeping. The same rules are followed against real panes in test_control_mode.py and
test_hook_wake.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.adapters.control import QUIET_S
from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.model import Pane, State
from app.base.settings import WatchSettings
from app.observe.assess import Assessment
from app.observe.pane import EVENTS, POLL, Tracked
from app.run.clock import (
    DEAD_SETTLE_S,
    STREAM_CAPTURE_MAX_S,
    STREAM_CAPTURE_S,
    STREAM_RIDE_S,
    URGENT_S,
    CaptureClock,
)
from app.run.watcher import Watcher

T0 = 1_000_000.0
SETTINGS = WatchSettings(min_capture_s=0.25, force_capture_s=30.0, ready_min_s=1.5,
                         send_grace_s=3.0)
MIN = SETTINGS.min_capture_s


class FakeHearing:
    """Control mode's fact about each pane's output: the panes that printed nothing for
    QUIET_S (by the ``now`` asked about), as a test sets them."""

    def __init__(self) -> None:
        self.last_output: dict[str, float] = {}

    def quiet(self, pane_id: str, now: float) -> bool:
        return now - self.last_output.get(pane_id, 0.0) >= QUIET_S


def pane(pane_id: str = "%1", activity: int = 0) -> Pane:
    return Pane(pane_id=pane_id, session_name="s", window_id="@1", window_index=0,
                window_name="w", pane_index=0, window_panes=1, cwd="/", current_command="bash",
                pid=1, title="", dead=False, dead_status=None, width=80, height=24,
                activity=activity, cursor_x=0, cursor_y=0, history_size=0)


def tracked(pane_id: str = "%1", captured_at: float = T0, mode: str = EVENTS) -> Tracked:
    t = Tracked(worker_id=f"w{pane_id[1:]}", pane=pane(pane_id), name=pane_id,
                named_by_user=False, cli_forced=None, mode=mode)
    t.looks.captured_at, t.looks.hint = captured_at, t.pane.change_hint
    return t


def clock_with(hearing: FakeHearing | None = None) -> CaptureClock:
    return CaptureClock(SETTINGS, FakeHearing() if hearing is None else hearing)


def streaming(hearing: FakeHearing, pane_id: str, now: float) -> None:
    hearing.last_output[pane_id] = now  # printed at this very moment: not quiet


def test_a_pane_that_printed_after_a_still_spell_is_due_min_capture_after_its_last_look() -> None:
    hearing, clock, t = FakeHearing(), clock_with(), tracked()
    clock.hearing = hearing
    clock.heard({"%1": T0 + 10.0}, T0 + 10.0)  # long after its capture: a still spell
    streaming(hearing, "%1", T0 + 10.0)
    assert clock.printed("%1")
    assert clock.capture_due(t, T0 + 10.0) == T0 + MIN
    assert clock.needs_capture(t, t.pane, T0 + 10.0, full=False)
    assert not clock.streams("%1")


def test_a_pane_printing_within_quiet_of_its_capture_waits_for_its_frame_or_min_capture(
        ) -> None:
    hearing = FakeHearing()
    clock, t = clock_with(hearing), tracked()
    clock.heard({"%1": T0 + QUIET_S / 3}, T0 + QUIET_S / 3)
    # Quiet since: the frame is drawn, captured min_capture_s after the last capture.
    assert clock.capture_due(t, T0 + MIN / 2) == T0 + MIN
    assert not clock.needs_capture(t, t.pane, T0 + MIN / 2, full=False)
    assert clock.needs_capture(t, t.pane, T0 + MIN, full=False)


def test_a_stream_begun_since_the_last_look_is_looked_at_after_min_capture_then_paced() -> None:
    hearing = FakeHearing()
    clock, t = clock_with(hearing), tracked()
    now = T0 + QUIET_S / 2
    clock.heard({"%1": T0 + QUIET_S / 6}, now)
    streaming(hearing, "%1", now)
    assert clock.capture_due(t, now) == T0 + MIN
    assert clock.streams("%1")
    # Captured during the stream: from then on the stream's pace, at least STREAM_CAPTURE_S.
    t.looks.captured_at = now + 0.01
    streaming(hearing, "%1", now + 0.02)
    assert clock.capture_due(t, now + 0.02) == now + 0.01 + STREAM_CAPTURE_S


def test_a_long_stream_is_captured_at_half_its_age_up_to_the_maximum() -> None:
    hearing = FakeHearing()
    clock, t = clock_with(hearing), tracked()
    clock.heard({"%1": T0 + 0.01}, T0 + 0.01)
    began = T0 + 0.05
    streaming(hearing, "%1", began)
    clock.capture_due(t, began)  # the stream begins
    for age, pace in ((4.0, 2.0), (8.0, 4.0), (30.0, STREAM_CAPTURE_MAX_S)):
        t.looks.captured_at = began + age
        # Seen still printing each second, so it stays one stream.
        for second in range(int(age) + 1):
            streaming(hearing, "%1", began + second)
            clock.capture_due(t, began + second)
        streaming(hearing, "%1", began + age + 0.1)
        assert clock.capture_due(t, began + age + 0.1) == pytest.approx(began + age + pace)


def test_a_stream_that_stopped_in_between_is_a_new_stream() -> None:
    hearing = FakeHearing()
    clock, t = clock_with(hearing), tracked()
    clock.heard({"%1": T0 + 0.01}, T0 + 0.01)
    streaming(hearing, "%1", T0 + 0.05)
    clock.capture_due(t, T0 + 0.05)
    later = T0 + 0.05 + STREAM_CAPTURE_MAX_S + 2.0
    t.looks.captured_at = later - 0.1  # the capture that found the new stream's beginning
    streaming(hearing, "%1", later)
    # The old stream's age would give STREAM_CAPTURE_MAX_S; the new one begins at `later`.
    assert clock.capture_due(t, later) == t.looks.captured_at + MIN


@pytest.mark.parametrize("signal", ["turn_end", "permission"])
def test_a_turn_end_or_question_heard_since_the_capture_makes_the_pane_urgent(
        signal: str) -> None:
    hearing = FakeHearing()
    clock, t = clock_with(hearing), tracked()
    clock.heard({"%1": T0 + 0.01}, T0 + 0.01)
    streaming(hearing, "%1", T0 + 0.02)
    t.signals = t.signals.with_event("hook", signal, signal, T0 + 0.015)
    assert clock.capture_due(t, T0 + 0.02) == T0 + URGENT_S


def test_after_a_turn_end_each_frame_of_a_pane_not_yet_ready_is_urgent_not_a_stream() -> None:
    hearing = FakeHearing()
    clock, t = clock_with(hearing), tracked()
    t.signals = replace(t.signals, turn_end=T0 - 0.5)
    t.assessment = Assessment(state=State.BUSY)
    clock.heard({"%1": T0 + 0.01}, T0 + 0.01)
    streaming(hearing, "%1", T0 + 0.02)
    assert clock.capture_due(t, T0 + 0.02) == T0 + URGENT_S
    # Captured now: resumed as drawing, so control mode wakes us with its next frame.
    resumed = clock.capturing([t], T0 + 0.03)
    assert resumed.panes == ["%1"] and list(resumed.streams) == []
    # Once READY, the same pane is no longer drawing an idle screen.
    t.assessment = Assessment(state=State.READY)
    clock.heard({"%1": T0 + 0.04}, T0 + 0.04)
    assert clock.capture_due(t, T0 + 0.04) == T0 + MIN


def test_a_captured_stream_is_due_again_at_its_pace_and_that_due_time_is_kept() -> None:
    hearing = FakeHearing()
    clock, t = clock_with(hearing), tracked(captured_at=T0)
    clock.heard({"%1": T0 + 0.01}, T0 + 0.01)
    streaming(hearing, "%1", T0 + 0.02)
    clock.capture_due(t, T0 + 0.02)
    resumed = clock.capturing([t], T0 + 0.3)
    assert resumed.panes == ["%1"] and set(resumed.streams) == {"%1"}
    assert not clock.printed("%1")
    due = T0 + 0.3 + STREAM_CAPTURE_S
    assert clock.next_due([t], T0 + 0.4) == due
    clock.heard({}, T0 + 0.5)
    assert clock.next_due([t], T0 + 0.5) == due  # kept until reached
    clock.heard({}, due + 0.1)
    assert clock.next_due([t], due + 0.1) is None  # reached: forgotten


def test_a_stream_due_gives_way_to_output_heard_again() -> None:
    hearing = FakeHearing()
    clock, t = clock_with(hearing), tracked(captured_at=T0)
    clock.heard({"%1": T0 + 0.01}, T0 + 0.01)
    streaming(hearing, "%1", T0 + 0.02)
    clock.capture_due(t, T0 + 0.02)
    clock.capturing([t], T0 + 0.3)
    clock.captured(t, T0 + 0.3)
    clock.heard({"%1": T0 + 0.6}, T0 + 0.6)
    assert clock.printed("%1")
    quiet_at = T0 + 0.6 + QUIET_S
    # Quiet: its frame is captured min_capture_s after the last capture, not at the stream's
    # pace.
    assert clock.next_due([t], quiet_at) == T0 + 0.3 + MIN


def test_a_followed_stream_skips_the_polls_hint_until_force_capture() -> None:
    hearing = FakeHearing()
    clock, t = clock_with(hearing), tracked()
    clock.heard({"%1": T0 + 0.01}, T0 + 0.01)
    streaming(hearing, "%1", T0 + 0.02)
    clock.capture_due(t, T0 + 0.02)
    clock.capturing([t], T0 + 0.02)
    clock.captured(t, T0 + 0.02)
    moved = pane(activity=5)
    t.pane = moved
    assert not clock.needs_capture(t, moved, T0 + 0.5, full=True)
    # Polled, not followed: the hint decides.
    t.mode = POLL
    assert clock.needs_capture(t, moved, T0 + 0.5, full=True)


def test_a_full_poll_captures_on_a_moved_hint_a_recent_activity_or_force_capture() -> None:
    clock = clock_with()
    t = tracked(captured_at=T0 + 0.7, mode=POLL)
    t.looks.hint = pane(activity=int(T0) - 5).change_hint
    old = pane(activity=int(T0) - 5)
    assert not clock.needs_capture(t, old, T0 + 1.0, full=False)  # a light tick: printed only
    assert not clock.needs_capture(t, old, T0 + 1.0, full=True)
    assert clock.needs_capture(t, pane(activity=int(T0) - 4), T0 + 1.0, full=True)
    # Activity in the capture's second (one-second resolution): it may have printed after.
    same_second = pane(activity=int(T0))
    t.looks.hint = same_second.change_hint
    assert clock.needs_capture(t, same_second, T0 + 1.0, full=True)
    t.looks.hint = old.change_hint
    assert clock.needs_capture(t, old, T0 + 0.7 + SETTINGS.force_capture_s, full=True)


def test_streaming_panes_due_soon_ride_along_and_others_do_not() -> None:
    hearing = FakeHearing()
    clock = clock_with(hearing)
    soon, late, quiet_one, view = (tracked(p) for p in ("%1", "%2", "%3", "%4"))
    view.view = "status --watch"
    now = T0 + 0.5
    clock.heard(dict.fromkeys(("%1", "%2", "%3", "%4"), T0 + 0.01), now)
    for t in (soon, late, view):
        streaming(hearing, t.pane.pane_id, now)
        clock.capture_due(t, now)  # each begins a stream now
    # Captured during the stream long ago enough: due within STREAM_RIDE_S, or not.
    soon.looks.captured_at = now - 0.5
    late.looks.captured_at = now + STREAM_RIDE_S
    view.looks.captured_at = now - 0.5
    riders = clock.riders([soon, late, quiet_one, view], now)
    assert riders == [soon.worker_id]


def test_next_due_is_the_soonest_of_second_looks_captures_and_streams() -> None:
    hearing = FakeHearing()
    clock = clock_with(hearing)
    idle, printer = tracked("%1"), tracked("%2")
    idle.looks.recheck_at = T0 + 2.0
    assert clock.next_due([idle, printer], T0 + 1.0) == T0 + 2.0
    clock.heard({"%2": T0 + 0.05}, T0 + 0.1)
    assert clock.next_due([idle, printer], T0 + 0.1) == T0 + MIN
    # A pane that printed is not looked at again before its next capture.
    printer.looks.recheck_at = T0 + 0.01
    assert clock.next_due([idle, printer], T0 + 0.1) == T0 + MIN
    assert clock_with().next_due([], T0) is None


def test_a_quiet_pane_is_rechecked_until_nothing_can_change_without_output() -> None:
    clock, t = clock_with(), tracked()
    t.assessment = Assessment(state=State.BUSY, candidate=State.BUSY, stable_count=1,
                              stable_since=T0)
    # Within ready_min_s: just after it ends, so READY is seen on time.
    assert clock.recheck_at(t, T0 + 1.2) == pytest.approx(T0 + 1.5 + 0.01)
    assert clock.recheck_at(t, T0 + 2.0) == pytest.approx(T0 + 2.5)
    # Long quiet and settled: nothing to look again for.
    t.assessment = replace(t.assessment, state=State.READY, candidate=State.READY,
                           stable_count=2)
    assert clock.recheck_at(t, T0 + 10.0) == 0.0
    clock.looked(t, T0 + 1.0)
    assert t.looks.recheck_at == pytest.approx(T0 + 1.5)
    t.mode = POLL  # the poll looks at it anyway: no second looks
    clock.looked(t, T0 + 1.0)
    assert t.looks.recheck_at == 0.0


def test_panes_gone_from_the_listing_are_forgotten() -> None:
    hearing = FakeHearing()
    clock, t = clock_with(hearing), tracked()
    clock.heard({"%1": T0 + 0.01, "%9": T0 + 0.01}, T0 + 0.01)
    streaming(hearing, "%1", T0 + 0.02)
    clock.capture_due(t, T0 + 0.02)
    clock.listed({"%2"})
    assert clock.printing() == set() and not clock.streams("%1")


def test_without_control_mode_nothing_prints_and_quiet_is_assumed() -> None:
    clock, t = CaptureClock(SETTINGS), tracked()
    assert clock.next_due([t], T0) is None
    clock.heard({"%1": T0 + 0.01}, T0 + 0.01)
    assert clock.capture_due(t, T0 + 0.02) == T0 + MIN and not clock.streams("%1")


def test_settings_given_to_a_running_watcher_pace_its_clock_and_its_first_seconds(
        tmp_path: Path) -> None:
    """A bench (force_capture_s) or a test (interval_s) sets a watcher's settings after it
    started: the clock and the teller take them as the watcher does."""
    store = StoreWriter(tmp_path)
    try:
        watcher = Watcher(Tmux(socket_name="conductor-never-started"), store, {}, SETTINGS)
        forced = replace(SETTINGS, force_capture_s=1e-6, interval_s=7.0)
        watcher.settings = forced
        assert watcher.clock.settings is forced and watcher.teller.settings is forced
        t = tracked(captured_at=T0, mode=POLL)
        assert watcher.clock.needs_capture(t, t.pane, T0 + 0.001, full=True)
    finally:
        store.close()


def test_a_pane_dead_with_127_is_captured_again_until_the_shells_words_show_for_a_moment(
) -> None:
    """tmux may report the pane dead before it draws the shell's "not found": its summary."""
    clock = clock_with()
    dead = replace(pane(activity=int(T0) - 5), dead=True, dead_status=127)
    t = tracked(captured_at=T0, mode=POLL)
    t.pane, t.looks.hint = dead, dead.change_hint
    t.assessment = Assessment(state=State.ERROR, state_entered=T0)
    t.screen.text = "\nPane is dead (status 127, Sat Nov 28 12:58:11 2026)"
    assert not clock.needs_capture(t, dead, T0 + 0.1, full=False)  # just captured
    assert clock.needs_capture(t, dead, T0 + 0.6, full=False)  # a light tick too
    assert not clock.needs_capture(t, dead, T0 + DEAD_SETTLE_S, full=False)  # not forever
    t.screen.text = "sh: 1: no-such-program-xq: not found\nPane is dead (status 127, …)"
    assert not clock.needs_capture(t, dead, T0 + 0.6, full=False)  # the words are there
    t.screen.text = ""
    exited = replace(dead, dead_status=3)
    t.pane = exited
    assert not clock.needs_capture(t, exited, T0 + 0.6, full=False)  # only 126 and 127
