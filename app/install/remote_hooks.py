"""Hooks for agent CLIs on another host, where nothing of conductor's is installed.

Each of the CLI's hook events runs one shell line there, which sets a tmux pane option of the
agent's own pane (``@conductor-hook`` = "CLI EVENT NONCE EPOCH", with "s=SESSION t=TRANSCRIPT"
before the nonce on the events that name the conversation); the watcher's control-mode client
over ssh is told of the change (``app.adapters.control.HOOK_SUBSCRIPTION``) and records it as the
hook event the local ``conductor pty hook`` would have recorded. No network path leads back.

``install`` merges those lines into the CLI's settings file on the host over ssh, keeping
everything else and a timestamped backup, as the local install does. Claude Code and Gemini CLI
only: Codex's single ``notify`` program gets its event as JSON, which one shell line without
conductor cannot read.
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from app.adapters.control import HOOK_OPTION
from app.adapters.ssh import SshVia
from app.base.errors import ConfigError, HostUnreachable
from app.base.render import printable
from app.install.hooks import (
    CLAUDE_EVENTS,
    GEMINI_EVENTS,
    MAX_SETTINGS_BYTES,
    _group,
    _parse_json,
    decoded,
    encodable,
    merge_events,
)

REMOTE_CLIS = ("claude", "gemini")
_SETTINGS = {"claude": ".claude/settings.json", "gemini": ".gemini/settings.json"}
SSH_TIMEOUT_S = 30.0  # each command; a file swapped for a FIFO after its look ends here


# The events whose line also names the agent's session and transcript (app.observe.sessions):
# the session's start and each turn's ends keep it current; the tool events, the most frequent,
# do without the extra work.
NAMING_EVENTS = frozenset({"SessionStart", "UserPromptSubmit", "Stop", "SessionEnd",
                           "BeforeAgent", "AfterAgent"})
# A payload's first bytes are read (the session fields come first); the rest is drained unread.
_PAYLOAD_BYTES = 65536
# One JSON string, quotes included (POSIX BRE: no alternation).
_JSON_STRING = r'"[^"\\]*\(\\.[^"\\]*\)*"'
# Anything between two strings of the top-level object but a nested object or list: so a key
# of the same name inside tool input, or inside a string, is never taken for the field.
_BETWEEN = r'[^]"{}[]*'


def _field(key: str) -> str:
    """A sed command printing the raw (still JSON-escaped) text of the top-level string ``key``
    of a one-line JSON object; nothing when it has none."""
    return (rf's/^[^{{]*{{{_BETWEEN}\({_JSON_STRING}{_BETWEEN}\)*"{key}"[[:space:]]*:'
            rf'[[:space:]]*"\([^"\\]*\(\\.[^"\\]*\)*\)".*/\3/p')


def hook_line(cli: str, event: str) -> str:
    """The shell line one hook event runs: ``$$`` (the hook shell's pid) makes every call a new
    value, so the same event twice is two changes; the host's clock says when, so a watcher that
    attaches later can tell an event it has not seen from one that was there before it. Quiet
    and successful outside tmux.

    On :data:`NAMING_EVENTS` it adds ``s=SESSION t=TRANSCRIPT`` from the payload on stdin, as
    their JSON text (spaces as ``\\u0020``, so the value splits on spaces): shell variables
    only, never shell text, and nothing for a payload it cannot read."""
    if event not in NAMING_EVENTS:
        value = shlex.quote(f"{cli} {event} ") + "$$' '$(date +%s)"
        return (f'tmux set-option -p -t "$TMUX_PANE" {HOOK_OPTION} {value} '
                ">/dev/null 2>&1 || true")
    return ("p=; [ -t 0 ] || p=$(head -c " + str(_PAYLOAD_BYTES) + " | tr '\\n' ' '; "
            "cat >/dev/null); "
            "s=$(printf '%s\\n' \"$p\" | LC_ALL=C sed -n "
            + shlex.quote(_field("session_id")) + "); "
            "t=$(printf '%s\\n' \"$p\" | LC_ALL=C sed -n "
            + shlex.quote(_field("transcript_path")) + " | LC_ALL=C sed 's/ /\\\\u0020/g'); "
            f'tmux set-option -p -t "$TMUX_PANE" {HOOK_OPTION} '
            f'"{cli} {event} s=$s t=$t $$ $(date +%s)" >/dev/null 2>&1 || true')


def events_for(cli: str) -> tuple[str, ...]:
    if cli not in REMOTE_CLIS:
        raise ConfigError(f"hooks on another host: --cli must be one of "
                          f"{', '.join(REMOTE_CLIS)} (Codex's notify program needs conductor "
                          "on the host)")
    return CLAUDE_EVENTS if cli == "claude" else GEMINI_EVENTS


def merged(cli: str, path: str, old_text: str | None) -> tuple[str | None, str]:
    """The settings with our line on each event (None: already there), and the snippet."""
    events = events_for(cli)
    snippet = json.dumps({"hooks": {e: [_group(cli, e, hook_line(cli, e))] for e in events}},
                         indent=2)
    settings = _parse_json(cli, path, old_text) if old_text is not None else {}
    lines = {e: hook_line(cli, e) for e in events}
    dropped = _drop_older_lines(settings, lines)
    changed = merge_events(cli, path, settings, lines) or dropped
    if not changed:
        return None, snippet
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n", snippet


def _drop_older_lines(settings: dict[str, Any], lines: dict[str, str]) -> bool:
    """Remove the lines an older release of ours put on these events (they set our option but
    are not today's line), so an install over them does not run both; True when any went.
    Anything else in the file stays, malformed parts included (merge_events reports those)."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return False
    dropped = False
    for event, line in lines.items():
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        emptied = []
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list):
                continue
            kept = [h for h in entries if not (
                isinstance(h, dict) and isinstance(h.get("command"), str)
                and HOOK_OPTION in h["command"] and h["command"] != line)]
            if len(kept) != len(entries):
                group["hooks"] = kept
                dropped = True
                if not kept:
                    emptied.append(group)
        if emptied:  # a group that held only our old line goes with it
            hooks[event] = [g for g in groups if not any(g is e for e in emptied)]
    return dropped


@dataclass(frozen=True)
class RemoteInstall:
    host: str
    path: str
    backup: str | None
    changed: bool
    snippet: str


def install(via: SshVia, cli: str, path: str | None = None, *, dry_run: bool = False
            ) -> RemoteInstall:
    """Merge the hook lines into ``cli``'s settings on the host (``~/.claude/settings.json``,
    ``~/.gemini/settings.json`` there unless ``path``), as the local install does: a symlink is
    followed (the link stays), only a regular UTF-8 file is read, and a file that could not be
    written back as it was is refused before the backup. The new text goes to a file of a
    name of its own (``mktemp``) beside the old one, with the old one's mode, and is moved over
    it. Every command is an argv of ours."""
    events_for(cli)
    if path is None or not path.startswith("/"):
        path = posixpath.join(_home(via), path or _SETTINGS[cli])
    path = _followed(via, path)
    where = f"{via.host}:{path}"
    old = _read(via, path)
    old_text = decoded(where, old) if old is not None else None
    new_text, snippet = merged(cli, where, old_text)
    if new_text is None or dry_run:
        return RemoteInstall(via.host, path, None, new_text is not None, snippet)
    data = encodable(where, new_text)
    backup = None
    if old is not None:
        backup = _mktemp(via, f"{path}.conductor-backup-{time.strftime('%Y%m%d-%H%M%S')}-")
        _must(via, ["cp", "-p", "--", path, backup], f"back up {path}")
    folder = posixpath.dirname(path)
    _must(via, ["mkdir", "-p", "--", folder], f"make {folder}")
    staged = _mktemp(via, f"{path}.conductor-new-")
    try:
        if old is not None:  # the mode of the file it replaces (mktemp's is 0600)
            _must(via, ["cp", "-p", "--", path, staged], f"write {staged}")
        _must(via, ["tee", "--", staged], f"write {staged}", stdin=data)
        _must(via, ["mv", "-f", "--", staged, path], f"replace {path}")
    except BaseException:
        via.run(["rm", "-f", "--", staged])
        raise
    return RemoteInstall(via.host, path, backup, True, snippet)


def _home(via: SshVia) -> str:
    home = os.fsdecode(_run(via, ["printenv", "HOME"]).stdout).strip()
    if not home.startswith("/"):
        raise ConfigError(f"host {via.host}: cannot tell its home folder")
    return home


def _followed(via: SshVia, path: str) -> str:
    """A dotfiles symlink stays a symlink: the file it points to is what changes."""
    if via.run(["test", "-L", path]).returncode != 0:
        return path
    done = _run(via, ["readlink", "-f", "--", path])
    target = os.fsdecode(done.stdout.rstrip(b"\n"))
    if done.returncode != 0 or not target.startswith("/"):
        raise ConfigError(f"host {via.host}: {path} is a symlink that cannot be followed; "
                          "nothing changed")
    return target


def _read(via: SshVia, path: str) -> bytes | None:
    """The file's bytes, None when there is none; anything but a regular file is refused
    (``cat`` of a FIFO would wait for a writer)."""
    if via.run(["test", "-f", path]).returncode != 0:
        if via.run(["test", "-e", path]).returncode == 0:
            raise ConfigError(f"host {via.host}: {path} is not a regular file; nothing changed")
        return None
    read = _run(via, ["cat", "--", path])
    if read.returncode != 0:
        raise ConfigError(f"host {via.host}: cannot read {path}: {_said(read.stderr)}")
    if len(read.stdout) > MAX_SETTINGS_BYTES:
        raise ConfigError(f"host {via.host}: {path} is too large for a settings file; "
                          "nothing changed")
    return read.stdout


def _mktemp(via: SshVia, prefix: str) -> str:
    """A new empty file named ``prefix`` plus random letters, made by the host (exclusively:
    nothing planted at a name we chose is written through)."""
    template = f"{prefix}XXXXXXXXXX"
    done = _run(via, ["mktemp", template])
    name = os.fsdecode(done.stdout.rstrip(b"\n"))
    if done.returncode != 0 or len(name) != len(template) or not name.startswith(prefix):
        raise ConfigError(f"host {via.host}: cannot create {template}: {_said(done.stderr)}")
    return name


def _must(via: SshVia, argv: list[str], what: str, stdin: bytes | None = None) -> None:
    done = _run(via, argv, stdin=stdin)
    if done.returncode != 0:
        raise ConfigError(f"host {via.host}: cannot {what}: {_said(done.stderr)}")


def _run(via: SshVia, argv: list[str], stdin: bytes | None = None
         ) -> subprocess.CompletedProcess[bytes]:
    """``via.run`` in bytes: a settings file's bytes arrive and leave as they are, never
    decoded with replacement characters nor encoded in the locale's charset."""
    try:
        done = subprocess.run(via.wrap(argv), capture_output=True, timeout=SSH_TIMEOUT_S,
                              check=False, input=stdin,
                              stdin=subprocess.DEVNULL if stdin is None else None)
    except FileNotFoundError:
        raise HostUnreachable("ssh is not installed (no 'ssh' on PATH)") from None
    except subprocess.TimeoutExpired:
        raise HostUnreachable(f"host {via.host} did not answer within {SSH_TIMEOUT_S:g} s"
                              ) from None
    failed = via.failure(done.returncode, done.stderr.decode(errors="replace"))
    if failed is not None:
        raise failed
    return done


def _said(stderr: bytes) -> str:
    return printable(" ".join(stderr.decode(errors="replace").split()))[:300]
