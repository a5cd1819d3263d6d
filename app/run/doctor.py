"""``conductor pty doctor``: everything conductor relies on, checked in one go, each problem one
line that says what to do.

A check that fails is something the person would otherwise find out the hard way: a state that
never leaves BUSY because a hook event is missing, a host whose panes go stale, a notification
receiver configured that cannot work here. What is only worth knowing (an optional MCP server
not installed, a tmux option with its consequence) passes and says so.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.adapters import status as status_module
from app.adapters.notify import command_receiver, desktop_receiver
from app.adapters.notify_settings import COMMAND, DESKTOP, TERMINAL
from app.adapters.store import DB_NAME
from app.adapters.store_read import StoreMissing, StoreReader
from app.adapters.tmux import Tmux, tmux_version
from app.base.errors import ConductorError
from app.install import hooks as hook_install
from app.install import mcp as mcp_install
from app.run.configfile import Config
from app.run.hosts import probe_all

# Control mode (watching on output rather than polling) needs tmux 3.2.
EVENTS_TMUX = (3, 2)


@dataclass(frozen=True)
class Check:
    area: str  # tmux, store, watcher, hooks, mcp, hosts, notifications
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'}  {self.area} {self.name}: {self.detail}"


def run_checks(tmux: Tmux, workers_dir: Path, cfg: Config,
               env: Mapping[str, str] | None = None) -> list[Check]:
    env = os.environ if env is None else env
    return [*tmux_checks(tmux), *store_checks(workers_dir, tmux.label),
            *hook_checks(env), *mcp_checks(env), *host_checks(cfg),
            *notification_checks(tmux, cfg, env)]


# --- tmux ----------------------------------------------------------------------------------------

def tmux_checks(tmux: Tmux) -> Iterator[Check]:
    text = tmux.version_text().strip()
    version = tmux_version(text)
    if version is None:
        yield Check("tmux", "version", False, text or "tmux -V printed nothing")
        return
    yield Check("tmux", "version", version >= EVENTS_TMUX,
                f"{text}" + ("" if version >= EVENTS_TMUX else
                             "; below 3.2 panes are polled only (no control mode)"))
    if not tmux.is_running():
        yield Check("tmux", "server", False, f"no tmux server running on socket {tmux.label}")
        return
    yield Check("tmux", "server", True, f"running on socket {tmux.label}")
    passthrough = _option(tmux, "-gwv", "allow-passthrough")
    yield Check("tmux", "allow-passthrough", True, f"{passthrough}: " + (
        "agents' own terminal notifications (OSC 9/777) reach the terminal"
        if passthrough in ("on", "all") else
        "agents' own terminal notifications stay inside tmux "
        "(`set -g allow-passthrough on` lets them through)"))
    focus = _option(tmux, "-sv", "focus-events")
    yield Check("tmux", "focus-events", True, f"{focus}: " + (
        "programs in panes are told when the terminal gains or loses focus" if focus == "on"
        else "programs in panes are never told of focus changes "
             "(`set -g focus-events on` to tell them)"))
    remain = _option(tmux, "-gwv", "remain-on-exit")
    yield Check("tmux", "remain-on-exit", True, f"{remain} globally; windows `create` opens set "
                "their own (create.remain_on_exit), so a crashed agent's last screen stays")


def _option(tmux: Tmux, flags: str, name: str) -> str:
    """The option's value, or why it cannot be read (an option older tmux does not know)."""
    try:
        done = tmux.run("show-options", flags, name, check=False)
    except ConductorError as exc:
        return str(exc)
    return done.stdout.strip() if done.returncode == 0 else \
        f"unknown to this tmux ({' '.join(done.stderr.split())[:80]})"


# --- store and watcher ---------------------------------------------------------------------------

def store_checks(workers_dir: Path, socket_label: str) -> Iterator[Check]:
    db = workers_dir / DB_NAME
    if not db.exists():
        yield Check("store", "database", False,
                    f"no store at {db} yet (start `conductor pty watch`)")
        return
    yield Check("store", "database", *_quick_check(workers_dir))
    try:
        snap = status_module.snapshot(workers_dir, socket_label)
    except (ConductorError, StoreMissing) as exc:
        yield Check("watcher", "health", False, str(exc))
        return
    warnings = [line.removeprefix("conductor pty: ")
                for line in status_module.watcher_warnings(snap, time.time())]
    beat = status_module.read_beat(workers_dir)
    seen = f"; its last beat {time.time() - beat[1]:.0f}s ago" if beat is not None else ""
    yield Check("watcher", "health", not warnings,
                "; ".join(warnings) if warnings else f"running (pid {snap.watcher_pid}){seen}")


