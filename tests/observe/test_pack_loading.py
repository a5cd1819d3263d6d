"""The pack loader rejects broken packs with file and line; detection picks the right pack."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest

from app.base.errors import PackError
from app.base.model import State
from app.observe.pack_detection import detect_pack
from app.observe.pack_loading import load_pack, load_packs, packs_dirs, parse_pack
from app.observe.packs import Pack

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "shared"
SHIPPED = ("aider", "claude", "codex", "gemini", "generic", "opencode", "qwen", "shell")

GOOD = """\
name: demo
description: a tiny pack
detect:
  commands: [demo]
stable_polls: 2
rules:
  - id: asks
    state: NEEDS_CONFIRMATION
    region: {last: 1}
    match: '(?P<question>Proceed\\?) \\[y/N\\]\\Z'
    summary: 'Question: {question}'
  - id: idle
    state: READY
    region: {last: 1}
    match: '^demo> ?\\Z'
examples:
  - name: idle prompt
    state: READY
    rule: idle
    screen: |
      demo>
"""


def screen(relative: str) -> str:
    return (CORPUS / relative).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def packs() -> dict[str, Pack]:
    return load_packs()


# --- loading -------------------------------------------------------------------------------------


def test_shipped_packs_load_with_their_examples(packs: dict[str, Pack]) -> None:
    assert set(SHIPPED) <= set(packs)
    for name in SHIPPED:
        assert packs[name].examples or name == "generic", f"{name} has no examples"


def test_packs_dirs_finds_the_shipped_folder() -> None:
    assert any((folder / "claude.yml").is_file() for folder in packs_dirs())


def test_a_good_pack_parses_and_orders_rules_by_state() -> None:
    pack = parse_pack(GOOD, "demo.yml")
    assert [r.id for r in pack.rules] == ["asks", "idle"]
    verdict = pack.classify("Proceed? [y/N]")
    assert verdict.state is State.NEEDS_CONFIRMATION
    assert verdict.summary == "Question: Proceed?"


class BrokenPack(NamedTuple):
    name: str
    old: str
    new: str
    line: int  # the line the error must point at: the rule's or example's first line
    words: tuple[str, ...]  # what the message must say


BROKEN = [
    BrokenPack("broken yaml", "    region: {last: 1}\n    match: '(?P<q", "    region: {last: 1\n"
               "    match: '(?P<q", 10, ("invalid YAML",)),
    BrokenPack("unknown state", "state: READY", "state: IDLE", 12,
               ("rule 'idle'", "unknown state 'IDLE'")),
    BrokenPack("regex does not compile", "'^demo> ?", "'^demo> (?", 12,
               ("rule 'idle'", "invalid regex")),
    BrokenPack("example fails", "      demo>\n", "      demo$\n", 17,
               ("example 'idle prompt'", "expects READY", "UNKNOWN")),
    BrokenPack("unknown rule key", "    region: {last: 1}\n    match: '^demo",
               "    regoin: {last: 1}\n    match: '^demo", 12,
               ("rule 'idle'", "unknown key(s) regoin")),
    BrokenPack("summary names a missing group", "'Question: {question}'", "'Q: {what}'", 7,
               ("rule 'asks'", "{what}")),
    BrokenPack("example names a missing rule", "    rule: idle", "    rule: idel", 17,
               ("unknown rule 'idel'",)),
    BrokenPack("duplicate rule id", "  - id: idle", "  - id: asks", 12, ("duplicate rule id",)),
    BrokenPack("checked versions not a list", "stable_polls: 2\n",
               "stable_polls: 2\nchecked_versions: 0.1\n", 1, ("checked_versions",)),
    BrokenPack("a rule's cursor place unknown", "    match: '^demo> ?\\Z'\n",
               "    match: '^demo> ?\\Z'\n    cursor: somewhere\n", 12,
               ("rule 'idle'", "cursor must be one of on_last_line, below_last_line")),
    BrokenPack("an example's cursor not a position", "    rule: idle\n",
               "    rule: idle\n    cursor: [3]\n", 17,
               ("example 'idle prompt'", "'cursor' must be [column, row]")),
    BrokenPack("working prompt without its glyph", "stable_polls: 2\n",
               "stable_polls: 2\nworking_prompt:\n  rule: '─+'\n", 7,
               ("'working_prompt' must have exactly 'rule' and 'glyph'",)),
    BrokenPack("working prompt regex does not compile", "stable_polls: 2\n",
               "stable_polls: 2\nworking_prompt:\n  rule: '─+'\n  glyph: '[❯'\n", 7,
               ("working_prompt: invalid regex /[❯/",)),
]


def assert_rejected(sample: str, old: str, new: str, line: int, words: tuple[str, ...],
                    folder: Path) -> None:
    """``sample`` with ``old`` replaced by ``new`` fails to load, naming the file and ``line``."""
    assert old in sample, "the test case no longer edits the sample pack"
    path = folder / "demo.yml"
    path.write_text(sample.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(PackError) as caught:
        load_pack(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}:"), message
    for word in words:
        assert word in message, message


@pytest.mark.parametrize("case", BROKEN, ids=[c.name for c in BROKEN])
def test_a_broken_pack_is_rejected_with_file_and_line(case: BrokenPack, tmp_path: Path) -> None:
    assert_rejected(GOOD, case.old, case.new, case.line, case.words, tmp_path)


def test_load_packs_reports_the_bad_file_among_good_ones(tmp_path: Path) -> None:
    (tmp_path / "good.yml").write_text(GOOD, encoding="utf-8")
    (tmp_path / "bad.yml").write_text(GOOD.replace("name: demo", "name: Bad Name"), "utf-8")
    with pytest.raises(PackError, match=r"bad\.yml:1: 'name'"):
        load_packs([tmp_path])


def test_detect_keys_are_checked(tmp_path: Path) -> None:
    broken = GOOD.replace("  commands: [demo]", "  commands: [demo]\n  comands: [x]")
    with pytest.raises(PackError, match=r"demo\.yml:4: detect: unknown key\(s\) comands"):
        parse_pack(broken, "demo.yml")


# --- explain -------------------------------------------------------------------------------------


def test_explain_names_the_deciding_rule_its_lines_and_the_rules_tried(
    packs: dict[str, Pack],
) -> None:
    text = screen("claude-code/confirm-shell-command-200x50.txt")
    verdict, traces = packs["claude"].explain(text)
    assert verdict.state is State.NEEDS_CONFIRMATION
    assert verdict.rule_id == "bash-permission"
    assert verdict.summary == "Claude Code wants to run: rm -rf build"
    assert any("Do you want to proceed?" in line for line in verdict.matched_lines)
    assert traces[-1].matched and traces[-1].rule_id == "bash-permission"
    assert all(not t.matched and t.detail for t in traces[:-1])


# --- choosing a pack -----------------------------------------------------------------------------


class Detection(NamedTuple):
    name: str
    expected: str
    command: str = ""
    children: tuple[str, ...] = ()
    title: str = ""
    screen_file: str = ""


DETECTIONS = [
    Detection("claude by name", "claude", command="claude"),
    Detection("claude 2.x native binary shows its version", "claude", command="2.1.197"),
    Detection("codex by name", "codex", command="codex"),
    Detection("aider by name", "aider", command="aider"),
    Detection("opencode by name", "opencode", command="opencode"),
    Detection("node running gemini, from the screen", "gemini", command="node",
              screen_file="gemini-cli/busy-streaming-200x50.txt"),
    Detection("node running opencode, from the screen", "opencode", command="node",
              screen_file="opencode/ready-after-answer-200x50.txt"),
    Detection("python3 running aider, from the screen", "aider", command="python3",
              screen_file="aider/ready-after-answer-200x50.txt"),
    Detection("node with a gemini child", "gemini", command="node", children=("gemini",)),
    Detection("shell at its prompt", "shell", command="bash",
              screen_file="plain/bash-prompt-200x50.txt"),
    Detection("wrapper shell around a live claude", "claude", command="bash",
              screen_file="claude-code/busy-streaming-200x50.txt"),
    Detection("claude exited back to the shell", "shell", command="bash",
              screen_file="claude-code/error-startup-no-network-200x50.txt"),
    Detection("claude after its banner scrolled away, screen only", "claude",
              screen_file="claude-code/error-529-final-200x50.txt"),
    Detection("codex after its banner scrolled away, screen only", "codex",
              screen_file="codex/error-500-final-200x50.txt"),
    Detection("aider mid-reply, screen only", "aider",
              screen_file="aider/busy-tool-running-200x50.txt"),
    Detection("unknown program falls back to generic", "generic", command="top",
              screen_file="plain/python-repl-busy-200x50.txt"),
    Detection("title when nothing else speaks", "codex", command="node", title="codex - proj"),
    Detection("qwen by name", "qwen", command="qwen"),
    # Qwen Code runs as node and shares Gemini CLI's input box: its footer and title decide.
    Detection("node running qwen, from the screen", "qwen", command="node",
              screen_file="../qwen-code-0.24.4/qwen-code/busy-tool-running-200x50.txt"),
    Detection("qwen approval, screen only", "qwen",
              screen_file="../qwen-code-0.24.4/qwen-code/confirm-shell-200x50.txt"),
    Detection("qwen by its title", "qwen", command="node", title="◐ Qwen - work"),
    Detection("codex 0.142 after its banner scrolled away, screen only", "codex",
              screen_file="../codex-0.142.5/codex/error-429-final-200x50.txt"),
]


@pytest.mark.parametrize("case", DETECTIONS, ids=[c.name for c in DETECTIONS])
def test_detect_pack(case: Detection, packs: dict[str, Pack]) -> None:
    text = screen(case.screen_file) if case.screen_file else ""
    chosen = detect_pack(packs, text, command=case.command, title=case.title,
                         child_commands=case.children)
    assert chosen.name == case.expected


def test_pack_examples_are_real_checks(packs: dict[str, Pack]) -> None:
    """Every example states what its screen is; re-run them so a pack edited in place is caught."""
    for pack in packs.values():
        for example in pack.examples:
            verdict = pack.classify(textwrap.dedent(example.screen), example.program,
                                    example.cursor)
            assert verdict.state is example.state, f"{pack.name}: {example.name}"


# --- stability -----------------------------------------------------------------------------------


def test_volatile_text_does_not_count_as_a_screen_change(packs: dict[str, Pack]) -> None:
    """Claude Code drops its `● high · /effort` hint a few seconds after a turn; READY must not
    wait for that."""
    idle = screen("claude-code/ready-startup-200x50.txt")
    assert "/effort" in idle
    without_hint = "\n".join(line.split("  ● high")[0] for line in idle.split("\n"))
    assert without_hint != idle
    claude = packs["claude"]
    assert claude.fingerprint(idle) == claude.fingerprint(without_hint)
    assert packs["shell"].fingerprint(idle) != packs["shell"].fingerprint(without_hint)


def test_a_volatile_regex_that_does_not_compile_is_rejected() -> None:
    broken = GOOD.replace("stable_polls: 2", "stable_polls: 2\nvolatile: ['(unclosed']")
    with pytest.raises(PackError, match=r"demo\.yml:1: volatile: invalid regex"):
        parse_pack(broken, "demo.yml")
