"""The real Claude Code with a status line of the kind people configure: lines under the input box
that the pack must read past, and a clock that Claude Code re-draws every second
(``statusLine.refreshInterval``), which must not keep the idle screen from settling into READY."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from tests.e2e.test_claude_and_codex import RETURNS_WITHIN_S, send_and_time_wait
from tests.support.agents import ClaudeInTmux
from tests.support.waiting import retry_until

pytestmark = [pytest.mark.slow, pytest.mark.agent]

STATUS_LINE = textwrap.dedent("""\
    import json, sys, time
    data = json.load(sys.stdin)
    model = (data.get("model") or {}).get("display_name") or "?"
    print(f"\\x1b[36m🤖 {model}\\x1b[0m │ 📁 proj │ 🌿 main* │ 🕐 {time.strftime('%H:%M:%S')}")
    print(f"▓▓░░░░░░░░ 23% ctx · 💰 $0.01 · {time.monotonic_ns()}")
    """)


def with_status_line(lab: ClaudeInTmux, tmp_path: Path) -> None:
    # the status line takes the place of `? for shortcuts`: idle is the line drawn under the box
    lab.idle = re.compile(r"23% ctx")
    script = tmp_path / "statusline.py"
    script.write_text(STATUS_LINE)
    settings = json.loads(lab.settings_path.read_text()) if lab.settings_path.exists() else {}
    settings["statusLine"] = {"type": "command", "command": f"{sys.executable} {script}",
                              "padding": 0, "refreshInterval": 1}
    lab.settings_path.write_text(json.dumps(settings))


def test_wait_returns_after_the_turn_under_a_ticking_status_line(
    claude: ClaudeInTmux, tmp_path: Path,
) -> None:
    with_status_line(claude, tmp_path)
    with claude:
        first = claude.capture()
        # the scene holds only if Claude Code really re-draws the line by itself while idle
        retry_until(lambda: claude.capture() != first, seconds=15,
                    message="the status line never changed by itself")
        lag = send_and_time_wait(claude, turns_before=0)
    assert 0 < lag < RETURNS_WITHIN_S, f"wait returned {lag:.2f} s after the turn ended"
