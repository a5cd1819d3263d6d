"""Settings from the environment (and ``.env``, loaded by the CLI entry point), with defaults
(each written once, in :mod:`app.base.settings_table`).

Everything here is cheap to import: the status-line command resolves the store through it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from app.base import paths
from app.base.errors import ConfigError
from app.base.settings_table import default

ENV_WORKERS_DIR = paths.ENV_WORKERS_DIR
ENV_TMUX_SOCKET = paths.ENV_TMUX_SOCKET

DEFAULT_INTERVAL_S = default("watch.interval", float)
# 0 in the file, None here: each pack's own stable_polls.
DEFAULT_STABLE_POLLS: int | None = default("states.ready_polls", int) or None
# History is bounded both ways: rows per pane and age.
DEFAULT_HISTORY_ROWS_PER_PANE = default("watch.history_rows", int)
DEFAULT_HISTORY_DAYS = default("watch.history_days", float)
# A pane whose change hint has not moved is still recaptured this often, as a safety net for
# output that tmux's one-second activity clock could hide.
DEFAULT_FORCE_CAPTURE_S = default("watch.force_capture", float)
# Anti-flap: polls a new verdict must hold before it becomes the reported state. READY has its
# own, stricter rule (the same screen for ``stable_polls`` polls and ``ready_min_s`` seconds);
# leaving READY is always immediate, whatever these say.
DEFAULT_BUSY_POLLS = default("states.busy_polls", int)
DEFAULT_CONFIRMATION_POLLS = default("states.confirmation_polls", int)
DEFAULT_ERROR_POLLS = default("states.error_polls", int)
# With fast polling (``wait`` polls every 0.5 s) a poll count alone would call a pause READY.
DEFAULT_READY_MIN_S = default("states.ready_min_seconds", float)
# READY or NEEDS_CONFIRMATION for longer than this is "waiting long".
DEFAULT_WAITING_GRACE_S = default("states.waiting_grace", float)
# Control mode: tmux tells the watcher the moment a pane prints, so the poll is only the safety
# net. A pane printing nonstop is still captured at most once per DEFAULT_MIN_CAPTURE_S.
DEFAULT_EVENTS = default("watch.events", bool)
DEFAULT_MIN_CAPTURE_S = default("watch.min_capture", float)
# After ``send``, READY is not believed until the pane visibly left READY or this passed: the
# screen of a CLI still looks idle for about half a second after Enter.
DEFAULT_SEND_GRACE_S = default("states.send_grace", float)
# An EXITED pane stays in `status` this long; `status --all` shows it until it is pruned.
DEFAULT_EXITED_SHOWN_S = default("states.exited_shown", float)


def workers_dir(env: Mapping[str, str] | None = None) -> Path:
    return Path(paths.workers_dir(env))


def tmux_socket(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    return env.get(ENV_TMUX_SOCKET) or None


@dataclass(frozen=True)
class WatchSettings:
    interval_s: float = DEFAULT_INTERVAL_S
    stable_polls: int | None = DEFAULT_STABLE_POLLS
    history_rows_per_pane: int = DEFAULT_HISTORY_ROWS_PER_PANE
    history_days: float = DEFAULT_HISTORY_DAYS
    force_capture_s: float = DEFAULT_FORCE_CAPTURE_S
    busy_polls: int = DEFAULT_BUSY_POLLS
    confirmation_polls: int = DEFAULT_CONFIRMATION_POLLS
    error_polls: int = DEFAULT_ERROR_POLLS
    ready_min_s: float = DEFAULT_READY_MIN_S
    waiting_grace_s: float = DEFAULT_WAITING_GRACE_S
    send_grace_s: float = DEFAULT_SEND_GRACE_S
    exited_shown_s: float = DEFAULT_EXITED_SHOWN_S
    events: bool = DEFAULT_EVENTS
    min_capture_s: float = DEFAULT_MIN_CAPTURE_S

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise ConfigError(f"interval must be positive, got {self.interval_s}")
        if self.stable_polls is not None and self.stable_polls < 1:
            raise ConfigError(f"stable polls must be at least 1, got {self.stable_polls}")
        for name in ("busy_polls", "confirmation_polls", "error_polls"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("ready_min_s", "waiting_grace_s", "send_grace_s", "history_days",
                     "exited_shown_s", "min_capture_s"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must not be negative, got {getattr(self, name)}")
        if self.force_capture_s <= 0 or self.history_rows_per_pane < 1:
            raise ConfigError("force_capture must be positive and history_rows at least 1")


def load_dotenv_file() -> None:
    """Load ``.env`` from the working directory upwards; real environment variables win."""
    from dotenv import find_dotenv, load_dotenv

    found = find_dotenv(usecwd=True)
    if found:
        load_dotenv(found, override=False)

# The config file (read and written by app.run.configfile); its place is a setting of its own.
ENV_CONFIG = "CONDUCTOR_CONFIG"
APP_DIR = "conductor-pty"
FILE_NAME = "config.toml"
# `wait` looks at the pane this often (seconds) unless the config file says otherwise.
DEFAULT_WAIT_POLL_S = default("wait.poll_interval", float)


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$CONDUCTOR_CONFIG``, else ``$XDG_CONFIG_HOME/conductor-pty/config.toml``, else
    ``~/.config/conductor-pty/config.toml``."""
    env = os.environ if env is None else env
    explicit = env.get(ENV_CONFIG, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = env.get("XDG_CONFIG_HOME", "").strip()
    # The XDG spec says a relative value is invalid and must be ignored.
    if xdg and Path(xdg).is_absolute():
        base = Path(xdg)
    else:
        home = env.get("HOME", "").strip()
        base = (Path(home) if home else Path.home()) / ".config"
    return base / APP_DIR / FILE_NAME
