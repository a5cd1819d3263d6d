"""Turn one verdict per poll, plus what hooks and ``send`` said, into a reported state.

Pure: no I/O. The watcher and ``wait`` feed it one observation per pane per poll; the timeline
replay in the tests feeds it one recorded frame per poll, so all of them run the same rules.

The screen is the judge; other signals only move it earlier or hold it back:

1. A screen showing NEEDS_CONFIRMATION, BUSY or ERROR wins over every hook.
2. An agent's "permission" hook makes the pane NEEDS_CONFIRMATION at once, for as long as the
   screen it arrived on stays up (the prompt the hook announced).
3. A "turn started" hook or a ``send`` restarts the stability count, like a screen change: the
   pane is BUSY until the screen has been still for the stability window after it. So a lost
   Stop hook delays READY by one window at most and never keeps a pane BUSY for good.
4. After a ``send``, READY is not believed until the pane visibly left READY (a busy screen or a
   turn-start hook) or ``send_grace_s`` passed: right after Enter the old idle screen is still up.
5. A "turn ended" hook newer than the turn's start lets the first screen after it that shows the
   idle prompt be READY at once, without the stability window, for as long as that screen stays
   up. A turn-end that is not newer than the moment the pane was seen leaving READY after the
   last send belongs to the previous turn and is ignored.
   Some releases draw no end mark at all (Codex before 0.160): their packs call a finished turn
   BUSY with the reason ``no_end_mark``, since it looks like a pause in a streaming reply. That
   guess, and only that one, gives way to a valid turn end (a hook, or the title's spinner
   stopping) once the screen has been still for END_MARK_QUIET_S and the turn end is
   END_MARK_AFTER_S old: the first screen that settles after it is the finished one. READY then
   lasts while that screen stays up. Without such a signal the pane stays BUSY: no stillness
   alone may call it finished. The pane's title is the other witness: when it is the CLI's own
   title for "not working" (``Pack.stopped_titles``: Codex's bare project name, no spinner
   frame) and the screen has been still for the stability window, the guess gives way too, even
   if no turn end was seen (a watcher started after the turn). A spinner title, or none, keeps
   it BUSY. The input box's prompt glyph is the third witness where the pack names it
   (``Pack.working_prompt``: Claude Code draws it dim while a turn runs): a styled capture with
   the glyph at rest counts as the stopped title does.
6. Anti-flap: a new state must hold for its configured polls before it is reported (READY has
   the stability window instead). Leaving READY is always immediate. UNKNOWN is a state like the
   others here: a known state gives way to it only after ``unknown_polls`` polls and
   ``unknown_min_s`` seconds (one poll interval), so a screen that redraws on a timer, or a
   command line just run whose program tmux does not name yet, cannot flip BUSY and UNKNOWN.
7. A resize: for a moment after the pane changed size, a changed screen that still reads as the
   reported state is no change (no "Screen is changing", no new stability run, ``last_change``
   kept: herding's stall clock goes on), and even READY is left only after the anti-flap hold,
   so a half-drawn frame is not a transition.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from app.base import settings
from app.base.model import State, Verdict

# The hook ``event`` names (see app/observe/hookevents.py) grouped by what they say about the turn.
TURN_START_EVENTS = frozenset({"turn_start", "working"})
TURN_END_EVENTS = frozenset({"turn_end", "idle"})
PERMISSION_EVENTS = frozenset({"permission"})
# Claude Code's hook names that count subagents (design/states.md, "Background work").
SUBAGENT_START, SUBAGENT_STOP = "SubagentStart", "SubagentStop"
SESSION_BOUNDS = frozenset({"SessionStart", "SessionEnd"})
# The reason a hook's evidence gives; the terminal's signals give "title_event" and the like.
HOOK_EVENT = "hook_event"


@dataclass(frozen=True)
class Signals:
    """The newest time (epoch seconds; 0 = never) of each kind of evidence besides the screen."""

    sent: float = 0.0
    turn_start: float = 0.0
    turn_end: float = 0.0
    permission: float = 0.0
    last_hook: str = ""  # the CLI's own name of the newest hook event, for people
    last_hook_ts: float = 0.0
    # The terminal's own signal that moved the turn last (app.observe.signals), for people.
    last_terminal: str = ""
    # The pane's newest title is its CLI's own "stopped" title (Pack.title_says_stopped).
    title_stopped: bool = False
    # The screen's styled capture drew the input box's prompt glyph at rest, where the CLI draws
    # it dim while a turn runs (Pack.working_prompt).
    prompt_at_rest: bool = False
    # Subagents the agent's hooks said started and not yet stopped (Claude Code's
    # SubagentStart/SubagentStop): a background one outlives the turn's Stop and resumes it.
    subagents: int = 0
    # The channel that gave the newest turn start, turn end and permission, as a reason names it:
    # "hook_event", or the terminal's "title_event" / "progress_event".
    turn_start_by: str = HOOK_EVENT
    turn_end_by: str = HOOK_EVENT
    permission_by: str = HOOK_EVENT

    def with_event(self, kind: str, event: str, name: str, ts: float) -> Signals:
        """Fold one row of the events table in (rows arrive in store order), or one of the
        terminal's signals (``kind`` "terminal"), which weighs what the same hook would."""
        if kind == "send":
            return replace(self, sent=max(self.sent, ts))
        if kind == "terminal":
            hooked = replace(self, last_terminal=name or event)
        elif kind != "hook":  # a refusal (app.act.gate): nothing reached the pane
            return self
        else:
            hooked = replace(self, last_hook=name or event, last_hook_ts=ts) \
                if ts >= self.last_hook_ts else self
            hooked = replace(hooked, subagents=running_subagents(self.subagents, name))
        by = HOOK_EVENT if kind == "hook" else f"{(name or event).partition(':')[0]}_event"
        if event in TURN_START_EVENTS:
            return replace(hooked, turn_start=max(self.turn_start, ts),
                           turn_start_by=by if ts >= self.turn_start else self.turn_start_by)
        if event in TURN_END_EVENTS:
            return replace(hooked, turn_end=max(self.turn_end, ts),
                           turn_end_by=by if ts >= self.turn_end else self.turn_end_by)
        if event in PERMISSION_EVENTS:
            return replace(hooked, permission=max(self.permission, ts),
                           permission_by=by if ts >= self.permission else self.permission_by)
        return hooked


