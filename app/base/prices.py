"""What a model's tokens cost: the price table shipped beside this module (``prices.toml``),
with the config file's ``[prices."MODEL"]`` tables over it.

Plain data and the standard library: the CLI prices ``status`` and ``cost`` with it, the herd and
the cycle their budgets.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.base.settings_table import default

KINDS = ("input", "output", "cache_write", "cache_read")
_SHIPPED = Path(__file__).with_name("prices.toml")


@dataclass(frozen=True)
class Price:
    """USD per million tokens of each kind."""

    input: float
    output: float
    cache_write: float
    cache_read: float

    def of(self, tokens: Mapping[str, Any]) -> float:
        return sum(float(getattr(self, kind)) * int(tokens.get(kind) or 0)
                   for kind in KINDS) / 1_000_000


class PriceError(ValueError):
    """A [prices."MODEL"] table that is not four non-negative numbers (one line)."""


def parse_prices(tables: Mapping[str, Any], where: str) -> dict[str, Price]:
    """``{model: {input, output, cache_write, cache_read}}`` as TOML gave it; PriceError names
    the first thing wrong. A kind left out costs nothing."""
    prices: dict[str, Price] = {}
    for model, table in tables.items():
        if not isinstance(table, Mapping):
            raise PriceError(f"{where}: [prices.{model!r}] must be a table")
        unknown = sorted(set(table) - set(KINDS))
        if unknown:
            raise PriceError(f"{where}: [prices.{model!r}] has no key {unknown[0]!r} "
                             f"(known: {', '.join(KINDS)})")
        values = {}
        for kind in KINDS:
            value = table.get(kind, 0.0)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                raise PriceError(f"{where}: [prices.{model!r}] {kind} must be a number ≥ 0 "
                                 f"(USD per million tokens)")
            values[kind] = float(value)
        prices[str(model)] = Price(**values)
    return prices


_shipped: dict[str, Price] | None = None


def shipped() -> dict[str, Price]:
    global _shipped
    if _shipped is None:
        text = _SHIPPED.read_text(encoding="utf-8")
        if sys.version_info >= (3, 11):
            import tomllib

            data: dict[str, Any] = tomllib.loads(text)
        else:  # pragma: no cover - Python 3.10
            import tomlkit

            data = tomlkit.parse(text).unwrap()
        _shipped = parse_prices(data, str(_SHIPPED))
    return _shipped


class PriceTable:
    """The shipped prices with the config's over them."""

    def __init__(self, overrides: Mapping[str, Price] | None = None) -> None:
        self._prices = {**shipped(), **(overrides or {})}
        # Longest first: "claude-opus-4-5" before "claude-opus-4".
        self._prefixes = sorted(self._prices, key=len, reverse=True)

    def price(self, model: str) -> Price | None:
        found = self._prices.get(model)
        if found is not None:
            return found
        for name in self._prefixes:
            if model.startswith(name):
                return self._prices[name]
        return None

    def cost(self, model: str, tokens: Mapping[str, Any]) -> float | None:
        """USD for ``tokens`` (by kind) of ``model``; None when the model has no price."""
        price = self.price(model)
        return None if price is None else price.of(tokens)


@dataclass(frozen=True)
class Budget:
    """The ``[budget]`` table and the ``[prices."MODEL"]`` tables of the config file: what
    automation may spend, and how it is priced. A limit of 0 is no limit."""

    pane_usd: float = default("budget.pane_usd", float)
    pane_tokens: int = default("budget.pane_tokens", int)
    day_usd: float = default("budget.day_usd", float)
    day_tokens: int = default("budget.day_tokens", int)
    prices: Mapping[str, Price] = field(default_factory=dict)  # the config's, over the shipped

    @property
    def limited(self) -> bool:
        return bool(self.pane_usd or self.pane_tokens or self.day_usd or self.day_tokens)

    def table(self) -> PriceTable:
        return PriceTable(self.prices)


def money(usd: float | None) -> str:
    if usd is None:
        return "-"
    return f"${usd:.2f}" if usd >= 0.995 or usd == 0 else f"${usd:.3f}"


def tokens_text(count: int) -> str:
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.2f}M"
