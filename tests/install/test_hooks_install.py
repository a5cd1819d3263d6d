"""``hooks install`` on real files: the user's settings survive, a second install is a no-op,
backups hold the original bytes, and files we cannot merge safely are refused untouched."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import time
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from app.base.errors import ConfigError
from app.install.hooks import (
    CLAUDE_ASYNC_EVENTS,
    CLAUDE_EVENTS,
    GEMINI_DETACHED_EVENTS,
    GEMINI_EVENTS,
    HOOK_NAME,
    HOOK_TIMEOUT_S,
    default_path,
    detached,
    hook_words,
    install,
    uninstall,
)
from app.install.mcp import install as mcp_install
from tests.conftest import conductor

COMMAND = ["/home/ana/.local/bin/conductor", "pty", "hook"]

USER_CLAUDE: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test:*)"], "deny": []},
    "env": {"FOO": "bar"},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard.sh"}]}
        ],
    },
    "statusLine": {"type": "command", "command": "conductor pty status --short"},
}

CODEX_CONFIG = """\
# Ana's Codex settings
model = "gpt-5-codex"  # the fast one
approval_policy = "on-request"

[profiles.quiet]
model = "o4-mini"
notify = ["notify-send", "Codex"]

# MCP servers
[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]
"""


def ours(cli: str, command: list[str] = COMMAND) -> str:
    return shlex.join([*command, "--cli", cli])


def write_json(path: Path, data: Any, mode: int = 0o640) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4) + "\n")
    path.chmod(mode)
    return path.read_bytes()


def load(path: Path) -> Any:
    return json.loads(path.read_text())


def commands(settings: dict[str, Any], event: str) -> list[str]:
    return [hook["command"] for group in settings["hooks"][event] for hook in group["hooks"]]


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bak-*"))


def leftovers(folder: Path) -> list[Path]:
    return [entry for entry in folder.iterdir() if entry.name.endswith(".tmp")]


# --- Claude Code -------------------------------------------------------------------------------


def test_claude_fresh_install_writes_every_event(tmp_path: Path) -> None:
    path = tmp_path / "claude" / "settings.json"
    result = install("claude", COMMAND, path)
    assert (result.path, result.changed, result.backup) == (path, True, None)
    settings = load(path)
    assert list(settings["hooks"]) == list(CLAUDE_EVENTS)
    for event in CLAUDE_EVENTS:
        (group,) = settings["hooks"][event]
        # The events that tell of what already happened run in the background: Claude Code
        # draws its idle prompt or dialog without waiting for us.
        background = {"async": True} if event in CLAUDE_ASYNC_EVENTS else {}
        assert group["hooks"] == [
            {"type": "command", "command": ours("claude"), "timeout": HOOK_TIMEOUT_S,
             **background}
        ]
        tool_events = ("PreToolUse", "PermissionRequest", "PostToolUse")
        assert group.get("matcher") == ("*" if event in tool_events else None)
    # Settings may hold API keys in "env": a file we create is private.
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(result.snippet) == {"hooks": settings["hooks"]}
    assert leftovers(path.parent) == []


def test_claude_merge_keeps_user_settings_and_hooks(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    original = write_json(path, USER_CLAUDE)
    result = install("claude", COMMAND, path)
    assert result.changed
    settings = load(path)
    for key in ("model", "permissions", "env", "statusLine"):
        assert settings[key] == USER_CLAUDE[key]
    assert commands(settings, "Stop") == ["say done", ours("claude")]
    assert settings["hooks"]["PreToolUse"][0] == USER_CLAUDE["hooks"]["PreToolUse"][0]
    assert commands(settings, "PreToolUse") == ["~/bin/guard.sh", ours("claude")]
    # The backup is the file as it was, mode included; the new file keeps the user's mode.
    assert result.backup is not None and backups(path) == [result.backup]
    assert result.backup.read_bytes() == original
    assert stat.S_IMODE(result.backup.stat().st_mode) == 0o640
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert leftovers(tmp_path) == []


def test_claude_second_install_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    write_json(path, USER_CLAUDE)
    install("claude", COMMAND, path)
    after_first = path.read_bytes()
    again = install("claude", COMMAND, path)
    assert (again.changed, again.backup) == (False, None)
    assert path.read_bytes() == after_first
    assert len(backups(path)) == 1
    for event in CLAUDE_EVENTS:
        assert commands(load(path), event).count(ours("claude")) == 1


def test_claude_user_edits_to_our_entry_are_respected(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    install("claude", COMMAND, path)
    settings = load(path)
    settings["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 30
    write_json(path, settings)
    assert not install("claude", COMMAND, path).changed
    assert load(path)["hooks"]["Stop"][0]["hooks"][0]["timeout"] == 30


def test_claude_an_install_from_before_async_hooks_gains_them_once(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    install("claude", COMMAND, path)
    settings = load(path)
    for event in CLAUDE_EVENTS:
        settings["hooks"][event][0]["hooks"][0].pop("async", None)  # as an older release wrote
    settings["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 30
    write_json(path, settings)
    assert install("claude", COMMAND, path).changed
    stop = load(path)["hooks"]["Stop"][0]["hooks"][0]
    assert (stop["async"], stop["timeout"]) == (True, 30)  # the user's timeout stays
    assert "async" not in load(path)["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    assert not install("claude", COMMAND, path).changed


def test_claude_moved_install_updates_our_entry_instead_of_adding_one(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    old = ["/old/venv/bin/conductor", "pty", "hook"]
    install("claude", old, path)
    result = install("claude", COMMAND, path)
    assert result.changed
    settings = load(path)
    for event in CLAUDE_EVENTS:
        assert commands(settings, event) == [ours("claude")]


def test_claude_command_with_spaces_is_shell_quoted(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    command = ["/opt/my tools/conductor", "pty", "hook"]
    install("claude", command, path)
    (stop,) = commands(load(path), "Stop")
    assert shlex.split(stop) == [*command, "--cli", "claude"]


def test_claude_dry_run_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    missing = install("claude", COMMAND, path, dry_run=True)
    assert (missing.changed, missing.backup, path.exists()) == (True, None, False)
    original = write_json(path, USER_CLAUDE)
    result = install("claude", COMMAND, path, dry_run=True)
    assert (result.changed, result.backup) == (True, None)
    assert path.read_bytes() == original
    assert backups(path) == []
    assert "Stop" in json.loads(result.snippet)["hooks"]


def test_claude_follows_a_symlinked_settings_file(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "claude.json"
    write_json(real, {"model": "opus"})
    link = tmp_path / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(real)
    result = install("claude", COMMAND, link)
    assert link.is_symlink()
    assert result.path == real
    assert load(link)["model"] == "opus" and "Stop" in load(link)["hooks"]


def test_claude_empty_file_counts_as_empty_settings(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("")
    assert install("claude", COMMAND, path).changed
    assert set(load(path)["hooks"]) == set(CLAUDE_EVENTS)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{\n  "model": "opus",\n  "hooks": {,}\n}\n', r"settings.json:3: not valid JSON"),
        ('["hooks"]', "the top level is a list, not an object"),
        ('{"hooks": []}', '"hooks" is a list, not an object'),
        ('{"hooks": {"Stop": {"command": "x"}}}', '"hooks.Stop" is an object, not a list'),
    ],
    ids=["syntax error", "top-level list", "hooks list", "event object"],
)
def test_claude_refuses_what_it_cannot_merge(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as raised:
        install("claude", COMMAND, path)
    assert str(path) in str(raised.value) and "\n" not in str(raised.value)
    assert path.read_text() == text
    assert backups(path) == [] and leftovers(tmp_path) == []


# --- hostile and odd files: refused before any backup, nothing written ---------------------


# A value in the user's settings (the "a" key) that a rewrite could not keep as it was.
HOSTILE_JSON = {
    "huge number": (b"1e400", "the number 1e400 is too large to keep (it would be written "
                              "back as Infinity)"),
    "huge negative": (b"[-1e999]", "written back as -Infinity"),
    "NaN": (b"NaN", "NaN is not a JSON value"),
    "Infinity": (b"Infinity", "Infinity is not a JSON value"),
    "5000 digits": (b"1" + b"0" * 5000, "cannot read as settings"),
    "lone surrogate": (b'"\\ud800 x"', "holds a lone surrogate (U+D800)"),
    "surrogate key": (b'{"\\udfff": 1}', "holds a lone surrogate (U+DFFF)"),
    "not UTF-8": (b'"caf\xe9"', "not UTF-8 (byte 0xe9 at offset 10)"),
}


@pytest.mark.parametrize("value, message", list(HOSTILE_JSON.values()), ids=list(HOSTILE_JSON))
@pytest.mark.parametrize("command", ["hooks install", "hooks uninstall", "mcp install"])
def test_what_cannot_be_written_back_is_refused_before_any_backup(
        tmp_path: Path, command: str, value: bytes, message: str) -> None:
    path = tmp_path / "settings.json"
    # uninstall changes only a file that holds our hook.
    hooked = json.dumps({"Stop": [{"hooks": [{"type": "command", "command": ours("claude")}]}]})
    path.write_bytes(b'{"a": ' + value + b', "hooks": ' + hooked.encode() + b"}")
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        if command == "hooks install":
            install("claude", ["/elsewhere/conductor", "pty", "hook"], path)
        elif command == "mcp install":
            mcp_install("claude", COMMAND, path)
        else:
            uninstall("claude", path)
    assert str(raised.value).startswith(f"{path}: ") and "\n" not in str(raised.value)
    assert path.read_bytes() == before
    assert backups(path) == [] and leftovers(tmp_path) == []


def test_a_fifo_a_folder_and_a_device_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "settings.json"
    os.mkfifo(fifo)
    # The real CLI, with a deadline: a read of the FIFO would block until it.
    done = conductor("pty", "hooks", "install", "--cli", "claude", "--path", str(fifo))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"Error: {fifo}: not a regular file (a FIFO); nothing changed\n"
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and [e.name for e in tmp_path.iterdir()] == [
        "settings.json"]
    for path, kind in ((Path("/dev/null"), "a character device"), (tmp_path, "a folder")):
        with pytest.raises(ConfigError, match=re.escape(
                f"not a regular file ({kind})")):
            mcp_install("gemini", COMMAND, path)
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    with pytest.raises(ConfigError, match=re.escape(
            "settings.json: not a regular file (a FIFO)")):
        install("gemini", COMMAND, link)
    assert link.is_symlink()


def test_a_symlink_loop_is_one_line(tmp_path: Path) -> None:
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    one.symlink_to(two)
    two.symlink_to(one)
    with pytest.raises(ConfigError, match="a symlink that cannot be followed"):
        install("claude", COMMAND, one)
    assert one.is_symlink() and two.is_symlink()


def test_a_symlinked_file_refused_stays_as_it_was_and_the_link_stays(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "claude.json"
    real.parent.mkdir()
    real.write_bytes(b'{"a": 1e400}')
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    with pytest.raises(ConfigError, match="too large to keep"):
        install("claude", COMMAND, link)
    assert link.is_symlink() and real.read_bytes() == b'{"a": 1e400}'
    assert backups(real) == [] and backups(link) == []


def test_the_backup_holds_the_bytes_read_and_never_writes_through_a_planted_link(
        tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    original = write_json(path, {"model": "opus", "note": "caf\u00e9 \u2603"}, mode=0o604)
    os.utime(path, (1_000_000_000, 1_000_000_000))
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    # Backups are named by the second: plant links at the names of this one and the next few.
    now = time.time()
    for ahead in range(4):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + ahead))
        path.with_name(f"{path.name}.bak-{stamp}").symlink_to(victim)
    result = install("claude", COMMAND, path)
    assert result.backup is not None and not result.backup.is_symlink()
    assert result.backup.read_bytes() == original and victim.read_text() == "keep me"
    assert stat.S_IMODE(result.backup.stat().st_mode) == 0o604
    assert result.backup.stat().st_mtime == 1_000_000_000
    assert stat.S_IMODE(path.stat().st_mode) == 0o604 and "Stop" in load(path)["hooks"]


# --- Gemini CLI --------------------------------------------------------------------------------


def test_gemini_install_uses_its_event_names_and_milliseconds(tmp_path: Path) -> None:
    path = tmp_path / ".gemini" / "settings.json"
    user = {"general": {"vimMode": True}, "hooks": {"AfterAgent": [
        {"hooks": [{"name": "review", "type": "command", "command": "review.sh"}]}
    ]}}
    original = write_json(path, user)
    result = install("gemini", COMMAND, path)
    settings = load(path)
    assert settings["general"] == {"vimMode": True}
    assert set(settings["hooks"]) == set(GEMINI_EVENTS)
    assert commands(settings, "AfterAgent") == ["review.sh", detached(ours("gemini"))]
    entry = settings["hooks"]["BeforeTool"][0]
    assert entry["matcher"] == "*"
    assert entry["hooks"] == [{
        "name": HOOK_NAME, "type": "command", "command": ours("gemini"),
        "timeout": HOOK_TIMEOUT_S * 1000,
    }]
    assert "matcher" not in settings["hooks"]["BeforeAgent"][0]
    assert result.backup is not None and result.backup.read_bytes() == original
    assert result.warnings == ()
    assert not install("gemini", COMMAND, path).changed


def test_gemini_turn_end_and_notification_hooks_run_in_the_background(tmp_path: Path) -> None:
    """Gemini CLI waits for every hook before it draws its idle screen (issue 31): the events
    that only say what happened return at once; those that open work stay in the foreground."""
    path = tmp_path / "settings.json"
    install("gemini", COMMAND, path)
    settings = load(path)
    assert {"AfterAgent", "Notification"} == GEMINI_DETACHED_EVENTS
    for event in GEMINI_EVENTS:
        [command] = commands(settings, event)
        assert hook_words(command) == shlex.split(ours("gemini"))
        wanted = detached(ours("gemini")) if event in GEMINI_DETACHED_EVENTS else ours("gemini")
        assert command == wanted, event


def test_an_older_foreground_gemini_install_is_brought_to_the_background_one(
        tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    group = {"hooks": [{"name": HOOK_NAME, "type": "command", "command": ours("gemini"),
                        "timeout": HOOK_TIMEOUT_S * 1000}]}
    write_json(path, {"hooks": {event: [dict(group)] for event in GEMINI_EVENTS}})
    assert install("gemini", COMMAND, path).changed
    settings = load(path)
    assert commands(settings, "AfterAgent") == [detached(ours("gemini"))]
    assert commands(settings, "BeforeAgent") == [ours("gemini")]
    assert not install("gemini", COMMAND, path).changed
    assert uninstall("gemini", path).changed and "hooks" not in load(path)


def test_gemini_warns_when_hooks_are_switched_off(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    write_json(path, {"hooksConfig": {"enabled": False}})
    result = install("gemini", COMMAND, path)
    assert result.changed
    assert len(result.warnings) == 1 and "hooksConfig.enabled is false" in result.warnings[0]
    assert load(path)["hooksConfig"] == {"enabled": False}


def test_gemini_settings_with_comments_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    text = '{\n  // my theme\n  "ui": {"theme": "GitHub"}\n}\n'
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"settings.json:2: .*comments"):
        install("gemini", COMMAND, path)
    assert path.read_text() == text


# --- Codex -------------------------------------------------------------------------------------


def codex_notify(path: Path) -> Any:
    return tomlkit.parse(path.read_text()).unwrap().get("notify")


def test_codex_fresh_install(tmp_path: Path) -> None:
    path = tmp_path / ".codex" / "config.toml"
    result = install("codex", COMMAND, path)
    assert (result.changed, result.backup) == (True, None)
    assert codex_notify(path) == [*COMMAND, "--cli", "codex"]
    assert result.snippet == (
        'notify = ["/home/ana/.local/bin/conductor", "pty", "hook", "--cli", "codex"]'
    )


def test_codex_merge_keeps_comments_and_puts_notify_at_top_level(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CODEX_CONFIG)
    result = install("codex", COMMAND, path)
    text = path.read_text()
    for line in CODEX_CONFIG.splitlines():
        assert line in text
    parsed = tomlkit.parse(text).unwrap()
    assert parsed["notify"] == [*COMMAND, "--cli", "codex"]
    assert parsed["profiles"]["quiet"]["notify"] == ["notify-send", "Codex"]
    assert parsed["mcp_servers"]["docs"]["args"] == ["-y", "docs-mcp"]
    assert text.index('notify = ["/home') < text.index("[profiles.quiet]")
    assert result.backup is not None and result.backup.read_text() == CODEX_CONFIG
    again = install("codex", COMMAND, path)
    assert (again.changed, again.backup) == (False, None)
    assert path.read_text() == text


def test_codex_refuses_to_replace_another_notify_program(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    text = 'notify = ["python3", "/home/ana/.codex/notify.py"]\nmodel = "o3"\n'
    path.write_text(text)
    refused = r"notify already runs another program.*--force"
    with pytest.raises(ConfigError, match=refused) as raised:
        install("codex", COMMAND, path)
    assert "python3 /home/ana/.codex/notify.py" in str(raised.value)
    assert path.read_text() == text and backups(path) == []
    forced = install("codex", COMMAND, path, force=True)
    assert codex_notify(path) == [*COMMAND, "--cli", "codex"]
    assert forced.backup is not None and forced.backup.read_text() == text
    assert tomlkit.parse(path.read_text()).unwrap()["model"] == "o3"


def test_codex_replaces_our_own_notify_from_a_moved_install(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('notify = ["/old/bin/conductor", "pty", "hook", "--cli", "codex"]\n')
    assert install("codex", COMMAND, path).changed
    assert codex_notify(path) == [*COMMAND, "--cli", "codex"]


def test_codex_non_list_notify_is_someone_elses(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('notify = "notify-send"\n')
    with pytest.raises(ConfigError, match="notify already runs another program"):
        install("codex", COMMAND, path)


def test_codex_invalid_toml_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    text = 'model = "o3"\n[profiles\n'
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"config.toml:2: not valid TOML"):
        install("codex", COMMAND, path)
    assert path.read_text() == text and backups(path) == []


def test_codex_dry_run_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CODEX_CONFIG)
    result = install("codex", COMMAND, path, dry_run=True)
    assert (result.changed, result.backup) == (True, None)
    assert path.read_text() == CODEX_CONFIG


# --- paths and arguments -----------------------------------------------------------------------


def test_default_paths_follow_each_clis_variables(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path)}
    assert default_path("claude", home) == tmp_path / ".claude" / "settings.json"
    assert default_path("codex", home) == tmp_path / ".codex" / "config.toml"
    assert default_path("gemini", home) == tmp_path / ".gemini" / "settings.json"
    moved = {
        **home,
        "CLAUDE_CONFIG_DIR": str(tmp_path / "cc"),
        "CODEX_HOME": str(tmp_path / "cx"),
        "GEMINI_CLI_HOME": str(tmp_path / "gh"),
    }
    assert default_path("claude", moved) == tmp_path / "cc" / "settings.json"
    assert default_path("codex", moved) == tmp_path / "cx" / "config.toml"
    assert default_path("gemini", moved) == tmp_path / "gh" / ".gemini" / "settings.json"


def test_install_without_a_path_uses_the_default(tmp_path: Path) -> None:
    result = install("codex", COMMAND, env={"HOME": str(tmp_path)})
    assert result.path == tmp_path / ".codex" / "config.toml"
    assert codex_notify(result.path) == [*COMMAND, "--cli", "codex"]


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown CLI 'cursor'"):
        install("cursor", COMMAND, tmp_path / "x.json")
    with pytest.raises(ConfigError, match="hook command is empty"):
        install("claude", [], tmp_path / "x.json")
    assert list(tmp_path.iterdir()) == []


def test_mcp_servers_live_in_claude_json_for_claude_and_beside_the_hooks_for_the_others(
        tmp_path: Path) -> None:
    from app.install.mcp import default_path as mcp_path

    home = {"HOME": str(tmp_path)}
    assert mcp_path("claude", home) == tmp_path / ".claude.json"
    assert mcp_path("claude", {**home, "CLAUDE_CONFIG_DIR": str(tmp_path / "cc")}) == \
        tmp_path / "cc" / ".claude.json"
    for cli in ("codex", "gemini"):
        assert mcp_path(cli, home) == default_path(cli, home)
