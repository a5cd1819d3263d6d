"""Console entry point ``conductor``.

``conductor pty status --short`` runs in tmux's status line every few seconds per client, so it is
answered here with the stdlib alone; everything else goes through click (``app.cli``).
"""

from __future__ import annotations

import sys

_SHORT_FLAGS = {"--short", "--colour", "--color", "--tmux-colours"}


def _short_status(argv: list[str]) -> int:
    from app import paths
    from app.status import short_line

    colour = bool({"--colour", "--color", "--tmux-colours"} & set(argv))
    print(short_line(paths.workers_dir(), colour))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:2] == ["pty", "status"] and "--short" in args[2:] and set(args[2:]) <= _SHORT_FLAGS:
        return _short_status(args[2:])
    from app.cli import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
