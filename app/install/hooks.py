"""``conductor pty hooks install``: merge our hook into Claude Code, Codex, Gemini CLI or Qwen Code
config.

The user's file is theirs: every other key, hook and (for TOML) comment stays; a second install
changes nothing; an existing file is copied to ``<file>.bak-YYYYmmdd-HHMMSS`` before it changes and
is replaced in one rename. Formats and their sources: ``design/hooks.md``.

The file may be hostile or just odd, and nothing that cannot be written back intact is taken:
only a regular file is read (a FIFO would block the read for ever), a symlink is followed to the
file it names (the link stays), and a number JSON readers cannot keep (``1e400`` becomes
``Infinity``), a bare ``NaN``, a lone surrogate or bytes that are not UTF-8 are refused before
any backup is made.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.base.errors import ConfigError
from app.base.files import write_atomic

CLIS = ("claude", "codex", "gemini", "qwen")

# The hook exits in well under a second; the CLIs' defaults (Claude 600 s, Gemini 60 s) would let
# a stuck hook freeze the agent for minutes.
HOOK_TIMEOUT_S = 10
HOOK_NAME = "conductor-pty"
# Settings files are a few KB; anything this large is not one, and is not read into memory.
MAX_SETTINGS_BYTES = 16 * 1024 * 1024

# Claude Code waits for a hook before it goes on: a Stop hook run synchronously holds back the
# idle prompt by the hook's whole run (0.26 s from the turn's end to READY against 0.09 s with
# `async`, 2.1.197, measured). These events say what has already happened, so Claude runs them in
# the background (`async`, 2.1.19 and later); the events that open work stay synchronous, so a
# turn's start is always recorded before anything that follows it. SessionEnd too: Claude ends
# its background hooks when it exits.
CLAUDE_ASYNC_EVENTS = frozenset({"Stop", "Notification", "PermissionRequest"})
# PermissionRequest fires as the permission dialog opens; Notification's permission_prompt only
# about 6 s later (Claude Code 2.1.197, measured).
CLAUDE_EVENTS = (
    # SessionStart names the session before the first prompt (and again after /clear).
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
    "Notification", "Stop", "SubagentStart", "SubagentStop", "SessionEnd",
)
GEMINI_EVENTS = (
    # SessionStart names the session before the first prompt, and the new one after /clear.
    "SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "Notification",
    "SessionEnd",
)
# Gemini CLI has no ``async``: it waits for every hook, and draws its idle screen only once the
# AfterAgent hooks have exited, so a Python start (0.2 s on a quiet machine, seconds under load)
# sat on every turn's end (issue 31). These events say what has already happened, so their
# command hands the payload to our hook in the background and returns at once; the hook stamps
# the row with the payload's own ``timestamp``, so a late one still sorts before the next turn's
# start. The events that open work stay synchronous: a turn's start is recorded before anything
# that follows it.
GEMINI_DETACHED_EVENTS = frozenset({"AfterAgent", "Notification"})
# A background job of a shell without job control reads /dev/null, so the pipe Gemini writes the
# payload to is kept as fd 3 for it; its output goes nowhere, so Gemini, which waits for the
# hook's stdout and stderr to close, waits for the shell alone.
_DETACH_HEAD = "{ "
_DETACH_TAIL = " <&3 >/dev/null 2>&1 3<&- & } 3<&0"
# Qwen Code 0.24 fires Claude Code's events with Claude's payloads (plus Gemini's ``timestamp``),
# from a settings.json in Claude's shape; SessionStart names the session and its chat file.
QWEN_EVENTS = (
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
    "Notification", "Stop", "SessionEnd",
)
EVENTS = {"claude": CLAUDE_EVENTS, "gemini": GEMINI_EVENTS, "qwen": QWEN_EVENTS}
# Only tool events get an explicit catch-all matcher; on the others a missing matcher already
# matches everything, and UserPromptSubmit/Stop ignore matchers.
_TOOL_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "PostToolUse", "BeforeTool",
                          "AfterTool"})


@dataclass(frozen=True)
class InstallResult:
    """What ``install`` did (or, on a dry run, would do).

    ``snippet`` is the configuration a user could paste by hand; ``backup`` is None when nothing
    was written; ``warnings`` are one-line facts that stop the hook from running even when
    installed.
    """

    cli: str
    path: Path
    backup: Path | None
    changed: bool
    snippet: str
    warnings: tuple[str, ...] = field(default=())


def default_path(cli: str, env: Mapping[str, str] | None = None) -> Path:
    """The user-level config file each CLI reads, honouring the same variables it does."""
    env = os.environ if env is None else env
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    _check_cli(cli)
    if cli == "claude":
        base = env.get("CLAUDE_CONFIG_DIR")
        return (Path(base).expanduser() if base else home / ".claude") / "settings.json"
    if cli == "codex":
        base = env.get("CODEX_HOME")
        return (Path(base).expanduser() if base else home / ".codex") / "config.toml"
    if cli == "qwen":
        # QWEN_HOME stands in for ~/.qwen itself (Storage.getGlobalQwenDir).
        base = env.get("QWEN_HOME")
        return (Path(base).expanduser() if base else home / ".qwen") / "settings.json"
    # GEMINI_CLI_HOME stands in for the home folder, so .gemini/ still follows it.
    base = env.get("GEMINI_CLI_HOME")
    return (Path(base).expanduser() if base else home) / ".gemini" / "settings.json"


def hook_argv(cli: str, command: Sequence[str]) -> list[str]:
    """The argv each CLI runs: our command plus ``--cli <cli>``, so the hook need not guess."""
    _check_cli(cli)
    if not command:
        raise ConfigError("the hook command is empty")
    return [*command, "--cli", cli]


def install(
    cli: str,
    command: list[str],
    path: Path | None = None,
    *,
    dry_run: bool = False,
    force: bool = False,
    env: Mapping[str, str] | None = None,
) -> InstallResult:
    """Merge the hook running ``command`` into ``cli``'s config at ``path`` (default_path if None).

    ``force`` lets Codex's single ``notify`` program be replaced when it is someone else's.
    Raises ConfigError, with nothing written, when the file cannot be parsed or has a shape this
    merge cannot keep intact.
    """
    argv = hook_argv(cli, command)
    target = followed(path if path is not None else default_path(cli, env))
    old = read_settings(target)
    old_text = old.text if old is not None else None
    if cli == "codex":
        new_text, snippet, warnings = _merge_codex(target, old_text, argv, force)
    else:
        new_text, snippet, warnings = _merge_json(cli, target, old_text, shlex.join(argv))
    backup = None
    if new_text is not None and not dry_run:
        backup = write_settings(target, new_text, old)
    return InstallResult(cli, target, backup, new_text is not None, snippet, warnings)


def _check_cli(cli: str) -> None:
    if cli not in CLIS:
        raise ConfigError(f"unknown CLI {cli!r}: expected one of {', '.join(CLIS)}")


def followed(path: Path) -> Path:
    """A dotfiles symlink stays a symlink: the file it points to is what changes."""
    try:
        return path.resolve() if path.is_symlink() else path
    except (OSError, RuntimeError) as error:  # a loop: RuntimeError before Python 3.13
        raise ConfigError(f"{path}: a symlink that cannot be followed ({error}); nothing "
                          "changed") from None


@dataclass(frozen=True)
class Existing:
    """A settings file as read: its text, and its bytes and metadata for the backup."""

    text: str
    data: bytes
    mode: int
    times_ns: tuple[int, int]


def read_settings(path: Path) -> Existing | None:
    """The file at ``path``, None when there is none. Opened without blocking and looked at
    before reading, so a FIFO, a device or a folder is refused, never read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ConfigError(f"{path}: not a regular file ({_file_kind(st.st_mode)}); "
                          "nothing changed")
    with os.fdopen(fd, "rb") as stream:
        if st.st_size > MAX_SETTINGS_BYTES:
            raise ConfigError(f"{path}: {st.st_size} bytes, too large for a settings file; "
                              "nothing changed")
        try:
            data = stream.read(MAX_SETTINGS_BYTES + 1)
        except OSError as error:
            raise ConfigError(f"{path}: cannot read: {error.strerror}") from None
    return Existing(decoded(path, data), data, stat.S_IMODE(st.st_mode),
                    (st.st_atime_ns, st.st_mtime_ns))


