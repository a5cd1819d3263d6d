"""Whether a pane's agent spent its [budget]: the one check herding and the report cycle make
before they type (app.act.herd.step, app.act.cycle.step). A person's own `send` never asks.

The stored usage is read once per tick, and only when a limit is set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.base.prices import Budget
from app.observe.spend import over_budget
from app.observe.usage import day_of

if TYPE_CHECKING:
    from app.adapters.store import StoreWriter

BUDGET = "budget"  # the reason herding and the cycle give


class BudgetCheck:
    def __init__(self, store: StoreWriter, budget: Budget) -> None:
        self.store = store
        self.budget = budget
        self._read_at: float | None = None
        self._rows: list[dict[str, Any]] = []
        self._resets: dict[str, dict[str, Any]] = {}

    def budget_exceeded(self, worker_id: str, now: float) -> str:
        """Why the pane is past its budget (its spend against the limit), "" when it is not."""
        if not self.budget.limited:
            return ""
        if self._read_at != now:
            self._read_at = now
            self._rows = self.store.usage.rows()
            self._resets = self.store.usage.resets()
        return over_budget(worker_id, self._rows, self._resets, self.budget, day_of(now))
