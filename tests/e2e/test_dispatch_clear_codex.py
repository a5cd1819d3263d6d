"""`dispatch --clear` on the real Codex in a git repository (issue 32): `/new` there opens
`Where should the new conversation run?`; dispatch answers it with the option that keeps the
current folder, read by its words, and sends its text into the fresh conversation. No menu is
left open and no second worktree is made."""

from __future__ import annotations

import json
import subprocess

import pytest

from app.act.cycle.clearing import _same_place
from app.base.model import Option
from tests.e2e.test_claude_and_codex import codex, codex_install, pty
from tests.support.agents import CodexInTmux
from tests.support.scripted_model import Say

__all__ = ["codex", "codex_install"]  # fixtures

MENU = "Where should the new conversation run?"


def commit(lab: CodexInTmux) -> None:
    done = subprocess.run(["git", "-C", str(lab.project), "-c", "user.email=t@example.org",
                           "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "start"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def worktrees(lab: CodexInTmux) -> list[str]:
    done = subprocess.run(["git", "-C", str(lab.project), "worktree", "list", "--porcelain"],
                          capture_output=True, text=True, check=True)
    return [line for line in done.stdout.splitlines() if line.startswith("worktree ")]


@pytest.mark.slow
@pytest.mark.agent
def test_dispatch_clear_on_codex_in_a_git_repository_answers_the_worktree_menu(
        codex: CodexInTmux) -> None:
    with codex:
        commit(codex)  # the lab's `git init` comes with the start
        codex.server.queue(Say("First answer, the one to clear."), Say("Second answer here."))
        assert pty(codex, "send", codex.pane_id, "first task").returncode == 0
        codex.server.wait_for_turn_end(1)
        done = pty(codex, "dispatch", codex.pane_id, "--clear", "--timeout", "60",
                   "second task", timeout=90)
        assert done.returncode == 0, done.stderr + codex.capture()
        assert "cleared with /new (chose 'Use current Git worktree'), then sent" in done.stdout
        codex.server.wait_for_turn_end(2)
        main = [r for r in codex.server.requests if r.get("tools")]
        assert "second task" in json.dumps(main[-1]) and "First answer" not in json.dumps(main[-1])
        codex.wait_for_screen("Second answer here")
        screen = codex.capture()
        assert MENU not in screen and "First answer" not in screen, screen
        assert len(worktrees(codex)) == 1


def option(label: str, key: str) -> Option:
    return Option(label=label, keys=(key,), role="other", highlighted=False, shortcut="")


@pytest.mark.parametrize(("labels", "chosen"), [
    (["Create new Git worktree   Create a separate checkout",
      "Use current Git worktree  Keep using the current working directory"],
     "Use current Git worktree  Keep using the current working directory"),
    (["Use the current folder", "Pick another folder"], "Use the current folder"),
    (["Create new Git worktree   Keep using nothing"], None),
    (["Use current folder", "Use current worktree"], None),  # two say so: no guess
])
def test_the_option_that_stays_is_chosen_by_its_words_not_its_place(
        labels: list[str], chosen: str | None) -> None:
    found = _same_place(tuple(option(label, str(n)) for n, label in enumerate(labels, 1)))
    assert (found.label if found else None) == chosen
