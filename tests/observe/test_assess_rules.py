"""The fusion and anti-flap rules of ``app.observe.assess``, poll by poll (pure: no tmux, no
clock)."""

from __future__ import annotations

from app.base.model import State, Verdict
from app.observe.assess import Assessment, Policy, Signals, assess

POLICY = Policy(stable_polls=3, ready_min_s=0.0, error_polls=2, send_grace_s=3.0)


def verdict(state: State) -> Verdict:
    return Verdict(state=state, confidence=80, reasons=(state.value.lower(),))


READY, BUSY, ERROR, CONFIRM = (verdict(s) for s in (
    State.READY, State.BUSY, State.ERROR, State.NEEDS_CONFIRMATION))


def run(frames: list[tuple[float, Verdict, str, Signals]], policy: Policy = POLICY,
        start: Assessment | None = None) -> list[Assessment]:
    out, a = [], start
    for t, v, screen, signals in frames:
        a = assess(a, v, screen, t, policy.stable_polls, policy=policy, signals=signals)
        out.append(a)
    return out


def settled_ready() -> Assessment:
    return run([(t, READY, "idle", Signals()) for t in (0, 1, 2, 3)])[-1]


def test_an_idle_screen_becomes_ready_only_after_the_stability_window() -> None:
    states = [a.state for a in run([(t, READY, "idle", Signals()) for t in range(4)])]
    assert states == [State.UNKNOWN, State.UNKNOWN, State.READY, State.READY]


def test_a_late_stop_of_the_previous_turn_does_not_make_the_new_turn_ready() -> None:
    sent = Signals(sent=10.0)
    late_stop = Signals(sent=10.0, turn_end=10.3, last_hook="Stop", last_hook_ts=10.3)
    frames = [
        (10.1, READY, "idle", sent),        # Enter pressed, the old idle screen still up
        (10.5, READY, "idle", late_stop),   # the previous turn's Stop lands
        (11.0, BUSY, "busy1", late_stop),   # the new turn shows
        (11.5, BUSY, "busy2", late_stop),
        (12.0, READY, "idle2", late_stop),  # a pause that looks idle: not READY yet
    ]
    states = [a.state for a in run(frames, start=settled_ready())]
    assert states == [State.BUSY] * 5


def test_after_a_send_ready_waits_for_the_grace_when_the_pane_never_looks_busy() -> None:
    sent = Signals(sent=10.0)
    frames = [(10.0 + 0.5 * i, READY, "idle", sent) for i in range(1, 10)]
    result = run(frames, start=settled_ready())
    assert [a.state for a in result if a.state is State.READY]
    first_ready = next(a for a in result if a.state is State.READY)
    assert first_ready.state_entered >= 13.0
    assert "sent" in result[0].reasons


def test_a_lost_stop_delays_ready_by_one_stability_window_only() -> None:
    started = Signals(turn_start=5.0, last_hook="UserPromptSubmit", last_hook_ts=5.0)
    frames = [(5.5, BUSY, "busy", started), (6.0, READY, "idle", started),
              (7.0, READY, "idle", started), (8.0, READY, "idle", started)]
    result = run(frames, start=settled_ready())
    assert [a.state for a in result] == [State.BUSY, State.BUSY, State.BUSY, State.READY]
    assert "screen_overrides_hook" in result[-1].reasons


def test_a_stop_after_the_turn_lets_an_idle_screen_be_ready_at_once() -> None:
    started = Signals(turn_start=5.0, last_hook="UserPromptSubmit", last_hook_ts=5.0)
    ended = Signals(turn_start=5.0, turn_end=9.0, last_hook="Stop", last_hook_ts=9.0)
    frames = [(6.0, BUSY, "busy", started), (9.1, READY, "idle", ended)]
    result = run(frames, start=settled_ready())
    assert result[-1].state is State.READY
    assert "hook_event" in result[-1].reasons
    assert "hook=Stop" in result[-1].signals


def test_the_screen_vetoes_a_stop_while_it_still_shows_work() -> None:
    ended = Signals(turn_start=5.0, turn_end=9.0, last_hook="Stop", last_hook_ts=9.0)
    result = run([(9.1, BUSY, "busy", ended)], start=settled_ready())
    assert result[-1].state is State.BUSY
    assert "screen_veto" in result[-1].reasons


def test_a_permission_hook_is_needs_confirmation_at_once_until_the_screen_moves_on() -> None:
    asking = Signals(turn_start=5.0, permission=6.0, last_hook="Notification",
                     last_hook_ts=6.0)
    frames = [(6.1, READY, "dialog", asking), (7.0, READY, "dialog", asking),
              (8.0, READY, "after", asking)]
    result = run(frames, start=settled_ready())
    assert [a.state for a in result[:2]] == [State.NEEDS_CONFIRMATION] * 2
    assert result[2].state is not State.NEEDS_CONFIRMATION


