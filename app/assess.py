"""Turn one verdict per poll into a reported state: stability, timing and the reasons behind it.

Pure: no I/O. The watcher feeds it one observation per pane per poll; the timeline replay in the
tests feeds it one recorded frame per poll, so both exercise the same logic.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.model import State, Verdict

# Reported at once: missing these is worse than reporting them a poll early.
IMMEDIATE = frozenset({State.NEEDS_CONFIRMATION, State.BUSY, State.ERROR})


@dataclass(frozen=True)
class Assessment:
    """What we believe about one pane after the latest poll."""

    state: State = State.UNKNOWN
    state_entered: float = 0.0
    last_change: float = 0.0  # when the screen last differed from the poll before
    screen_hash: str | None = None
    stable_count: int = 0  # consecutive polls showing this same screen, this one included
    verdict: Verdict | None = None
    reasons: tuple[str, ...] = ()
    summary: str = ""
    actions_needed: str = ""
    confidence: int = 0

    def seconds_in_state(self, now: float) -> float:
        return max(0.0, now - self.state_entered)


def assess(
    previous: Assessment | None,
    verdict: Verdict,
    screen_hash: str,
    now: float,
    stable_polls: int,
) -> Assessment:
    """Fold one poll's verdict into the pane's assessment.

    NEEDS_CONFIRMATION, ERROR and BUSY are reported as soon as seen. READY needs the classifier's
    positive evidence *and* a screen unchanged for ``stable_polls`` polls; until then a screen that
    moves is BUSY (agents such as aider and Codex show no busy marker while streaming). A pane seen
    for the first time stays UNKNOWN until its screen settles, so a freshly started watcher never
    invents transitions.
    """
    first_sight = previous is None or previous.screen_hash is None
    prior = previous or Assessment(state_entered=now, last_change=now)
    changed = screen_hash != prior.screen_hash
    stable_count = 1 if changed else prior.stable_count + 1
    last_change = now if changed else prior.last_change
    settled = stable_count >= stable_polls

    state = verdict.state
    reasons = list(verdict.reasons)
    summary, actions, confidence = verdict.summary, verdict.actions_needed, verdict.confidence
    if state in IMMEDIATE:
        pass
    elif settled:
        reasons.append("stable_for_n")
    elif first_sight:
        state, confidence = State.UNKNOWN, min(confidence, 30)
        reasons.append("settling")
    elif changed:
        # A moving screen with no busy marker: something is still being written.
        state, confidence = State.BUSY, 60
        reasons.append("screen_changing")
        summary = "Screen is changing"
        actions = ""
    else:
        # Same screen as last poll, not yet stable long enough: hold what we reported.
        state = prior.state
        reasons.append("settling")
        summary, actions, confidence = prior.summary, prior.actions_needed, prior.confidence

    state_entered = prior.state_entered if state is prior.state and not first_sight else now
    return Assessment(
        state=state,
        state_entered=state_entered,
        last_change=last_change,
        screen_hash=screen_hash,
        stable_count=stable_count,
        verdict=verdict,
        reasons=tuple(reasons),
        summary=summary,
        actions_needed=actions,
        confidence=confidence,
    )
