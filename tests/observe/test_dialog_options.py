"""Hints from the screen: every dialog in the corpus names, as "refuse", the option whose label
refuses (tests/corpus/dialogs.tsv, written by a person), reachable by the key the hint names; and
the generic layer finds dialogs a CLI's pack has not learned, without ever saying READY."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import pytest

from app.base.model import Option, State
from app.observe.options import REFUSE, hint, read_options
from app.observe.pack_detection import judge_for
from app.observe.pack_loading import load_packs
from app.observe.packs import Pack
from scripts.corpus import CORPUS, ScreenCase, load_cases, pack_for, verdict_for
from tests.conftest import conductor

DIALOGS = CORPUS / "dialogs.tsv"


class Truth(NamedTuple):
    refuse: str | None
    approve: str | None


def truths(path: Path = DIALOGS) -> dict[str, Truth]:
    rows: dict[str, Truth] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith(("#", "dialog\t")):
            continue
        name, refuse, approve = line.split("\t")
        rows[name] = Truth(None if refuse == "-" else refuse, None if approve == "-" else approve)
    return rows


TRUTH = truths()
DIALOG_CASES = [c for c in load_cases() if c.state is State.NEEDS_CONFIRMATION]


def dialog_name(case: ScreenCase) -> str:
    """The row of dialogs.tsv for this screen: its release's own row, else the dialog's."""
    name = re.sub(r"-\d+x\d+\.txt$", "", case.path)
    release = f"{case.set_name.removeprefix('heldout-')}/{name}"
    return release if release in TRUTH else name


@pytest.fixture(scope="module")
def packs() -> dict[str, Pack]:
    return load_packs()


def test_every_dialog_in_the_corpus_has_a_written_truth() -> None:
    missing = sorted({dialog_name(c) for c in DIALOG_CASES} - set(TRUTH))
    assert not missing, f"add these to {DIALOGS.name}: {missing}"
    assert len(DIALOG_CASES) >= 100


def first(options: tuple[Option, ...], role: str) -> Option | None:
    return next((o for o in options if o.role == role), None)


def reaches(option: Option, options: tuple[Option, ...], text: str) -> bool:
    """The keys the hint names for ``option`` pick that option on this very screen."""
    if option.shortcut:
        return f"({'esc' if option.shortcut == 'Escape' else option.shortcut})" in text.lower()
    keys = option.keys
    if keys and keys[0].isdigit():
        return re.search(rf"(?m)^\W*{keys[0]}[.)] +{re.escape(option.label)}", text) is not None
    if len(keys) == 2 and keys[1] == "Enter" and keys[0].isalpha() and len(keys[0]) == 1:
        # A letter typed on the question's line: `(y/N)`, `[Y/n]`, aider's `(N)o`.
        last = text.rstrip().splitlines()[-1]
        key = re.escape(keys[0])
        return re.search(rf"(?i)[(\[/] ?{key} ?[)\]/]", last) is not None
    if keys and keys[-1] == "Enter" and set(keys[:-1]) <= {"Up", "Down"}:
        marked = next(i for i, o in enumerate(options) if o.highlighted)
        moves = keys.count("Down") - keys.count("Up")
        return options[marked + moves] is option
    return False


@pytest.mark.parametrize("case", DIALOG_CASES, ids=[c.id for c in DIALOG_CASES])
def test_the_option_named_refuse_is_the_one_whose_label_refuses(
        case: ScreenCase, packs: dict[str, Pack]) -> None:
    text = case.text()
    _, verdict = verdict_for(case, packs, text)
    truth = TRUTH[dialog_name(case)]
    refuse, approve = first(verdict.options, REFUSE), first(verdict.options, "approve")
    assert (refuse.label if refuse else None) == truth.refuse
    assert (approve.label if approve else None) == truth.approve
    for option in (refuse, approve):
        if option is not None and option.keys:
            assert reaches(option, verdict.options, text), option
    if refuse is not None and "refuse:" in verdict.actions_needed:
        # The hint text names the refusing label next to the key that reaches it.
        assert f"refuse: {refuse.shortcut or ', '.join(refuse.keys)} ({refuse.label})" \
            in verdict.actions_needed


# Screens whose hint is not about answering a dialog (a login screen says how to sign in).
NOT_A_DIALOG_HINT = {"sign-in"}


@pytest.mark.parametrize("case", DIALOG_CASES, ids=[c.id for c in DIALOG_CASES])
def test_every_pack_hints_from_the_options_on_screen_not_from_memory(
        case: ScreenCase, packs: dict[str, Pack]) -> None:
    text = case.text()
    _, verdict = verdict_for(case, packs, text)
    if verdict.options and verdict.rule_id not in NOT_A_DIALOG_HINT:
        # a hint is filled in as one line, runs of spaces between a label and its note closed
        assert verdict.actions_needed == " ".join(hint(read_options(text)).split()), \
            verdict.rule_id


def test_claude_2_1_330_hints_follow_the_new_option_order(packs: dict[str, Pack]) -> None:
    """The two hints that became dangerous: Enter now refuses the trust dialog, and 3 approves
    (and switches to auto mode) in the Bash dialog."""
    new = CORPUS / "claude-code-2.1.330" / "claude-code"
    trust = (new / "confirm-trust-folder-200x50.txt").read_text()
    bash = (new / "confirm-shell-command-200x50.txt").read_text()
    old_bash = (CORPUS / "shared/claude-code/confirm-shell-command-200x50.txt").read_text()

    said = packs["claude"].classify(trust).actions_needed
    assert "refuse: Enter (No, exit)" in said and "approve: Down, Enter (Yes, I trust" in said
    said = packs["claude"].classify(bash).actions_needed
    assert "refuse: 4 (No) or Esc" in said and "3" not in said.split("refuse")[1]
    assert packs["claude"].classify(bash).summary == "Claude Code wants to run: rm -rf build"
    assert "refuse: 3 (No) or Esc" in packs["claude"].classify(old_bash).actions_needed


def test_a_dialog_whose_options_cannot_be_read_gets_a_hint_naming_no_key(
        packs: dict[str, Pack]) -> None:
    screen = ("─" * 60 + "\n Accessing workspace: /tmp/p\n"
              " Pick Yes, I trust this folder below, or leave.\n"
              " Enter to confirm · Esc to cancel\n")
    verdict = packs["claude"].classify(screen)

    assert verdict.state is State.NEEDS_CONFIRMATION and verdict.options == ()
    assert "could not be read" in verdict.actions_needed
    assert not re.search(r"\b(?:\d|Enter|Esc|Escape|Up|Down|y|n)\b", verdict.actions_needed)
    assert not re.search(r"\b(?:\d|Enter|Esc|Up|Down)\b", hint(None))


@pytest.mark.parametrize(("screen", "labels", "highlighted"), [
    ("Overwrite? [y/N] ", ["y", "N"], "N"),
    ("Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: ", ["Yes", "No", "Don't ask again"],
     "Yes"),
    ("   Allow once   Allow always   Reject", ["Allow once", "Allow always", "Reject"], None),
    ("  ❯ No, exit\n    Yes, I trust this folder\n  Enter to confirm", ["No, exit",
                                                                        "Yes, I trust this folder"],
     "No, exit"),
], ids=["y/N", "aider", "side-by-side", "bare"])
def test_read_options_shapes(screen: str, labels: list[str], highlighted: str | None) -> None:
    dialog = read_options(screen)
    assert dialog is not None
    assert [o.label for o in dialog.options] == labels
    assert (dialog.highlighted.label if dialog.highlighted else None) == highlighted


def test_side_by_side_buttons_name_labels_but_no_keys() -> None:
    said = hint(read_options("   Allow once   Allow always   Reject"))
    assert "'Reject' to refuse" in said and "Enter" not in said and "Tab" not in said


# --- the generic layer ---------------------------------------------------------------------------


def without_dialog_rules(pack: Pack) -> Pack:
    return replace(pack, rules=tuple(r for r in pack.rules
                                     if r.state is not State.NEEDS_CONFIRMATION))


AGENT_DIALOGS = [c for c in DIALOG_CASES if c.cli != "plain"]
# Screens only a CLI's own pack can know: Codex's question form keeps the turn's `esc to
# interrupt` footer (work, to anyone else), panels a person opened or a sign-in code prompt
# show no options to find, and a picker a person opened by command (`/model`, `/new`'s worktree
# menu, closed by `esc back` / `Esc to close`) waits for that person, not for an agent.
PACK_ONLY_DIALOGS = ("confirm-question-form", "confirm-shortcuts-panel", "confirm-help-panel",
                     "confirm-login-code", "confirm-menu-model", "confirm-new-worktree-menu")
# the sweep's screens name their set-up first: `sweep-120x40-confirm-menu-model-120x40.txt`
LAYER_DIALOGS = [c for c in AGENT_DIALOGS
                 if not re.sub(r"^(?:sweep-[\w-]*?-)?(?=confirm-)", "",
                               c.path.rpartition("/")[2]).startswith(PACK_ONLY_DIALOGS)]


@pytest.mark.parametrize("case", LAYER_DIALOGS, ids=[c.id for c in LAYER_DIALOGS])
def test_the_generic_layer_finds_a_dialog_the_pack_has_not_learned(
        case: ScreenCase, packs: dict[str, Pack]) -> None:
    """Every agent dialog in the corpus, with the CLI's own dialog rules taken away."""
    text = case.text()
    judge, program = judge_for(packs, pack_for(case.cli, packs, text, case.command), case.command)
    verdict = without_dialog_rules(judge).classify(text, program)

    assert verdict.state is State.NEEDS_CONFIRMATION, verdict.rule_id
    assert "generic_layer" in verdict.reasons and verdict.confidence <= 60
    assert verdict.rule_id and verdict.rule_id.startswith("generic:")


