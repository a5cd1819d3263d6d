"""As a new user would: the real Claude Code or Codex in tmux, a fake model on loopback, our CLI.

`conductor pty send` types a task, `conductor pty wait` must return after the fake server's last
byte of the turn (never before) and soon after it: within the READY stability window from the
screen alone, within 2 s when the agent's hooks (Codex: its `notify` program) report the end.
Each CLI is installed once into ``$CONDUCTOR_AGENT_CACHE`` (default
``~/.cache/conductor-pty/agents``); without npm, or when the install fails, its tests skip.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, conductor
from tests.support.agents import (
    AgentInTmux,
    AgentUnavailable,
    ClaudeInTmux,
    CodexInTmux,
    Install,
    install_codex,
)
from tests.support.scripted_model import RunBash, Say
from tests.support.waiting import retry_until, stays_false

pytestmark = [pytest.mark.slow, pytest.mark.agent]

# What these tests hold is the behaviour: `wait` returns after the turn's real end, never before,
# and it does return. How soon is a figure, not a test (scripts/bench.py: READY from the screen
# alone needs the same screen for 1.5 s and `wait` polls every 0.5 s, 1.9-2.1 s measured; with
# hooks 0.4-0.5 s): on a loaded two-core CI machine the same run took over 3 s. The bound only
# says "returned because the turn ended, not because a timeout or another turn came".
RETURNS_WITHIN_S = 20.0
SLOW_TASK = Say.words(28, delay=0.25)  # about 7 s of streaming, 4 lines


@pytest.fixture(scope="module")
def codex_install() -> Install:
    try:
        return install_codex()
    except AgentUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def codex(codex_install: Install, tmp_path: Path, isolated_env: Path) -> Iterator[CodexInTmux]:
    """Codex, idle, in its own tmux server; its notify program (if installed) reaches our store."""
    lab = CodexInTmux(tmp_path / "agent", codex_install.binary,
                      env={"CONDUCTOR_WORKERS_DIR": str(isolated_env)})
    yield lab
    lab.close()


def pty(lab: AgentInTmux, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return conductor("-L", lab.socket_name, "pty", *args, timeout=timeout)


def start_wait(lab: AgentInTmux, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app", "-L", lab.socket_name, "pty", "wait", lab.pane_id, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env=dict(os.environ),
    )


def finish(proc: subprocess.Popen[str], seconds: float) -> tuple[int, float, str]:
    """Exit status, the time.time() it was seen to exit, and its output."""
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"wait still running after {seconds} s:\n{out}{err}") from None
    return proc.returncode, time.time(), out + err


def send_and_time_wait(lab: AgentInTmux, turns_before: int) -> float:
    """Send the slow task, wait for it; seconds from the turn's real end to `wait` returning.

    The turn ends only once `wait` has had its first look at the pane (`-v` says what it saw):
    on a loaded machine its start can take longer than the whole reply, and a wait begun after a
    turn's end rightly takes no earlier hook's word for the still screen."""
    looked = threading.Event()
    lab.server.queue(dataclasses.replace(SLOW_TASK, held_until=looked))
    sent = pty(lab, "send", lab.pane_id, "Write a slow answer")
    assert sent.returncode == 0, sent.stderr
    proc = start_wait(lab, "--until", "READY", "--timeout", "60", "-v")
    assert proc.stderr is not None
    first_look = proc.stderr.readline()
    looked.set()
    status, returned, output = finish(proc, 70)
    output = first_look + output
    assert status == 0, output
    ends = lab.server.turn_ends()
    assert len(ends) > turns_before, (
        f"wait returned before the turn ended: {lab.server.responses}\n{output}\n{lab.capture()}")
    return returned - ends[turns_before]


def test_wait_without_hooks_returns_after_the_turn_within_the_window(
    claude: ClaudeInTmux,
) -> None:
    with claude:
        lag = send_and_time_wait(claude, turns_before=0)
    assert 0 < lag < RETURNS_WITHIN_S, f"wait returned {lag:.2f} s after the turn ended"


def install_hooks(lab: AgentInTmux) -> None:
    """`conductor pty hooks install` for the lab's CLI, into its scratch settings."""
    installed = pty(lab, "hooks", "install", "--cli", lab.cli, "--path", str(lab.hooks_path))
    assert installed.returncode == 0, installed.stderr


