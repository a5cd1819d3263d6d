"""Claude Code's one on-screen sign of a turn at work that the plain text lacks (issue 31,
design/release_sweep.md): while a turn runs, the input box's prompt glyph (the pointer, or `!` in
bash mode) is drawn in the theme's dim "subtle" colour; once the turn is over it is back in the
terminal's default colour, or in the colour of the box's own rules (bash mode's magenta).

The `-pairs-sweep` sets hold each release's idle and busy screens of the same kinds (an empty box,
a draft, the `/` list, bash mode, with and without a status line) together with the
``capture-pane -e`` screen of each (``ansi/``). Their plain text is the same when idle and busy
for 2.1.79-2.1.117 (and for 2.1.0-2.1.69 once their banner is out of view); the pack's
``working_prompt`` reads the colour on a styled capture, and these tests hold it to every pair.
"""

from __future__ import annotations

import pytest

from app.base.model import State
from app.observe.pack_loading import load_packs
from scripts.corpus import BY_PROMPT, ScreenCase, classify_cases, load_cases

# the idle and busy screens (a start-up dialog met on the way has no box to read)
PAIRS = [c for c in load_cases() if c.set_name.endswith("-pairs-sweep") and c.cli == "claude-code"
         and c.state in (State.READY, State.BUSY)]


def _styled(case: ScreenCase) -> str:
    styled = case.styled_text()
    assert styled is not None, f"{case.id} has no styled copy"
    return styled


def test_the_pairs_are_here() -> None:
    versions = {c.version for c in PAIRS}
    assert {"2.1.0", "2.1.32", "2.1.79", "2.1.90", "2.1.105", "2.1.117", "2.1.332"} <= versions
    for version in versions:
        states = {c.state for c in PAIRS if c.version == version}
        assert {State.READY, State.BUSY} <= states, version


@pytest.mark.parametrize("case", PAIRS, ids=[c.id for c in PAIRS])
def test_the_prompt_glyph_is_dim_exactly_while_the_turn_runs(case: ScreenCase) -> None:
    working = load_packs()["claude"].working_prompt
    assert working is not None
    assert working.at_rest(_styled(case)) is (case.state is State.READY), case.state.value


def test_read_with_its_colours_and_no_title_every_pair_is_right() -> None:
    """The watcher without a title (one the person turned off): the colour alone ends the turn
    where the text shows no end mark, and never calls a busy screen READY."""
    read = classify_cases(load_packs(), [c._replace(title=None) for c in PAIRS])
    assert [r.case.id for r in read if not r.right] == []
    assert any((r.rule or "").endswith(BY_PROMPT) for r in read)


def test_read_without_its_title_or_colours_no_busy_screen_of_the_pairs_is_ready() -> None:
    """The plain text cannot tell them apart, so the pack keeps the safe side: a screen read
    alone (another person's capture, no title) may be BUSY when idle, never READY when busy."""
    alone = classify_cases(load_packs(),
                           [c._replace(title=None, styled=False) for c in PAIRS])
    busy = [r for r in alone if r.case.state is State.BUSY]
    assert busy and not [r.case.id for r in busy if r.predicted is State.READY]