def running_subagents(running: int, hook_name: str) -> int:
    """The count of running subagents after one hook event (the CLI's own name). A session that
    starts or ends has none: a SubagentStop lost with a killed agent does not outlive it."""
    if hook_name == SUBAGENT_START:
        return running + 1
    if hook_name == SUBAGENT_STOP:
        return max(0, running - 1)
    if hook_name in SESSION_BOUNDS:
        return 0
    return running


NO_SIGNALS = Signals()
# A turn-end hook can vouch for an idle screen only this soon after it fired; an older one (from
# before a prompt the user typed in directly, say) says nothing about today's screen.
TURN_END_ARM_S = 3.0
# The reason a pack gives for BUSY when the screen shows a reply but cannot show its end.
NO_END_MARK = "no_end_mark"
# Such a screen is the finished one once a turn end came and it has been still this long (its
# last words are drawn within a frame or two of the end, not after a still spell)...
END_MARK_QUIET_S = 0.15
# ...and the turn end is this old: a screen captured at the very moment of the signal may not
# show the last words yet, and a screen once vouched for is never vouched for again.
END_MARK_AFTER_S = 0.1


@dataclass(frozen=True)
class Policy:
    """How much evidence each state needs (the ``[states]`` part of the config)."""

    stable_polls: int = 3
    ready_min_s: float = settings.DEFAULT_READY_MIN_S
    busy_polls: int = settings.DEFAULT_BUSY_POLLS
    confirmation_polls: int = settings.DEFAULT_CONFIRMATION_POLLS
    error_polls: int = settings.DEFAULT_ERROR_POLLS
    send_grace_s: float = settings.DEFAULT_SEND_GRACE_S
    # A screen no rule reads, after one we could read, is more often a moment between two
    # redraws than news; anything but READY stands until UNKNOWN held this many polls.
    unknown_polls: int = 3
    # ...and this many seconds: a shell's command line just run stays on screen while tmux still
    # names the shell as the pane's program (the watcher lists panes once per interval), so
    # polls alone, which control mode makes fast, would let `sleep 600` flip BUSY, UNKNOWN, BUSY.
    unknown_min_s: float = 0.0

    @classmethod
    def from_settings(cls, settings: settings.WatchSettings, pack_stable_polls: int) -> Policy:
        return cls(
            stable_polls=settings.stable_polls or pack_stable_polls,
            ready_min_s=settings.ready_min_s,
            busy_polls=settings.busy_polls,
            confirmation_polls=settings.confirmation_polls,
            error_polls=settings.error_polls,
            send_grace_s=settings.send_grace_s,
            unknown_min_s=settings.interval_s,
        )

    def hold(self, state: State) -> int:
        return {State.BUSY: self.busy_polls, State.NEEDS_CONFIRMATION: self.confirmation_polls,
                State.ERROR: self.error_polls, State.UNKNOWN: self.unknown_polls}.get(state, 1)


