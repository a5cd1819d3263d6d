"""The Codex releases that draw no end mark (0.142.5, 0.152.0), for real: only `notify` or the
window title (design/signals.md) ends a turn.

A finished turn of theirs looks like a still frame of a streaming reply (Codex draws a reply line
by line, so the screen can stand still for seconds mid-reply), so the pack reads it BUSY with the
reason ``no_end_mark``, and app/observe/assess.py lets Codex's ``notify`` program overrule that
once the
screen is still. What these releases do, measured against tests/support/fake_openai.py (2026-11-23):

- ``notify = [...]`` as `conductor pty hooks install --cli codex` writes it is accepted by both.
- It runs once per user turn with ``{"type": "agent-turn-complete", "thread-id", "turn-id", "cwd",
  "client": "codex-tui", "input-messages", "last-assistant-message"}``, 0-35 ms after the model's
  last byte, while the TUI is still drawing: its last bytes come 1-80 ms after the program
  starts, so the hook's row can predate the final frame. Never at start-up, for an approval
  prompt or on /quit; a turn with a tool call gets one call, at its very end.
- 0.152.0 (not 0.142.5) runs it too for its hidden turn that titles the thread, about 0.1 s after
  the first prompt (another thread-id); app/observe/hookevents.py reads that one as ``other``.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_claude_and_codex import (
    RETURNS_WITHIN_S,
    SLOW_TASK,
    finish,
    install_notify,
    pty,
    send_and_time_wait,
    start_wait,
)
from tests.support.agents import AgentUnavailable, Install, OldCodexInTmux, install_codex
from tests.support.scripted_model import RunBash
from tests.support.waiting import stays_false, stop_process

pytestmark = [pytest.mark.slow, pytest.mark.agent]

RELEASES = ("0.142.5", "0.152.0")
# Without the hook, BUSY must still hold this long after the turn's last byte: well past the
# stability window that makes a still screen READY for other CLIs.
STILL_AFTER_END_S = 5.0
READY_LINE = re.compile(r": READY \[")  # how `wait -v` reports a READY assessment


@pytest.fixture(scope="module", params=RELEASES)
def old_codex_install(request: pytest.FixtureRequest) -> Install:
    try:
        return install_codex(version=request.param)
    except AgentUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def old_codex(old_codex_install: Install, tmp_path: Path, isolated_env: Path
              ) -> Iterator[OldCodexInTmux]:
    """An old Codex, idle, in its own tmux server; its notify program (if installed) reaches our
    store."""
    lab = OldCodexInTmux(tmp_path / "agent", old_codex_install.binary,
                         env={"CONDUCTOR_WORKERS_DIR": str(isolated_env)})
    yield lab
    lab.close()


def test_with_notify_each_turn_is_ready_once_the_screen_is_still(
    old_codex: OldCodexInTmux,
) -> None:
    """READY after each turn's real end and within the stability window of it, never before: not
    on 0.152.0's title-turn hook, which comes as the first turn starts, nor, in the second turn,
    on the first turn's hook. A `wait` begun afterwards takes no earlier hook's word (it cannot
    tell this still screen from a pause in a reply to a prompt typed in by hand), but the pane's
    title can: Codex's bare project title, no spinner, says it stopped."""
    install_notify(old_codex)
    with old_codex:
        lags = [send_and_time_wait(old_codex, turns_before=n) for n in range(2)]
        again = pty(old_codex, "wait", old_codex.pane_id, "--until", "READY", "--timeout", "10",
                    "-v")
    assert all(0 < lag < RETURNS_WITHIN_S for lag in lags), f"lags after the turn end: {lags}"
    assert again.returncode == 0, again.stdout + again.stderr
    assert "title_stopped" in again.stdout + again.stderr, again.stdout + again.stderr


def test_without_notify_the_titles_spinner_ends_the_turn_never_before_the_reply_ends(
    old_codex: OldCodexInTmux,
) -> None:
    """No hook: the screen has no end mark, but the window title's spinner turns for the whole
    turn and stops at its end (design/signals.md). That stop lets the still screen after it be
    READY; never while the reply streams (the screen stands still between its lines, the title
    spinner does not)."""
    with old_codex:
        old_codex.server.queue(SLOW_TASK)
        sent = pty(old_codex, "send", old_codex.pane_id, "Write a slow answer")
        assert sent.returncode == 0, sent.stderr
        until_ready = start_wait(old_codex, "--until", "READY", "--timeout", "60", "-v")
        status, returned, said = finish(until_ready, 70)
        ends = old_codex.server.turn_ends()
    assert status == 0, said
    assert ends and returned >= ends[0], f"READY before the turn ended:\n{said}"


def test_without_notify_a_wait_begun_after_the_turn_reads_the_stopped_title(
    old_codex: OldCodexInTmux,
) -> None:
    """Nobody looked while the turn ended: no hook, no turn end seen, a still screen with no end
    mark. The pane's title (the bare project name, no spinner) says Codex stopped: READY. A wait
    begun mid-reply (the stream held before its last words) is not: the title spins."""
    with old_codex:
        held = threading.Event()
        old_codex.server.queue(dataclasses.replace(SLOW_TASK, held_until=held))
        sent = pty(old_codex, "send", old_codex.pane_id, "Write a slow answer")
        assert sent.returncode == 0, sent.stderr
        try:
            mid = pty(old_codex, "wait", old_codex.pane_id, "--until", "READY", "--timeout", "4",
                      "-v")
        finally:
            held.set()
        old_codex.server.wait_for_turn_end(1, 60)
        after = pty(old_codex, "wait", old_codex.pane_id, "--until", "READY", "--timeout", "15",
                    "-v")
    assert mid.returncode != 0 and not READY_LINE.search(mid.stderr), mid.stderr
    assert ": BUSY [" in mid.stderr, mid.stderr
    assert after.returncode == 0, after.stdout + after.stderr
    assert "title_stopped" in after.stdout + after.stderr, after.stdout + after.stderr


# After a tool call these releases close the turn with a full-width rule under the reply, drawn
# 0.04-0.1 s after its last byte: the pack's `reply-closed-by-rule` reads that as READY.


def test_with_notify_ready_after_an_approved_command(old_codex: OldCodexInTmux) -> None:
    """NEEDS_CONFIRMATION while the approval prompt is up and never READY then; READY within the
    stability window after the approved command's summary ends."""
    install_notify(old_codex)
    with old_codex:
        old_codex.server.queue(RunBash("rm -rf build", "Remove the build directory"))
        sent = pty(old_codex, "send", old_codex.pane_id, "Clean the build folder")
        assert sent.returncode == 0, sent.stderr
        until_ready = start_wait(old_codex, "--until", "READY", "--timeout", "60", "-v")
        try:
            asked = pty(old_codex, "wait", old_codex.pane_id, "--until", "NEEDS_CONFIRMATION",
                        "--timeout", "20")
            assert asked.returncode == 0, asked.stdout + asked.stderr + old_codex.capture()
            assert "Would you like to run the following command?" in old_codex.capture()
            assert stays_false(lambda: until_ready.poll() is not None, 3.0), \
                finish(until_ready, 1)
            old_codex.send_keys("y")
            end = old_codex.server.wait_for_turn_end(1, 30)
            status, returned, output = finish(until_ready, end + RETURNS_WITHIN_S + 1
                                              - time.time())
        finally:
            stop_process(until_ready)
    assert status == 0, output
    assert 0 < returned - end < RETURNS_WITHIN_S, f"{returned - end:.2f} s after the end"
