"""Pure text functions over captured screens: ANSI stripping, normalising, regions, hashing."""

from __future__ import annotations

import hashlib
import re

# CSI (colours, cursor moves), OSC (titles, hyperlinks; BEL or ST terminated), other 2-byte ESC
# sequences, and stray C0 controls except tab and newline.
_ANSI_RE = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]            # CSI
    | \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)  # OSC
    | \x1b[PX^_][^\x1b]*\x1b\\          # DCS, SOS, PM, APC
    | \x1b[@-Z\\-_]                      # two-byte escapes
    | [\x00-\x08\x0b-\x1f\x7f]          # C0 controls but \t and \n
    """,
    re.VERBOSE,
)


def strip_ansi(text: str) -> str:
    return _ANSI_RE.sub("", text.replace("\r\n", "\n"))


def normalise(text: str) -> str:
    """Strip escapes and trailing blanks, so equal screens compare equal.

    Trailing spaces on each line and blank lines at the bottom carry no information: terminals pad
    with them and tmux captures them.
    """
    lines = [line.rstrip() for line in strip_ansi(text).split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def last_lines(text: str, count: int) -> str:
    """The bottom ``count`` non-blank lines of a normalised screen."""
    if count <= 0:
        return ""
    picked: list[str] = []
    for line in reversed(text.split("\n")):
        if line.strip():
            picked.append(line)
            if len(picked) == count:
                break
    return "\n".join(reversed(picked))


def first_lines(text: str, count: int) -> str:
    picked = [line for line in text.split("\n") if line.strip()]
    return "\n".join(picked[:count])


def screen_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=12).hexdigest()
