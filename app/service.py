"""Keeping the watcher running: a systemd user unit or a launchd agent, stopping the running
watcher from its lock, and the watcher's own log file.

The service runs the same ``conductor … pty watch`` a person would, with the store and the tmux
socket written out explicitly, so it watches what the command that installed it would have.
Nothing secret is written into a unit: the LLM key stays in the environment file the unit reads
(``~/.config/conductor-pty/env``), which the user owns.
"""

from __future__ import annotations

import fcntl
import io
import logging
import logging.handlers
import os
import plistlib
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from app.classify.redact import redact
from app.errors import ConductorError
from app.render import printable

UNIT_NAME = "conductor-pty.service"
LAUNCHD_LABEL = "dev.conductor-pty.watch"
LOCK_NAME = "watch.lock"  # the daemon's InstanceLock file
LOG_NAME = "watch.log"
LOG_BYTES = 1_000_000
LOG_BACKUPS = 3
# Environment a service needs to reach the same tmux server and config as the installer.
_PASSED_ON = ("TMUX_TMPDIR", "CONDUCTOR_CONFIG", "XDG_CONFIG_HOME", "LANG", "LC_ALL")


# --- the watcher's log file ----------------------------------------------------------------------


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log whose files are created 0600 and never through a symlink: pane names and
    summaries are the user's business."""

    def _open(self) -> io.TextIOWrapper:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.baseFilename, flags, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding or "utf-8", errors=self.errors)


class SafeFormatter(logging.Formatter):
    """Every line of the watcher's log, its tracebacks included, with secrets redacted and
    terminal escapes and controls removed, whatever the code that logged it passed in.

    Log lines quote what others wrote: an agent's check command (``mysql -pSECRET``), its
    report, a goal, a summary of a screen, a pane's name; and ``conductor pty logs`` prints them
    to a terminal. One filter at the end of the line, so no call site can forget it.
    """

    def format(self, record: logging.LogRecord) -> str:
        return redact(printable(super().format(record)))


def log_handler(workers_dir: Path) -> PrivateRotatingFileHandler:
    """The handler for ``<store>/watch.log``; raises OSError when it cannot be opened."""
    workers_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    handler = PrivateRotatingFileHandler(workers_dir / LOG_NAME, maxBytes=LOG_BYTES,
                                         backupCount=LOG_BACKUPS, encoding="utf-8")
    handler.setFormatter(SafeFormatter("%(asctime)s %(levelname)s %(message)s",
                                       "%Y-%m-%d %H:%M:%S"))
    return handler


def read_log(workers_dir: Path, lines: int) -> list[str]:
    path = workers_dir / LOG_NAME
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return [line.rstrip("\n") for line in handle.readlines()[-lines:]] if lines else []
    except FileNotFoundError:
        raise ConductorError(f"no watcher log at {path} yet: start `conductor pty watch`"
                             ) from None
    except OSError as exc:
        raise ConductorError(f"cannot read {path}: {exc.strerror or exc}") from None


def follow_log(workers_dir: Path, poll_s: float = 0.5,
               stop: Callable[[], bool] = lambda: False) -> Iterator[str]:
    """New lines of ``watch.log`` as they are written, across rotations (the file is reopened
    when it is replaced or shrinks). A line still being written is held until it ends."""
    path = workers_dir / LOG_NAME
    handle: BinaryIO | None = None
    inode = -1
    pending = b""
    try:
        while not stop():
            try:
                stat = path.stat()
            except FileNotFoundError:
                stat = None
            if stat is not None and (handle is None or stat.st_ino != inode
                                     or stat.st_size < handle.tell()):
                first = handle is None
                if handle is not None:
                    pending += handle.read()  # the rest of the file that was rotated away
                    handle.close()
                handle = path.open("rb")
                inode = stat.st_ino
                if first:
                    handle.seek(0, os.SEEK_END)
            if handle is not None:
                pending += handle.read()
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.decode("utf-8", "replace")
            if not lines:
                time.sleep(poll_s)
    finally:
        if handle is not None:
            handle.close()


# --- stopping the running watcher ----------------------------------------------------------------


def running_pid(workers_dir: Path) -> int | None:
    """The pid of the watcher holding the store's lock, or None when no watcher holds it."""
    path = workers_dir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConductorError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 64).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None  # we could lock it: nobody holds it
    finally:
        os.close(fd)


def stop_watcher(workers_dir: Path, timeout: float = 15.0) -> int:
    """SIGTERM the watcher of this store and wait until it let go of its lock; its pid."""
    pid = running_pid(workers_dir)
    if pid is None:
        raise ConductorError(f"no watcher is running for {workers_dir}")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        raise ConductorError(f"the watcher (pid {pid}) is gone already") from None
    except PermissionError:
        raise ConductorError(f"not allowed to stop the watcher (pid {pid})") from None
    deadline = time.monotonic() + timeout
    while running_pid(workers_dir) is not None:
        if time.monotonic() > deadline:
            raise ConductorError(f"the watcher (pid {pid}) did not stop within {timeout:g} s")
        time.sleep(0.05)
    return pid


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
    from app.files import write_atomic

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
