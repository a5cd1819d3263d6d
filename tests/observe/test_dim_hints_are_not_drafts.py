"""Hints drawn dim in an input box are not a person's unsent input.

Real Claude Code 2.1.197 screens (tests/corpus/styled/), captured with ``capture-pane -p -e``
while it showed a suggested next prompt, its placeholder, or text typed by hand. In plain text a
suggestion reads exactly like typed input; only its dim style tells them apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.base.screen import normalise, strip_ansi, without_dim
from app.observe.pack_loading import load_packs

STYLED = Path(__file__).resolve().parents[1] / "corpus" / "styled"
ROWS = [line.split("\t") for line in (STYLED / "drafts.tsv").read_text().splitlines()
        if line and not line.startswith("#")]


@pytest.mark.parametrize(("name", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_only_text_not_drawn_dim_counts_as_a_draft(name: str, expected: str) -> None:
    styled = (STYLED / name).read_text(encoding="utf-8")
    claude = load_packs()["claude"]
    assert claude.draft(normalise(without_dim(styled))) == (expected or None)


def test_the_plain_text_alone_cannot_tell_a_suggestion_from_typing() -> None:
    claude = load_packs()["claude"]
    suggestion = (STYLED / "claude-code" / "40_suggestion.ansi").read_text(encoding="utf-8")
    typed = (STYLED / "claude-code" / "43_after_tab.ansi").read_text(encoding="utf-8")
    assert claude.draft(normalise(strip_ansi(suggestion))) == "run the tests now"
    assert claude.draft(normalise(strip_ansi(typed))) == "run the tests now"


@pytest.mark.parametrize(("styled", "plain"), [
    ("❯\xa0\x1b[7mr\x1b[0;2mun the tests\x1b[0m", "❯\xa0"),  # hint with its cursor cell
    ("❯\xa0\x1b[2mTry\x1b[0m \x1b[2m\"fix\x1b[0m", "❯\xa0"),
    ("❯\xa0hel\x1b[7ml\x1b[0mox", "❯\xa0hellox"),  # the cursor inside typed text stays
    ("❯\xa0\x1b[7mx\x1b[0m", "❯\xa0x"),  # a one-character draft under the cursor stays
    ("\x1b[2mdim\nstill dim\x1b[22m bright", "   \n          bright"),  # style spans lines
    ("\x1b[1;2mbold dim\x1b[0m ok", "         ok"),
])
def test_without_dim(styled: str, plain: str) -> None:
    assert without_dim(styled).rstrip() == plain.rstrip()