def test_anti_flap_an_error_must_hold_before_it_is_reported() -> None:
    flapping = [(float(t), ERROR if t % 2 else READY, f"s{t % 2}", Signals())
                for t in range(4, 14)]
    result = run(flapping, start=settled_ready())
    states = [a.state for a in result]
    assert State.ERROR not in states
    assert "holding" in result[1].reasons  # the ERROR screen was seen and held back

    lasting = run([(4.0, ERROR, "err", Signals()), (5.0, ERROR, "err", Signals())],
                  start=run([(3.0, BUSY, "b", Signals())], start=settled_ready())[-1])
    assert [a.state for a in lasting] == [State.BUSY, State.ERROR]


def test_leaving_ready_is_always_immediate_whatever_the_holds() -> None:
    strict = Policy(stable_polls=3, ready_min_s=0.0, busy_polls=5, error_polls=5,
                    confirmation_polls=5)
    result = run([(4.0, BUSY, "busy", Signals())], policy=strict, start=settled_ready())
    assert result[0].state is State.BUSY


def test_ready_needs_minimum_seconds_as_well_as_polls() -> None:
    fast = Policy(stable_polls=3, ready_min_s=1.5)
    frames = [(t / 2, READY, "idle", Signals()) for t in range(8)]
    result = run(frames, policy=fast)
    first_ready = next(i for i, a in enumerate(result) if a.state is State.READY)
    assert frames[first_ready][0] - frames[0][0] >= 1.5


def test_signals_from_before_the_first_look_are_history_not_news() -> None:
    # A permission prompt cancelled with Esc fires no hook: the last hook is still "permission".
    stale = Signals(turn_start=1.0, permission=2.0, last_hook="PermissionRequest",
                    last_hook_ts=2.0)
    result = run([(100.0 + t, READY, "idle", stale) for t in range(4)])
    assert State.NEEDS_CONFIRMATION not in [a.state for a in result]
    assert result[-1].state is State.READY


def test_an_old_turn_end_vouches_for_no_screen_that_keeps_changing() -> None:
    # Codex's notify fires only at a turn's end; the user then types a prompt in directly and
    # the answer streams with no busy marker: every frame looks idle, and each one differs.
    old_stop = Signals(turn_end=50.0, last_hook="agent-turn-complete", last_hook_ts=50.0)
    start = run([(t, READY, "idle", old_stop) for t in (40.0, 41.0, 42.0, 43.0)])[-1]
    streaming = [(100.0 + t, READY, f"stream{t}", old_stop) for t in range(5)]
    assert [a.state for a in run(streaming, start=start)] == [State.BUSY] * 5


def test_a_turn_end_vouches_only_for_the_screen_it_found() -> None:
    started = Signals(turn_start=5.0, last_hook="UserPromptSubmit", last_hook_ts=5.0)
    ended = Signals(turn_start=5.0, turn_end=9.0, last_hook="Stop", last_hook_ts=9.0)
    frames = [(6.0, BUSY, "busy", started), (9.1, READY, "idle", ended),
              (9.6, READY, "more output", ended)]
    result = run(frames, start=settled_ready())
    assert [a.state for a in result] == [State.BUSY, State.READY, State.BUSY]


NO_END_MARK = Verdict(state=State.BUSY, confidence=60, reasons=("no_end_mark",))
TURN_DONE = Signals(sent=10.0, turn_end=14.0, last_hook="agent-turn-complete", last_hook_ts=14.0)


def test_a_reply_without_end_mark_stays_busy_without_a_hook_however_still() -> None:
    sent = Signals(sent=10.0)
    frames = [(10.0 + t, NO_END_MARK, "reply", sent) for t in range(1, 30)]
    assert {a.state for a in run(frames, start=settled_ready())} == {State.BUSY}


def test_a_turn_end_makes_a_still_reply_without_end_mark_ready_once_it_has_settled() -> None:
    sent = Signals(sent=10.0)
    frames = [(11.0, NO_END_MARK, "stream1", sent), (12.0, NO_END_MARK, "stream2", sent),
              (13.5, NO_END_MARK, "final", sent),  # drawn before the hook fired
              (14.05, NO_END_MARK, "final", TURN_DONE),  # the end is not END_MARK_AFTER_S old
              (14.5, NO_END_MARK, "final", TURN_DONE), (15.5, NO_END_MARK, "final", TURN_DONE)]
    result = run(frames, start=settled_ready())
    # Still since 13.5 (END_MARK_QUIET_S and more): READY at the first look 0.1 s after the end,
    # without the stability window.
    assert [a.state for a in result] == [State.BUSY] * 4 + [State.READY] * 2
    assert "hook_event" in result[-1].reasons and "no_end_mark" in result[-1].reasons


