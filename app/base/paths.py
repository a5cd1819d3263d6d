"""Where the store lives. os.path only: this runs on the status-line path, where pathlib's import
alone costs ~10 ms."""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV_WORKERS_DIR = "CONDUCTOR_WORKERS_DIR"
# The tmux socket name (as `tmux -L`) every command means when not given -L.
ENV_TMUX_SOCKET = "CONDUCTOR_TMUX_SOCKET"


def workers_dir(env: Mapping[str, str] | None = None) -> str:
    """``$CONDUCTOR_WORKERS_DIR``, else ``$XDG_STATE_HOME/conductor-pty/workers`` (with
    ``~/.local/state`` when XDG_STATE_HOME is unset): the same from every working directory, so the
    daemon, the CLI and tmux's status line find one store."""
    env = os.environ if env is None else env
    configured = env.get(ENV_WORKERS_DIR)
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    home = env.get("HOME") or os.path.expanduser("~")
    state_home = env.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    return os.path.join(os.path.expanduser(state_home), "conductor-pty", "workers")
