"""Approve on the desktop notification of the real Claude Code's permission dialog (issue 34): a
real watcher, real notify-send, a private D-Bus bus whose notification server draws the buttons
and presses them, and a fake model on loopback that asks to run `rm -rf build`. The press runs
the command; a press on an alert whose dialog was answered by hand presses nothing and says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.e2e.test_answer_with_claude import ask_to_remove_build, pty
from tests.run.test_dialog_buttons import button, buttons_bus, dialog_alert, presses
from tests.support.agents import ClaudeInTmux
from tests.support.dbus_notifications import NotificationBus
from tests.support.waiting import STARTS_WITHIN_S, retry_until, stays_false, stop_process

pytestmark = [pytest.mark.slow, pytest.mark.agent]
__all__ = ["buttons_bus"]  # the fixture, used by name below


@pytest.fixture
def watching(claude: ClaudeInTmux, buttons_bus: NotificationBus,
             tmp_path: Path) -> Iterator[None]:
    """`conductor pty watch` on Claude's tmux server, its desktop alerts on the private bus
    (and no rate limit: the test's second dialog comes within seconds of the first)."""
    (tmp_path / "config.toml").write_text("[notify]\nmin_interval = 0\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "-L", claude.socket_name, "pty", "watch", "--interval",
         "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
        env={**os.environ, "DBUS_SESSION_BUS_ADDRESS": buttons_bus.address})
    yield
    stop_process(proc, seconds=STARTS_WITHIN_S)


def alerts_after(bus: NotificationBus, seen: int) -> dict[str, object]:
    found: list[dict[str, object]] = []

    def new_one() -> bool:
        found[:] = [r for r in bus.records()[seen:] if r["actions"]]
        return bool(found)

    retry_until(new_one, STARTS_WITHIN_S)
    return found[-1]


def test_approve_on_the_alert_runs_the_command_and_a_stale_press_does_nothing(
        claude: ClaudeInTmux, buttons_bus: NotificationBus, watching: None,
        isolated_env: Path) -> None:
    build = claude.project / "build"
    with claude:
        ask_to_remove_build(claude)
        alert = dialog_alert(buttons_bus)

        buttons_bus.press(int(str(alert["id"])), button(alert, "Approve"))

        retry_until(lambda: not build.exists(), 60,
                    message=f"the approved command did not run:\n{claude.capture()}")
        retry_until(lambda: any("pressed 'Yes'" in p for p in presses(isolated_env)), 30)
        # The turn the approval let go on ends before the next question is asked.
        ready = pty(claude, "wait", claude.pane_id, "--timeout", "90", timeout=120)
        assert ready.returncode == 0, ready.stderr + claude.capture()

        build.mkdir()
        seen = len(buttons_bus.records())
        ask_to_remove_build(claude)
        second = alerts_after(buttons_bus, seen)
        claude.send_keys("Escape")  # refused by hand, in the pane
        retry_until(lambda: "Do you want to proceed?" not in claude.capture(), 30)

        buttons_bus.press(int(str(second["id"])), button(second, "Approve"))

        retry_until(lambda: any("nothing pressed" in str(r["summary"]) + str(r["body"])
                                for r in buttons_bus.records()[seen:]), STARTS_WITHIN_S)
        assert stays_false(lambda: not build.exists(), 2.0, interval=0.1), claude.capture()
