"""A pane program that reads a line at a prompt as aider does, for tests.

    line_prompt.py PROMPT

Prints a turn's last lines and a rule, then reads a line at PROMPT with the terminal's own line
editing (the cursor stays in the line while text is typed; Enter moves it under the line), then
prints nothing for ten minutes: the moment between a prompt taken and the first sign of the
answer (aider brings its repository map up to date there).
"""

from __future__ import annotations

import sys
import time


def main() -> None:
    print("Tokens: 2.1k sent, 40 received.")
    print("─" * 40)
    input(sys.argv[1])
    time.sleep(600)


if __name__ == "__main__":
    main()
