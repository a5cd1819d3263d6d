"""A pane program that replays an agent's screens and terminal signals on command, for tests.

    screen_player.py COMMANDS_FILE

Follows COMMANDS_FILE (appended to by the test, one command a line) and does each in order:

    show PATH     draw the screen captured in PATH (a corpus file), as the CLI left it
    title TEXT    set the window title (OSC 0), as Claude Code and Codex do
    progress S;P  report progress (OSC 9;4)
    bell          ring the bell (BEL)
    notify TEXT   ask for a desktop notification (OSC 777)

Nothing is echoed: the bytes written are those a real CLI writes for the same thing. Commands
appended together are written in one piece, as a CLI writes one frame.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def run(command: str) -> None:
    verb, _, rest = command.partition(" ")
    if verb == "show":
        lines = Path(rest).read_text(encoding="utf-8").splitlines()
        # Home, clear, and no newline after the last line: a trailing one would scroll.
        sys.stdout.write("\x1b[H\x1b[2J" + "\r\n".join(lines))
    elif verb == "title":
        sys.stdout.write(f"\x1b]0;{rest}\x07")
    elif verb == "progress":
        sys.stdout.write(f"\x1b]9;4;{rest}\x1b\\")
    elif verb == "bell":
        sys.stdout.write("\x07")
    elif verb == "notify":
        sys.stdout.write(f"\x1b]777;notify;{rest}\x07")
    sys.stdout.flush()


def main() -> None:
    commands = Path(sys.argv[1])
    done = 0
    while True:
        lines = commands.read_text(encoding="utf-8").splitlines() if commands.exists() else []
        for line in lines[done:]:
            run(line)
        # Commands added together are written together, as a CLI writes one frame.
        sys.stdout.flush()
        done = max(done, len(lines))
        time.sleep(0.02)


if __name__ == "__main__":
    main()