def test_the_reply_drawn_after_the_hook_is_the_one_it_vouches_for() -> None:
    frames = [(14.2, NO_END_MARK, "last lines", TURN_DONE), (14.3, NO_END_MARK, "final", TURN_DONE),
              (14.4, NO_END_MARK, "final", TURN_DONE),  # not END_MARK_QUIET_S still yet
              (14.5, NO_END_MARK, "final", TURN_DONE), (15.5, NO_END_MARK, "final", TURN_DONE)]
    result = run(frames, start=run([(11.0, NO_END_MARK, "stream", Signals(sent=10.0))],
                                   start=settled_ready())[-1])
    assert [a.state for a in result] == [State.BUSY] * 3 + [State.READY] * 2


def test_a_hooked_reply_without_end_mark_is_busy_again_once_the_screen_moves() -> None:
    still = [(14.5 + t, NO_END_MARK, "final", TURN_DONE) for t in range(4)]
    ready = run(still, start=settled_ready())[-1]
    assert ready.state is State.READY
    # The user types a new prompt in the pane itself: Codex sends no hook at a turn's start.
    moving = [(20.0 + t, NO_END_MARK, f"typed{t}", TURN_DONE) for t in range(3)]
    assert [a.state for a in run(moving, start=ready)] == [State.BUSY] * 3


def test_a_turn_end_from_before_the_send_does_not_vouch_for_the_new_reply() -> None:
    old_end = Signals(sent=20.0, turn_end=14.0, last_hook="agent-turn-complete",
                      last_hook_ts=14.0)
    frames = [(20.0 + t, NO_END_MARK, "reply", old_end) for t in range(1, 12)]
    assert {a.state for a in run(frames, start=settled_ready())} == {State.BUSY}


def test_a_reply_without_end_mark_is_no_sign_that_the_pane_left_ready() -> None:
    # A fast turn: the hook lands before the watcher first looks after the send. The finished
    # screen (BUSY by its look) must not count as the departure that would outdate that hook.
    fast = Signals(sent=10.0, turn_end=10.4, last_hook="agent-turn-complete", last_hook_ts=10.4)
    frames = [(10.0 + t, NO_END_MARK, "final", fast) for t in (1, 2, 3, 4, 5)]
    result = run(frames, start=settled_ready())
    assert result[-1].state is State.READY
    assert result[0].departed_at == 0.0


def test_a_fresh_look_takes_no_old_turn_end_for_a_reply_without_end_mark() -> None:
    # A watcher restarted, or a `wait` begun, while a prompt typed into the pane by hand streams
    # its reply: the turn-end on record is the previous turn's, whatever the screen's stillness.
    frames = [(30.0 + t, NO_END_MARK, "mid-reply", TURN_DONE) for t in range(10)]
    assert {a.state for a in run(frames)} <= {State.UNKNOWN, State.BUSY}
    assert run(frames)[-1].state is State.BUSY
    newer = Signals(sent=10.0, turn_end=45.0, last_hook="agent-turn-complete", last_hook_ts=45.0)
    after = run([(45.5 + t, NO_END_MARK, "mid-reply", newer) for t in range(3)],
                start=run(frames)[-1])
    assert after[-1].state is State.READY  # its own turn-end, seen arriving, does vouch


STOPPED_TITLE = Signals(title_stopped=True)


def test_a_stopped_title_makes_a_still_reply_without_end_mark_ready_on_first_sight() -> None:
    # A watcher started after the turn: no turn end was ever seen, only the CLI's quiet title.
    frames = [(30.0 + t, NO_END_MARK, "final", STOPPED_TITLE) for t in range(4)]
    result = run(frames)
    assert [a.state for a in result] == [State.BUSY, State.BUSY, State.READY, State.READY]
    assert "title_stopped" in result[-1].reasons and "no_end_mark" in result[-1].reasons


def test_a_stopped_title_waits_for_the_screen_to_be_still() -> None:
    moving = [(30.0 + t, NO_END_MARK, f"stream{t}", STOPPED_TITLE) for t in range(6)]
    assert {a.state for a in run(moving, start=settled_ready())} == {State.BUSY}


def test_without_a_stopped_title_a_still_reply_without_end_mark_stays_busy() -> None:
    # A spinner title, a shell's, tmux's default or none: the pack said no (title_stopped False).
    frames = [(30.0 + t, NO_END_MARK, "final", Signals()) for t in range(12)]
    assert run(frames)[-1].state is State.BUSY


def test_a_stopped_title_never_overrules_a_screen_that_shows_work() -> None:
    frames = [(30.0 + t, BUSY, "working", STOPPED_TITLE) for t in range(8)]
    assert {a.state for a in run(frames, start=settled_ready())} == {State.BUSY}


def test_a_stopped_title_right_after_a_send_waits_for_the_agent_to_start() -> None:
    # Enter pressed: the title is still the quiet one for a moment and the old reply is up.
    sent = Signals(sent=40.0, title_stopped=True)
    frames = [(40.0 + t * 0.5, NO_END_MARK, "old reply", sent) for t in range(1, 6)]
    assert {a.state for a in run(frames, start=settled_ready())} == {State.BUSY}