@dataclass(frozen=True)
class Assessment:
    """What we believe about one pane after the latest poll."""

    state: State = State.UNKNOWN
    state_entered: float = 0.0
    last_change: float = 0.0  # when the screen last differed from the poll before
    screen_hash: str | None = None
    stable_count: int = 0  # consecutive polls without a change or new busy evidence
    stable_since: float = 0.0  # when that run of polls began
    verdict: Verdict | None = None
    reasons: tuple[str, ...] = ()
    summary: str = ""
    actions_needed: str = ""
    confidence: int = 0
    # Which signals were looked at and what each said, e.g. ("screen=READY", "hook=Stop").
    signals: tuple[str, ...] = ()
    # Anti-flap: the state the evidence points to and for how many polls in a row.
    candidate: State | None = None
    candidate_count: int = 0
    candidate_since: float = 0.0
    # Bookkeeping for the signals: what was already taken into account.
    evidence_seen: float = 0.0  # newest send / turn-start folded into the stability count
    send_seen: float = 0.0
    departed_at: float = 0.0  # when the pane was first seen leaving READY after the last send
    permission_seen: float = 0.0
    permission_screen: str | None = None  # the screen a permission hook arrived on
    turn_end_armed: float = 0.0  # the turn-end hook that vouched for ``turn_end_screen``
    turn_end_screen: str | None = None

    def seconds_in_state(self, now: float) -> float:
        return max(0.0, now - self.state_entered)


def absorb(assessment: Assessment, signals: Signals) -> Assessment:
    """Take signals older than our first look as already accounted for.

    A pane first seen (or restored after a watcher restart) must not treat a send or a
    turn-start from before as news that restarts its stability, nor a permission hook from an
    earlier prompt (one cancelled with Esc fires no hook) as a prompt on today's screen.
    """
    # Nor a turn-end: it vouched for the screen of its day, and a prompt typed into the pane
    # since (no hook tells of that) may be streaming now, still between two lines of its reply.
    return replace(
        assessment,
        evidence_seen=max(assessment.evidence_seen, signals.sent, signals.turn_start),
        send_seen=max(assessment.send_seen, signals.sent),
        permission_seen=max(assessment.permission_seen, signals.permission),
        turn_end_armed=max(assessment.turn_end_armed, signals.turn_end),
    )


@dataclass
class _Draft:
    state: State
    confidence: int
    summary: str
    actions: str
    reasons: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Facts:
    """What one poll establishes before any state is chosen (the rules' inputs)."""

    first_sight: bool
    changed: bool
    busy_evidence: float
    fresh_evidence: bool
    stable_count: int
    stable_since: float
    settled: bool
    departed_at: float
    lacks_end_mark: bool
    awaiting_departure: bool
    permission_screen: str | None
    permission_active: bool
    turn_end_valid: bool
    turn_end_armed: float
    turn_end_screen: str | None
    turn_end_confirmed: bool
    stop_witnessed: bool  # no end mark, a still screen, and the title or prompt says it stopped


def assess(
    previous: Assessment | None,
    verdict: Verdict,
    screen_hash: str,
    now: float,
    stable_polls: int,
    *,
    policy: Policy | None = None,
    signals: Signals = NO_SIGNALS,
    redrawing: bool = False,
) -> Assessment:
    """Fold one poll's verdict and the pane's signals into its assessment (rules: module doc).
    ``redrawing``: the pane was just resized (rule 7)."""
    if policy is None or policy.stable_polls != stable_polls:
        policy = replace(policy or Policy(), stable_polls=stable_polls)
    first_sight = previous is None or previous.screen_hash is None
    prior = previous or Assessment(state_entered=now, last_change=now, stable_since=now)
    if first_sight:
        prior = absorb(prior, signals)
    facts = _establish(prior, verdict, screen_hash, now, policy, signals, first_sight,
                       redrawing)

    shown = [f"screen={verdict.state.value}"]
    if signals.last_hook:
        shown.append(f"hook={signals.last_hook}")
    if signals.last_terminal:
        shown.append(f"term={signals.last_terminal}")
    if signals.sent and now - signals.sent < 3600:
        shown.append("sent")

    draft = _choose(prior, verdict, facts, signals)
    candidate = draft.state
    same = candidate is prior.candidate
    candidate_count = prior.candidate_count + 1 if same else 1
    candidate_since = prior.candidate_since if same else now
    young = candidate_count < policy.hold(candidate) or (
        candidate is State.UNKNOWN and now - candidate_since < policy.unknown_min_s)
    state = candidate
    if (not first_sight and candidate is not prior.state
            and (prior.state is not State.READY or redrawing)
            and candidate is not State.READY and young):
        # Anti-flap: not yet held long enough. Never applied when leaving READY.
        draft = _Draft(prior.state, prior.confidence, prior.summary, prior.actions_needed,
                       [*draft.reasons, "holding"])
        state = prior.state

    state_entered = prior.state_entered if state is prior.state and not first_sight else now
    return Assessment(
        state=state,
        state_entered=state_entered,
        last_change=now if facts.changed else prior.last_change,
        screen_hash=screen_hash,
        stable_count=facts.stable_count,
        stable_since=facts.stable_since,
        verdict=verdict,
        reasons=tuple(draft.reasons),
        summary=draft.summary,
        actions_needed=draft.actions,
        confidence=draft.confidence,
        signals=tuple(shown),
        candidate=candidate,
        candidate_count=candidate_count,
        candidate_since=candidate_since,
        evidence_seen=max(prior.evidence_seen, facts.busy_evidence),
        send_seen=max(prior.send_seen, signals.sent),
        departed_at=facts.departed_at,
        permission_seen=max(prior.permission_seen, signals.permission),
        turn_end_armed=facts.turn_end_armed,
        turn_end_screen=facts.turn_end_screen,
        permission_screen=facts.permission_screen,
    )


