"""The herd's gates, pure: one case per gate, in the order they are tried, and the counters."""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import pytest

from app.act.herd.eligibility import (
    NO_TURN,
    STALLED,
    TURN_ASKED,
    TURN_RUNNING,
    WAITING_LONG,
    Counters,
    HerdSettings,
    PaneFacts,
    decide,
    needs_draft_check,
    nudged,
    observe,
)
from app.base.model import State

NOW = 10_000.0
SETTINGS = HerdSettings(stall_after_s=120, stability_s=5, confidence_min=60, cooldown_s=120,
                        max_nudges=3, waiting_grace_s=120)
# A READY pane, quiet for 200 s, opted in, nothing typed: every gate open.
OPEN = PaneFacts(state=State.READY, state_entered=NOW - 200, last_change=NOW - 200,
                 last_send=0.0, confidence=90, opted_in=True)


class Case(NamedTuple):
    id: str
    facts: PaneFacts
    counters: Counters
    eligible: bool
    reason: str
    when: str = ""


CASES = [
    Case("eligible-stalled", OPEN, Counters(), True, "", STALLED),
    Case("dead", replace(OPEN, dead=True), Counters(), False, "pane_dead"),
    # A shell, a plain program or conductor's own view: a nudge there would run as a command.
    Case("not-an-agent", replace(OPEN, agent=False), Counters(), False, "not_an_agent"),
    Case("not-an-agent-even-opted-out-and-busy",
         replace(OPEN, agent=False, opted_in=False, state=State.BUSY), Counters(), False,
         "not_an_agent"),
    Case("busy", replace(OPEN, state=State.BUSY), Counters(), False, "busy"),
    Case("unknown", replace(OPEN, state=State.UNKNOWN), Counters(), False, "unknown"),
    Case("too-recent", replace(OPEN, state_entered=NOW - 4), Counters(), False, "too_recent"),
    Case("low-confidence", replace(OPEN, confidence=59), Counters(), False, "low_confidence"),
    Case("fresh-agent-no-turn-yet", replace(OPEN, had_turn=False), Counters(), False,
         "no_turn_yet", STALLED),
    Case("dialog-needs-no-turn", replace(OPEN, state=State.NEEDS_CONFIRMATION, had_turn=False),
         Counters(), True, "", WAITING_LONG),
    Case("screen-changed-lately", replace(OPEN, last_change=NOW - 100), Counters(), False,
         "not_stalled", STALLED),
    Case("sent-lately", replace(OPEN, last_send=NOW - 100), Counters(), False, "not_stalled",
         STALLED),
    Case("nudged-lately", OPEN, Counters(1, NOW - 100), False, "not_stalled", STALLED),
    Case("dialog-not-long", replace(OPEN, state=State.NEEDS_CONFIRMATION,
                                    state_entered=NOW - 60), Counters(), False,
         "not_waiting_long", WAITING_LONG),
    Case("dialog-long", replace(OPEN, state=State.NEEDS_CONFIRMATION), Counters(), True, "",
         WAITING_LONG),
    Case("error-long", replace(OPEN, state=State.ERROR), Counters(), True, "", WAITING_LONG),
    Case("not-opted-in", replace(OPEN, opted_in=False), Counters(), False, "not_opted_in",
         STALLED),
    Case("draft", replace(OPEN, draft=True), Counters(), False, "draft_in_prompt", STALLED),
    Case("max-nudges", OPEN, Counters(3, NOW - 500), False, "max_nudges", STALLED),
    Case("cooldown-passed", OPEN, Counters(1, NOW - 130), True, "", STALLED),  # 130 > 120 s
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_each_gate(case: Case) -> None:
    decision = decide(case.facts, case.counters, SETTINGS, NOW)
    assert (decision.eligible, decision.reason) == (case.eligible, case.reason)
    assert decision.when == case.when


def test_cooldown_blocks_until_it_has_passed_even_when_the_pane_looks_stalled() -> None:
    settings = replace(SETTINGS, stall_after_s=10, cooldown_s=120)
    counters = Counters(1, NOW - 60)
    assert decide(OPEN, counters, settings, NOW).reason == "cooldown"
    assert decide(OPEN, counters, settings, NOW + 61).eligible


def test_the_first_failing_gate_is_the_one_reported() -> None:
    facts = replace(OPEN, confidence=10, opted_in=False, draft=True)
    assert decide(facts, Counters(9, NOW), SETTINGS, NOW).reason == "low_confidence"


def test_the_draft_is_looked_for_only_when_it_can_decide() -> None:
    assert needs_draft_check(OPEN, Counters(), SETTINGS, NOW)
    assert needs_draft_check(OPEN, Counters(3, NOW - 500), SETTINGS, NOW)
    assert not needs_draft_check(replace(OPEN, state=State.BUSY), Counters(), SETTINGS, NOW)
    assert not needs_draft_check(replace(OPEN, opted_in=False), Counters(), SETTINGS, NOW)


def test_a_nudge_counts_and_waits_for_its_turn_a_dry_run_does_not() -> None:
    assert nudged(Counters(), NOW, typed=True) == Counters(1, NOW, TURN_ASKED)
    assert nudged(Counters(1, 5.0), NOW, typed=False) == Counters(2, NOW, NO_TURN)


def test_the_turn_a_nudge_asked_for_does_not_reset_the_count() -> None:
    asked = Counters(1, NOW - 10, TURN_ASKED)
    busy, ready = replace(OPEN, state=State.BUSY), OPEN
    running = observe(asked, busy, 0.0)
    assert running == Counters(1, NOW - 10, TURN_RUNNING)
    assert observe(running, busy, 0.0) == running  # still our turn
    ended = observe(running, ready, 0.0)
    assert ended == Counters(1, NOW - 10, NO_TURN)
    assert observe(ended, ready, 0.0) == ended


class Act(NamedTuple):
    id: str
    facts: PaneFacts
    person_send: float


PERSON_ACTS = [
    Act("send-from-cli", OPEN, NOW - 5),
    Act("typing-in-the-prompt", replace(OPEN, draft=True), 0.0),
    Act("a-turn-they-started", replace(OPEN, state=State.BUSY), 0.0),
]


@pytest.mark.parametrize("act", PERSON_ACTS, ids=[a.id for a in PERSON_ACTS])
def test_a_person_acting_resets_the_count_but_not_the_cooldown(act: Act) -> None:
    counters = Counters(3, NOW - 30, NO_TURN)
    assert observe(counters, act.facts, act.person_send) == Counters(0, NOW - 30, NO_TURN)


def test_an_older_send_is_not_a_person_acting() -> None:
    counters = Counters(2, NOW - 30, NO_TURN)
    assert observe(counters, OPEN, NOW - 31) == counters
