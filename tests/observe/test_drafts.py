"""Reading the text a person typed into an agent's input box and has not sent (``Pack.draft``).

``conductor pty send`` refuses to type over such a draft, so both mistakes cost something: a missed
draft gets mangled by the sent text, a false one blocks a send for nothing. Every real screen of
the corpus is checked: ``tests/corpus/drafts.tsv`` names the typed text of those that have some.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from app.base.errors import PackError
from app.base.model import State
from app.observe.pack_loading import load_packs, parse_pack
from app.observe.packs import Pack
from scripts.corpus import (
    DraftCase,
    draft_figures,
    draft_pack,
    frame_drafts,
    load_draft_cases,
    load_timelines,
    pack_for,
    read_drafts,
)
from tests.observe.test_pack_loading import assert_rejected

CASES = load_draft_cases()
WITH_RULES = ("aider", "claude", "codex", "gemini", "opencode", "shell")

DEMO = """\
name: demo
detect:
  commands: [demo]
input:
  region: {last: 4}
  match:
    - '^\\[ (?P<draft>[^\\n]*(?:\\n {2}[^\\n]*)*) \\]$'
  trim: ['\\|$']
  placeholder: ['type here']
rules:
  - id: idle
    state: READY
    region: {last: 1}
    match: '^demo ready$'
examples:
  - name: empty box
    state: READY
    rule: idle
    draft: null
    screen: |
      [  ]
      demo ready
