"""What the panes' agents spent: the stored tokens (app.observe.usage) added up by pane, day or
host and priced (app.base.prices), and whether a budget is used up.

Pure: the callers read the rows (``StoreReader.usage()``, ``writer.usage.rows()``) and give them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.base.prices import Budget, PriceTable, money, tokens_text

TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")


@dataclass
class Figures:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_usd: float | None = None  # None: no model of these rows has a price
    unpriced: int = 0  # tokens of models without a price (in the counts, not in the cost)

    def add(self, row: Mapping[str, Any], prices: PriceTable) -> None:
        tokens = {kind: int(row.get(kind) or 0) for kind in TOKEN_KINDS}
        self.input += tokens["input"]
        self.output += tokens["output"]
        self.cache_read += tokens["cache_read"]
        self.cache_write += tokens["cache_write"]
        cost = prices.cost(str(row.get("model") or ""), tokens)
        if cost is None:
            self.unpriced += sum(tokens.values())
        else:
            self.cost_usd = (self.cost_usd or 0.0) + cost

    @property
    def budget_tokens(self) -> int:
        """The tokens a budget counts: a cache read re-reads the same context every turn, so
        counting it would make a token limit measure how long the conversation is."""
        return self.input + self.output + self.cache_write

    def public(self) -> dict[str, Any]:
        return {"input": self.input, "output": self.output, "cache_read": self.cache_read,
                "cache_write": self.cache_write,
                "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6)}


def totals(rows: Iterable[Mapping[str, Any]], prices: PriceTable,
           key: Callable[[Mapping[str, Any]], str]) -> dict[str, Figures]:
    """The rows added up by ``key`` (say ``lambda r: r["id"]``), each priced."""
    found: dict[str, Figures] = {}
    for row in rows:
        found.setdefault(key(row), Figures()).add(row, prices)
    return found


def over_budget(worker_id: str, rows: Iterable[Mapping[str, Any]],
                resets: Mapping[str, Mapping[str, Any]], budget: Budget, today: str) -> str:
    """Why automation must leave the pane alone ("" when it need not): the limit its own spend
    or today's spend of every pane passed, counted from the person's last reset."""
    if not budget.limited:
        return ""
    prices = budget.table()
    pane = Figures()
    day = Figures()
    for row in rows:
        if row.get("id") == worker_id:
            pane.add(row, prices)
        if row.get("day") == today:
            day.add(row, prices)
    checks = (("pane", pane, resets.get(worker_id), budget.pane_usd, budget.pane_tokens),
              ("today", day, resets.get(f"day:{today}"), budget.day_usd, budget.day_tokens))
    for scope, figures, reset, usd_limit, token_limit in checks:
        spent_usd = (figures.cost_usd or 0.0) - float((reset or {}).get("usd") or 0.0)
        spent_tokens = figures.budget_tokens - int((reset or {}).get("tokens") or 0)
        if usd_limit and spent_usd >= usd_limit:
            return f"{scope} spent {money(spent_usd)} of its {money(usd_limit)} budget"
        if token_limit and spent_tokens >= token_limit:
            return (f"{scope} used {tokens_text(spent_tokens)} tokens of its "
                    f"{tokens_text(token_limit)} budget")
    return ""