def test_wait_with_hooks_returns_within_two_seconds(claude: ClaudeInTmux) -> None:
    install_hooks(claude)
    assert "hooks" in json.loads(claude.settings_path.read_text())
    with claude:
        lags = [send_and_time_wait(claude, turns_before=n) for n in range(2)]
    assert all(0 < lag < RETURNS_WITHIN_S for lag in lags), f"lags after the turn end: {lags}"


def hold_through_permission(lab: AgentInTmux, question: str, approve: str, hooks: bool) -> None:
    """Ask for a command that needs approval: `wait --until NEEDS_CONFIRMATION` returns while the
    prompt is up, `wait --until READY` only after ``approve`` (tmux keys) and the final answer."""
    with lab:
        lab.server.queue(RunBash("rm -rf build", "Remove the build directory"))
        sent = pty(lab, "send", lab.pane_id, "Clean the build folder")
        assert sent.returncode == 0, sent.stderr
        until_ready = start_wait(lab, "--until", "READY", "--timeout", "60")

        asked = pty(lab, "wait", lab.pane_id, "--until", "NEEDS_CONFIRMATION",
                    "--timeout", "20", timeout=30)
        assert asked.returncode == 0, asked.stdout + asked.stderr + lab.capture()
        assert question in lab.capture()
        # The prompt is up and nothing moves: READY must not be reported while it waits.
        assert stays_false(lambda: until_ready.poll() is not None, 3.0), finish(until_ready, 1)

        lab.send_keys(approve)
        status, returned, output = finish(until_ready, 40)
        assert status == 0, output
        ends = lab.server.turn_ends()
        assert ends, f"wait returned before the summary ended: {lab.server.responses}"
        lag = returned - ends[0]
        assert 0 < lag < RETURNS_WITHIN_S, f"{lag:.2f} s after the end"
        retry_until(lambda: not (lab.project / "build").exists(), 5,
                    message="the approved command did not run")


@pytest.mark.parametrize("hooks", [False, True], ids=["screen", "hooks"])
def test_wait_holds_through_a_permission_prompt(claude: ClaudeInTmux, hooks: bool) -> None:
    if hooks:
        install_hooks(claude)
    hold_through_permission(claude, "Do you want to proceed?", "Enter",  # "1. Yes" is highlighted
                            hooks)


# Codex: no hook at turn start or for approvals, only `notify` at the turn's end. While the reply
# streams its screen shows no busy marker at all; the pack reads the reply without an end mark.


def install_notify(lab: CodexInTmux) -> None:
    install_hooks(lab)
    assert "notify = [" in lab.config_path.read_text()


def test_codex_wait_without_hooks_returns_after_the_turn_within_the_window(
    codex: CodexInTmux,
) -> None:
    with codex:
        lag = send_and_time_wait(codex, turns_before=0)
    assert 0 < lag < RETURNS_WITHIN_S, f"wait returned {lag:.2f} s after the turn ended"


def test_codex_wait_with_notify_returns_within_two_seconds(codex: CodexInTmux) -> None:
    install_notify(codex)
    with codex:
        lags = [send_and_time_wait(codex, turns_before=n) for n in range(2)]
    assert all(0 < lag < RETURNS_WITHIN_S for lag in lags), f"lags after the turn end: {lags}"


@pytest.mark.parametrize("hooks", [False, True], ids=["screen", "notify"])
def test_codex_wait_holds_through_an_approval_prompt(codex: CodexInTmux, hooks: bool) -> None:
    if hooks:
        install_notify(codex)
    hold_through_permission(codex, "Would you like to run the following command?", "y", hooks)