"""


@pytest.fixture(scope="module")
def packs() -> dict[str, Pack]:
    return load_packs()


# --- the real screens ----------------------------------------------------------------------------


def test_the_draft_listing_covers_every_cli_and_names_real_files() -> None:
    typed = {c.cli for c in CASES if c.expected is not None}
    assert {"claude-code", "codex", "gemini-cli", "aider", "opencode", "bash"} <= typed
    assert all(c.text() for c in CASES if c.expected is not None)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_draft_on_a_real_screen(case: DraftCase, packs: dict[str, Pack]) -> None:
    """Typed text is read exactly; an empty box, a hint text or no box at all reads as None."""
    text = case.text()
    pack = draft_pack(case, packs, text)
    assert (pack.draft(text, case.cursor) if pack else None) == case.expected, case.note


def test_no_false_draft_on_a_screen_that_a_send_may_target(packs: dict[str, Pack]) -> None:
    """The figure the issue asks for: READY, BUSY and NEEDS_CONFIRMATION screens without typed
    text never report a draft (that would block `send` for nothing)."""
    targets = [c for c in CASES if c.state in (State.READY, State.BUSY, State.NEEDS_CONFIRMATION)]
    fig = draft_figures(read_drafts(packs, targets))
    print(f"\n{fig}")
    assert fig.false_drafts == 0
    assert fig.read_right == fig.typed > 0


def test_a_draft_does_not_make_a_busy_screen_ready(packs: dict[str, Pack]) -> None:
    """Typing into the box hides Claude Code's busy footer; the extra captures must still not
    read READY while the agent works (they are outside the classification figures)."""
    for case in CASES:
        if case.path.startswith("drafts/") and case.state is State.BUSY:
            text = case.text()
            assert pack_for(case.cli, packs, text).classify(text).state is State.BUSY, case.id


def test_a_draft_on_a_timeline_frame_is_the_prompt_being_sent(packs: dict[str, Pack]) -> None:
    """The lab types a prompt then presses Enter; only a frame caught in between may show a
    draft, and that text must then leave the box as the sent prompt."""
    found = frame_drafts(packs, load_timelines())
    assert all(f.sent_later for f in found), [(f.timeline.id, f.frame, f.draft) for f in found]


def test_every_agent_pack_has_an_input_rule_and_generic_has_none(packs: dict[str, Pack]) -> None:
    assert all(packs[name].input is not None for name in WITH_RULES)
    assert packs["generic"].input is None
    assert packs["generic"].draft("anything > typed here") is None


# --- the semantics -------------------------------------------------------------------------------


class Reading(NamedTuple):
    name: str
    screen: str
    expected: str | None


READINGS = [
    Reading("typed text", "[ fix the parser ]\ndemo ready", "fix the parser"),
    Reading("wrapped lines are joined with one space",
            "[ fix the parser and\n  its tests ]\ndemo ready", "fix the parser and its tests"),
    Reading("trim removes decoration from each line", "[ fix it| ]\ndemo ready", "fix it"),
    Reading("a placeholder in full is no draft", "[ type here ]\ndemo ready", None),
    Reading("text that merely contains the placeholder is a draft",
            "[ type here please ]\ndemo ready", "type here please"),
    Reading("blank box", "[   ]\ndemo ready", None),
    Reading("no box on screen", "demo ready", None),
    Reading("escape sequences are ignored", "[ \x1b[2mfix\x1b[0m it ]\ndemo ready", "fix it"),
]


@pytest.mark.parametrize("case", READINGS, ids=[c.name for c in READINGS])
def test_draft_semantics(case: Reading) -> None:
    assert parse_pack(DEMO, "demo.yml").draft(case.screen) == case.expected


def test_the_region_keeps_blank_lines_between_its_non_blank_ones() -> None:
    """Codex closes its composer with a blank line; the region must not squeeze it out."""
    pack = parse_pack(DEMO.replace("'^\\[ (?P<draft>[^\\n]*(?:\\n {2}[^\\n]*)*) \\]$'",
                                   "'^> (?P<draft>.*)\\n\\nstatus\\Z'"), "demo.yml")
    assert pack.draft("old\n> fix it\n\nstatus") == "fix it"
    assert pack.draft("> fix it\nstatus") is None


def test_the_first_matching_pattern_decides() -> None:
    two = DEMO.replace("  trim:", "    - '^(?P<draft>.*) <$'\n  trim:")
    pack = parse_pack(two, "demo.yml")
    assert pack.draft("[  ]\nfix it <") is None  # the empty box matched first
    assert pack.draft("fix it <") == "fix it"


def test_a_pack_without_an_input_rule_cannot_tell() -> None:
    pack = parse_pack(DEMO[: DEMO.index("input:")] + DEMO[DEMO.index("rules:"):]
                      .replace("    draft: null\n", ""), "demo.yml")
    assert pack.input is None
    assert pack.draft("[ fix the parser ]\ndemo ready") is None


# --- loading -------------------------------------------------------------------------------------


class BrokenInput(NamedTuple):
    name: str
    old: str
    new: str
    line: int
    words: tuple[str, ...]


BROKEN = [
    BrokenInput("no draft group", "(?P<draft>", "(?P<text>", 5, ("input.match", "draft")),
    BrokenInput("unknown key", "  trim:", "  strip: ['x']\n  trim:", 5,
                ("input: unknown key(s) strip",)),
    BrokenInput("no match", "  match:\n    - '^\\[ (?P<draft>[^\\n]*(?:\\n {2}[^\\n]*)*) \\]$'\n",
                "", 5, ("input: 'match' is required",)),
    BrokenInput("placeholder does not compile", "['type here']", "['type (here']", 5,
                ("input.placeholder", "invalid regex")),
    BrokenInput("bad region", "region: {last: 4}", "region: {last: 0}", 5, ("input: region",)),
    BrokenInput("example expects another draft", "    draft: null", "    draft: 'x'", 16,
                ("example 'empty box'", "expects draft 'x'", "reads None")),
    BrokenInput("example draft is not text", "    draft: null", "    draft: [x]", 16,
                ("example 'empty box'", "'draft' must be text or null")),
]


@pytest.mark.parametrize("case", BROKEN, ids=[c.name for c in BROKEN])
def test_a_broken_input_rule_is_rejected_with_file_and_line(case: BrokenInput,
                                                            tmp_path: Path) -> None:
    assert_rejected(DEMO, case.old, case.new, case.line, case.words, tmp_path)


def test_input_must_be_a_mapping() -> None:
    broken = DEMO.replace("input:\n  region: {last: 4}\n", "input: 3\nx:\n  region: {last: 4}\n")
    broken = broken[: broken.index("x:\n")] + broken[broken.index("rules:"):]
    with pytest.raises(PackError, match=r"demo\.yml:1: 'input' must be a mapping"):
        parse_pack(broken.replace("    draft: null\n", ""), "demo.yml")


def test_an_example_draft_needs_an_input_rule() -> None:
    without = DEMO[: DEMO.index("input:")] + DEMO[DEMO.index("rules:"):]
    with pytest.raises(PackError, match=r"demo\.yml:10: example 'empty box' states a draft"):
        parse_pack(without, "demo.yml")


def test_shipped_examples_state_drafts(packs: dict[str, Pack]) -> None:
    """Each pack with an input rule checks at every load that it reads a draft and an empty box."""
    for name in WITH_RULES:
        drafts = [e.draft for e in packs[name].examples if e.checks_draft]
        assert any(d is None for d in drafts), name
        assert any(d is not None for d in drafts), name
