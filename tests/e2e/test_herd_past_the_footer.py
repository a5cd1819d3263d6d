"""Herding the real Claude Code whose closing question sits far from the screen's bottom: a
three-line status line under the box and a task list over it (issue 32). The bundled rules'
"last 8 lines" count from above the box and its footer block, so the question is seen and the
pane nudged once; `herd log` and `herd list` say which region the rule saw."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_herd_with_claude import NEXT_TURN, QUESTION, daemon, nudges, opt_in, pty
from tests.e2e.test_herd_with_claude import write_config as herd_config
from tests.support.agents import ClaudeInTmux
from tests.support.scripted_model import CallTool, Say
from tests.support.waiting import stays_false

pytestmark = [pytest.mark.slow, pytest.mark.agent]

__all__ = ["daemon"]  # the fixture, shared with the plain herding tests

STATUS_LINES = "print('🤖 model │ 📁 proj │ 🌿 main*')\nprint('▓▓░░░░ 23% ctx · $0.01')\n" \
    "print('⏱ session 12m · mode: manual')\n"
TASKS = ["Refactor the parser", "Run the parser tests", "Refactor the printer",
         "Run the printer tests"]
# Claude Code 2.1.197 keeps its task list with TaskCreate/TaskUpdate (TodoWrite is not offered).
PLANNING = [*(CallTool("TaskCreate", {"subject": task, "description": task}, "Planning.")
              for task in TASKS),
            *(CallTool("TaskUpdate", {"taskId": str(n), "status": "completed"}, "Done.")
              for n in (1, 2))]


def with_three_status_lines(lab: ClaudeInTmux, tmp_path: Path) -> None:
    lab.idle = re.compile(r"23% ctx")  # the status line takes the place of `? for shortcuts`
    script = tmp_path / "statusline.py"
    script.write_text(STATUS_LINES)
    settings = json.loads(lab.settings_path.read_text()) if lab.settings_path.exists() else {}
    settings["statusLine"] = {"type": "command", "command": f"{sys.executable} {script}",
                              "padding": 0}
    lab.settings_path.write_text(json.dumps(settings))


def lines_from_bottom(screen: str, needle: str) -> int:
    lines = screen.rstrip("\n").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return next(len(lines) - i for i, line in enumerate(lines) if needle in line)


def test_claude_with_status_lines_and_a_task_list_is_nudged_once_stalled(
        claude: ClaudeInTmux, daemon: Any, tmp_path: Path) -> None:
    herd_config(tmp_path)
    with_three_status_lines(claude, tmp_path)
    with claude:
        daemon()
        claude.server.queue(*PLANNING, Say(QUESTION), Say(NEXT_TURN))
        assert pty(claude, "send", claude.pane_id, "Refactor the parser, then the printer"
                   ).returncode == 0
        claude.server.wait_for_turn_end(1)
        screen = claude.wait_for_screen(r"(?s)Shall I continue.*Refactor the printer")
        # The scene holds: the question is far above the bottom, past any "last 8 lines".
        assert lines_from_bottom(screen, "Shall I continue") >= 11, screen
        opt_in(claude)

        claude.server.wait_for_turn_end(2, seconds=60)
        [nudge] = nudges(claude)
        assert nudge["text"] == "Yes, please continue." and nudge["rule_id"] == "keep-going"
        assert "saw 8 lines above the box" in nudge["detail"]
        claude.wait_for_screen("Continuing with the printer now")
        assert stays_false(lambda: len(nudges(claude)) > 1, 6.0, interval=0.5)
        listed = pty(claude, "herd", "list")
        assert listed.returncode == 0 and "8 lines above the box" in listed.stdout
        print("\n".join(pty(claude, "herd", "log", "-n", "100").stdout.splitlines()))
