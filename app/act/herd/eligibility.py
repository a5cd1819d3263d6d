"""The safety gates of herding, pure: what we know of a pane plus its counters plus ``now`` gives a
decision and, when it is no, the first gate that said so.

Gates, in the order they are tried (the order is the explanation a person reads):

1. ``pane_dead``, ``not_an_agent``, ``busy``, ``unknown``: a dead pane, a pane whose program is
   not an agent CLI (a shell, where a nudge would run as a command; a plain program; conductor's
   own views), a working agent and a screen nothing recognises are never nudged. ``budget``
   (before ``busy``, so the reason holds while the agent works on): an opted-in pane past its
   [budget] (app.act.budget) until a person resets it.
2. ``too_recent``: the state is younger than ``stability`` seconds.
3. ``low_confidence``: the assessment's confidence is under ``confidence_min``.
4. READY must follow a turn (``no_turn_yet``: a fresh agent at its first prompt has nothing to
   continue) and be *stalled* (``not_stalled``): no screen change, no send from anyone and no
   nudge for ``stall_after`` seconds. NEEDS_CONFIRMATION and ERROR must be *waiting long*
   (``not_waiting_long``): in that state for ``waiting_grace`` seconds.
5. ``not_opted_in``: nobody ran ``herd on`` for the pane.
6. ``draft_in_prompt``: the prompt holds text a person typed and has not sent.
7. ``max_nudges``: ``max_nudges`` nudges since a person last acted on the pane.
8. ``cooldown``: the last nudge is younger than ``cooldown`` seconds.

Only then do the rules get a say (``no_rule`` when none matches). Counters move in
:func:`observe`: a person acting (a send that is not ours, a draft in the prompt, a turn that
our nudge did not start) puts them back to zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from app.base.model import State
from app.base.prices import Budget
from app.base.settings_table import default

DEFAULT_STALL_AFTER_S = default("herd.stall_after", float)
DEFAULT_STABILITY_S = default("herd.stability", float)
DEFAULT_CONFIDENCE_MIN = default("herd.confidence_min", int)
DEFAULT_COOLDOWN_S = default("herd.cooldown", float)
DEFAULT_MAX_NUDGES = default("herd.max_nudges", int)
DEFAULT_RULES = default("herd.rules", str)

STALLED = "stalled"
WAITING_LONG = "waiting_long"
WHENS = (STALLED, WAITING_LONG)

NO_TURN, TURN_ASKED, TURN_RUNNING = 0, 1, 2


@dataclass(frozen=True)
class HerdSettings:
    """The ``[herd]`` table of the config file, plus the ``[states]`` grace it shares."""

    stall_after_s: float = DEFAULT_STALL_AFTER_S
    stability_s: float = DEFAULT_STABILITY_S
    confidence_min: int = DEFAULT_CONFIDENCE_MIN
    cooldown_s: float = DEFAULT_COOLDOWN_S
    max_nudges: int = DEFAULT_MAX_NUDGES
    waiting_grace_s: float = default("states.waiting_grace", float)
    rules: str = DEFAULT_RULES  # the rule set `herd on` uses without --rules
    budget: Budget = field(default_factory=Budget)  # [budget]: past it, no nudge


@dataclass(frozen=True)
class PaneFacts:
    """What the watcher knows of one pane at one tick (times are epoch seconds, 0 = never)."""

    state: State
    state_entered: float
    last_change: float  # the screen last differed from the poll before
    last_send: float  # newest send from anyone, nudges included
    confidence: int
    opted_in: bool
    # Since the watcher started: a send, a turn-start hook or a busy marker on screen.
    had_turn: bool = True
    dead: bool = False
    draft: bool = False  # unsent text in the prompt (only looked for when it can matter)
    # The pane runs an agent CLI, whose prompt takes prose (app.act.herd.step.agent_cli).
    agent: bool = True
    over_budget: bool = False  # past its [budget] (looked at for opted-in panes only)


@dataclass(frozen=True)
class Counters:
    """Per pane, kept in the store so a restart changes nothing."""

    nudges: int = 0  # since a person last acted on the pane
    last_nudge_ts: float = 0.0
    turn: int = 0  # the turn a typed nudge asked for: NO_TURN, TURN_ASKED or TURN_RUNNING


@dataclass(frozen=True)
class Decision:
    eligible: bool
    reason: str  # the gate that said no; "" when eligible
    when: str = ""  # STALLED or WAITING_LONG: what the rules are asked about
    idle_s: float = 0.0  # seconds without input (READY) or in the state (others)


def needs_draft_check(facts: PaneFacts, counters: Counters, settings: HerdSettings,
                      now: float) -> bool:
    """Whether the draft gate is reached, so the caller looks at the prompt only then."""
    return decide(replace(facts, draft=False), counters, settings, now).reason in (
        "", "max_nudges", "cooldown")


def decide(facts: PaneFacts, counters: Counters, settings: HerdSettings, now: float) -> Decision:
    """The first gate that blocks, or an eligible decision (the module doc lists the gates)."""
    if facts.dead:
        return Decision(False, "pane_dead")
    if not facts.agent:
        return Decision(False, "not_an_agent")
    if facts.over_budget:
        return Decision(False, "budget")
    if facts.state is State.BUSY:
        return Decision(False, "busy")
    if facts.state is State.UNKNOWN:
        return Decision(False, "unknown")
    age = max(0.0, now - facts.state_entered)
    if age < settings.stability_s:
        return Decision(False, "too_recent", idle_s=age)
    if facts.confidence < settings.confidence_min:
        return Decision(False, "low_confidence", idle_s=age)
    if facts.state is State.READY and not facts.had_turn:
        return Decision(False, "no_turn_yet", STALLED)
    if facts.state is State.READY:
        quiet_since = max(facts.state_entered, facts.last_change, facts.last_send,
                          counters.last_nudge_ts)
        idle = max(0.0, now - quiet_since)
        when = STALLED
        if idle < settings.stall_after_s:
            return Decision(False, "not_stalled", when, idle)
    else:
        idle, when = age, WAITING_LONG
        if age < settings.waiting_grace_s:
            return Decision(False, "not_waiting_long", when, idle)
    if not facts.opted_in:
        return Decision(False, "not_opted_in", when, idle)
    if facts.draft:
        return Decision(False, "draft_in_prompt", when, idle)
    if counters.nudges >= settings.max_nudges:
        return Decision(False, "max_nudges", when, idle)
    if counters.last_nudge_ts and now - counters.last_nudge_ts < settings.cooldown_s:
        return Decision(False, "cooldown", when, idle)
    return Decision(True, "", when, idle)


def observe(counters: Counters, facts: PaneFacts, person_send_ts: float) -> Counters:
    """The counters after this tick's evidence of a person acting on the pane.

    A send from the CLI newer than our last nudge, text typed into the prompt, or a turn that
    started while no nudge of ours was waiting for its turn: the count starts again.
    """
    if not counters.nudges and counters.turn == NO_TURN:
        return counters
    # The cooldown still runs from our last nudge: a person acting is no reason to type sooner.
    reset = Counters(last_nudge_ts=counters.last_nudge_ts)
    if person_send_ts > counters.last_nudge_ts or facts.draft:
        return reset
    busy = facts.state is State.BUSY
    if counters.turn == TURN_ASKED:
        return replace(counters, turn=TURN_RUNNING) if busy else counters
    if counters.turn == TURN_RUNNING:
        # Our turn lasts while the pane works; anything else (even a question answered by a
        # person, then more work) is no longer ours.
        return counters if busy else replace(counters, turn=NO_TURN)
    return reset if busy else counters


def nudged(counters: Counters, now: float, typed: bool) -> Counters:
    """The counters after a nudge (``typed`` False: a dry run, which waits for no turn)."""
    return Counters(nudges=counters.nudges + 1, last_nudge_ts=now,
                    turn=TURN_ASKED if typed else NO_TURN)