def _quick_check(workers_dir: Path) -> tuple[bool, str]:
    """SQLite's quick_check on a read-only connection: the watcher's writes go on."""
    db = workers_dir / DB_NAME
    try:
        reader = StoreReader(workers_dir)
    except ConductorError as exc:
        return False, str(exc)
    try:
        rows = reader.quick_check()
    except ConductorError as exc:
        return False, str(exc)
    finally:
        reader.close()
    if rows == ["ok"]:
        return True, f"{db}: quick_check ok"
    return False, f"{db}: quick_check found {len(rows)} problem(s), first: {rows[0][:120]}"


# --- agent CLIs ----------------------------------------------------------------------------------

def used_clis(env: Mapping[str, str]) -> list[str]:
    """The CLIs this account uses: their settings folder exists (each writes it on first run),
    or the program is on PATH. Hooks for a CLI never run here would be noise."""
    programs = {"claude": "claude", "codex": "codex", "gemini": "gemini", "qwen": "qwen"}
    return [cli for cli in hook_install.CLIS
            if hook_install.default_path(cli, env).parent.is_dir()
            or shutil.which(programs[cli], path=env.get("PATH")) is not None]


def hook_checks(env: Mapping[str, str]) -> Iterator[Check]:
    clis = used_clis(env)
    if not clis:
        yield Check("hooks", "-", True, "no agent CLI found (no ~/.claude, ~/.codex or "
                    "~/.gemini, none on PATH)")
    for cli in clis:
        path = hook_install.default_path(cli, env)
        try:
            missing = _missing_hook_events(cli, path)
        except ConductorError as exc:
            yield Check("hooks", cli, False, str(exc))
            continue
        fix = f"(`conductor pty hooks install --cli {cli}`)"
        if missing is None:
            yield Check("hooks", cli, False, f"not installed in {path} {fix}")
        elif missing:
            yield Check("hooks", cli, False, f"missing event{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(missing)} in {path} {fix}")
        elif waited := _waited_for(cli, path):
            yield Check("hooks", cli, False, f"{', '.join(waited)} in {path} run in the "
                        "foreground, so Gemini CLI waits for them at every turn's end "
                        f"(`conductor pty hooks install --cli {cli}` updates them)")
        else:
            events = "notify" if cli == "codex" else f"{len(_events(cli))} events"
            yield Check("hooks", cli, True, f"installed in {path} ({events})")


def _events(cli: str) -> tuple[str, ...]:
    return hook_install.EVENTS.get(cli, ("notify",))


def _waited_for(cli: str, path: Path) -> tuple[str, ...]:
    """The events whose hook of ours should run in the background and does not (an install
    from before issue 31): the CLI waits for each at every turn's end."""
    if cli != "gemini":
        return ()
    hooks = _settings(cli, path).get("hooks")
    hooks = hooks if isinstance(hooks, dict) else {}
    return tuple(sorted(
        event for event in hook_install.GEMINI_DETACHED_EVENTS
        if isinstance(hooks.get(event), list) and any(
            isinstance(hook, dict) and isinstance(hook.get("command"), str)
            and _is_our_hook(hook_install.hook_words(hook["command"]), cli)
            and not hook_install.runs_detached(hook["command"])
            for group in hooks[event] if isinstance(group, dict)
            and isinstance(group.get("hooks"), list) for hook in group["hooks"])))


def _missing_hook_events(cli: str, path: Path) -> tuple[str, ...] | None:
    """The events our hook is missing from; None when it is on none (or there is no file)."""
    settings = _settings(cli, path)
    if cli == "codex":
        return None if not _is_our_hook(settings.get("notify"), cli) else ()
    hooks = settings.get("hooks")
    hooks = hooks if isinstance(hooks, dict) else {}
    present = {event for event, groups in hooks.items() if isinstance(groups, list) and any(
        isinstance(hook, dict) and isinstance(hook.get("command"), str) and
        _is_our_hook(hook_install.hook_words(hook["command"]), cli)
        for group in groups if isinstance(group, dict) and isinstance(group.get("hooks"), list)
        for hook in group["hooks"])}
    if not present:
        return None
    return tuple(event for event in _events(cli) if event not in present)