def _establish(prior: Assessment, verdict: Verdict, screen_hash: str, now: float,
               policy: Policy, signals: Signals, first_sight: bool,
               redrawing: bool = False) -> _Facts:
    """Stability, the send's departure, the permission screen and the turn-end's screen."""
    # A screen redrawn for a new size that still reads as what was reported is the same screen.
    changed = screen_hash != prior.screen_hash and not (
        redrawing and verdict.state is prior.state)
    busy_evidence = max(signals.sent, signals.turn_start)
    fresh_evidence = busy_evidence > prior.evidence_seen
    restarted = changed or fresh_evidence
    stable_count = 1 if restarted else prior.stable_count + 1
    stable_since = now if restarted else prior.stable_since
    settled = stable_count >= policy.stable_polls and now - stable_since >= policy.ready_min_s

    # The send bookkeeping: a new send forgets the previous departure.
    departed_at = 0.0 if signals.sent > prior.send_seen else prior.departed_at
    # A reply with no end mark reads BUSY before, during and after the turn: no sign of leaving.
    lacks_end_mark = verdict.state is State.BUSY and NO_END_MARK in verdict.reasons
    if signals.sent and not departed_at and (
            (verdict.state in (State.BUSY, State.NEEDS_CONFIRMATION, State.ERROR)
             and not lacks_end_mark)
            or signals.turn_start > signals.sent):
        departed_at = now
    awaiting_departure = bool(signals.sent) and not departed_at \
        and now - signals.sent < policy.send_grace_s

    permission_screen = prior.permission_screen
    if signals.permission > prior.permission_seen:
        permission_screen = screen_hash
    permission_active = (
        signals.permission > max(signals.turn_start, signals.turn_end, signals.sent)
        and screen_hash == permission_screen
    )
    turn_began = max(signals.turn_start, signals.sent, departed_at)
    turn_end_valid = signals.turn_end > turn_began and signals.turn_end > 0
    # A turn-end vouches for one screen only: the first idle-looking screen after it. If that
    # screen changes, the hook says nothing about the new one (output may be streaming again).
    armed_for, armed_screen = prior.turn_end_armed, prior.turn_end_screen
    if armed_screen is not None and screen_hash != armed_screen:
        # Once left, the vouched screen is not vouched for again if it comes back: Gemini CLI
        # clears a typed prompt a frame before echoing it, the very picture of its idle screen.
        armed_screen = None
    if (turn_end_valid and verdict.state is State.READY and signals.turn_end > armed_for
            and now - signals.turn_end <= TURN_END_ARM_S):
        armed_for, armed_screen = signals.turn_end, screen_hash
    if lacks_end_mark and turn_end_valid and signals.turn_end > armed_for \
            and now >= end_mark_settles(stable_since, signals.turn_end) \
            and not awaiting_departure:
        # The reply may have been drawn a moment after the signal: whatever screen settles
        # first after it is the finished one.
        armed_for, armed_screen = signals.turn_end, screen_hash
    turn_end_confirmed = turn_end_valid and armed_for == signals.turn_end \
        and screen_hash == armed_screen
    cli_stopped = signals.title_stopped or signals.prompt_at_rest
    stop_witnessed = lacks_end_mark and cli_stopped and settled and not awaiting_departure
    return _Facts(
        first_sight=first_sight, changed=changed, busy_evidence=busy_evidence,
        fresh_evidence=fresh_evidence, stable_count=stable_count, stable_since=stable_since,
        settled=settled, departed_at=departed_at, lacks_end_mark=lacks_end_mark,
        awaiting_departure=awaiting_departure, permission_screen=permission_screen,
        permission_active=permission_active, turn_end_valid=turn_end_valid,
        turn_end_armed=armed_for, turn_end_screen=armed_screen,
        turn_end_confirmed=turn_end_confirmed, stop_witnessed=stop_witnessed,
    )


