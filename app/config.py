"""Settings from the environment (and ``.env``, loaded by the CLI entry point), with defaults.

Everything here is cheap to import: the status-line command resolves the store through it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from app import paths
from app.errors import ConfigError

ENV_WORKERS_DIR = paths.ENV_WORKERS_DIR
ENV_TMUX_SOCKET = "CONDUCTOR_TMUX_SOCKET"

DEFAULT_INTERVAL_S = 5.0
DEFAULT_STABLE_POLLS: int | None = None  # None: each pack's own stable_polls
# History is bounded both ways: rows per pane and age.
DEFAULT_HISTORY_ROWS_PER_PANE = 1000
DEFAULT_HISTORY_DAYS = 7.0
# A pane whose change hint has not moved is still recaptured this often, as a safety net for
# output that tmux's one-second activity clock could hide.
DEFAULT_FORCE_CAPTURE_S = 30.0


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

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise ConfigError(f"interval must be positive, got {self.interval_s}")
        if self.stable_polls is not None and self.stable_polls < 1:
            raise ConfigError(f"stable polls must be at least 1, got {self.stable_polls}")


def load_dotenv_file() -> None:
    """Load ``.env`` from the working directory upwards; real environment variables win."""
    from dotenv import find_dotenv, load_dotenv

    found = find_dotenv(usecwd=True)
    if found:
        load_dotenv(found, override=False)