def decoded(path: Path | str, data: bytes) -> str:
    """The file's text; bytes that are not UTF-8 are refused (a rewrite would turn them into
    U+FFFD, or drop them)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 (byte 0x{data[error.start]:02x} at offset "
                          f"{error.start}); nothing changed") from None


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    return next((name for test, name in kinds if test(mode)), "not a file")


def encodable(path: Path | str, text: str) -> bytes:
    """The new text as UTF-8, checked before anything is written: a lone surrogate read from a
    JSON escape (``"\\ud800"``) cannot be written back."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ConfigError(f"{path}: holds a lone surrogate (U+{ord(text[error.start]):04X}) "
                          "that cannot be written as UTF-8; nothing changed") from None


# --- Claude Code and Gemini CLI: settings.json -------------------------------------------------


def _hook_entry(cli: str, event: str, command: str) -> dict[str, Any]:
    if cli == "gemini":
        # Gemini's timeout is in milliseconds; its ``name`` is what /hooks disable takes.
        return {
            "name": HOOK_NAME, "type": "command", "command": command,
            "timeout": HOOK_TIMEOUT_S * 1000,
        }
    entry: dict[str, Any] = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}
    if cli == "claude" and event in CLAUDE_ASYNC_EVENTS:
        entry["async"] = True
    return entry


