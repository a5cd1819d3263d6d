"""`conductor pty answer` on the real Claude Code's permission dialog (a fake model on loopback
asks to run `rm -rf build` in the lab's project), and the gate's refusals around it.

The bug this guards against: `send ID 3 --force` pasted "3", the menu ignored the paste, and the
Enter after it picked the highlighted "Yes": refusing ran `rm -rf build`.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import conductor
from tests.support.agents import ClaudeInTmux
from tests.support.scripted_model import RunBash
from tests.support.waiting import retry_until, stays_false

pytestmark = [pytest.mark.slow, pytest.mark.agent]


def pty(lab: ClaudeInTmux, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return conductor("-L", lab.socket_name, "pty", *args, timeout=timeout)


def ask_to_remove_build(lab: ClaudeInTmux) -> None:
    lab.server.queue(RunBash("rm -rf build", "Remove the build directory"))
    sent = pty(lab, "send", lab.pane_id, "Clean the build folder")
    assert sent.returncode == 0, sent.stderr
    asked = pty(lab, "wait", lab.pane_id, "--until", "NEEDS_CONFIRMATION", "--timeout", "40",
                timeout=60)
    assert asked.returncode == 0, asked.stdout + asked.stderr + lab.capture()
    assert "Do you want to proceed?" in lab.capture()


def test_answer_refuse_does_not_run_the_command_and_approve_runs_it(
        claude: ClaudeInTmux) -> None:
    build = claude.project / "build"
    with claude:
        idle = pty(claude, "answer", claude.pane_id, "approve")
        assert idle.returncode == 1 and "not asking anything" in idle.stderr, idle.stderr

        ask_to_remove_build(claude)
        forced = pty(claude, "send", "--force", claude.pane_id, "3")
        assert forced.returncode == 1
        assert "conductor pty answer" in forced.stderr, forced.stderr
        assert "Do you want to proceed?" in claude.capture()

        refused = pty(claude, "answer", claude.pane_id, "refuse")
        assert refused.returncode == 0, refused.stderr + claude.capture()
        assert "answered 'No' (3) to: " in refused.stdout, refused.stdout
        assert "rm -rf build" in refused.stdout, refused.stdout  # what was refused, not only "No"
        assert "Do you want to proceed?" not in claude.capture()
        ready = pty(claude, "wait", claude.pane_id, "--timeout", "60", timeout=80)
        assert ready.returncode == 0, ready.stderr + claude.capture()
        assert stays_false(lambda: not build.exists(), 2.0, interval=0.1), claude.capture()

        ask_to_remove_build(claude)
        approved = pty(claude, "answer", claude.pane_id, "approve")
        assert approved.returncode == 0, approved.stderr + claude.capture()
        assert "answered 'Yes'" in approved.stdout
        retry_until(lambda: not build.exists(), 30,
                    message=f"the approved command did not run:\n{claude.capture()}")
