"""Work an agent started that will resume its turn, as its hooks and its teammates tell it.

The screen is the first witness of background work (a pack rule's ``background_work`` reason,
app.base.background). Two more can only hold a pane back from READY, never make it READY:

- Claude Code's SubagentStart/SubagentStop hooks: a subagent started and not yet stopped, after
  the turn's Stop, runs in the background and resumes the turn with its report;
- teammates: panes whose ``lead`` is this pane (design/states.md, "Leads and teammates") that
  are working, since the lead waits for them.
"""

from __future__ import annotations

from dataclasses import replace

from app.base.background import BACKGROUND_REASON, SCREEN_QUOTE, plural
from app.base.model import State, Verdict
from app.observe.packs import GENERIC_PACK

# Packs of panes where no agent runs: nothing there waits for subagents or teammates.
PLAIN_PACKS = frozenset({"shell", GENERIC_PACK})
# The reason (beside BACKGROUND_REASON) and rule of a verdict held back by hooks or teammates.
SUBAGENT_HOOKS = "subagent_hooks"
TEAMMATES_WORKING = "teammates_working"
HELD_RULE = "background-hold"


def hold_for_background(verdict: Verdict, subagents: int, teammates: int = 0) -> Verdict:
    """``verdict``, or BUSY when it would let the pane be READY (or UNKNOWN) while ``subagents``
    the hooks counted or ``teammates`` working in panes of their own are still at it. A screen
    that asks or fails keeps its verdict: a person is needed whatever runs behind it."""
    if verdict.state not in (State.READY, State.UNKNOWN) or not (subagents or teammates):
        return verdict
    reasons, said = [BACKGROUND_REASON], []
    if subagents:
        reasons.append(SUBAGENT_HOOKS)
        said.append(f"{plural(subagents, 'background agent')} running (SubagentStart hooks "
                    "without their SubagentStop)")
    if teammates:
        reasons.append(TEAMMATES_WORKING)
        said.append(f"{plural(teammates, 'teammate')} working in panes of their own")
    screen = f"{SCREEN_QUOTE}{verdict.summary}" if verdict.summary else ""
    return replace(verdict, state=State.BUSY, reasons=(*reasons, *verdict.reasons),
                   rule_id=HELD_RULE, summary="; ".join(said) + screen, actions_needed="",
                   options=())