def _group(cli: str, event: str, command: str) -> dict[str, Any]:
    group: dict[str, Any] = {"matcher": "*"} if event in _TOOL_EVENTS else {}
    group["hooks"] = [_hook_entry(cli, event, command)]
    return group


def _merge_json(
    cli: str, path: Path, old_text: str | None, command: str
) -> tuple[str | None, str, tuple[str, ...]]:
    events = EVENTS[cli]
    commands = {event: event_command(cli, event, command) for event in events}
    snippet = json.dumps(
        {"hooks": {event: [_group(cli, event, line)] for event, line in commands.items()}},
        indent=2)
    settings = _parse_json(cli, path, old_text) if old_text is not None else {}
    changed = merge_events(cli, path, settings, commands)
    warnings = _gemini_warnings(path, settings) if cli == "gemini" else ()
    if not changed:
        return None, snippet, warnings
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n", snippet, warnings


def merge_events(cli: str, path: Path | str, settings: dict[str, Any],
                 commands: Mapping[str, str]) -> bool:
    """Add each event's command to the ``hooks`` of parsed settings; True when they changed."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f'{path}: "hooks" is {_json_type(hooks)}, not an object')
    changed = False
    for event, command in commands.items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ConfigError(f'{path}: "hooks.{event}" is {_json_type(groups)}, not a list')
        changed |= _merge_event(cli, groups, event, command)
    return changed


class _NotKept(ValueError):
    """A number the merge could not write back as it was."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = "Infinity" if value > 0 else "-Infinity"
        raise _NotKept(f"the number {text[:40]} is too large to keep (it would be written back "
                       f"as {shown})")
    return value


def _no_constant(name: str) -> float:
    raise _NotKept(f"{name} is not a JSON value")


def _parse_json(cli: str, path: Path | str, text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        settings = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        # Gemini reads settings.json with comments stripped; a rewrite would lose them.
        hint = "; comments cannot be kept, merge the snippet by hand" if cli == "gemini" else ""
        raise ConfigError(f"{path}:{error.lineno}: not valid JSON: {error.msg}{hint}") from None
    except _NotKept as error:
        raise ConfigError(f"{path}: {error}; nothing changed") from None
    except ValueError as error:  # an integer of more digits than Python converts
        raise ConfigError(f"{path}: cannot read as settings ({str(error)[:80]}); nothing "
                          "changed") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read as settings; nothing changed"
                          ) from None
    if not isinstance(settings, dict):
        raise ConfigError(f"{path}: the top level is {_json_type(settings)}, not an object")
    return settings


