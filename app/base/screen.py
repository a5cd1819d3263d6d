"""Pure text functions over captured screens: ANSI stripping, normalising, regions, hashing."""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

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


class Cursor(NamedTuple):
    """The terminal's cursor: column and row from the screen's top left, as tmux counts them."""

    x: int
    y: int


# The foreground a cell has when no colour was set (SGR 39, or a reset).
DEFAULT_COLOUR = "39"


class Cell(NamedTuple):
    char: str
    colour: str  # the foreground as its SGR parameters: "39", "90", "38;5;246", "38;2;r;g;b"
    dim: bool


def _foreground(params: list[str], colour: str, dim: bool) -> tuple[str, bool]:
    index = 0
    while index < len(params):
        code = params[index] or "0"
        if code == "0":
            colour, dim = DEFAULT_COLOUR, False
        elif code in ("2", "22"):
            dim = code == "2"
        elif code == "39":
            colour = DEFAULT_COLOUR
        elif code in ("38", "48", "58"):
            # An extended colour: 5;n or 2;r;g;b follow. Only the foreground is kept.
            width = 3 if params[index + 1:index + 2] == ["5"] else 5
            if code == "38":
                colour = ";".join(params[index:index + width])
            index += width - 1
        elif code.isdigit() and (30 <= int(code) <= 37 or 90 <= int(code) <= 97):
            colour = code
        index += 1
    return colour, dim


# The 16 colours' black, white and their bright twins: the greys of a theme drawn in them.
_GREY_CODES = frozenset({"30", "37", "90", "97", "38;5;0", "38;5;7", "38;5;8", "38;5;15"})
# A true colour this close to equal red, green and blue reads as a grey.
_GREY_SPREAD = 24


def is_grey(colour: str) -> bool:
    """Whether a foreground (as ``Cell.colour``) is black, white or a grey between them."""
    parts = colour.split(";")
    if colour in _GREY_CODES:
        return True
    if parts[:2] == ["38", "5"] and len(parts) == 3 and parts[2].isdigit():
        index = int(parts[2])
        if index >= 232:  # the 256-colour palette's grey ramp
            return True
        if 16 <= index <= 231:  # the 6x6x6 cube: grey when its three levels are equal
            level = index - 16
            return level // 36 == level // 6 % 6 == level % 6
        return False
    if parts[:2] == ["38", "2"] and len(parts) == 5 and all(p.isdigit() for p in parts[2:]):
        levels = [int(p) for p in parts[2:]]
        return max(levels) - min(levels) <= _GREY_SPREAD
    return False


def styled_lines(styled: str) -> list[list[Cell]]:
    """A ``capture-pane -e`` screen as lines of cells with the foreground each is drawn in.
    tmux carries a style across lines, so the screen is read in order."""
    lines: list[list[Cell]] = [[]]
    colour, dim = DEFAULT_COLOUR, False

    def emit(text: str) -> None:
        for char in text:
            if char == "\n":
                lines.append([])
            elif char >= " ":
                lines[-1].append(Cell(char, colour, dim))

    position = 0
    for match in _SGR_OR_ANY_ESCAPE.finditer(styled):
        emit(styled[position:match.start()])
        position = match.end()
        if match.group(1) is not None:
            colour, dim = _foreground((match.group(1) or "0").replace(":", ";").split(";"),
                                      colour, dim)
    emit(styled[position:])
    return lines


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
