"""What of a pane's transitions is told (app.run.telling.Teller), with plain numbers for the
time: a pane's first seconds are held back, a question is told at once, a view is never told,
a return from UNKNOWN to the state last told is no news. test_cli_names_and_first_seconds.py
follows the same rules with real panes."""

from __future__ import annotations

from dataclasses import replace

from app.base.model import Pane, State, Transition, Verdict
from app.base.settings import WatchSettings
from app.observe.assess import Assessment
from app.observe.pane import Tracked
from app.run.telling import FIRST_HOLD_INTERVALS, FIRST_HOLD_LOOKS, Teller

T0 = 1_000_000.0
SETTINGS = WatchSettings(interval_s=1.0)
HOLD_S = FIRST_HOLD_INTERVALS * SETTINGS.interval_s


def tracked() -> Tracked:
    pane = Pane(pane_id="%1", session_name="s", window_id="@1", window_index=0,
                window_name="w", pane_index=0, window_panes=1, cwd="/", current_command="bash",
                pid=1, title="", dead=False, dead_status=None, width=80, height=24, activity=0,
                cursor_x=0, cursor_y=0, history_size=0)
    return Tracked(worker_id="w1", pane=pane, name="api", named_by_user=False, cli_forced=None)


def move(t: Tracked, previous: State | None, state: State, at: float) -> Transition:
    t.assessment = Assessment(state=state, state_entered=at, candidate=state, candidate_count=1)
    verdict = Verdict(state=state, confidence=90, reasons=("test",))
    return Transition(t.worker_id, at, previous, state, verdict, 0.0)


def held_for(t: Tracked, looks: int) -> None:
    assert t.assessment is not None
    t.assessment = replace(t.assessment, candidate_count=looks)


class Told:
    def __init__(self) -> None:
        self.transitions: list[tuple[State | None, State]] = []

    def __call__(self, transition: Transition, _: Tracked) -> None:
        self.transitions.append((transition.previous, transition.state))


def test_a_start_up_is_held_back_and_its_end_told_only_if_it_ends_elsewhere() -> None:
    teller, told, t = Teller(SETTINGS), Told(), tracked()
    teller.notify(move(t, State.READY, State.BUSY, T0), t, told)
    teller.notify(move(t, State.BUSY, State.READY, T0 + 0.5), t, told)
    assert told.transitions == [] and t.news.held_back is not None
    # READY held, but not yet for long enough.
    held_for(t, FIRST_HOLD_LOOKS)
    teller.settle(t, T0 + 0.5 + HOLD_S / 2)
    assert not t.news.settled
    teller.settle(t, T0 + 0.5 + HOLD_S)
    # It began READY and ends READY: a start-up, no news.
    assert t.news.settled and t.news.told is State.READY
    assert teller.take_released() == []


def test_what_was_held_back_is_released_when_the_pane_settles_elsewhere() -> None:
    teller, told, t = Teller(SETTINGS), Told(), tracked()
    teller.notify(move(t, State.BUSY, State.UNKNOWN, T0), t, told)
    teller.notify(move(t, State.UNKNOWN, State.READY, T0 + 0.5), t, told)
    held_for(t, FIRST_HOLD_LOOKS)
    teller.settle(t, T0 + 0.5 + HOLD_S)
    released = teller.take_released()
    assert [(r.previous, r.state) for r in released] == [(State.BUSY, State.READY)]
    assert teller.take_released() == []
    for transition in released:
        teller.notify(transition, t, told, held=True)
    assert told.transitions == [(State.BUSY, State.READY)]


def test_a_question_is_told_at_once_even_in_the_first_seconds() -> None:
    teller, told, t = Teller(SETTINGS), Told(), tracked()
    teller.notify(move(t, State.BUSY, State.NEEDS_CONFIRMATION, T0), t, told)
    assert told.transitions == [(State.BUSY, State.NEEDS_CONFIRMATION)]
    assert t.news.settled and t.news.held_back is None


def test_a_return_from_unknown_to_the_state_last_told_is_no_news() -> None:
    teller, told, t = Teller(SETTINGS), Told(), tracked()
    teller.known_before(t, State.READY)
    teller.notify(move(t, State.READY, State.BUSY, T0), t, told)
    teller.notify(move(t, State.BUSY, State.UNKNOWN, T0 + 1), t, told)
    teller.notify(move(t, State.UNKNOWN, State.BUSY, T0 + 2), t, told)
    teller.notify(move(t, State.BUSY, State.READY, T0 + 3), t, told)
    assert told.transitions == [(State.READY, State.BUSY), (State.BUSY, State.UNKNOWN),
                                (State.BUSY, State.READY)]


def test_a_view_is_never_told_and_a_pane_without_memory_only_logged() -> None:
    teller, told, t = Teller(SETTINGS), Told(), tracked()
    teller.known_before(t, State.READY)
    t.view = "status --watch"
    teller.notify(move(t, State.READY, State.NEEDS_CONFIRMATION, T0), t, told)
    gone = Transition("w9", T0, State.READY, State.EXITED,
                      Verdict(state=State.EXITED, confidence=100, reasons=("pane_gone",)), 1.0)
    teller.notify(gone, None, told, "old")
    assert told.transitions == []


def test_a_failing_handler_is_logged_and_survived() -> None:
    teller, t = Teller(SETTINGS), tracked()
    teller.known_before(t, State.READY)

    def broken(transition: Transition, _: Tracked) -> None:
        raise RuntimeError("the notifier fell over")

    teller.notify(move(t, State.READY, State.NEEDS_CONFIRMATION, T0), t, broken)
    assert t.news.told is State.NEEDS_CONFIRMATION
