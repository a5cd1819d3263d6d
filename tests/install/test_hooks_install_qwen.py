"""`hooks install --cli qwen`: Qwen Code 0.24 reads Claude Code's hook shape from its own
settings.json (seen live: every event below reached a recorder hook with `session_id` and
`transcript_path`; design/hooks.md)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from app.install.hooks import HOOK_TIMEOUT_S, QWEN_EVENTS, default_path, install, uninstall

COMMAND = ["/opt/conductor/bin/conductor", "pty", "hook"]
OURS = shlex.join([*COMMAND, "--cli", "qwen"])


def test_qwen_gets_claudes_event_names_in_seconds_and_nothing_run_in_the_background(
        tmp_path: Path) -> None:
    path = tmp_path / ".qwen" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"security": {"auth": {"selectedType": "openai"}}}))
    result = install("qwen", COMMAND, path)
    settings = json.loads(path.read_text())
    assert settings["security"] == {"auth": {"selectedType": "openai"}}
    assert set(settings["hooks"]) == set(QWEN_EVENTS)
    assert "SessionStart" in QWEN_EVENTS  # names the session before the first prompt
    assert settings["hooks"]["PreToolUse"] == [{"matcher": "*", "hooks": [
        {"type": "command", "command": OURS, "timeout": HOOK_TIMEOUT_S}]}]
    # Claude's `async` key is Claude's: Qwen Code is not known to honour it.
    assert settings["hooks"]["Stop"] == [{"hooks": [
        {"type": "command", "command": OURS, "timeout": HOOK_TIMEOUT_S}]}]
    assert result.backup is not None
    assert not install("qwen", COMMAND, path).changed
    assert uninstall("qwen", path).changed
    assert "hooks" not in json.loads(path.read_text()) or \
        not json.loads(path.read_text())["hooks"]


def test_qwen_settings_follow_qwen_home(tmp_path: Path) -> None:
    assert default_path("qwen", {"HOME": str(tmp_path)}) == tmp_path / ".qwen" / "settings.json"
    assert default_path("qwen", {"HOME": str(tmp_path), "QWEN_HOME": str(tmp_path / "q")}) == \
        tmp_path / "q" / "settings.json"
