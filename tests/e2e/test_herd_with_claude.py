"""Herding the real Claude Code (from the agent tests' npm cache) against a fake model.

The model ends its first turn asking "Shall I continue?": the daemon must type exactly one
nudge after ``stall_after`` and the agent's next turn must start. A permission dialog must
never be answered under the bundled rules, however long it waits, and a prompt a person is
typing into is never nudged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, conductor
from tests.support.agents import ClaudeInTmux
from tests.support.scripted_model import RunBash, Say
from tests.support.waiting import retry_until, stays_false, stop_process

pytestmark = [pytest.mark.slow, pytest.mark.agent]

QUESTION = "I refactored the parser and its tests pass. Shall I continue with the printer?"
NEXT_TURN = "Continuing with the printer now. Done."


def write_config(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "[watch]\ninterval = 0.5\n\n[states]\nwaiting_grace = 2.0\n\n"
        "[herd]\nstall_after = 2.0\nstability = 1.0\ncooldown = 600.0\n")


def pty(lab: ClaudeInTmux, *args: str) -> subprocess.CompletedProcess[str]:
    return conductor("-L", lab.socket_name, "pty", *args)


@pytest.fixture
def daemon(claude: ClaudeInTmux, tmp_path: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[str]] = []

    def start() -> None:
        started.append(subprocess.Popen(
            [sys.executable, "-m", "app", "-L", claude.socket_name, "pty", "watch", "-v"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO))

    yield start
    for proc in started:
        stop_process(proc, seconds=10)


def opt_in(lab: ClaudeInTmux, *extra: str) -> None:
    def known() -> bool:
        done = pty(lab, "status", "--json")
        return done.returncode == 0 and any(w["pane_id"] == lab.pane_id
                                            for w in json.loads(done.stdout))
    retry_until(known, 30, interval=0.3)
    done = pty(lab, "herd", "on", lab.pane_id, *extra)
    assert done.returncode == 0, done.stderr


def log(lab: ClaudeInTmux) -> list[dict[str, Any]]:
    done = pty(lab, "herd", "log", "-n", "100", "--json")
    return [json.loads(line) for line in done.stdout.splitlines()] if done.returncode == 0 \
        else []


def nudges(lab: ClaudeInTmux) -> list[dict[str, Any]]:
    return [row for row in log(lab) if row["outcome"] == "nudged"]


def test_claude_asking_shall_i_continue_gets_one_nudge_and_its_next_turn_starts(
        claude: ClaudeInTmux, daemon: Any, tmp_path: Path) -> None:
    write_config(tmp_path)
    with claude:
        daemon()
        opt_in(claude)
        claude.server.queue(Say(QUESTION), Say(NEXT_TURN))
        sent = pty(claude, "send", claude.pane_id, "Refactor the parser, then the printer")
        assert sent.returncode == 0, sent.stderr
        first_end = claude.server.wait_for_turn_end(1)

        second_end = claude.server.wait_for_turn_end(2, seconds=60)
        [nudge] = nudges(claude)
        assert nudge["text"] == "Yes, please continue." and nudge["rule_id"] == "keep-going"
        assert nudge["ts"] - first_end >= 2.0  # stall_after, counted from the settled screen
        main = [r for r in claude.server.requests if r.get("tools")]
        assert "Yes, please continue." in json.dumps(main[-1]["messages"][-1])
        claude.wait_for_screen("Continuing with the printer now")
        # Exactly one: the answered question is still on screen, and nothing types again.
        assert stays_false(lambda: len(nudges(claude)) > 1, 6.0, interval=0.5)
        assert second_end > nudge["ts"]
        print("\n".join(pty(claude, "herd", "log", "-n", "100").stdout.splitlines()))


def test_claude_permission_dialog_is_never_answered(
        claude: ClaudeInTmux, daemon: Any, tmp_path: Path) -> None:
    write_config(tmp_path)
    with claude:
        daemon()
        opt_in(claude, "--rules", "persistent")
        assert pty(claude, "goal", claude.pane_id, "clean the build").returncode == 0
        claude.server.queue(RunBash("rm -rf build", "Remove the build directory"))
        assert pty(claude, "send", claude.pane_id, "Clean the build folder").returncode == 0
        claude.wait_for_screen("Do you want to proceed?")
        # Past waiting_grace (2 s) it is "waiting long" and eligible; no rule may answer.
        retry_until(lambda: any(r["state"] == "NEEDS_CONFIRMATION" and r["reason"] == "no_rule"
                                for r in log(claude)), 30, interval=0.5,
                    message=f"{log(claude)}")
        assert stays_false(lambda: nudges(claude), 4.0, interval=0.5)
        assert "Do you want to proceed?" in claude.capture()
        assert (claude.project / "build").exists()
        print("\n".join(pty(claude, "herd", "log", "-n", "100").stdout.splitlines()))


def test_claude_with_a_half_typed_prompt_is_never_nudged(
        claude: ClaudeInTmux, daemon: Any, tmp_path: Path) -> None:
    write_config(tmp_path)
    with claude:
        daemon()
        opt_in(claude)
        claude.server.queue(Say(QUESTION))
        assert pty(claude, "send", claude.pane_id, "Refactor the parser").returncode == 0
        claude.server.wait_for_turn_end(1)
        claude.wait_for_screen("Shall I continue")
        claude.type_text("wait, first rename the")  # a person, mid-sentence
        retry_until(lambda: any(r["reason"] == "draft_in_prompt" for r in log(claude)), 30,
                    interval=0.5, message=f"{log(claude)}")
        assert stays_false(lambda: nudges(claude), 4.0, interval=0.5)
        assert len(claude.server.turn_ends()) == 1
