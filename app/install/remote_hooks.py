"""Hooks for agent CLIs on another host, where nothing of conductor's is installed.

Each of the CLI's hook events runs one shell line there, which sets a tmux pane option of the
agent's own pane (``@conductor-hook`` = "CLI EVENT NONCE EPOCH"); the watcher's control-mode client
over ssh is told of the change (``app.adapters.tmux.HOOK_SUBSCRIPTION``) and records it as the
hook event the local ``conductor pty hook`` would have recorded. No network path leads back.

``install`` merges those lines into the CLI's settings file on the host over ssh, keeping
everything else and a timestamped backup, as the local install does. Claude Code and Gemini CLI
only: Codex's single ``notify`` program gets its event as JSON, which one shell line without
conductor cannot read.
"""

from __future__ import annotations

import json
import posixpath
import shlex
import time
from dataclasses import dataclass

from app.adapters.ssh import SshVia
from app.adapters.tmux import HOOK_OPTION
from app.base.errors import ConfigError
from app.install.hooks import CLAUDE_EVENTS, GEMINI_EVENTS, _group, _parse_json, merge_events

REMOTE_CLIS = ("claude", "gemini")
_SETTINGS = {"claude": ".claude/settings.json", "gemini": ".gemini/settings.json"}


def hook_line(cli: str, event: str) -> str:
    """The shell line one hook event runs: ``$$`` (the hook shell's pid) makes every call a new
    value, so the same event twice is two changes; the host's clock says when, so a watcher that
    attaches later can tell an event it has not seen from one that was there before it. Quiet
    and successful outside tmux."""
    value = shlex.quote(f"{cli} {event} ") + "$$' '$(date +%s)"
    return (f'tmux set-option -p -t "$TMUX_PANE" {HOOK_OPTION} {value} '
            ">/dev/null 2>&1 || true")


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
    changed = merge_events(cli, path, settings, {e: hook_line(cli, e) for e in events})
    if not changed:
        return None, snippet
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n", snippet


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
    ``~/.gemini/settings.json`` there unless ``path``): read with ``cat``, a backup with ``cp``,
    the new text written next to it and moved over it. Every command is an argv of ours."""
    events_for(cli)
    if path is None:
        home = via.run(["printenv", "HOME"]).stdout.strip()
        if not home.startswith("/"):
            raise ConfigError(f"host {via.host}: cannot tell its home folder")
        path = posixpath.join(home, _SETTINGS[cli])
    exists = via.run(["test", "-f", path]).returncode == 0
    old_text = None
    if exists:
        read = via.run(["cat", "--", path])
        if read.returncode != 0:
            raise ConfigError(f"host {via.host}: cannot read {path}: {read.stderr.strip()}")
        old_text = read.stdout
    new_text, snippet = merged(cli, f"{via.host}:{path}", old_text)
    if new_text is None or dry_run:
        return RemoteInstall(via.host, path, None, new_text is not None, snippet)
    backup = None
    if exists:
        backup = f"{path}.conductor-backup-{time.strftime('%Y%m%d-%H%M%S')}"
        _must(via, ["cp", "-p", "--", path, backup], f"back up {path}")
    _must(via, ["mkdir", "-p", "--", posixpath.dirname(path)], f"make {posixpath.dirname(path)}")
    staged = f"{path}.conductor-new"
    _must(via, ["tee", "--", staged], f"write {staged}", stdin=new_text)
    _must(via, ["mv", "-f", "--", staged, path], f"replace {path}")
    return RemoteInstall(via.host, path, backup, True, snippet)


def _must(via: SshVia, argv: list[str], what: str, stdin: str | None = None) -> None:
    done = via.run(argv, stdin=stdin)
    if done.returncode != 0:
        raise ConfigError(f"host {via.host}: cannot {what}: {' '.join(done.stderr.split())}")
