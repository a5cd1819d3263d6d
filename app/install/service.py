"""Keeping the watcher running: a systemd user unit or a launchd agent (its log and lock are
``app.adapters.watchfiles``).

The service runs the same ``conductor … pty watch`` a person would, with the store and the tmux
socket written out explicitly, so it watches what the command that installed it would have.
Nothing secret is written into a unit: the LLM key stays in the environment file the unit reads
(``~/.config/conductor-pty/env``), which the user owns.
"""

from __future__ import annotations

import os
import plistlib
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.adapters.watchfiles import running_pid
from app.base.errors import ConductorError

UNIT_NAME = "conductor-pty.service"
LAUNCHD_LABEL = "dev.conductor-pty.watch"
# Environment a service needs to reach the same tmux server and config as the installer.
_PASSED_ON = ("TMUX_TMPDIR", "CONDUCTOR_CONFIG", "XDG_CONFIG_HOME", "LANG", "LC_ALL")


# --- service definitions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Service:
    kind: str  # "systemd" or "launchd"
    path: Path
    text: str


def default_kind() -> str:
    return "launchd" if sys.platform == "darwin" else "systemd"


def watch_argv(program: Sequence[str], workers_dir: Path, socket_name: str | None
               ) -> list[str]:
    socket = ["-L", socket_name] if socket_name else []
    return [*program, "--workers-dir", str(workers_dir), *socket, "pty", "watch"]


def service_env(env: Mapping[str, str]) -> dict[str, str]:
    """PATH (tmux's folder first: service managers start with a bare PATH) and the variables that
    decide which tmux server and config the watcher uses."""
    tmux = shutil.which("tmux", path=env.get("PATH"))
    folders = [str(Path(tmux).parent)] if tmux else []
    folders += [f for f in ("/usr/local/bin", "/usr/bin", "/bin") if f not in folders]
    out = {"PATH": ":".join(folders)}
    out.update({k: env[k] for k in _PASSED_ON if env.get(k)})
    return out


_SYSTEMD_SAFE = re.compile(r"^[A-Za-z0-9_./:@+,=-]+$")


def systemd_word(word: str) -> str:
    """One ExecStart word as systemd reads it: quoted, with its specifiers (%) and variables ($)
    doubled so nothing in a path is expanded."""
    if "\n" in word or "\0" in word:
        raise ConductorError(f"cannot put {word!r} in a systemd unit (a newline or NUL)")
    word = word.replace("%", "%%").replace("$", "$$")
    if _SYSTEMD_SAFE.match(word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_unit(argv: Sequence[str], env: Mapping[str, str]) -> str:
    environment = "\n".join(f"Environment={systemd_word(f'{k}={v}')}" for k, v in env.items())
    return f"""\
# Written by `conductor pty service install`; `conductor pty service uninstall` removes it.
[Unit]
Description=conductor pty watcher: which tmux agent panes are READY, BUSY or need you
# A watcher that keeps failing (a broken config, another watcher on the store) stops retrying.
StartLimitIntervalSec=120
StartLimitBurst=5

[Service]
Type=simple
ExecStart={" ".join(systemd_word(w) for w in argv)}
{environment}
# Put OPENROUTER_API_KEY=... here (mode 0600) to turn the LLM classifier on.
EnvironmentFile=-%h/.config/conductor-pty/env
Restart=on-failure
RestartSec=5

[Install]
WantedBy=default.target
"""


def launchd_plist(argv: Sequence[str], env: Mapping[str, str], workers_dir: Path) -> str:
    data = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(argv),
        "EnvironmentVariables": dict(env),
        "RunAtLoad": True,
        # Restart when it fails, not after a clean stop (`conductor pty stop`).
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 5,
        "StandardErrorPath": str(workers_dir / "launchd.err"),
    }
    return plistlib.dumps(data).decode("utf-8")