def _is_our_hook(argv: object, cli: str) -> bool:
    """Ours wherever it was installed from: it ends with ``pty hook --cli <cli>``."""
    return isinstance(argv, list) and argv[-4:] == ["pty", "hook", "--cli", cli]


def _settings(cli: str, path: Path) -> dict[str, Any]:
    """A CLI's settings file as a mapping ({} when there is none), read as ``hooks install``
    reads it: a FIFO or a folder is refused, a malformed file is one line."""
    existing = hook_install.read_settings(path)
    if existing is None or not existing.text.strip():
        return {}
    if path.suffix == ".toml":
        import tomlkit
        from tomlkit.exceptions import ParseError

        try:
            return dict(tomlkit.parse(existing.text).unwrap())
        except ParseError as error:
            raise ConductorError(f"{path}:{error.line}: not valid TOML: {error}") from None
    import json

    try:
        loaded = json.loads(existing.text)
    except (ValueError, RecursionError) as error:
        raise ConductorError(f"{path}: not valid JSON ({str(error)[:80]})") from None
    return loaded if isinstance(loaded, dict) else {}


def mcp_checks(env: Mapping[str, str]) -> Iterator[Check]:
    for cli in used_clis(env):
        path = mcp_install.default_path(cli, env)
        try:
            settings = _settings(cli, path)
        except ConductorError as exc:
            yield Check("mcp", cli, False, str(exc))
            continue
        servers = settings.get("mcp_servers" if cli == "codex" else "mcpServers")
        found = isinstance(servers, dict) and mcp_install.SERVER_NAME in servers
        yield Check("mcp", cli, True, f"installed in {path}" if found else
                    f"not installed (optional: `conductor pty mcp install --cli {cli}`)")


# --- hosts ---------------------------------------------------------------------------------------

def host_checks(cfg: Config) -> Iterator[Check]:
    for report in probe_all(tuple(h for h in cfg.hosts if h.enabled)):
        if report.reachable:
            yield Check("hosts", report.name, True, f"{report.destination} reachable, "
                        f"{report.tmux or 'tmux ?'}, {report.panes or 0} panes")
        else:
            yield Check("hosts", report.name, False, f"{report.destination} unreachable: "
                        f"{report.problem or 'no answer'}")
    for host in cfg.hosts:
        if not host.enabled:
            yield Check("hosts", host.name, True, "disabled in the config file")


# --- notifications -------------------------------------------------------------------------------

def notification_checks(tmux: Tmux, cfg: Config, env: Mapping[str, str]) -> Iterator[Check]:
    kinds = cfg.notify.kinds
    if DESKTOP in kinds:
        receiver = desktop_receiver(cfg.notify.timeout, env=env,
                                    which=lambda name: shutil.which(name, path=env.get("PATH")))
        off = receiver.unavailable
        # On by default, and off by nature on a box reached over ssh: the watcher runs fine
        # without it (it logs the same line once), so it is said, not failed.
        yield Check("notifications", "desktop", True,
                    f"{off}; alerts reach you through tmux and [notify.terminal] instead (turn "
                    "notify.desktop.enabled off to quiet this)" if off else
                    "notify-send and a D-Bus session bus found")
    else:
        yield Check("notifications", "desktop", True, "off (notify.desktop.enabled)")
    command = command_receiver(cfg.notify.notify_command, cfg.notify.timeout,
                               which=lambda name: shutil.which(name, path=env.get("PATH")))
    if COMMAND in kinds and command is not None:
        yield Check("notifications", "command", not command.unavailable,
                    command.unavailable or f"runs {cfg.notify.notify_command[0]}")
    if TERMINAL not in kinds:
        yield Check("notifications", "terminal", True, "off (notify.terminal.enabled)")
        return
    try:
        clients = tmux.run("list-clients", "-F", "#{client_control_mode} #{client_termname}",
                           check=False).stdout.split("\n")
    except ConductorError as exc:
        yield Check("notifications", "terminal", False, str(exc))
        return
    terms = [line.split(" ", 1)[1] for line in clients if line.startswith("0 ")]
    nested = [term for term in terms if term.startswith(("tmux", "screen"))]
    if not terms:
        detail = "on; no client attached now, so nobody would see one"
    elif nested:
        detail = (f"on; {len(nested)} client(s) run inside another tmux ({nested[0]}): that "
                  "outer tmux needs `set -g allow-passthrough on` to pass them on")
    else:
        detail = f"on; written to {len(terms)} attached client(s)"
    yield Check("notifications", "terminal", True, detail)

