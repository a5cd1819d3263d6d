"""Measure what redaction changes on real screens: every line it alters, per folder.

    python -m scripts.redact_report                       # tests/corpus
    python -m scripts.redact_report tests/corpus ../shared/screens

Reads every ``*.txt`` screen and every ``*.ansi`` capture (its escapes removed first) under each
folder, runs :func:`app.base.redact.redact` over it, and prints how many screens and lines it
changed, then each distinct changed line (before and after) with how often it was seen. On an
ordinary screen no line should change: every line listed must hold a secret.
tests/test_redact.py asserts the same for tests/corpus.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

from app.base.redact import redact

ROOT = Path(__file__).resolve().parent.parent

# Enough of ECMA-48 for tmux's captures: CSI, OSC (BEL or ST), charset selection, keypad modes.
_ESCAPES = re.compile(r"\x1b\[[0-9;?<=>]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
                      r"|\x1b[()][A-Za-z0-9]|\x1b[=>78]")


def screen_text(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    return _ESCAPES.sub("", text) if path.suffix == ".ansi" else text


def changed_lines(text: str) -> list[tuple[str, str]]:
    """(before, after) of every line redaction altered; the line count never changes."""
    out = redact(text)
    if out == text:
        return []
    return [(a, b) for a, b in zip(text.split("\n"), out.split("\n"), strict=True) if a != b]


def report(folder: Path) -> tuple[int, int, Counter[tuple[str, str]]]:
    """(screens read, lines changed, each distinct change with its count)."""
    screens, lines, seen = 0, 0, Counter[tuple[str, str]]()
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".txt", ".ansi") or not path.is_file():
            continue
        screens += 1
        changes = changed_lines(screen_text(path))
        lines += len(changes)
        seen.update(changes)
    return screens, lines, seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, default=[ROOT / "tests" / "corpus"])
    args = parser.parse_args(argv)
    for folder in args.folders:
        screens, lines, seen = report(folder)
        print(f"{folder}: {screens} screens, {lines} lines changed "
              f"({len(seen)} distinct)")
        for (before, after), count in seen.most_common():
            print(f"  {count:>5}x  - {before.strip()[:110]}\n"
                  f"          + {after.strip()[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
