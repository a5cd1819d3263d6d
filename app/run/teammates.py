"""Leads and teammates among the panes of one watcher (design/states.md, "Leads and teammates").

A pane ``create`` opened from inside another pane of the same server names that pane its lead
(``ptys.lead``). Each pane counts its teammates at work (those BUSY), and the count holds its
READY back (app.observe.background_work): the lead's agent waits for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.adapters.store import StoreWriter
from app.base.model import State
from app.observe.pane import Tracked


def read_leads(store: StoreWriter, tracked: Mapping[str, Tracked]) -> None:
    """Each tracked pane's lead as the store has it (``create`` may record it after the
    watcher first saw the window, so it is read again on every full poll)."""
    leads = {str(row["id"]): str(row["lead"]) for row in store.rows(
        "SELECT id, lead FROM ptys WHERE lead IS NOT NULL AND lead != ''")}
    for wid, one in tracked.items():
        one.lead = leads.get(wid, "")


def working(tracked: Iterable[Tracked]) -> dict[str, int]:
    """Lead worker id -> how many of its teammates are BUSY now."""
    counts: dict[str, int] = {}
    for one in tracked:
        a = one.assessment
        if one.lead and a is not None and a.state is State.BUSY:
            counts[one.lead] = counts.get(one.lead, 0) + 1
    return counts


def recount(tracked: Mapping[str, Tracked], among: Iterable[str]) -> list[str]:
    """Set the count of each pane in ``among``; the ones whose count moved (to judge again)."""
    counts = working(tracked.values())
    moved = []
    for wid in among:
        one = tracked[wid]
        if counts.get(wid, 0) != one.teammates:
            one.teammates = counts.get(wid, 0)
            moved.append(wid)
    return moved


def stale_counts(tracked: Mapping[str, Tracked]) -> list[Tracked]:
    """The panes whose stored count no longer matches their teammates (one was judged since)."""
    counts = working(tracked.values())
    return [one for wid, one in tracked.items() if counts.get(wid, 0) != one.teammates]
