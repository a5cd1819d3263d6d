"""What a herd rule sees: lines counted from above the CLI's input box and the footer block over
it (status lines under the box, a turn line with its task list over it), or the agent's last
message, on real screens of Claude Code and Codex (tests/corpus). The region is said in words
for `herd log` and `herd list`."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.act.herd.rules import RuleError, Sight, load, parse
from app.base.screen import normalise
from app.observe.conversation import conversation
from app.observe.pack_loading import load_packs
from app.observe.packs import Region
from tests.conftest import REPO

CORPUS = REPO / "tests" / "corpus"
# Claude Code 2.1.330 after a task list, with a 3-line status line (sl3) or two (sl2c).
CLAUDE_TASKS = [CORPUS / "claude-code-2.1.330-variants" / "claude-code" / name for name in
                ("ready-after-tasks-sl3-80x24.txt", "ready-after-tasks-sl2c-200x50.txt")]
CODEX_READY = CORPUS / "codex-0.160.0" / "codex" / "ready-after-long-answer-200x50.txt"
QUESTION = "  Shall I continue with the printer?"


def asking(path: Path) -> str:
    """The real screen with the agent's reply ending in a question, as the issue's user saw."""
    screen = normalise(path.read_text(encoding="utf-8"))
    mark = "  consectetur adipiscing elit sed do eiusmod"
    assert mark in screen
    return screen.replace(mark, mark + "\n" + QUESTION, 1)


@pytest.mark.parametrize("path", CLAUDE_TASKS, ids=lambda p: p.name)
def test_the_question_over_a_task_list_and_status_lines_is_seen(path: Path) -> None:
    screen = asking(path)
    bottom = [line for line in screen.split("\n") if line.strip()]
    assert QUESTION not in "\n".join(bottom[-8:])  # the old count from the bottom missed it
    claude = load_packs()["claude"]
    [keep_going] = [r for r in load("conservative").rules if r.id == "keep-going"]
    found, seen = keep_going.look(screen, claude)
    assert found == {} and seen == "8 lines above the box"
    talk = conversation(screen, claude)
    assert talk.boxed and talk.lines[-1] == QUESTION  # no end mark, task or status line left
    assert talk.last_message().startswith("● lorem ipsum") and QUESTION in talk.last_message()


def test_without_a_box_the_screens_last_lines_are_seen_and_it_is_said() -> None:
    screen = "$ make\nShall I continue?\n"
    area, seen = Sight(Region("last", 8)).see(screen, load_packs()["claude"])
    assert "Shall I continue?" in area and seen == "last 8 lines (no input box found)"
    assert Sight(Region("last", 8)).see(screen, None)[1] == "last 8 lines (no input box found)"


def test_codex_the_box_is_found_by_its_input_patterns_and_the_message_is_its_last() -> None:
    screen = normalise(CODEX_READY.read_text(encoding="utf-8"))
    codex = load_packs()["codex"]
    talk = conversation(screen, codex)
    assert talk.boxed and not any("Ask Codex" in line or "gpt-5" in line for line in talk.lines)
    assert talk.last_message().startswith("• ")


def test_a_rule_may_look_at_the_last_message_only() -> None:
    loaded = parse("rules:\n  - id: asks\n    when: stalled\n    states: READY\n"
                   "    region: message\n    match: 'Shall I continue'\n"
                   "    command: 'Yes, please continue.'\n", "t.yml")
    [rule] = loaded.rules
    assert str(rule.region) == "last message"
    screen = asking(CLAUDE_TASKS[0])
    assert rule.look(screen, load_packs()["claude"]) == ({}, "last message")
    # A question in an older message is no question now.
    older = screen.replace("\n" + QUESTION, "").replace("● I am working",
                                                         "● Shall I continue? I am")
    assert rule.search(older, load_packs()["claude"]) is None


def test_an_unknown_region_is_one_line_naming_the_choices() -> None:
    with pytest.raises(RuleError, match=r"t\.yml:\d+: .*'message'.*lines above the input box"):
        parse("rules:\n  - id: x\n    when: stalled\n    states: READY\n"
              "    region: {above: box, lines: 3}\n    match: x\n    command: y\n", "t.yml")


def test_a_drawn_box_right_above_the_input_box_is_content_not_footer() -> None:
    screen = ("● Shall I continue? The tool said:\n╭──────────╮\n│ all good │\n╰──────────╯\n"
              + "─" * 40 + "\n❯ \n" + "─" * 40 + "\n  ? for shortcuts\n")
    talk = conversation(screen, load_packs()["claude"])
    assert talk.boxed and talk.lines[-1] == "╰──────────╯"
    assert "Shall I continue?" in talk.last(8)
