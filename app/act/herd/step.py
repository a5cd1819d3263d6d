"""What the watcher calls each tick for herding: judge every pane, then nudge the opted-in ones
that every gate and a rule agree on.

``annotate`` runs while the tick builds each pane's status row and returns the eligibility
fields for it (so ``status --json``, ``status.json`` and ``explain`` show them); ``act`` runs
after the tick's store transaction, applies the rules and types through ``handoff.send`` (or,
for a rule that may approve a dialog, presses its keys through ``app.act.gate.answer``) with the
screen the decision was made on, so a screen that moved in between refuses. Counters and
the decisions log are written in one transaction per tick. Nothing here may stop the watcher:
every failure is logged and the pane simply gets no nudge. A fault stays with its pane: a rule
whose pattern runs out of time (``rule_error``) or anything unexpected (``herd_fault``) blocks
that pane, logged once per change, while the other panes decide as usual.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from app.act.budget import BUDGET, BudgetCheck
from app.act.herd import eligibility, rules
from app.act.herd.eligibility import Counters, Decision, HerdSettings, PaneFacts
from app.act.steps import ActingStep
from app.base.errors import ConductorError
from app.base.model import Note, State
from app.observe.one_pane import target_of
from app.observe.pack_patterns import PatternTimeout, time_limit
from app.observe.packs import GENERIC_PACK

if TYPE_CHECKING:
    from app.act.herd.llmrule import Asker
    from app.observe.packs import Pack
    from app.observe.pane import Tracked

log = logging.getLogger(__name__)

NUDGED, DRY_RUN, BLOCKED = "nudged", "dry_run", "blocked"
# Wall-clock budget for one pane's regex rules on one screen: a rule whose pattern runs past it
# blocks that pane (``rule_error``) and is not run again on the same screen.
RULES_BUDGET_S = 0.5
_PRUNE_EVERY_S = 3600.0
_KEEP_LOG_S = 30 * 86400.0
# How long an approving rule's answer waits to see the dialog leave: the tick waits with it.
_ANSWER_CONFIRM_S = 2.0


@dataclass
class _Pending:
    tracked: Tracked
    facts: PaneFacts
    counters: Counters
    decision: Decision
    row: dict[str, Any]
    over_budget: str = ""  # why it is past its budget


@dataclass(frozen=True)
class Outcome:
    outcome: str  # NUDGED, DRY_RUN, BLOCKED
    reason: str  # the gate, or what stopped the rules ("no_rule", "llm_error", "refused", ...)
    rule_id: str = ""
    text: str = ""
    detail: str = ""
    seen: str = ""  # the screen region(s) the rules looked at ("8 lines above the box")


class HerdStep(ActingStep[HerdSettings]):
    source = "herd"

    def setup(self) -> None:
        self._asker: Asker | None = None
        self._tick: float | None = None
        self._rows: dict[str, dict[str, Any]] = {}
        self._person_sends: dict[tuple[str, int | None], float] = {}
        self._pending: dict[str, _Pending] = {}
        self._logged: dict[str, tuple[str, str, str]] = {}
        self._rule_sets: dict[str, tuple[float, rules.RuleSet | str]] = {}
        self._pruned_at = 0.0
        self._had_turn: set[str] = set()
        self._typed: dict[str, str] = {}  # the last nudge typed into each pane
        # Per pane: the screen (hash) and rule whose pattern ran out of time on it, and why.
        self._timed_out: dict[str, tuple[str | None, rules.Rule, str]] = {}
        self._budget = BudgetCheck(self.store, self.settings.budget)
        self._told_budget: set[str] = set()  # panes told they are past it, until a reset

    # --- during the tick ------------------------------------------------------------------------

    def observe(self, tracked: Tracked, now: float) -> dict[str, Any]:
        """The pane's herd fields for its status row; remembers the decision for :meth:`act`."""
        try:
            return self._annotate(tracked, now)
        except Exception:  # herding must never cost the pane its status
            log.exception("herd: pane %s skipped", tracked.worker_id)
            self._pending.pop(tracked.worker_id, None)
            return {"herd_eligible": 0, "herd_reason": "herd_fault"}

    def _annotate(self, tracked: Tracked, now: float) -> dict[str, Any]:
        if self._tick != now:
            self._tick = now
            self._pending.clear()
            self._rows = self.store.herd.herd_rows()
            # Only counters that could be reset need to know who sent what since their nudge.
            counting = [r.get("last_nudge_ts") or 0.0 for r in self._rows.values()
                        if r.get("enabled") and (r.get("nudges") or r.get("turn"))]
            self._person_sends = self.store.herd.person_sends(min(counting)) if counting else {}
        a = tracked.assessment
        if a is None:
            return {}
        row = self._rows.get(tracked.worker_id) or {}
        opted_in = bool(row.get("enabled"))
        signals = tracked.signals
        # A busy marker, not a moving screen: a CLI redrawing its banner has had no turn.
        if signals.sent or signals.turn_start or (
                a.verdict is not None and a.verdict.state is State.BUSY):
            self._had_turn.add(tracked.worker_id)
        spent = self._budget.budget_exceeded(tracked.worker_id, now) if opted_in else ""
        facts = PaneFacts(
            state=a.state, state_entered=a.state_entered, last_change=a.last_change,
            last_send=signals.sent, confidence=a.confidence, opted_in=opted_in,
            had_turn=tracked.worker_id in self._had_turn, dead=tracked.pane.dead,
            agent=agent_cli(tracked.pack), over_budget=bool(spent),
        )
        counters = Counters(nudges=row.get("nudges") or 0,
                            last_nudge_ts=row.get("last_nudge_ts") or 0.0,
                            turn=row.get("turn") or 0)
        unsent = False
        if opted_in and a.state in (State.READY, State.ERROR) and (
                counters.nudges
                or eligibility.needs_draft_check(facts, counters, self.settings, now)):
            draft = self._draft(tracked)
            facts = replace(facts, draft=draft is not None)
            # Our own nudge still in the prompt (its Enter was lost): blocks like any draft, but
            # it is no person acting, and it is said as what it is.
            unsent = draft is not None and _same_text(draft, self._typed.get(tracked.worker_id))
        person = self._person_sends.get((tracked.pane.pane_id, _server_pid(tracked)), 0.0)
        if opted_in and not unsent:
            counters = eligibility.observe(counters, facts, person)
        decision = eligibility.decide(facts, counters, self.settings, now)
        if unsent and decision.reason == "draft_in_prompt":
            decision = replace(decision, reason="nudge_unsent")
        self._pending[tracked.worker_id] = _Pending(tracked, facts, counters, decision, row,
                                                    spent)
        return {"herd_eligible": int(decision.eligible), "herd_reason": decision.reason}

    def _draft(self, tracked: Tracked) -> str | None:
        """The unsent text in the pane's prompt, or None."""
        pack, cursor = tracked.pack, tracked.screen.cursor
        if pack is None or pack.draft(tracked.text, cursor) is None:
            return None
        # Plain text cannot tell typing from a hint drawn dim in the empty box (Claude Code's
        # suggested next prompt): look again with the styles, as `send` does.
        from app.base.screen import normalise, without_dim

        try:
            styled = self.tmux.capture_styled(tracked.pane.pane_id)
        except ConductorError:
            return pack.draft(tracked.text, cursor)  # cannot tell: a person's text, which blocks
        return pack.draft(normalise(without_dim(styled)), cursor)

    # --- after the tick -------------------------------------------------------------------------

    def act(self, panes: Mapping[str, Tracked], gone: Collection[str], now: float
            ) -> dict[str, dict[str, Any]]:
        """Apply the rules to this tick's eligible panes, type the nudges, log the decisions.
        Its status-row column (``herd_eligible``) is written during the tick (observe): none
        moves here."""
        try:
            self._act(list(gone), now)
        except Exception:
            log.exception("herd: this tick's decisions failed; no nudge typed")
        return {}

    def _act(self, removed: list[str], now: float) -> None:
        updates: list[dict[str, Any]] = []
        log_rows: list[dict[str, Any]] = []
        for wid, pending in list(self._pending.items()):
            if not pending.facts.opted_in:
                continue
            counters = pending.counters
            outcome = self._apply_safely(pending, now) if pending.decision.eligible else \
                Outcome(BLOCKED, pending.decision.reason,
                        detail=pending.over_budget if pending.decision.reason == BUDGET else "")
            self._tell_budget(pending)
            if outcome.outcome in (NUDGED, DRY_RUN):
                counters = eligibility.nudged(counters, now, typed=outcome.outcome == NUDGED)
            stored = Counters(pending.row.get("nudges") or 0,
                              pending.row.get("last_nudge_ts") or 0.0, pending.row.get("turn") or 0)
            if counters != stored:
                updates.append({"id": wid, "nudges": counters.nudges,
                                "last_nudge_ts": counters.last_nudge_ts, "turn": counters.turn,
                                "updated_ts": now})
            row = self._log_row(pending, outcome, counters, now)
            if row is not None:
                log_rows.append(row)
        self._pending.clear()
        prune = now - self._pruned_at >= _PRUNE_EVERY_S
        if not (updates or log_rows or removed or prune):
            return
        with self.store.transaction() as conn:
            for update in updates:
                self.store.herd.upsert_herd(conn, update)
            for row in log_rows:
                self.store.herd.add_nudge(conn, row)
            self.store.herd.forget_herd(conn, removed)
            if prune:
                self.store.herd.prune_nudges(conn, now - _KEEP_LOG_S)
                self._pruned_at = now
        for wid in removed:
            self._logged.pop(wid, None)
            self._had_turn.discard(wid)
            self._typed.pop(wid, None)
            self._timed_out.pop(wid, None)

    def _tell_budget(self, pending: _Pending) -> None:
        """One notification when a pane goes past its budget; again only after a reset."""
        wid = pending.tracked.worker_id
        if not pending.over_budget:
            self._told_budget.discard(wid)
        elif wid not in self._told_budget:
            self._told_budget.add(wid)
            self._tell(pending.tracked, Note("herd", BUDGET, "needs you",
                                             f"herd stopped: {pending.over_budget}", urgent=True))

    def _apply_safely(self, pending: _Pending, now: float) -> Outcome:
        """:meth:`_apply`, with a fault confined to its pane: the other panes still decide."""
        try:
            return self._apply(pending, now)
        except Exception as exc:
            outcome = Outcome(BLOCKED, "herd_fault", detail=f"{type(exc).__name__}: {exc}"[:300])
            key = (outcome.outcome, outcome.reason, outcome.rule_id)
            if self._logged.get(pending.tracked.worker_id) != key:  # a traceback per change
                log.exception("herd: pane %s (%s) skipped", pending.tracked.name,
                              pending.tracked.worker_id)
            return outcome

    def _apply(self, pending: _Pending, now: float) -> Outcome:
        rule_set = self._rule_set(str(pending.row.get("rules") or self.settings.rules))
        if isinstance(rule_set, str):
            return Outcome(BLOCKED, "rules_error", detail=rule_set)
        context = self._context(pending, now)
        with time_limit(RULES_BUDGET_S):
            return self._first_rule(pending, rule_set, context)

    def _first_rule(self, pending: _Pending, rule_set: rules.RuleSet,
                    context: Mapping[str, object]) -> Outcome:
        """The outcome of the first rule that applies and matches, in the rule set's order."""
        tracked, decision, state = pending.tracked, pending.decision, pending.facts.state
        seen: list[str] = []  # for the log: a rule that saw the wrong lines is found by it
        for rule in rule_set.rules:
            if not rule.applies(state, decision.when, context):
                continue
            if rule.type == "regex":
                found = self._search(tracked, rule, seen)
                if isinstance(found, Outcome):
                    return found
                if found is None:
                    continue
                variables: dict[str, object] = {**context, **found}
            else:
                answer = self._ask(rule, pending, context)
                if answer is None:
                    return Outcome(BLOCKED, "llm_pending", rule.id)
                if answer.error:
                    return Outcome(BLOCKED, "llm_error", rule.id, detail=answer.error)
                if not answer.match:
                    continue
                variables = {**context, **answer.variables, rules.LLM_COMMAND: answer.command}
            text = rules.render(rule.command, variables)
            if not text or len(text) > rules.MAX_COMMAND_CHARS:
                return Outcome(BLOCKED, "bad_command", rule.id,
                               detail=f"rendered to {len(text)} characters")
            looked = seen[-1] if rule.type == "regex" else "the screen (LLM)"
            if pending.row.get("dry_run"):
                return Outcome(DRY_RUN, "", rule.id, text, seen=looked)
            return replace(self._type(pending, rule, text), seen=looked)
        return Outcome(BLOCKED, "no_rule", detail=f"rule set {rule_set.name}",
                       seen=", ".join(dict.fromkeys(seen)))

    def _search(self, tracked: Tracked, rule: rules.Rule, seen: list[str]
                ) -> dict[str, str] | Outcome | None:
        """A regex rule's match on the pane's screen, the region it saw added to ``seen``;
        ``rule_error`` when its pattern ran out of time (then not run again on the same
        screen)."""
        timed_out = self._timed_out.get(tracked.worker_id)
        if timed_out is not None and timed_out[:2] == (tracked.text_hash, rule):
            return Outcome(BLOCKED, "rule_error", rule.id, detail=timed_out[2])
        try:
            found, region = rule.look(tracked.text, tracked.pack)
            seen.append(region)
            return found
        except PatternTimeout as exc:
            detail = f"{exc} on this screen (budget {RULES_BUDGET_S:g}s)"[:300]
            self._timed_out[tracked.worker_id] = (tracked.text_hash, rule, detail)
            return Outcome(BLOCKED, "rule_error", rule.id, detail=detail)

    def _type(self, pending: _Pending, rule: rules.Rule, text: str) -> Outcome:
        from app.act import handoff

        tracked = pending.tracked
        target = target_of(tracked)
        try:
            if rule.approve and pending.facts.state is State.NEEDS_CONFIRMATION:
                # A dialog takes its own keys, never typed text: the rule's command names the
                # option ("approve", "refuse", a key or a label), as `conductor pty answer` does.
                from app.act import (
                    gate as keystrokes,  # not app.act.herd.eligibility, the herd's gates
                )

                keystrokes.answer(self.tmux, target, text, self.packs, self.watch_settings,
                                  self.store.workers_dir, origin="herd",
                                  expect_screen=tracked.stability_hash,
                                  confirm_s=_ANSWER_CONFIRM_S, writer=self.store)
            else:
                handoff.send(self.tmux, target, text, self.packs, self.watch_settings,
                             self.store.workers_dir, origin="herd",
                             expect_screen=tracked.stability_hash, agent_only=True,
                             writer=self.store)
        except handoff.Refused as exc:
            return Outcome(BLOCKED, "refused", rule.id, text, str(exc))
        except ConductorError as exc:
            return Outcome(BLOCKED, "send_failed", rule.id, text, str(exc))
        self._typed[tracked.worker_id] = text
        return Outcome(NUDGED, "", rule.id, text)

    def _ask(self, rule: rules.Rule, pending: _Pending, context: Mapping[str, object]
             ) -> Any:
        from app.act.herd.llmrule import Answer, Asker

        if self.llm is None or not self.llm.settings.enabled:
            return Answer(error="the LLM is off (set OPENROUTER_API_KEY)")
        tracked = pending.tracked
        if self.llm.settings.excluded(tracked.worker_id, tracked.name, tracked.pane.pane_id):
            return Answer(error="pane excluded from the LLM (llm.exclude)")
        if self._asker is None:
            self._asker = Asker(self.llm)
        key = (tracked.worker_id, tracked.text_hash or "", rule.id)
        return self._asker.answer(key, rule, tracked.text, context)

    def next_due(self, now: float) -> float | None:
        """Herding decides on what the panes show: only a tick that wrote gives it a turn."""
        return None

    def close(self) -> None:
        if self._asker is not None:
            self._asker.close()

    # --- helpers --------------------------------------------------------------------------------

    def _rule_set(self, spec: str) -> rules.RuleSet | str:
        """The rule set, reloaded when its file changes; a load error as text (logged once)."""
        try:
            path = rules.locate(spec)
            mtime = path.stat().st_mtime
        except (ConductorError, OSError) as exc:
            return self._remember_error(spec, 0.0, str(exc))
        cached = self._rule_sets.get(spec)
        if cached is not None and cached[0] == mtime:
            return cached[1]
        try:
            loaded: rules.RuleSet | str = rules.load(spec)
        except ConductorError as exc:
            return self._remember_error(spec, mtime, str(exc))
        self._rule_sets[spec] = (mtime, loaded)
        return loaded

    def _remember_error(self, spec: str, mtime: float, error: str) -> str:
        if self._rule_sets.get(spec) != (mtime, error):
            log.error("herd rules %s: %s; no nudges from them until fixed", spec, error)
            self._rule_sets[spec] = (mtime, error)
        return error

    def _context(self, pending: _Pending, now: float) -> dict[str, object]:
        tracked, facts = pending.tracked, pending.facts
        a = tracked.assessment
        waiting = now - facts.state_entered if facts.state in (
            State.READY, State.NEEDS_CONFIRMATION) else 0.0
        return {
            "state": facts.state.value, "summary": a.summary if a else "",
            "actions_needed": a.actions_needed if a else "", "waiting_s": round(waiting),
            "inactive_s": round(now - facts.last_change), "confidence": facts.confidence,
            "reasons": " ".join(a.reasons) if a else "",
            "cli": tracked.pack.name if tracked.pack else "", "cwd": tracked.pane.cwd,
            "name": tracked.name, "nudges": pending.counters.nudges,
            "goal": str(pending.row.get("goal") or ""),
        }

    def _log_row(self, pending: _Pending, outcome: Outcome, counters: Counters, now: float
                 ) -> dict[str, Any] | None:
        """A row for the decisions log when something happened or the verdict changed."""
        tracked = pending.tracked
        key = (outcome.outcome, outcome.reason, outcome.rule_id)
        if outcome.outcome == BLOCKED and self._logged.get(tracked.worker_id) == key:
            return None
        self._logged[tracked.worker_id] = key
        level = logging.INFO if outcome.outcome != BLOCKED else \
            logging.WARNING if outcome.reason in _FAULTS else logging.DEBUG
        log.log(level, "herd %s (%s): %s%s%s%s", tracked.name, tracked.worker_id,
                outcome.outcome, f" [{outcome.reason}]" if outcome.reason else "",
                f" rule {outcome.rule_id}" if outcome.rule_id else "",
                f": {outcome.text!r}" if outcome.text else
                f": {outcome.detail}" if outcome.reason in _FAULTS else "")
        if outcome.outcome == NUDGED:
            self._tell(tracked, Note(
                "herd", "nudged", f"herd nudge {counters.nudges}/{self.settings.max_nudges}",
                outcome.text))
        elif outcome.reason == "nudge_unsent":
            self._tell(tracked, Note("herd", "nudge_unsent", "needs you",
                                     "herd: the nudge sits unsent in its prompt", urgent=True))
        elif outcome.reason == "max_nudges":
            self._tell(tracked, Note(
                "herd", "max_nudges", "needs you",
                f"herd: max nudges reached ({counters.nudges}), still stuck", urgent=True))
        return {
            "id": tracked.worker_id, "ts": now, "name": tracked.name,
            "eligible": int(pending.decision.eligible), "outcome": outcome.outcome,
            "reason": outcome.reason, "rule_id": outcome.rule_id or None,
            "text": outcome.text or None, "state": pending.facts.state.value,
            "detail": (outcome.detail or _detail(pending, counters))
            + (f"; saw {outcome.seen}" if outcome.seen else ""),
        }

