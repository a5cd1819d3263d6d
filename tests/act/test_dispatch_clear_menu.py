"""`dispatch --clear` when the clear opens a where-to-run menu, on a real tmux pane running a
stand-in agent (tests/act/fake_clear_menu.py): the option that keeps the current folder is
found by its words wherever it sits; a menu with no such option is closed with Esc and the
dispatch fails saying why, with its text never typed into the menu."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO, conductor
from tests.support.waiting import retry_until

MENU = "Where should the new conversation run?"


def start(session: Any, log: Path, *options: str) -> Any:
    command = " ".join(shlex.quote(part) for part in (
        sys.executable, "-m", "tests.act.fake_clear_menu", str(log), *options))
    window = session.new_window(window_name="agent", window_shell=f"cd {REPO} && {command}",
                                attach=False)
    pane = window.active_pane
    retry_until(lambda: "? for shortcuts" in screen(pane), 10)
    return pane


def screen(pane: Any) -> str:
    return "\n".join(pane.capture_pane())


def dispatch(server: Any, pane: Any, text: str) -> Any:
    return conductor("-L", server.socket_name, "pty", "dispatch", pane.pane_id, "--clear",
                     "--timeout", "60", text, timeout=90)


def test_the_option_that_keeps_the_folder_is_chosen_by_its_words_not_its_place(
        server: Any, session: Any, tmp_path: Path) -> None:
    log = tmp_path / "keys.log"
    pane = start(session, log, "Create a new worktree", "Use the current folder")
    done = dispatch(server, pane, "the next task")
    assert done.returncode == 0, done.stderr + screen(pane)
    assert done.stdout.strip().endswith("cleared with /clear (chose 'Use the current folder'), "
                                              "then sent")
    assert log.read_text().split() == ["2"]
    retry_until(lambda: "● Answer to: the next task" in screen(pane), 10)
    assert "● New conversation: Use the current folder" in screen(pane)


def test_a_menu_with_no_option_to_stay_is_closed_with_esc_and_nothing_is_sent(
        server: Any, session: Any, tmp_path: Path) -> None:
    log = tmp_path / "keys.log"
    pane = start(session, log, "Create a new worktree", "Pick another checkout")
    done = dispatch(server, pane, "the next task")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: not sent: /clear opened a menu with no option to stay in "
                           "the current folder (") and line.endswith("); closed it with Esc"), line
    assert log.read_text().split() == ["esc"]
    retry_until(lambda: "? for shortcuts" in screen(pane), 10)
    assert MENU not in screen(pane) and "the next task" not in screen(pane)
