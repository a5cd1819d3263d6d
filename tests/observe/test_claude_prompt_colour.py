"""Claude Code's one on-screen sign of a turn at work that the plain text lacks (issue 31,
design/release_sweep.md): while a turn runs, the input box's prompt glyph (the pointer, or `!` in
bash mode) is drawn in the theme's dim "subtle" colour; once the turn is over it is back in the
terminal's default colour, or in the colour of the box's own rules (bash mode's magenta).

The `-pairs-sweep` sets hold each release's idle and busy screens of the same kinds (an empty box,
a draft, the `/` list, bash mode, with and without a status line) together with the
``capture-pane -e`` screen of each (``ansi/``). Their plain text is the same when idle and busy
for 2.1.79-2.1.117 (and for 2.1.0-2.1.69 once their banner is out of view); this test pins the
colour evidence the page cites, so a classifier that reads colours can rely on it. The watcher
reads plain text today, so the pack cannot use it yet.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from app.base.model import State
from app.observe.pack_loading import load_packs
from scripts.corpus import CORPUS, ScreenCase, classify_cases, load_cases

# the idle and busy screens (a start-up dialog met on the way has no box to read)
PAIRS = [c for c in load_cases() if c.set_name.endswith("-pairs-sweep") and c.cli == "claude-code"
         and c.state in (State.READY, State.BUSY)]
_ESCAPE = re.compile(r"\x1b\[([0-9;:]*)m|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[^\[\]]")
DEFAULT = "39"


def _foreground(params: str, current: str) -> str:
    parts = (params or "0").replace(":", ";").split(";")
    index = 0
    while index < len(parts):
        code = parts[index] or "0"
        if code in ("0", "39"):
            current = DEFAULT
        elif code == "38" and index + 2 < len(parts) and parts[index + 1] == "5":
            current, index = "38;5;" + parts[index + 2], index + 2
        elif code == "38" and index + 4 < len(parts) and parts[index + 1] == "2":
            current, index = "38;2;" + ";".join(parts[index + 2:index + 5]), index + 4
        elif code.isdigit() and (30 <= int(code) <= 37 or 90 <= int(code) <= 97):
            current = code
        index += 1
    return current


def _coloured_lines(styled: str) -> list[list[tuple[str, str]]]:
    """Each line as (character, foreground in effect); tmux carries styles across lines."""
    lines: list[list[tuple[str, str]]] = [[]]
    foreground, position = DEFAULT, 0
    for match in [*_ESCAPE.finditer(styled), None]:
        for char in styled[position:match.start() if match else len(styled)]:
            if char == "\n":
                lines.append([])
            else:
                lines[-1].append((char, foreground))
        if match is None:
            break
        position = match.end()
        if match.group(1) is not None:
            foreground = _foreground(match.group(1), foreground)
    return lines


def box_prompt_colours(styled: str) -> tuple[str, str] | None:
    """The lowest input box's (top rule colour, prompt glyph colour), or None with no box."""
    found = None
    lines = _coloured_lines(styled)
    for rule, prompt in itertools.pairwise(lines):
        if re.match(r"─{20,}", "".join(c for c, _ in rule)) and prompt and prompt[0][0] in "❯!":
            found = (rule[0][1], prompt[0][1])
    return found


def _styled(case: ScreenCase) -> str:
    name = Path(case.path).with_suffix(".ansi").name
    return (CORPUS / case.set_name / "ansi" / name).read_text(encoding="utf-8")


def test_the_pairs_are_here() -> None:
    versions = {c.version for c in PAIRS}
    assert {"2.1.0", "2.1.32", "2.1.79", "2.1.90", "2.1.105", "2.1.117", "2.1.332"} <= versions
    for version in versions:
        states = {c.state for c in PAIRS if c.version == version}
        assert {State.READY, State.BUSY} <= states, version


@pytest.mark.parametrize("case", PAIRS, ids=[c.id for c in PAIRS])
def test_the_prompt_glyph_is_dim_exactly_while_the_turn_runs(case: ScreenCase) -> None:
    colours = box_prompt_colours(_styled(case))
    assert colours is not None, "every screen of the pairs has its input box"
    rule, glyph = colours
    at_work = glyph not in (DEFAULT, rule)
    assert at_work is (case.state is State.BUSY), (case.state.value, rule, glyph)


def test_read_without_its_title_no_busy_screen_of_the_pairs_is_ready() -> None:
    """The plain text cannot tell them apart, so the pack keeps the safe side: a screen read
    alone (another person's capture, no title) may be BUSY when idle, never READY when busy."""
    alone = classify_cases(load_packs(), [c._replace(title=None) for c in PAIRS])
    busy = [r for r in alone if r.case.state is State.BUSY]
    assert busy and not [r.case.id for r in busy if r.predicted is State.READY]