# Blocks that say something is wrong with the rules or the code, not with the pane's moment.
_FAULTS = frozenset({"rule_error", "herd_fault"})


def agent_cli(pack: Pack | None) -> bool:
    """Whether a pane judged by ``pack`` runs an agent CLI, whose prompt takes prose: a pack with
    an input box (where a prompt is typed) that is neither a shell's (``weak``: what is typed
    there runs as a command) nor the generic pack of any other program. None: not known yet."""
    return pack is not None and pack.input is not None and not pack.detect.weak \
        and pack.name != GENERIC_PACK


def _same_text(draft: str, typed: str | None) -> bool:
    # A draft comes back with wrapped lines joined by one space, maybe cut at the box's edge.
    if not typed:
        return False
    seen, sent = " ".join(draft.split()).rstrip("…"), " ".join(typed.split())
    # A short prefix ("Yes") is as likely a person's start as our cut-off text.
    return seen == sent or (len(seen) >= 20 and sent.startswith(seen))


def _server_pid(tracked: Tracked) -> int | None:
    pid = (tracked.pty_row or {}).get("server_pid")
    return int(pid) if pid is not None else None


def _detail(pending: _Pending, counters: Counters) -> str:
    d = pending.decision
    return (f"{d.when or '-'} {round(d.idle_s)}s, confidence {pending.facts.confidence}, "
            f"nudges {counters.nudges}")

