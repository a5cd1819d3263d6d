"""Console entry point ``conductor``.

``conductor pty status --short`` runs in tmux's status line every few seconds per client, and
``conductor pty hook`` inside every agent hook, so both are answered here with the stdlib alone;
everything else goes through click (``app.front.cli.main``).
"""

from __future__ import annotations

import sys

_SHORT_FLAGS = {"--short", "--colour", "--color", "--tmux-colours"}


def _short_status(argv: list[str]) -> int:
    from app.adapters.status import short_line
    from app.base import paths

    colour = bool({"--colour", "--color", "--tmux-colours"} & set(argv))
    print(short_line(paths.workers_dir(), colour))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:2] == ["pty", "status"] and "--short" in args[2:] and set(args[2:]) <= _SHORT_FLAGS:
        return _short_status(args[2:])
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
