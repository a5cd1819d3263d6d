"""What the watcher runs after each tick: a list of ``Step``s, of which it knows only this.

Herding and the report cycle are steps. A step first sees every pane the tick assessed
(``observe``: it returns the status-row columns it owns, such as ``herd_eligible`` or ``cycle``),
then acts once the tick's rows are in the store (``act``: it may type, through the gate, or run a
check). The watcher imports no step; the daemon builds the list.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol

from app.observe.pane import Tracked


class Step(Protocol):
    def observe(self, tracked: Tracked, now: float) -> dict[str, Any]:
        """A pane just assessed by this tick; the status-row columns this step owns."""

    def act(self, panes: Mapping[str, Tracked], gone: Collection[str], now: float) -> None:
        """After the tick's rows are written: act on the panes (``gone``: ids that ended)."""

    def next_due(self, now: float) -> float | None:
        """When (epoch seconds) this step needs a turn although no pane changed (a check it
        runs may have finished); None: only when a tick writes something."""

    def close(self) -> None:
        """The watcher stops: let go of threads and processes."""