def test_the_generic_layer_never_says_ready_or_error(packs: dict[str, Pack]) -> None:
    """A pack whose only rule never matches is the layer alone: over the whole corpus it says
    NEEDS_CONFIRMATION, BUSY or UNKNOWN, and never READY on a busy or asking screen."""
    claude = packs["claude"]
    bare = replace(claude, rules=tuple(r for r in claude.rules if r.id == "startup-failed"))
    verdicts = [(c.id, bare.classify(c.text()).state) for c in load_cases()]
    said = {state for _, state in verdicts}
    assert said <= {State.NEEDS_CONFIRMATION, State.BUSY, State.UNKNOWN, State.ERROR}
    assert State.NEEDS_CONFIRMATION in said and State.BUSY in said
    errors = [case_id for case_id, state in verdicts if state is State.ERROR]
    assert all(bare.classify(CORPUS.joinpath(*e.split("/", 1)).read_text()).rule_id
               == "startup-failed" for e in errors)


def test_an_unrecognised_screen_says_what_runs_there(packs: dict[str, Pack]) -> None:
    assert packs["claude"].classify("something new").summary == "claude: screen not recognised"
    verdict = packs["generic"].classify("htop-like screen", program="btop")
    assert verdict.state is State.BUSY and verdict.summary == "btop is running"


def test_classify_json_lists_the_options_with_their_keys() -> None:
    screen = CORPUS / "claude-code-2.1.330/claude-code/confirm-shell-command-200x50.txt"
    done = conductor("pty", "classify", "--cli", "claude", "--json", str(screen))
    assert done.returncode == 0, done.stderr
    options = json.loads(done.stdout)["options"]
    assert [(o["keys"], o["role"]) for o in options if o["label"] == "No"] == [(["4"], "refuse")]
    assert options[2]["label"].startswith("Yes, and switch to auto mode")
