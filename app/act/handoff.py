"""Handing a pane its next instruction: ``send`` and ``wait``.

``wait`` always looks at the pane itself, every ``poll_s`` (0.5 s by default), with the watcher's
own rules (``PaneObserver``) plus the pane's hook and send events from the store. It therefore
works whether or not the watcher runs, and it sees a turn end within one short poll instead of
one watcher interval. The two classic failures of such waits are guarded against by the rules in
``app.observe.assess``: a lost Stop hook cannot keep the pane BUSY once its screen has settled,
and a Stop or an idle screen from the previous turn cannot end a wait that began with a send.

``send`` types through the gate (``app.act.gate``); the pane a name means and how this process
looks at one pane are ``app.observe.one_pane``'s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from app.act import gate
from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.errors import ConductorError, PaneDead, PaneNotFound
from app.base.inputs import Refused as Refused
from app.base.inputs import check_text as check_text
from app.base.model import State
from app.base.settings import DEFAULT_WAIT_POLL_S, WatchSettings
from app.observe.assess import Assessment
from app.observe.one_pane import PaneWatch as PaneWatch
from app.observe.one_pane import Target as Target
from app.observe.one_pane import resolve as resolve
from app.observe.packs import Pack

TIMEOUT_EXIT = 124  # what timeout(1) returns, so scripts can tell a timeout from an error


def send(tmux: Tmux, target: Target, text: str, packs: Mapping[str, Pack],
         settings: WatchSettings, workers_dir: Path, *, enter: bool = True,
         force: bool = False, origin: str = "send", expect_screen: str | None = None,
         answer_dialog: bool = False, agent_only: bool = False,
         writer: StoreWriter | None = None) -> None:
    """Type ``text`` into the pane literally (then Enter) through the gate in front of every
    keystroke (``app.act.gate.type_text``, which has the refusals); record the send so ``wait`` and
    the watcher know a new turn was asked for.

    ``origin`` names the sender in the events table ("herd" for a nudge: a person's sends reset
    the herd's counters, its own do not). ``expect_screen`` (the stability hash a decision was
    made on) refuses when the pane shows anything else by the time we look. ``answer_dialog``
    lets text into a NEEDS_CONFIRMATION pane whose options cannot be read; a menu is answered
    with ``app.act.gate.answer``. ``agent_only`` (prose) refuses anything but an agent CLI at its
    own prompt.
    """
    gate.type_text(tmux, target, text, packs, settings, workers_dir, enter=enter, force=force,
                   origin=origin, expect_screen=expect_screen, answer_dialog=answer_dialog,
                   agent_only=agent_only, writer=writer)


@dataclass(frozen=True)
class WaitResult:
    reached: bool
    assessment: Assessment
    waited_s: float
    # How long this wait saw the final state without a break (all of it when it never changed).
    state_seen_s: float = 0.0


# A wait with ``quiet_poll_s`` polls that slowly once the pane has shown the same screen in the
# same state this long: a turn's end (the screen stops changing) is still seen at ``poll_s``.
QUIET_AFTER_S = 5.0


class WaitStopped(ConductorError):
    """The one waiting went away (an MCP call cancelled): the wait ends before its time."""


def _exited(reasons: tuple[str, ...], summary: str, started: float,
            on_change: Callable[[Assessment], None] | None) -> WaitResult:
    now = time.time()
    assessment = Assessment(state=State.EXITED, state_entered=now, last_change=now,
                            reasons=reasons, summary=summary, confidence=100)
    if on_change is not None:
        on_change(assessment)
    return WaitResult(True, assessment, time.monotonic() - started)


def wait(watch: PaneWatch, until: Collection[State], timeout_s: float | None,
         poll_s: float = DEFAULT_WAIT_POLL_S,
         on_change: Callable[[Assessment], None] | None = None,
         stop: threading.Event | None = None,
         quiet_poll_s: float | None = None) -> WaitResult:
    """Poll until the pane's reported state is one of ``until``, or the timeout passes. A pane
    that ends (gone, or dead and kept by remain-on-exit) ends the wait at once: reached when
    ``until`` holds EXITED, else :class:`PaneNotFound` (:class:`PaneDead` with its status).
    ``stop`` set ends it between polls with :class:`WaitStopped`. ``quiet_poll_s``: the
    pause between polls once nothing has changed for :data:`QUIET_AFTER_S` (each poll runs
    tmux twice and classifies the screen: an idle wait costs a share of a core otherwise)."""
    started = time.monotonic()
    last: State | None = None
    since = started
    settling = False
    seen: str | None = None
    unchanged_since = started
    while True:
        try:
            assessment = watch.poll()
        except PaneNotFound:
            if State.EXITED not in until:
                raise PaneNotFound(f"pane {watch.target.label} exited while waiting") from None
            return _exited(("pane_gone",), "exited", started, on_change)
        pane = watch.tracked.pane
        if pane.dead:
            # Kept by remain-on-exit, its program over: as final as a pane that is gone.
            code = pane.dead_status if pane.dead_status is not None else \
                watch.tmux.dead_status(pane.pane_id)
            status = f"exited with status {code}" if code is not None else "exited"
            if State.EXITED not in until:
                raise PaneDead(f"pane {watch.target.label} {status}")
            return _exited(("pane_dead",), status, started, on_change)
        if assessment.state is not last:
            if last is not None and not settling:
                since = time.monotonic()
            last = assessment.state
            if on_change is not None:
                on_change(assessment)
        # UNKNOWN while first settling is no state of the pane's: the next one began before.
        settling = assessment.reasons[-1:] == ("settling",)
        now = time.monotonic()
        shown = f"{assessment.state.value} {watch.tracked.stability_hash}"
        if shown != seen:
            seen, unchanged_since = shown, now
        waited = now - started
        if assessment.state in until:
            return WaitResult(True, assessment, waited, now - since)
        if timeout_s is not None and waited >= timeout_s:
            return WaitResult(False, assessment, waited, now - since)
        every = quiet_poll_s if quiet_poll_s is not None and \
            now - unchanged_since >= QUIET_AFTER_S else poll_s
        pause = every if timeout_s is None else min(every, max(0.0, timeout_s - waited))
        if stop is None:
            time.sleep(pause)
        elif stop.wait(pause):
            raise WaitStopped(f"the wait for {watch.target.label} was stopped")
