"""Console entry point ``conductor``.

``conductor pty status --short`` runs in tmux's status line every few seconds per client, and
``conductor pty hook`` inside every agent hook, so both are answered here with the stdlib alone;
everything else goes through click (``app.front.cli.main``).
"""

from __future__ import annotations

import sys

_COLOUR_FLAGS = {"--colour", "--color", "--tmux-colours"}
_SOCKET_FLAGS = {"-L", "--socket-name"}


class _ShortStatus:
    """What ``[GLOBAL OPTIONS] pty [-L NAME] status --short [--colour] [--width N]`` asks."""

    __slots__ = ("colour", "short", "socket", "width", "workers_dir")

    def __init__(self) -> None:
        self.socket: str | None = None
        self.workers_dir: str | None = None
        self.colour = False
        self.short = False
        self.width: int | None = None


def _parse_short_status(args: list[str]) -> _ShortStatus | None:
    """The short status request in ``args``, or None for anything else (click handles it, with
    its errors)."""
    asked = _ShortStatus()
    words = iter(args)
    stage = "global"  # then "pty", then "status"
    for word in words:
        name, has_value, value = word.partition("=") if word.startswith("--") else (word, "", "")
        takes_value = name in _SOCKET_FLAGS or (stage == "global" and name == "--workers-dir") \
            or (stage == "status" and name == "--width")
        if takes_value and not has_value:
            value = next(words, "")
        if takes_value and not value:
            return None
        if stage != "status" and name in _SOCKET_FLAGS:
            asked.socket = value
        elif stage == "global" and name == "--workers-dir":
            asked.workers_dir = value
        elif stage == "global" and word == "pty":
            stage = "pty"
        elif stage == "pty" and word == "status":
            stage = "status"
        elif stage == "status" and name == "--width":
            if not value.lstrip("-").isdigit():
                return None
            asked.width = max(0, int(value))  # no room (a format's negative sum): nothing
        elif stage == "status" and word in _COLOUR_FLAGS:
            asked.colour = True
        elif stage == "status" and word == "--short":
            asked.short = True
        else:
            return None
    return asked if stage == "status" and asked.short else None


def _short_status(asked: _ShortStatus) -> int:
    import os

    from app.adapters.status import short_line
    from app.base import paths

    env = dict(os.environ)
    if asked.workers_dir:
        env[paths.ENV_WORKERS_DIR] = asked.workers_dir
    workers_dir = paths.workers_dir(env)
    socket = asked.socket or env.get(paths.ENV_TMUX_SOCKET) or None
    print(short_line(workers_dir, asked.colour, asked.width, socket))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    # An argument that is not UTF-8 (a lone surrogate) takes click's path, which refuses it.
    short = _parse_short_status(args) if "--short" in args and not any(
        "\ud800" <= char <= "\udfff" for arg in args for char in arg) else None
    if short is not None:
        return _short_status(short)
    store_args = args[:2] if args[:1] == ["--workers-dir"] else []
    if args[len(store_args):len(store_args) + 2] == ["pty", "hook"]:
        # Agents wait for their hooks: no click, no third-party imports.
        import os

        from app.front.hook import main as hook_main

        env = dict(os.environ)
        if len(store_args) == 2:
            env["CONDUCTOR_WORKERS_DIR"] = store_args[1]
        return hook_main(args[len(store_args) + 2:], env=env)
    from app.front.cli.main import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
