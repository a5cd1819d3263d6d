"""What the terminal's own signals say about an agent's turn (the second channel beside the screen).

Agent CLIs tell the terminal where their turn is, through the window title above all
(``design/signals.md`` has what each release sends, as observed):

- while the model works, the title starts with a braille spinner frame (``⠂``, ``⠋``...) and a
  space: Claude Code (about once a second) and Codex (ten times a second) both do;
- Codex's approval dialog makes it ``[ ! ] Action Required | ...`` (blinking with ``[ . ]``);
- when the turn stops, the spinner goes: Claude Code shows ``✳ <session>``, Codex the bare title.
  Claude Code's ``✳`` also comes with a permission dialog: it means "not working", not "idle".
- Gemini CLI (0.31, 0.61) draws fixed titles, no spinner: ``✦  Working… (<folder>)`` for the
  whole turn, ``✋  Action Required (<folder>)`` with its approval dialog, ``◇  Ready (<folder>)``
  when the turn ends;
- Qwen Code (0.24; 0.15 sets its title once and never again) marks the title it always shows,
  ``Qwen - <folder>``: ``◐︎ `` in front while it works (no spinner), ``✳︎ `` when it asks for
  approval (just before the dialog is drawn), nothing when the turn ends. Its ``✳︎`` carries a
  text-style selector (U+FE0E) that Claude Code's ``✳`` lacks: the two never mix.

opencode (a fixed ``OpenCode``, then ``OC | <session>``) and aider (no title) say nothing of the
turn in their titles, and none of these CLIs rang a bell or asked for a notification.

:class:`TerminalWatch` follows one pane's signals and turns a change of phase into the same event
names hooks use (``turn_start``, ``turn_end``, ``permission``; ``app.observe.assess``), so they
are evidence of the same weight: a turn end lets an idle screen be READY at once, and nothing
here overrules a screen that shows work or a dialog. A progress report (OSC 9;4) counts the same
way: set or indeterminate is working, removed is stopped. Bells and notifications are kept for
people (``term=bell``) but decide nothing: no CLI observed sends them under tmux, and a bell alone
does not say whether the turn ended or a question came.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.base.termsignals import PROGRESS, TITLE, TermSignal

WORKING, STOPPED, ASKING = "working", "stopped", "asking"
# The kind of events.row these signals make (beside "hook" and "send").
TERMINAL = "terminal"
# How each CLI's title starts in each phase, as observed (design/signals.md); anything else is
# STOPPED. The forms are each CLI's own, so one table serves every pane whatever runs in it.
_WORKING = re.compile("|".join((
    r"[\u2801-\u28ff] ",  # Claude Code, Codex: a braille spinner frame
    r"✦\s+Working…",  # Gemini CLI
    "◐\ufe0e Qwen - ",  # Qwen Code
)))
_ASKING = re.compile("|".join((
    r"\[ [!.] \] Action Required\b",  # Codex, blinking
    r"✋\s+Action Required\b",  # Gemini CLI
    "✳\ufe0e Qwen - ",  # Qwen Code (Claude Code's "✳ " has no U+FE0E and means stopped)
)))
# OSC 9;4 states: 0 removed, 1 set, 2 error, 3 indeterminate, 4 paused.
_PROGRESS_WORKING = ("1", "3")
_PROGRESS_STOPPED = ("0",)
_EVENT = {WORKING: "turn_start", STOPPED: "turn_end", ASKING: "permission"}


def title_phase(title: str) -> str:
    """Where a title says the turn is; any title without a spinner or a question is STOPPED."""
    if _WORKING.match(title):
        return WORKING
    if _ASKING.match(title):
        return ASKING
    return STOPPED


def _phase(signal: TermSignal) -> str | None:
    if signal.kind == TITLE:
        return title_phase(signal.text)
    if signal.kind == PROGRESS:
        state = signal.text.partition(";")[0]
        if state in _PROGRESS_WORKING:
            return WORKING
        if state in _PROGRESS_STOPPED:
            return STOPPED
    return None


@dataclass(frozen=True)
class TurnEvent:
    """One change of phase, as an event row would carry it."""

    event: str  # turn_start, turn_end or permission
    name: str  # what was seen, for people: the signal's kind and phase ("title:stopped")
    ts: float


class TerminalWatch:
    """One pane's terminal signals, in the order they were seen."""

    def __init__(self) -> None:
        self.phase: str | None = None
        self.last = ""  # the newest signal, for people
        # The newest title, whatever it says: a CLI's "stopped" title seen first (a watcher
        # started after the turn) is no turn end, but its pack may read it (stopped_titles).
        self.title = ""
        self._seen_at = 0.0

    def observe(self, signal: TermSignal, ts: float) -> TurnEvent | None:
        """Fold one signal in; the event when it moved the turn to another phase. A signal
        older than the newest one folded in (the stream's, after a capture's title) is stale."""
        if ts < self._seen_at:
            return None
        self._seen_at = ts
        self.last = str(signal)[:80]
        if signal.kind == TITLE:
            self.title = signal.text
        phase = _phase(signal)
        if phase is None or phase == self.phase:
            return None
        before, self.phase = self.phase, phase
        if phase == STOPPED and before is None:
            return None  # first sight of a quiet title: no turn ended that we saw
        return TurnEvent(_EVENT[phase], f"{signal.kind}:{phase}", ts)

    def observe_title(self, title: str, ts: float) -> TurnEvent | None:
        """The pane's title as tmux holds it (read with a capture or a listing)."""
        return self.observe(TermSignal(TITLE, title), ts)
