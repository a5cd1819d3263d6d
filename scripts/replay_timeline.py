#!/usr/bin/env python3
"""Show a recorded timeline's frames in this terminal with their timing (for scripts/bench.py).

    replay_timeline.py TIMELINE_DIR START_FILE [claude|codex]

Shows the first frame, waits for START_FILE to hold the epoch time to start at, then shows each
frame of ``frames.tsv`` at its ``t_seconds`` after it, and stays on the last one. With a CLI's
name, each frame also sets the window title that CLI sets in that state (design/signals.md):
a spinner frame while BUSY, Codex's "Action Required" on its dialogs, the quiet title otherwise.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def title(cli: str, label: str, frame: int) -> str:
    """The title ``cli`` shows in a frame labelled ``label``, as recorded from the real CLI."""
    working = label == "BUSY"
    if cli == "claude":
        return f"{'⠂⠐'[frame % 2]} Replayed session" if working else "✳ Replayed session"
    if label == "NEEDS_CONFIRMATION":
        return "[ ! ] Action Required | Replayed session | project"
    return f"{SPINNER[frame % len(SPINNER)]} Replayed session | project" if working \
        else "Replayed session | project"


def show(path: Path, cli: str = "", label: str = "", frame: int = 0) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    # Home, clear, and no newline after the last line: a trailing one would scroll the screen.
    out = "\x1b[H\x1b[2J" + "\r\n".join(lines)
    if cli:
        out += f"\x1b]0;{title(cli, label, frame)}\x07"  # after the frame, as the CLIs do
    sys.stdout.write(out)
    sys.stdout.flush()


def main() -> None:
    folder, start_file = Path(sys.argv[1]), Path(sys.argv[2])
    cli = sys.argv[3] if len(sys.argv) > 3 else ""
    rows = [line.split("\t") for line in
            (folder / "frames.tsv").read_text(encoding="utf-8").splitlines()[1:] if line]
    show(folder / rows[0][1], cli, rows[0][2], 0)
    while not start_file.exists() or not start_file.read_text().strip():
        time.sleep(0.05)
    start = float(start_file.read_text())
    for frame, (t_text, name, label) in enumerate(rows[1:], 1):
        delay = start + float(t_text) - time.time()
        if delay > 0:
            time.sleep(delay)
        show(folder / name, cli, label, frame)
    time.sleep(86400)


if __name__ == "__main__":
    main()