def end_mark_settles(stable_since: float, turn_end: float) -> float:
    """When a screen still since ``stable_since`` becomes the finished one for a release that
    draws no end mark, after a turn end at ``turn_end`` (rule 5)."""
    return max(stable_since + END_MARK_QUIET_S, turn_end + END_MARK_AFTER_S)


def awaits_end_mark_settling(assessment: Assessment, signals: Signals) -> float:
    """When a pane whose screen lacks an end mark can be READY without new output, for a turn
    end not yet taken (0: no such moment to wait for), so the watcher looks again then."""
    verdict = assessment.verdict
    turn_began = max(signals.turn_start, signals.sent, assessment.departed_at)
    if (verdict is None or verdict.state is not State.BUSY or NO_END_MARK not in verdict.reasons
            or signals.turn_end <= max(assessment.turn_end_armed, turn_began)):
        return 0.0
    return end_mark_settles(assessment.stable_since, signals.turn_end)


def _choose(prior: Assessment, verdict: Verdict, facts: _Facts, signals: Signals) -> _Draft:
    """The state this poll's evidence supports, before anti-flap (the fixed order of rules)."""
    draft = _Draft(verdict.state, verdict.confidence, verdict.summary, verdict.actions_needed,
                   list(verdict.reasons))
    if facts.lacks_end_mark and facts.turn_end_confirmed:
        draft = _Draft(State.READY, 80, "The turn ended (its hook or title said so; this "
                       "release draws no end mark)", "", [*verdict.reasons, signals.turn_end_by])
    elif facts.stop_witnessed:
        witness, said = ("title_stopped", "the pane's title says the CLI stopped") \
            if signals.title_stopped else ("prompt_at_rest", "the input box's prompt is no "
                                           "longer dim")
        draft = _Draft(State.READY, 75, f"The turn ended ({said}; this release draws no end "
                       "mark)", "", [*verdict.reasons, witness])
    elif draft.state in (State.NEEDS_CONFIRMATION, State.BUSY, State.ERROR, State.EXITED):
        if draft.state is State.BUSY and facts.turn_end_valid:
            draft.reasons.append("screen_veto")  # the hook said done; the screen says not yet
    elif facts.permission_active:
        draft = _Draft(State.NEEDS_CONFIRMATION, 90, "The agent is asking for permission",
                       "Answer the prompt in the pane", [*verdict.reasons, signals.permission_by])
    elif facts.first_sight:
        draft.state, draft.confidence = State.UNKNOWN, min(draft.confidence, 30)
        draft.reasons.append("settling")
    elif draft.state is State.READY and facts.turn_end_confirmed \
            and not facts.awaiting_departure:
        draft.reasons.append(signals.turn_end_by)
    elif facts.awaiting_departure:
        draft = _Draft(State.BUSY, 70, "Instruction sent; waiting for the agent to start", "",
                       [*verdict.reasons, "sent"])
    elif facts.settled:
        draft.reasons.append("stable_for_n")
        if facts.fresh_evidence or signals.turn_start > signals.turn_end:
            # A turn-start with no turn-end since, yet a still idle screen: the Stop was lost.
            draft.reasons.append("screen_overrides_hook")
    elif facts.changed:
        # A moving screen with no busy marker: something is still being written.
        draft = _Draft(State.BUSY, 60, "Screen is changing", "", [*verdict.reasons,
                                                                  "screen_changing"])
    elif signals.turn_start > signals.turn_end or facts.stable_count == 1:
        # Same screen, but a send or a turn-start hook since it settled: work has begun.
        why = "sent" if signals.sent >= signals.turn_start else signals.turn_start_by
        draft = _Draft(State.BUSY, 70, "The agent is working", "", [*verdict.reasons, why])
    else:
        # Same screen as last poll, not yet stable long enough: hold what we reported.
        draft = _Draft(prior.state, prior.confidence, prior.summary, prior.actions_needed,
                       [*verdict.reasons, "settling"])
    return draft
