"""A stand-in agent for the race tests: it draws Claude Code's screens as the real CLI draws them
(see tests/corpus/shared/claude-code/) and takes one instruction per line.

    work S [D]  busy for S seconds (spinner, "esc to interrupt", the prompt box still visible),
                then an answer and the idle prompt; with D, the idle screen stays up D seconds
                first, as real CLIs leave it up for a moment after Enter
    ask         Claude's Bash permission dialog, a menu read key by key: 1, 2 or Enter on "Yes"
                approve (then 2 s of work), 3 or Esc refuse
    suggest T   answers, then shows T in the empty prompt box the way Claude draws a suggested
                next prompt (dim)
    say T       ends its turn saying T (e.g. "Shall I continue?"), as a model's reply
    anything    else: a short answer at once

Hooks are not called from here: each test writes the hook events itself, at exactly the moment
its race needs (a Stop lost, or a Stop from the previous turn landing late).
"""

from __future__ import annotations

import os
import sys
import termios
import time
import tty

RULE = "─" * 120
SPINNER = "✻✽✶✢·"


def draw(lines: list[str], footer: str, prompt_box: bool = True, suggestion: str = "") -> None:
    out = ["\x1b[H\x1b[2J", *(f"{line}\n" for line in lines)]
    if prompt_box:
        # A suggested next prompt, as Claude draws it: its own cursor cell, then dim text.
        hint = f"\x1b[7m{suggestion[:1]}\x1b[0;2m{suggestion[1:]}\x1b[0m" if suggestion else ""
        out += [f"{RULE}\n", f"❯ {hint}\n", f"{RULE}\n", f"  {footer}"]
        out.append("\x1b[2A\x1b[3G")  # the cursor sits in the prompt box, where typing shows
    else:
        out.append(footer)
    sys.stdout.write("".join(out))
    sys.stdout.flush()


def idle(history: list[str], suggestion: str = "") -> None:
    draw(history[-20:], "? for shortcuts · ← for agents", suggestion=suggestion)


def work(history: list[str], task: str, seconds: float) -> None:
    started = time.monotonic()
    frame = 0
    while (elapsed := time.monotonic() - started) < seconds:
        spinner = SPINNER[frame % len(SPINNER)]
        draw([*history[-18:], f"❯ {task}", f"{spinner} Working… ({int(elapsed)}s · esc to "
              "interrupt)"], "esc to interrupt · ← for agents")
        frame += 1
        time.sleep(0.25)
    history += [f"❯ {task}", f"● Done: {task}", f"✻ Worked for {int(seconds)}s"]


OPTIONS = ("Yes", "Yes, and always allow access to build/ from this project", "No")
KEYS = {"\x1b[A": "up", "\x1bOA": "up", "\x1b[B": "down", "\x1bOB": "down", "\r": "enter",
        "\n": "enter", "\x1b": "esc"}


def read_key() -> str:
    """One key press, as a menu reads it: no echo, no line editing; whatever else arrived with
    it (an Enter right behind a digit) is dropped."""
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    try:
        return os.read(fd, 32).decode(errors="replace")
    finally:
        termios.tcsetattr(fd, termios.TCSAFLUSH, saved)


def ask(history: list[str], task: str) -> None:
    """A menu like Claude's: digits pick, arrows move the highlight, Enter picks it, Esc and
    "3" refuse. Pasted text is not a key (bracketed paste would be ignored the same way)."""
    chosen = 0
    while True:
        rows = [f" {'❯' if i == chosen else ' '} {i + 1}. {label}"
                for i, label in enumerate(OPTIONS)]
        dialog = [
            *history[-10:], f"❯ {task}", "● I will remove the build directory now.",
            "● Bash(rm -rf build)", "  ⎿  Waiting…", RULE, " Bash command", "   rm -rf build",
            "   Remove the build directory", " Do you want to proceed?", *rows, "",
        ]
        draw(dialog, " Esc to cancel · Tab to amend · ctrl+e to explain", prompt_box=False)
        key = read_key()
        name = KEYS.get(key, key[:1] if len(key) == 1 or key[1:] in ("\r", "\n") else "")
        if name == "up":
            chosen = max(0, chosen - 1)
        elif name == "down":
            chosen = min(len(OPTIONS) - 1, chosen + 1)
        elif name in ("1", "2", "3", "enter", "esc"):
            picked = chosen if name == "enter" else 2 if name == "esc" else int(name) - 1
            break
    if picked == 2:
        history += [f"❯ {task}", "● Refused: rm -rf build was not run."]
        return
    work(history, task, 2.0)


def main() -> None:
    history = ["╭─── Claude Code v2.1.197 ───╮", "╰────────────────────────────╯"]
    idle(history)
    for line in sys.stdin:
        task = line.strip()
        words = task.split()
        if words[:1] == ["work"] and len(words) > 1:
            time.sleep(float(words[2]) if len(words) > 2 else 0.0)
            work(history, task, float(words[1]))
        elif words[:1] == ["ask"]:
            ask(history, task)
        elif words[:1] == ["say"]:
            history += [f"❯ {task}", f"● {task.removeprefix('say').strip()}"]
        elif words[:1] == ["suggest"]:
            history += [f"❯ {task}", "● Done."]
            idle(history, suggestion=task.removeprefix("suggest").strip())
            continue
        elif task:
            history += [f"❯ {task}", f"● Answer to: {task}"]
        idle(history)


if __name__ == "__main__":
    main()