def service_path(kind: str, env: Mapping[str, str]) -> Path:
    home = Path(env.get("HOME") or Path.home())
    if kind == "launchd":
        return home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".config"
    return base / "systemd" / "user" / UNIT_NAME


def build(kind: str, program: Sequence[str], workers_dir: Path, socket_name: str | None,
          env: Mapping[str, str]) -> Service:
    argv = watch_argv(program, workers_dir, socket_name)
    passed = service_env(env)
    text = systemd_unit(argv, passed) if kind == "systemd" else \
        launchd_plist(argv, passed, workers_dir)
    return Service(kind, service_path(kind, env), text)


def _manager(kind: str, action: str, path: Path) -> list[list[str]]:
    """The service manager's commands for ``action`` (start or stop)."""
    if kind == "systemd":
        if action == "start":
            return [["systemctl", "--user", "daemon-reload"],
                    ["systemctl", "--user", "enable", "--now", UNIT_NAME]]
        return [["systemctl", "--user", "disable", "--now", UNIT_NAME]]
    domain = f"gui/{os.getuid()}"
    if action == "start":
        return [["launchctl", "bootstrap", domain, str(path)]]
    return [["launchctl", "bootout", f"{domain}/{LAUNCHD_LABEL}"]]


def _run(argv: list[str]) -> str | None:
    """None when it worked, else one line saying why not."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError:
        return f"{argv[0]} is not installed"
    except subprocess.TimeoutExpired:
        return f"{' '.join(argv)} did not answer within 30 s"
    if done.returncode != 0:
        return f"{' '.join(argv)}: {' '.join(done.stderr.split()) or f'exit {done.returncode}'}"
    return None


def install(service: Service, start: bool = True) -> list[str]:
    """Write the unit (atomically) and start it; the lines to print. Raises ConductorError when
    the manager refuses, after the file is written (the message says how to start it)."""
    from app.base.files import write_atomic

    try:
        service.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(service.path, service.text, mode=0o644)
    except OSError as exc:
        raise ConductorError(f"cannot write {service.path}: {exc.strerror or exc}") from None
    out = [f"wrote {service.path}"]
    if not start:
        return out
    for argv in _manager(service.kind, "start", service.path):
        problem = _run(argv)
        if problem:
            later = " ".join(_manager(service.kind, "start", service.path)[-1])
            raise ConductorError(f"wrote {service.path} but could not start it ({problem}); "
                                 f"start it with: {later}")
    out.append(f"started the watcher as a {service.kind} service; it restarts if it fails")
    return out


def uninstall(kind: str, path: Path) -> list[str]:
    if not path.exists():
        raise ConductorError(f"no conductor pty service installed ({path} does not exist)")
    out = []
    for argv in _manager(kind, "stop", path):
        problem = _run(argv)
        out.append(f"note: {problem}" if problem else "stopped the service")
    try:
        path.unlink()
    except OSError as exc:
        raise ConductorError(f"cannot remove {path}: {exc.strerror or exc}") from None
    out.append(f"removed {path}")
    if kind == "systemd":
        _run(["systemctl", "--user", "daemon-reload"])
    return out


def status_lines(kind: str, path: Path, workers_dir: Path) -> list[str]:
    lines = [f"service file: {path}" if path.exists() else f"service file: none ({path})"]
    if path.exists():
        if kind == "systemd":
            try:
                done = subprocess.run(["systemctl", "--user", "is-active", UNIT_NAME],
                                      capture_output=True, text=True, timeout=30, check=False)
                state = done.stdout.strip() or " ".join(done.stderr.split()) or "unknown"
            except (FileNotFoundError, subprocess.TimeoutExpired):
                state = "unknown (systemctl not available)"
            lines.append(f"systemd says: {state}")
        else:
            lines.append(f"launchd label: {LAUNCHD_LABEL}")
    pid = running_pid(workers_dir)
    lines.append(f"watcher for {workers_dir}: " +
                 (f"running (pid {pid})" if pid else "not running"))
    return lines
