"""Questions a person must answer that are no permission menus (issue 31): Codex's
``request_user_input`` form and its ``/new`` worktree menu, and the menus a person opens
(``/model``), as real releases drew them in the sweep (tests/corpus/*-sweep, codex-0.171.0).
They are NEEDS_CONFIRMATION with their options, and ``answer`` picks an option by its number or
label, never by "approve": a question has no yes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from app.act import gate
from app.base.inputs import Refused
from app.base.model import State
from app.base.screen import normalise
from app.observe.pack_loading import load_packs
from scripts.corpus import CORPUS
from tests.conftest import conductor
from tests.support.waiting import retry_until

FORM = CORPUS / "heldout-codex-0.171.0/codex/sweep-120x40-confirm-question-form-120x40.txt"
AFTER = CORPUS / "codex-0.171.0/codex/sweep-120x40-ready-after-question-120x40.txt"
QUESTIONS = [
    ("heldout-codex-0.171.0/codex/sweep-120x40-confirm-question-form-120x40.txt", "SQLite"),
    ("codex-0.142.5-sweep/codex/sweep-120x40-confirm-question-form-120x40.txt", "SQLite"),
    ("codex-0.171.0/codex/sweep-120x40-confirm-new-worktree-menu-120x40.txt",
     "Create new Git worktree"),
    ("gemini-cli-0.61.0-sweep/gemini-cli/sweep-120x40-confirm-menu-model-120x40.txt", "Manual"),
]
# Draws the form, reads one key as the real form does (cbreak), logs it, draws the turn that
# followed the answer, then waits to be stopped.
FORM_PROGRAM = """
import sys, termios, time, tty
from pathlib import Path
form, after, log = sys.argv[1:4]
def show(path):
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    sys.stdout.write("\\x1b[H\\x1b[2J" + "\\r\\n".join(lines))
    sys.stdout.flush()
tty.setcbreak(0)
show(form)
key = sys.stdin.read(1)
Path(log).write_text(key)
show(after)
time.sleep(600)
"""


@pytest.fixture
def session_params() -> dict[str, Any]:
    return {"x": 120, "y": 40}


@pytest.mark.parametrize(("path", "second"), QUESTIONS, ids=[p for p, _ in QUESTIONS])
def test_a_question_is_needs_confirmation_with_its_options(path: str, second: str) -> None:
    text = normalise((CORPUS / path).read_text(encoding="utf-8"))
    pack = load_packs()["gemini" if "gemini" in path else "codex"]
    verdict = pack.classify(text)
    assert verdict.state is State.NEEDS_CONFIRMATION, verdict.rule_id
    by_number = gate.decision_on(text, "2")
    assert by_number.keys == ("2",) and by_number.label.startswith(second)
    assert gate.decision_on(text, second).keys == ("2",)


@pytest.mark.parametrize("choice", ["approve", "refuse"])
def test_a_question_form_has_no_yes_or_no_to_press(choice: str) -> None:
    text = normalise(FORM.read_text(encoding="utf-8"))
    with pytest.raises(Refused, match=f"no key that would {choice}"):
        gate.decision_on(text, choice)


def test_answer_picks_a_question_form_option_by_its_label(
        server: Any, session: Any, tmp_path: Path) -> None:
    program, log = tmp_path / "form.py", tmp_path / "keys.log"
    program.write_text(FORM_PROGRAM, encoding="utf-8")
    pane = session.new_window(
        window_name="codex", attach=False, start_directory=str(tmp_path),
        window_shell=f"{sys.executable} {program} {FORM} {AFTER} {log}").active_pane
    retry_until(lambda: "enter to submit answer" in "\n".join(pane.capture_pane()), 10)

    done = conductor("-L", server.socket_name, "pty", "answer", pane.pane_id, "SQLite",
                     timeout=60)

    assert done.returncode == 0, done.stdout + done.stderr
    assert log.read_text() == "2"
    retry_until(lambda: "answer: SQLite" in "\n".join(pane.capture_pane()), 10)
