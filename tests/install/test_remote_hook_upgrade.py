"""An install on a host over the lines an older release put there (app.install.remote_hooks):
the older line of ours is replaced, never run beside the new one; the person's own hooks and
groups stay as they were."""

from __future__ import annotations

import json
import shlex

from app.adapters.control import HOOK_OPTION
from app.install.remote_hooks import hook_line, merged


def _older(event: str) -> str:
    """The line releases before the session fields wrote for every event."""
    value = shlex.quote(f"claude {event} ") + "$$' '$(date +%s)"
    return f'tmux set-option -p -t "$TMUX_PANE" {HOOK_OPTION} {value} >/dev/null 2>&1 || true'


def test_an_older_line_of_ours_is_replaced_and_the_rest_stays() -> None:
    old = {"theme": "dark", "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-me"},
                            {"type": "command", "command": _older("Stop"), "timeout": 99}]},
                 {"hooks": [{"type": "command", "command": _older("Stop")}]},
                 {"hooks": []}],  # the person's own empty group stays
        "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command",
                                                   "command": _older("PreToolUse")}]}]}}
    text, _ = merged("claude", "alpha:/s.json", json.dumps(old))
    assert text is not None
    hooks = json.loads(text)["hooks"]
    stop = [[h["command"] for h in g["hooks"]] for g in hooks["Stop"]]
    assert stop == [["notify-me"], [], [hook_line("claude", "Stop")]]
    # A tool event's line did not change: it stays where it was, once.
    assert [[h["command"] for h in g["hooks"]] for g in hooks["PreToolUse"]] == \
        [[hook_line("claude", "PreToolUse")]]
    assert json.loads(text)["theme"] == "dark"
    again, _ = merged("claude", "alpha:/s.json", text)
    assert again is None  # installed: nothing to change
