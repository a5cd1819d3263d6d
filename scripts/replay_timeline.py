#!/usr/bin/env python3
"""Show a recorded timeline's frames in this terminal with their timing (for scripts/bench.py).

    replay_timeline.py TIMELINE_DIR START_FILE

Shows the first frame, waits for START_FILE to hold the epoch time to start at, then shows each
frame of ``frames.tsv`` at its ``t_seconds`` after it, and stays on the last one.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def show(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    # Home, clear, and no newline after the last line: a trailing one would scroll the screen.
    sys.stdout.write("\x1b[H\x1b[2J" + "\r\n".join(lines))
    sys.stdout.flush()


def main() -> None:
    folder, start_file = Path(sys.argv[1]), Path(sys.argv[2])
    rows = [line.split("\t") for line in
            (folder / "frames.tsv").read_text(encoding="utf-8").splitlines()[1:] if line]
    show(folder / rows[0][1])
    while not start_file.exists() or not start_file.read_text().strip():
        time.sleep(0.05)
    start = float(start_file.read_text())
    for t_text, name, _ in rows[1:]:
        delay = start + float(t_text) - time.time()
        if delay > 0:
            time.sleep(delay)
        show(folder / name)
    time.sleep(86400)


if __name__ == "__main__":
    main()