def _merge_event(cli: str, groups: list[Any], event: str, command: str) -> bool:
    """Add our hook to one event's groups; True when ``groups`` changed."""
    entries = [
        hook
        for group in groups
        if isinstance(group, dict) and isinstance(group.get("hooks"), list)
        for hook in group["hooks"]
        if isinstance(hook, dict) and isinstance(hook.get("command"), str)
    ]
    wanted = _hook_entry(cli, event, command)
    for hook in entries:
        if hook["command"] == command:
            # Ours already; an install from an older release may lack a key we now set (the
            # user's own changes, a longer timeout say, stay).
            missing = {key: value for key, value in wanted.items() if key not in hook}
            hook.update(missing)
            return bool(missing)
    for hook in entries:
        if _same_program(hook_words(hook["command"]), hook_words(command)):
            # Ours from another install path (a moved venv), or from a release that ran it
            # otherwise (in the foreground): update it rather than run twice.
            hook.update(wanted)
            return True
    groups.append(_group(cli, event, command))
    return True


def _gemini_warnings(path: Path, settings: dict[str, Any]) -> tuple[str, ...]:
    hooks_config = settings.get("hooksConfig")
    if isinstance(hooks_config, dict) and hooks_config.get("enabled") is False:
        return (f"{path}: hooksConfig.enabled is false, so Gemini CLI runs no hooks at all",)
    return ()


def _json_type(value: object) -> str:
    names: dict[type, str] = {
        dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
    }
    return names.get(type(value), "a number")


# --- Codex: config.toml ------------------------------------------------------------------------


def _merge_codex(
    path: Path, old_text: str | None, argv: list[str], force: bool
) -> tuple[str | None, str, tuple[str, ...]]:
    # tomlkit costs ~30 ms to import; only this command needs it.
    import tomlkit
    from tomlkit.exceptions import ParseError

    snippet = tomlkit.dumps({"notify": argv}).strip()
    try:
        document = tomlkit.parse(old_text or "")
    except ParseError as error:
        raise ConfigError(f"{path}:{error.line}: not valid TOML: {error}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read as settings; nothing changed"
                          ) from None
    current = document.unwrap().get("notify")
    if current == argv:
        return None, snippet, ()
    if current is not None and not force and not _same_program(current, argv):
        shown = shlex.join(current) if _is_argv(current) else repr(current)
        raise ConfigError(
            f"{path}: notify already runs another program ({shown[:120]}); Codex runs only one,"
            " so it was left as it is (use --force to replace it)"
        )
    value = tomlkit.array()
    value.extend(argv)
    # On a new key tomlkit inserts before the first table, where a top-level key must be.
    document["notify"] = value
    new_text = tomlkit.dumps(document)
    if tomlkit.parse(new_text).unwrap().get("notify") != argv:
        raise ConfigError(f"{path}: cannot place notify at the top level; add the line by hand")
    return new_text, snippet, ()


