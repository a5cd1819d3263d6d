"""The release sweep of Codex, Gemini CLI, Qwen Code and opencode (scripts/lab/sweep_others.py,
issue 31): the screen classes a person meets hold in every release swept, whatever the release.

The sweep's screens are named by class (`<set-up>-<class>-WxH.txt`): the `/` list and a draft are
the person typing at an ended turn (READY), a menu the person opened and a question the model asked
wait for a person (NEEDS_CONFIRMATION, with options `answer` can press), and no busy or asking
screen is READY.
"""

from __future__ import annotations

import pytest

from app.base.model import State
from app.observe.options import read_options
from app.observe.pack_loading import load_packs
from app.observe.packs import Pack
from scripts.corpus import ScreenCase, classify_cases, load_cases

# aider's sweep has a driver of its own (sweep_aider.py) and its bar in test_release_sweep_page.py:
# its prompt line with a draft is the same text as a prompt just sent, so it reads UNKNOWN.
SWEEP = [c for c in load_cases() if c.path.rpartition("/")[2].startswith(("sweep-", "first-run-"))
         and c.cli != "aider"]
RELEASES = sorted({(c.cli, c.version) for c in SWEEP})
# Qwen Code's /model lists the one configured model (nothing to choose) and opencode's /models is
# a search list with no keys on its rows: NEEDS_CONFIRMATION all the same, answered in the pane.
ASKING = ("confirm-question-form", "confirm-new-worktree-menu", "confirm-menu-model")
QUESTIONS = [c for c in SWEEP if c.cli not in ("qwen-code", "opencode")
             and any(k in c.path for k in ASKING)]


@pytest.fixture(scope="module")
def packs() -> dict[str, Pack]:
    return load_packs()


def test_the_sweep_covers_the_newest_release_of_each_cli_and_older_ones() -> None:
    versions: dict[str, set[str]] = {}
    for cli, version in RELEASES:
        versions.setdefault(cli, set()).add(version)
    assert {"0.171.0", "0.152.0", "0.142.5", "0.116.0"} <= versions["codex"]
    assert {"0.61.0", "0.51.0", "0.31.0"} <= versions["gemini-cli"]
    assert {"0.24.4", "0.12.0", "0.7.1"} <= versions["qwen-code"]
    assert "1.18.33" in versions["opencode"]


@pytest.mark.parametrize(("cli", "version"), RELEASES, ids=[f"{c}-{v}" for c, v in RELEASES])
def test_each_release_reads_the_typing_screens_ready_and_never_ready_on_work_or_asking(
        cli: str, version: str, packs: dict[str, Pack]) -> None:
    results = classify_cases(packs, [c for c in SWEEP if (c.cli, c.version) == (cli, version)])
    typing = [r for r in results
              if "ready-slash-list" in r.case.path or "ready-draft" in r.case.path]
    assert typing and all(r.predicted is State.READY for r in typing), [
        (r.case.id, r.predicted.value) for r in typing if r.predicted is not State.READY]
    dangerous = [r.case.id for r in results if r.predicted is State.READY
                 and r.case.state in (State.BUSY, State.NEEDS_CONFIRMATION)]
    assert not dangerous
    asking = [r for r in results if r.case.state is State.NEEDS_CONFIRMATION]
    missed = [r.case.id for r in asking if r.predicted is not State.NEEDS_CONFIRMATION]
    assert not missed


@pytest.mark.parametrize("case", QUESTIONS, ids=[c.id for c in QUESTIONS])
def test_a_question_or_an_opened_menu_shows_options_answer_can_press(case: ScreenCase) -> None:
    dialog = read_options(case.text())
    assert dialog is not None and len(dialog.options) >= 2
    assert all(option.keys for option in dialog.options)
