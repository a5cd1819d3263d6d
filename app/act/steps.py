"""What the watcher runs after each tick: a list of ``Step``s, of which it knows only this.

Herding and the report cycle are steps. A step first sees every pane the tick assessed
(``observe``: it returns the status-row columns it owns, such as ``herd_eligible`` or ``cycle``),
then acts once the tick's rows are in the store (``act``: it may type, through the gate, or run a
check). The watcher imports no step; the daemon builds the list.

Both steps type into panes and tell the person; what they need for that, besides their own
settings, is :class:`ActingStep`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from app.base.model import Note
from app.observe.pane import Tracked

if TYPE_CHECKING:
    from app.adapters.llm import LLMClient
    from app.adapters.store import StoreWriter
    from app.adapters.tmux import Tmux
    from app.base.settings import WatchSettings
    from app.observe.packs import Pack

log = logging.getLogger(__name__)

SettingsT = TypeVar("SettingsT")
# Worker id -> the status-row columns a step's act moved (already written to the store).
Moved = Mapping[str, Mapping[str, Any]]


class Step(Protocol):
    def observe(self, tracked: Tracked, now: float) -> dict[str, Any]:
        """A pane just assessed by this tick; the status-row columns this step owns."""

    def act(self, panes: Mapping[str, Tracked], gone: Collection[str], now: float) -> Moved:
        """After the tick's rows are written: act on the panes (``gone``: ids that ended). The
        status-row columns the step moved in the store meanwhile, by worker id: the watcher
        keeps its memory of the rows (and status.json) true with them. A step never edits a
        ``Tracked``'s rows itself."""

    def next_due(self, now: float) -> float | None:
        """When (epoch seconds) this step needs a turn although no pane changed (a check it
        runs may have finished); None: only when a tick writes something."""

    def close(self) -> None:
        """The watcher stops: let go of threads and processes."""


class ActingStep(Generic[SettingsT]):
    """A step that types into panes and tells the person: the tmux server and the store it acts
    through, the packs, its own settings and the watcher's, the LLM client (None: it decides
    without one) and who tells the person (None: nobody). A step sets up its own state in
    :meth:`setup`."""

    source = ""  # who speaks in the log and the notes: "herd", "cycle"

    def __init__(self, tmux: Tmux, store: StoreWriter, packs: Mapping[str, Pack],
                 settings: SettingsT, watch_settings: WatchSettings, *,
                 llm: LLMClient | None = None,
                 announce: Callable[[Tracked, Note], None] | None = None) -> None:
        self.tmux = tmux
        self.store = store
        self.packs = packs
        self.settings = settings
        self.watch_settings = watch_settings
        self.llm = llm
        self.announce = announce
        self.setup()

    def setup(self) -> None:
        """The step's own state, once the shared parts are set."""

    def _tell(self, tracked: Tracked, note: Note) -> None:
        if self.announce is None:
            return
        try:
            self.announce(tracked, note)
        except Exception as exc:  # a notification is never worth a nudge or a tick
            log.warning("%s notification failed: %s", self.source, exc)