def _is_argv(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


# --- shared ------------------------------------------------------------------------------------


def _split(command: str) -> list[str]:
    """``shlex.split`` that answers [] for text a shell would reject (an open quote)."""
    try:
        return shlex.split(command)
    except ValueError:
        return []


def detached(command: str) -> str:
    """``command`` run in the background with the hook's stdin, the shell returning at once."""
    return f"{_DETACH_HEAD}{command}{_DETACH_TAIL}"


def runs_detached(command: str) -> bool:
    """Whether a hook's command line is one of our background lines."""
    return command.startswith(_DETACH_HEAD) and command.endswith(_DETACH_TAIL)


def event_command(cli: str, event: str, command: str) -> str:
    """The command line one event of ``cli`` runs for our hook ``command``."""
    return detached(command) if cli == "gemini" and event in GEMINI_DETACHED_EVENTS else command


def hook_words(command: str) -> list[str]:
    """A hook's command line as the shell splits it, with our background wrapper taken off;
    [] for one a shell would reject."""
    if runs_detached(command):
        command = command[len(_DETACH_HEAD):-len(_DETACH_TAIL)]
    return _split(command)


def _same_program(found: object, ours: list[str]) -> bool:
    """True when ``found`` is our hook argv with only the program's folder differing."""
    if not isinstance(found, list) or not _is_argv(found) or len(found) != len(ours) or not ours:
        return False
    return found[1:] == ours[1:] and Path(found[0]).name == Path(ours[0]).name


def write_settings(path: Path, text: str, old: Existing | None) -> Path | None:
    """Back up the old file (if any), then replace it atomically; return the backup's path.

    The backup holds the bytes that were read, so a file swapped meanwhile is neither copied
    nor waited on."""
    encodable(path, text)
    backup = None
    if old is not None:
        mode = old.mode
        backup = _backup(path, old)
    else:
        # A config folder may hold API keys: private unless the user made it otherwise.
        mode = 0o600
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigError(f"{path.parent}: cannot create: {error}") from None
    try:
        write_atomic(path, text, mode)
    except OSError as error:
        raise ConfigError(f"{path}: cannot write: {error}") from None
    return backup


def _backup(path: Path, old: Existing) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for number in range(1000):
        # Two installs within one second must not overwrite the first backup; nor may a name
        # planted there (a symlink) be written through.
        suffix = f"-{number}" if number else ""
        candidate = path.with_name(f"{path.name}.bak-{stamp}{suffix}")
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                         old.mode)
        except FileExistsError:
            continue
        except OSError as error:
            raise ConfigError(f"{path}: cannot write the backup {candidate}: "
                              f"{error.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as stream:
                stream.write(old.data)
            os.utime(candidate, ns=old.times_ns)
        except OSError as error:
            candidate.unlink(missing_ok=True)
            raise ConfigError(f"{path}: cannot write the backup {candidate}: "
                              f"{error.strerror}") from None
        return candidate
    raise ConfigError(f"{path}: too many backups named {path.name}.bak-{stamp}-N")


# --- uninstall -----------------------------------------------------------------------------------


def _ours(argv: object, cli: str) -> bool:
    """Our hook, wherever it was installed from: it ends with ``pty hook --cli <cli>``."""
    return isinstance(argv, list) and _is_argv(argv) and argv[-4:] == ["pty", "hook", "--cli", cli]


def uninstall(cli: str, path: Path | None = None, *, env: Mapping[str, str] | None = None
              ) -> InstallResult:
    """Remove our hook from ``cli``'s config, keeping everything else (with a backup). Groups
    and events left empty by the removal go too; nothing else is touched."""
    _check_cli(cli)
    target = followed(path if path is not None else default_path(cli, env))
    old = read_settings(target)
    old_text = old.text if old is not None else None
    new_text: str | None = None
    if old_text is not None and cli == "codex":
        import tomlkit
        from tomlkit.exceptions import ParseError

        try:
            document = tomlkit.parse(old_text)
        except ParseError as error:
            raise ConfigError(f"{target}:{error.line}: not valid TOML: {error}") from None
        if _ours(document.unwrap().get("notify"), cli):
            del document["notify"]
            new_text = tomlkit.dumps(document)
    elif old_text is not None:
        settings = _parse_json(cli, target, old_text)
        if _strip_json_hooks(settings, cli):
            new_text = json.dumps(settings, indent=2, ensure_ascii=False) + "\n"
    backup = write_settings(target, new_text, old) if new_text is not None else None
    return InstallResult(cli, target, backup, new_text is not None, "")


def _strip_json_hooks(settings: dict[str, Any], cli: str) -> bool:
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return False
    changed = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        emptied = False
        for group in list(groups):
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            kept = [h for h in group["hooks"] if not (
                isinstance(h, dict) and isinstance(h.get("command"), str)
                and _ours(hook_words(h["command"]), cli))]
            if len(kept) == len(group["hooks"]):
                continue
            changed = emptied = True
            if kept:
                group["hooks"] = kept
            else:
                groups.remove(group)
        if emptied and not groups:
            del hooks[event]
    if changed and not hooks:
        del settings["hooks"]
    return changed
