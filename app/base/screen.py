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


_SGR_OR_ANY_ESCAPE = re.compile(r"\x1b\[([0-9;:]*)m|" + _ANSI_RE.pattern, re.VERBOSE)


def without_dim(styled: str) -> str:
    """Plain text of a ``capture-pane -e`` screen with dim (SGR 2) characters blanked.

    CLIs draw hints in their empty input box dim: placeholders, and Claude Code's suggested next
    prompt, which in plain text looks exactly like typed input. Such a box often draws its own
    cursor as one reverse-video cell on the hint's first character, so a reverse cell directly
    followed by dim text goes too. tmux carries the style across lines, so the whole screen is
    parsed in order.
    """
    out: list[str] = []
    dim = reverse = False
    cursor: int | None = None  # a reverse cell that may be a hint's cursor, by index in ``out``

    def emit(text: str) -> None:
        nonlocal cursor
        for char in text:
            if cursor is not None and not char.isspace():
                if dim:
                    out[cursor] = " "
                cursor = None
            if reverse and not dim and not char.isspace():
                cursor = len(out)
            out.append(" " if dim and char != "\n" else char)

    position = 0
    for match in _SGR_OR_ANY_ESCAPE.finditer(styled):
        emit(styled[position:match.start()])
        position = match.end()
        if match.group(1) is None:
            continue  # not a style: cursor moves, titles and the like
        for param in (match.group(1) or "0").replace(":", ";").split(";"):
            code = int(param) if param.isdigit() else 0
            if code == 0:
                dim = reverse = False
            elif code in (2, 22):
                dim = code == 2
            elif code in (7, 27):
                reverse = code == 7
    emit(styled[position:])
    return "".join(out)


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
