"""What of a pane's transitions is told, and when: ``Teller``.

Every transition is logged. A pane's first seconds are held back until one state has held (a
program starting up passes through states that are not news), conductor's own views are never
told about, and a return from UNKNOWN to the state last told is no news. What was told of each
pane is ``Tracked.news``, written here only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from app.base.errors import ConductorError
from app.base.model import State, Transition
from app.base.settings import WatchSettings
from app.observe.exits import EXITED_NORMALLY
from app.observe.pane import Tracked

log = logging.getLogger(__name__)

# A pane's first state must hold this many looks, and FIRST_HOLD_INTERVALS poll intervals, before
# anything about the pane is notified: a program starting up (Claude Code draws its box, a hint,
# its prompt) passes through states that are not news.
FIRST_HOLD_LOOKS = 2
FIRST_HOLD_INTERVALS = 2.0

Handler = Callable[[Transition, Tracked], None]


class Teller:
    def __init__(self, settings: WatchSettings) -> None:
        self.settings = settings
        self._released: list[Transition] = []  # held back in a pane's first seconds, now news

    def known_before(self, tracked: Tracked, state: State) -> None:
        """A pane restored from the store: its first seconds are long past."""
        tracked.news.settled, tracked.news.told = True, state

    def take_released(self) -> list[Transition]:
        """What was held back in panes' first seconds and turned out to be news."""
        released, self._released = self._released, []
        return released

    def settle(self, tracked: Tracked, now: float) -> None:
        """End a pane's first seconds once one state held FIRST_HOLD_LOOKS looks and
        FIRST_HOLD_INTERVALS intervals; what was held back is news only if it ends elsewhere
        than where it began."""
        a, news = tracked.assessment, tracked.news
        if news.settled or a is None or a.candidate is not a.state \
                or a.candidate_count < FIRST_HOLD_LOOKS \
                or a.seconds_in_state(now) < FIRST_HOLD_INTERVALS * self.settings.interval_s:
            return
        news.settled = True
        news.told = a.state if a.state is not State.UNKNOWN else None
        held, news.held_back = news.held_back, None
        if held is not None and held.state is a.state and held.previous is not a.state:
            self._released.append(held)

    def news(self, transition: Transition, tracked: Tracked) -> bool:
        """Whether a transition of a live pane is handed to the notifier: not in the pane's first
        seconds (held back, see settle), not a return from UNKNOWN to the state it left."""
        if transition.state is State.EXITED:
            # An ordinary end (status 0) is the person's own doing, and the final row of a pane
            # already EXITED (closed after it ended) is not a second end.
            return EXITED_NORMALLY not in transition.verdict.reasons \
                and transition.previous is not State.EXITED
        news = tracked.news
        if not news.settled and transition.state is State.NEEDS_CONFIRMATION:
            # A question is told at once, first seconds or not: a missed one costs more than
            # a flap, and questions do not flicker the way a fresh agent's READY does.
            news.settled, news.held_back = True, None
        if not news.settled:
            first = news.held_back.previous if news.held_back else transition.previous
            news.held_back = replace(transition, previous=first)
            return False
        if transition.state is State.UNKNOWN:
            return True
        if transition.previous is State.UNKNOWN and transition.state is news.told:
            return False
        news.told = transition.state
        return True

    def notify(self, transition: Transition, tracked: Tracked | None, handler: Handler | None,
               name: str = "", *, held: bool = False) -> None:
        """Log a transition and hand it to ``handler`` if it is news. ``tracked`` is None for a
        pane that exited while no watcher ran (or with its server): logged, never notified (a
        restarted tmux server would otherwise ping once per pane it had)."""
        # A transition held back in the pane's first seconds was logged when it happened.
        log.log(
            logging.DEBUG if held else logging.INFO,
            "%s%s (%s): %s -> %s after %.1f s [%s] %s", "told after holding: " if held else "",
            tracked.name if tracked else name or transition.pane_key, transition.pane_key,
            transition.previous.value if transition.previous else "-", transition.state.value,
            transition.previous_lasted_s, ", ".join(transition.verdict.reasons),
            transition.verdict.summary,
        )
        if tracked is not None and tracked.view:
            return  # conductor's own view: nobody is told about it
        if tracked is not None and not held and not self.news(transition, tracked):
            return
        if handler is not None and tracked is not None:
            try:
                handler(transition, tracked)
            except ConductorError as exc:
                log.error("transition handler failed: %s", exc)
            except Exception:
                log.exception("transition handler failed")
