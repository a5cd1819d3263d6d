"""Herd rule sets: the bundled ones load and never approve; every mistake is one line with the
file and line; templates fill from the status context and regex groups."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from app.act.herd import rules
from app.act.herd.eligibility import STALLED, WAITING_LONG
from app.act.herd.rules import RuleError, load, locate, parse, render
from app.base.model import State
from tests.conftest import REPO, conductor

BUNDLED = sorted(p.stem for p in (REPO / "design" / "herd_rules").glob("*.yml"))
CONTEXT = {"state": "READY", "summary": "", "actions_needed": "", "waiting_s": 130,
           "inactive_s": 130, "confidence": 90, "reasons": "stable_for_n", "cli": "claude",
           "cwd": "/src", "name": "api", "nudges": 0, "goal": ""}


def test_the_bundled_sets_load_and_never_answer_a_dialog() -> None:
    assert {"conservative", "persistent"} <= set(BUNDLED)
    for name in BUNDLED:
        loaded = load(name)
        assert loaded.rules
        for rule in loaded.rules:
            assert not rule.approve and State.NEEDS_CONFIRMATION not in rule.states, rule.id


SHALL_I = "● Done with step 1 of 3.\n  Shall I continue with step 2?\n" \
          "────\n❯ \n────\n  ? for shortcuts"


def first_match(name: str, screen: str, context: dict[str, object], state: State = State.READY,
                when: str = STALLED) -> str | None:
    for rule in load(name).rules:
        if rule.applies(state, when, context):
            found = rule.search(screen)
            if found is not None:
                return render(rule.command, {**context, **found})
    return None


def test_conservative_answers_shall_i_continue_with_the_goal_when_there_is_one() -> None:
    assert first_match("conservative", SHALL_I, CONTEXT) == "Yes, please continue."
    assert first_match("conservative", SHALL_I, {**CONTEXT, "goal": "all tests pass"}) == \
        "Yes, please continue until this is done: all tests pass"
    assert first_match("conservative", "● All done.\n❯ \n", CONTEXT) is None
    answered = SHALL_I.replace("────\n❯ \n", "❯ Yes, please continue.\n● On it.\n────\n❯ \n", 1)
    assert first_match("conservative", answered, CONTEXT) is None
    # The same words in a dialog the pack missed: vetoed, and never for a dialog state anyway.
    dialog = " Shall I continue?\n Do you want to proceed?\n ❯ 1. Yes\n   2. No"
    assert first_match("conservative", dialog, CONTEXT) is None
    assert first_match("conservative", SHALL_I, CONTEXT, State.NEEDS_CONFIRMATION,
                       WAITING_LONG) is None


def test_persistent_takes_regex_groups_into_its_command() -> None:
    screen = "● Tests pass.\n  Would you like me to add a changelog entry?\n❯ \n"
    assert first_match("persistent", screen, CONTEXT) == "Yes, please add a changelog entry."


def test_template_fills_status_context() -> None:
    ruleset = parse("rules:\n  - id: r\n    when: stalled\n    states: READY\n    match: 'x'\n"
                    "    command: '{name} in {cwd} waited {waiting_s}s at {confidence}%'\n",
                    "t.yml")
    assert render(ruleset.rules[0].command, CONTEXT) == "api in /src waited 130s at 90%"


class Broken(NamedTuple):
    id: str
    text: str
    line: int
    words: str


RULE = "rules:\n  - id: r\n    when: [stalled]\n    states: [READY]\n"
BROKEN = [
    Broken("unknown-variable", RULE + "    match: 'x'\n    command: 'hi {nmae}'\n", 2,
           "command uses {nmae}, which is not a variable"),
    Broken("group-of-another-rule", RULE + "    match: '(?P<what>x)'\n    command: '{who}'\n",
           2, "{who}"),
    Broken("dialog-without-approve",
           "rules:\n  - id: r\n    when: waiting_long\n    states: [NEEDS_CONFIRMATION]\n"
           "    match: 'x'\n    command: 'y'\n", 2, "approve: true"),
    Broken("approve-without-dialog", RULE + "    approve: true\n    match: 'x'\n"
           "    command: 'y'\n", 2, "approve: true"),
    Broken("busy-state", "rules:\n  - id: r\n    when: stalled\n    states: [BUSY]\n"
           "    match: 'x'\n    command: 'y'\n", 2, "never nudged"),
    Broken("bad-when", "rules:\n  - id: r\n    when: [idle]\n    states: [READY]\n"
           "    match: 'x'\n    command: 'y'\n", 2, "'when' 'idle'"),
    Broken("bad-regex", RULE + "    match: '(x'\n    command: 'y'\n", 2, "invalid regex"),
    Broken("unknown-key", RULE + "    match: 'x'\n    comand: 'y'\n", 2, "unknown key(s) comand"),
    Broken("no-command", RULE + "    match: 'x'\n", 2, "'command' must be non-empty"),
    Broken("llm-without-prompt", RULE + "    type: llm\n", 2, "needs a 'prompt'"),
    Broken("llm-with-match", RULE + "    type: llm\n    prompt: 'q'\n    match: 'x'\n", 2,
           "'match' is for regex rules"),
    Broken("needs-unknown", RULE + "    match: 'x'\n    needs: [owner]\n    command: 'y'\n", 2,
           "'needs' names 'owner'"),
    Broken("duplicate-id", RULE + "    match: 'x'\n    command: 'y'\n" + RULE[7:]
           + "    match: 'x'\n    command: 'y'\n", 7, "duplicate rule id"),
    Broken("yaml", "rules:\n  - id: [\n", 3, "invalid YAML"),
]


@pytest.mark.parametrize("case", BROKEN, ids=[b.id for b in BROKEN])
def test_a_broken_rule_set_is_one_line_with_file_and_line(case: Broken) -> None:
    with pytest.raises(RuleError) as caught:
        parse(case.text, "mine.yml")
    message = str(caught.value)
    assert message.startswith(f"mine.yml:{case.line}: "), message
    assert case.words in message and "\n" not in message


def test_an_llm_rule_may_use_its_variables_and_the_model_command() -> None:
    ruleset = parse(RULE + "    type: llm\n    prompt: 'Is it stuck?'\n    variables: [step]\n"
                    "    command: 'Go on with {step}: {command}'\n", "l.yml")
    rule = ruleset.rules[0]
    assert ruleset.uses_llm and rule.variables == ("step",)
    default = parse(RULE + "    type: llm\n    prompt: 'q'\n", "l.yml").rules[0]
    assert default.command == "{command}"


def test_sets_are_found_by_name_in_the_users_folder_first_then_bundled(
        tmp_path: Path) -> None:
    mine = tmp_path / "herd_rules"  # CONDUCTOR_CONFIG is tmp_path/config.toml (conftest)
    mine.mkdir()
    (mine / "conservative.yml").write_text(RULE + "    match: 'x'\n    command: 'mine'\n")
    assert locate("conservative") == mine / "conservative.yml"
    assert locate("persistent").parent == rules.bundled_dir()
    with pytest.raises(RuleError, match=r"no rule set named 'nope'; known: .*conservative"):
        locate("nope")
    with pytest.raises(RuleError, match="no such rule file"):
        locate(str(tmp_path / "missing.yml"))


def test_herd_on_refuses_a_broken_rule_set_in_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "mine.yml"
    broken.write_text(RULE + "    match: 'x'\n    command: 'hi {nmae}'\n")
    done = conductor("pty", "herd", "on", "agent", "--rules", str(broken))
    assert done.returncode == 1
    assert done.stderr.startswith(f"Error: {broken}:2: rule 'r': command uses {{nmae}}")
    assert len(done.stderr.strip().splitlines()) == 1
    unknown = conductor("pty", "herd", "on", "agent", "--rules", "nope")
    assert unknown.returncode == 1 and "no rule set named 'nope'" in unknown.stderr
