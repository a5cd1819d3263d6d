"""A stand-in agent (tests/support/fake_agent.py's Claude Code screens) whose clear command opens a
where-to-run menu, as Codex's `/new` does in a git repository, with the options given.

    python -m tests.act.fake_clear_menu LOG OPTION...   (from the checkout's top)

`/clear` draws `Where should the new conversation run?` with the OPTIONs numbered in that
order; a digit or Enter picks one, Esc closes the menu. Every key the menu takes is appended
to LOG as a line (`esc`, `1`, `enter`), then the idle screen comes back.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.fake_agent import KEYS, draw, idle, read_key


def menu(history: list[str], options: list[str], log: Path) -> None:
    chosen = 0
    while True:
        rows = [f"{'❯' if i == chosen else ' '} {i + 1}. {label}"
                for i, label in enumerate(options)]
        draw([*history[-12:], "", "  Where should the new conversation run?", "", *rows, ""],
             "  Enter to select · Esc to cancel", prompt_box=False)
        key = read_key()
        name = KEYS.get(key, key[:1])
        with log.open("a", encoding="utf-8") as out:
            out.write(f"{name}\n")
        if name in ("up", "down"):
            chosen = max(0, min(len(options) - 1, chosen + (1 if name == "down" else -1)))
            continue
        if name == "esc":
            return
        if name == "enter" or name.isdigit():
            picked = chosen if name == "enter" else int(name) - 1
            history += ["❯ /clear", f"● New conversation: {options[picked]}"]
            return


def main() -> None:
    log, options = Path(sys.argv[1]), sys.argv[2:]
    history = ["╭─── Claude Code v2.1.197 ───╮", "╰────────────────────────────╯"]
    idle(history)
    for line in sys.stdin:
        task = line.strip()
        if task == "/clear":
            menu(history, options, log)
        elif task:
            history += [f"❯ {task}", f"● Answer to: {task}"]
        idle(history)


if __name__ == "__main__":
    main()
