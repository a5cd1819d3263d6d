"""Bounds and cleanliness of what people and agents hand conductor to keep: a pane's goal and
declared check, a report and its check command, a queued message; and the cleaning of a
check's output before anyone reads it.

Inputs are refused, never repaired: a NUL or an escape sequence in a command would make it a
different command, and a goal of megabytes would be copied into every ``status --json``. The
CLI prints the refusal as one line (exit 1), the MCP server returns it as a tool error.
Output, on the other hand, is the world's and is cleaned: a check prints what it prints.
"""

from __future__ import annotations

from app.base.errors import ConductorError
from app.base.render import clean_text

MAX_GOAL_CHARS = 2_000
MAX_REPORT_CHARS = 8_000
MAX_CHECK_CHARS = 1_000  # a report's wait_cmd, a declared check, an allowed_checks entry
MAX_QUEUED_CHARS = 20_000  # a queued message (`send` itself has no limit: it types at once)

# Bidirectional overrides, embeddings, isolates and marks reorder what a terminal shows, so a
# command could display as one thing and run as another.
BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
# Invisible characters that split or join words where no one can see it.
ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff")
# Line breaks to Python's str.splitlines but not to a terminal.
_ODD_BREAKS = str.maketrans({"\u2028": "\n", "\u2029": "\n", "\x85": "\n"})


# A lone surrogate: what Python makes of a byte that is not UTF-8 in an argument
# (surrogateescape) and what JSON's "\udcff" decodes to. Typed, tmux would get "?" for it (bash
# globs /etc/host? to /etc/hosts); stored, SQLite cannot encode it.
NOT_UTF8 = "holds bytes that are not UTF-8"


class BadInput(ConductorError):
    """Text handed to conductor is too long or holds characters it does not keep."""


def checked(what: str, text: str, limit: int, *, lines: bool = False) -> str:
    """``text`` when it is at most ``limit`` characters of printable text (newlines and tabs
    too when ``lines``); else :class:`BadInput` naming ``what`` and the first offence."""
    if len(text) > limit:
        raise BadInput(f"{what} is too long ({len(text)} characters, at most {limit})")
    allowed = "\n\t\r" if lines else "\t"
    for index, char in enumerate(text):
        code = ord(char)
        if 0xD800 <= code <= 0xDFFF:
            raise BadInput(f"{what} {NOT_UTF8} (at position {index})")
        if (code < 0x20 or 0x7F <= code <= 0x9F) and char not in allowed:
            name = "a NUL" if code == 0 else "a control character"
            raise BadInput(f"{what} holds {name} (U+{code:04X} at position {index}); only "
                           f"printable text{', newlines' if lines else ''} and tabs are kept")
        if char in BIDI or char in "\u2028\u2029":
            raise BadInput(f"{what} holds an invisible direction or line mark (U+{code:04X} at "
                           f"position {index}), which would show it as other than it is")
    return text


def goal(text: str) -> str:
    """A pane's goal as stored: one line, whitespace collapsed; "" clears it."""
    return " ".join(checked("the goal", text, MAX_GOAL_CHARS, lines=True).split())


def check_command(text: str | None, what: str = "the check command") -> str | None:
    """A check command as stored (stripped), or None for none. Newlines stay: ``sh -c`` runs a
    small script as well as one command."""
    if text is None:
        return None
    return checked(what, text, MAX_CHECK_CHARS, lines=True).strip() or None


def report_text(text: str) -> str:
    """An agent's report: one line, whitespace collapsed."""
    return " ".join(checked("the report", text, MAX_REPORT_CHARS, lines=True).split())


def clean_output(text: str) -> str:
    """A check's output as it may be shown, stored and quoted: escape sequences, control
    characters (but newlines and tabs), bidi and zero-width characters removed; carriage
    returns (progress bars) and odd line separators become newlines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").translate(_ODD_BREAKS)
    return "\n".join("".join(c for c in clean_text(line.replace("\t", "    "))
                             if c not in ZERO_WIDTH and c not in BIDI)
                     for line in text.split("\n"))


class Refused(ConductorError):
    """The gate (``app.act.gate``) will not type into a pane as it is: one line naming the
    reason."""


# What `send` will type: printable text, newlines and tabs. Any other control character is
# refused, not stripped: ESC starts the bracketed-paste end marker (ESC [201~), after which the
# rest of the text would run as typed keys, and CSI/OSC sequences move the cursor or retitle the
# terminal. Stripping would silently send something other than what the caller asked for.
_ALLOWED_CONTROLS = frozenset("\n\t")


def check_text(text: str) -> None:
    """Refuse text holding terminal control characters (ESC, CSI, BEL, C1, DEL...) or bytes
    that are not UTF-8."""
    for index, char in enumerate(text):
        code = ord(char)
        if 0xD800 <= code <= 0xDFFF:
            raise Refused(f"not sent: the text {NOT_UTF8} (at position {index}); nothing was "
                          "typed")
        if (code < 0x20 or 0x7F <= code <= 0x9F) and char not in _ALLOWED_CONTROLS:
            if char == "\r" and text[index + 1:index + 2] == "\n":
                continue  # a CRLF line end from a file piped in
            raise Refused(f"not sent: the text holds a control character (U+{code:04X} at "
                          f"position {index}); send types plain text, newlines and tabs only")
