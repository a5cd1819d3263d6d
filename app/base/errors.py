"""One exception family; every message is one readable line."""

from __future__ import annotations


class ConductorError(Exception):
    """Base of every error conductor pty reports to a person."""


class ConfigError(ConductorError):
    """A setting is missing or malformed."""


class PackError(ConductorError):
    """A classifier pack cannot be loaded; the message starts with ``file:line``."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


class TmuxError(ConductorError):
    """A tmux command failed."""


class TmuxServerNotRunning(TmuxError):
    """No tmux server answers on the socket."""


class PaneNotFound(ConductorError):
    """No pane or worker matches what the user named."""


class PaneDead(PaneNotFound):
    """The pane is still listed, but its program has exited (tmux's remain-on-exit)."""


class StoreError(ConductorError):
    """The status store is missing, locked or unreadable."""


class AlreadyRunning(ConductorError):
    """Another watcher holds the store's lock."""


class LLMError(ConductorError):
    """The LLM classifier gave no usable verdict; the message never contains the API key."""


class HostUnreachable(TmuxError):
    """ssh could not reach a configured host (refused, auth failure, timeout, session refused):
    its panes are stale, never ended."""


def error_line(message: str) -> str:
    """``message`` as the one line a person or an agent reads: whitespace runs made one space,
    and a message longer than 300 characters cut in the middle (a 100 KB name echoed back in
    "no pane named …" helps nobody)."""
    line = " ".join(message.split())
    return line if len(line) <= 300 else f"{line[:200]} … {line[-80:]}"
