"""The mark a hook leaves on its tmux pane, so the watcher hears of the event at once.

A hook call (``conductor pty hook``) writes its event to the store, then runs one tmux command
line on the pane's own server:

    tmux set-option -p -t "$TMUX_PANE" @conductor-hook "<epoch seconds> <event>" \\; \\
         wait-for -S conductor-hook

The ``wait-for`` channel wakes the watcher's waiter (``app.adapters.control.HookBell``) within
milliseconds; the pane option is seen by every control-mode client that subscribed to it
(``%subscription-changed``, tmux checks subscriptions once a second) and stays readable in
``#{@conductor-hook}``. Both live on the tmux server the pane runs on, so a hook on a remote host
needs no way back to us: the line above, run there, is all it takes (``shell_line``).

Only the hook's path runs this module, so it imports nothing heavy (no ``subprocess``: the agent
waits for its hooks); :func:`parse_mark` is the one place a mark is read back.
"""

from __future__ import annotations

import os

OPTION = "@conductor-hook"
CHANNEL = "conductor-hook"
_EVENT_MAX = 32


def format_mark(ts: float, event: str) -> str:
    """The option's value: when the hook fired (epoch seconds) and its event kind."""
    return f"{ts:.3f} {event[:_EVENT_MAX]}"


def parse_mark(value: str) -> tuple[float, str] | None:
    """(epoch seconds, event kind) from an option value; None for anything else."""
    stamp, _, event = value.strip().partition(" ")
    try:
        ts = float(stamp)
    except ValueError:
        return None
    if not event or not event.replace("_", "").isalnum() or ts != ts or ts <= 0:
        return None
    return ts, event[:_EVENT_MAX]


def tmux_args(pane_id: str, mark: str) -> list[str]:
    """The tmux arguments that leave ``mark`` on the pane and ring the channel."""
    return ["set-option", "-p", "-t", pane_id, OPTION, mark, ";", "wait-for", "-S", CHANNEL]


def shell_line() -> str:
    """The same, as one line of sh a hook on any host can run inside its pane."""
    return (f'tmux set-option -p -t "$TMUX_PANE" {OPTION} "$(date +%s) $EVENT" \\; '
            f"wait-for -S {CHANNEL}")


def ring(socket_path: str, pane_id: str, mark: str) -> int:
    """Run :func:`tmux_args` on the server at ``socket_path`` and wait for it; tmux's exit
    status, or -1 when it could not be started. Prints nothing (the agent reads our stdout)."""
    argv = ["tmux", *(["-S", socket_path] if socket_path else []), *tmux_args(pane_id, mark)]
    quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    try:
        pid = os.posix_spawnp("tmux", argv, os.environ, file_actions=quiet)
        _, status = os.waitpid(pid, 0)
    except OSError:
        return -1
    return os.waitstatus_to_exitcode(status)
