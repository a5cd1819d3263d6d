"""``dispatch --clear``'s clear: send the CLI's clear command, answer the one menu it may open,
and wait until the agent is at its prompt again.

Codex's ``/new`` in a git repository asks `Where should the new conversation run?` before it
starts anything (0.169: `1. Use current Git worktree`, `2. Create new Git worktree`). A new
conversation in the same folder is what a clear means, so that option is chosen, found by its
words, never by its place in the list (a release may reorder it). Any other menu, or one with
no such option, is closed with Esc and the dispatch fails saying what was on screen: a menu is
never left open for the next keystroke to land in.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from app.base.errors import ConductorError
from app.base.model import State
from app.base.screen import normalise
from app.observe.options import read_options

if TYPE_CHECKING:
    from app.adapters.tmux import Tmux
    from app.base.model import Option
    from app.base.settings import WatchSettings
    from app.observe.one_pane import Target
    from app.observe.packs import Pack

# The option that keeps the new conversation where the old one ran.
_SAME_PLACE = re.compile(r"(?i)\buse (?:the )?current\b|\bcurrent (?:git )?(?:worktree|working "
                         r"(?:directory|folder|tree)|folder|directory)\b|\bkeep using\b")
_ELSEWHERE = re.compile(r"(?i)\b(?:create|new|another|separate)\b")
_ESC_CONFIRM_S = 2.0


def clear(tmux: Tmux, target: Target, command: str, packs: Mapping[str, Pack],
          settings: WatchSettings, workers_dir: Path, deadline: float | None,
          poll_s: float) -> str:
    """Send ``command`` and wait for READY, answering a where-to-run menu on the way; what was
    done, for the dispatch's line. Raises :class:`ConductorError` (with no menu left open)."""
    from app.act import gate, handoff

    handoff.send(tmux, target, command, packs, settings, workers_dir, origin="dispatch")
    watch = handoff.PaneWatch(tmux, target, packs, settings, workers_dir)
    result = handoff.wait(watch, {State.READY, State.NEEDS_CONFIRMATION}, _left(deadline),
                          poll_s)
    if result.reached and result.assessment.state is State.READY:
        return f"cleared with {command}"
    if not result.reached:
        a = result.assessment
        raise ConductorError(f"not sent: {target.label} still {a.state.value} after {command} "
                             f"({result.waited_s:.0f}s){': ' + a.summary if a.summary else ''}")
    screen = watch.tracked.text
    dialog = read_options(screen)
    option = _same_place(dialog.options) if dialog is not None else None
    if option is None:
        _escape(tmux, target)
        raise ConductorError(f"not sent: {command} opened a menu with no option to stay in the "
                             f"current folder ({_face(result.assessment.summary)}); closed it "
                             "with Esc")
    try:
        gate.answer(tmux, target, option.label, packs, settings, workers_dir,
                    origin="dispatch")
    except ConductorError as exc:
        _escape(tmux, target)
        raise ConductorError(f"not sent: could not answer the menu {command} opened "
                             f"({exc}); closed it with Esc") from None
    watch = handoff.PaneWatch(tmux, target, packs, settings, workers_dir)
    after = handoff.wait(watch, {State.READY}, _left(deadline), poll_s)
    if not after.reached:
        if after.assessment.state is State.NEEDS_CONFIRMATION:
            _escape(tmux, target)
        raise ConductorError(f"not sent: {target.label} still {after.assessment.state.value} "
                             f"after {command} and {option.label.split('  ')[0]!r}")
    return f"cleared with {command} (chose {option.label.split('  ')[0]!r})"


def _same_place(options: tuple[Option, ...]) -> Option | None:
    """The one option that keeps the current folder, by its words; None when none or several
    say so (a guess is no answer)."""
    # A label is its title, then (after two spaces) a description that may say anything.
    fits = [o for o in options if _SAME_PLACE.search(o.label)
            and not _ELSEWHERE.search(o.label.split("  ")[0])]
    return fits[0] if len(fits) == 1 else None


def _escape(tmux: Tmux, target: Target) -> None:
    """Press Esc once while a menu is up (read again right before the key), then give it a
    moment to leave. Once only: a second Esc at Codex's empty prompt opens its backtrack view."""
    pane_id = target.pane.pane_id

    def menu() -> object:
        try:
            screens = tmux.capture([pane_id])
        except ConductorError:
            return None
        return read_options(normalise(screens[pane_id])) if pane_id in screens else None

    seen = menu()
    if seen is None:
        return
    tmux.send_keys(pane_id, ["Escape"])
    stop = time.monotonic() + _ESC_CONFIRM_S
    while time.monotonic() < stop and menu() == seen:
        time.sleep(0.1)


def _face(summary: str) -> str:
    return summary if len(summary) <= 160 else summary[:159] + "…"


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())
