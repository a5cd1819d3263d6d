"""Pack patterns with a time budget: a pattern from a user's pack must not hang the watcher."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from app.base.errors import ConductorError

# A user's pack may hold a pattern that backtracks for hours on some screen (``(a|aa)+$``).
# Patterns therefore run on the ``regex`` engine, whose matching takes a timeout: every search
# gets what is left of the budget of the classification it belongs to (see ``time_limit``), or
# DEFAULT_MATCH_TIMEOUT_S outside one. Its V0 syntax is the ``re`` syntax the packs are written in.
DEFAULT_MATCH_TIMEOUT_S = 1.0
_budget = threading.local()


class PatternTimeout(ConductorError):
    """A pack pattern ran past its time budget on a screen."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Every pattern searched inside shares one budget of ``seconds`` (per thread)."""
    outer = getattr(_budget, "deadline", None)
    _budget.deadline = time.monotonic() + seconds
    try:
        yield
    finally:
        _budget.deadline = outer


class BoundedPattern:
    """The part of ``re.Pattern``'s interface the packs use, with every match bounded in time."""

    __slots__ = ("_compiled", "groupindex", "pattern")

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled
        self.pattern: str = compiled.pattern
        self.groupindex: Mapping[str, int] = compiled.groupindex

    def _timeout(self) -> float:
        deadline: float | None = getattr(_budget, "deadline", None)
        if deadline is None:
            return DEFAULT_MATCH_TIMEOUT_S
        return max(0.001, deadline - time.monotonic())

    def _run(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._compiled, method)(*args, timeout=self._timeout())
        except TimeoutError:
            raise PatternTimeout(f"pattern /{self.pattern}/ ran out of time") from None

    def search(self, text: str) -> Any:
        return self._run("search", text)

    def fullmatch(self, text: str) -> Any:
        return self._run("fullmatch", text)

    def finditer(self, text: str) -> Any:
        # Materialised here: the timeout covers the whole scan, not only the first match.
        try:
            return iter(list(self._compiled.finditer(text, timeout=self._timeout())))
        except TimeoutError:
            raise PatternTimeout(f"pattern /{self.pattern}/ ran out of time") from None

    def sub(self, replacement: str, text: str) -> Any:
        return self._run("sub", replacement, text)
