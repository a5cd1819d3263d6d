"""What background work a verdict's evidence counts (issue 31), for ``status --json``.

A pack rule that keeps a pane BUSY for work the agent started and that will resume its turn gives
the reason :data:`BACKGROUND_REASON` and quotes the CLI's own words in its summary (Claude Code's
``✻ Waiting for 2 background agents to finish``, ``✻ Worked for 4s · 1 shell, 2 monitors still
running``, a footer pill ``2 bashes``). Those words are data: only numbers before known nouns are
read from them, never anything else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from app.base.model import Verdict

BACKGROUND_REASON = "background_work"
# A READY screen that names background work which will not resume the turn (a shell the agent
# may look at later): the pane is READY, with the work as a note.
BACKGROUND_NOTE = "background_note"

# The nouns each release uses, by what the work is: agents resume the turn with their report;
# shells and monitors with their output; tasks are MCP tasks or a mix of kinds.
_KINDS: dict[str, tuple[str, ...]] = {
    "agents": (r"(?:local |background )?agents?", r"teams?", r"(?:remote|cloud) sessions?",
               r"(?:background |cloud )?dynamic workflows?"),
    "shells": (r"shells?", r"bash(?:es)?", r"monitors?"),
    "tasks": (r"MCP tasks?", r"(?:background |scheduled )?tasks?"),
}
_COUNTS = [(kind, re.compile(rf"\b(\d{{1,4}}) (?:{'|'.join(nouns)})\b"))
           for kind, nouns in _KINDS.items()]
_EVIDENCE_MAX = 200
# Between what hooks or teammates say and the screen's own words in a held verdict's summary
# (app.observe.background_work).
SCREEN_QUOTE = " · screen: "


@dataclass(frozen=True)
class Background:
    """Counts of running background work, by kind, and the screen's words that say so."""

    agents: int = 0
    shells: int = 0
    tasks: int = 0
    evidence: str = ""

    def as_dict(self) -> dict[str, int | str]:
        return {"agents": self.agents, "shells": self.shells, "tasks": self.tasks,
                "evidence": self.evidence}

    def note(self) -> str:
        """``2 background agents, 1 shell``; "background work" when no count could be read."""
        said = [plural(n, noun) for n, noun in ((self.agents, "background agent"),
                                                (self.shells, "background shell"),
                                                (self.tasks, "background task")) if n]
        return ", ".join(said) or "background work"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def background_of(verdict: Verdict | None) -> Background | None:
    """The background work a verdict names, or None when its rule was not about any."""
    if verdict is None:
        return None
    return background_in(verdict.reasons, verdict.summary)


def background_in(reasons: Sequence[str], summary: str) -> Background | None:
    """The same from a stored row's reasons and summary (what ``status --json`` reads)."""
    if BACKGROUND_REASON not in reasons and BACKGROUND_NOTE not in reasons:
        return None
    counts = dict.fromkeys(_KINDS, 0)
    # A held verdict's summary says what the hooks counted, then quotes the screen: the same
    # agents told twice, so each part counts alone and the larger count stands.
    for part in summary.split(SCREEN_QUOTE):
        for kind, found in _counted(part).items():
            counts[kind] = max(counts[kind], found)
    return Background(agents=counts["agents"], shells=counts["shells"], tasks=counts["tasks"],
                      evidence=summary[:_EVIDENCE_MAX])


def _counted(text: str) -> dict[str, int]:
    counts = dict.fromkeys(_KINDS, 0)
    taken: list[tuple[int, int]] = []
    for kind, pattern in _COUNTS:
        for found in pattern.finditer(text):
            # "2 background tasks" must not count again as tasks once read as something else
            if any(start <= found.start() < end for start, end in taken):
                continue
            taken.append(found.span())
            counts[kind] += int(found.group(1))
    return counts
