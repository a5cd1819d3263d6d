"""The terminal's own signals, as bytes: what a program tells the terminal besides its screen.

Agent CLIs set the window title (OSC 0/2), report progress (OSC 9;4), ring the bell (BEL) and
ask for desktop notifications (OSC 9, OSC 777). Control mode hands us those bytes (``%output``);
:class:`SignalScanner` picks them out of one pane's stream. What a signal means for the turn is
``app.observe.signals``; what each CLI sends, as observed: ``design/signals.md``.

Pure: no I/O, cheap on output that holds no escape (one ``in`` test per chunk).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TITLE, PROGRESS, NOTIFY, BELL = "title", "progress", "notify", "bell"
# An OSC longer than this is not a signal we read; its bytes are dropped, not kept forever.
_CARRY_MAX = 1024
_TEXT_MAX = 200
_OSC = re.compile(rb"\x1b\]([0-9]*)(?:;(.*?))?(?:\x07|\x1b\\)", re.DOTALL)
_CONTROLS = dict.fromkeys((*range(0x20), *range(0x7F, 0xA0)), " ")


@dataclass(frozen=True)
class TermSignal:
    """One signal: its kind and what it carried (a title, ``state;percent``, a message)."""

    kind: str
    text: str = ""

    def __str__(self) -> str:
        return f"{self.kind}:{self.text}" if self.text else self.kind


def _clean(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").translate(_CONTROLS).strip()[:_TEXT_MAX]


def _from_osc(number: bytes, body: bytes) -> TermSignal | None:
    if number in (b"0", b"2"):
        return TermSignal(TITLE, _clean(body))
    if number == b"9":
        if body.startswith(b"4;"):
            return TermSignal(PROGRESS, _clean(body[2:]))
        return TermSignal(NOTIFY, _clean(body))
    if number == b"777" and body.startswith(b"notify;"):
        return TermSignal(NOTIFY, _clean(body[len(b"notify;"):]))
    return None


class SignalScanner:
    """Signals from one pane's output, fed chunk by chunk as it arrives (an OSC split between
    two chunks is joined)."""

    def __init__(self) -> None:
        self._carry = b""

    def feed(self, data: bytes) -> list[TermSignal]:
        if self._carry:
            data, self._carry = self._carry + data, b""
        elif b"\x07" not in data and b"\x1b]" not in data:
            return []
        found: list[TermSignal] = []
        position = 0
        while True:
            start = data.find(b"\x1b]", position)
            bell_end = len(data) if start < 0 else start
            found.extend(TermSignal(BELL) for _ in range(data.count(b"\x07", position,
                                                                     bell_end)))
            if start < 0:
                return found
            match = _OSC.match(data, start)
            if match is None:
                if len(data) - start <= _CARRY_MAX:
                    self._carry = data[start:]
                return found
            signal = _from_osc(match.group(1), match.group(2) or b"")
            if signal is not None:
                found.append(signal)
            position = match.end()

    @property
    def pending(self) -> bool:
        """Whether the start of a sequence waits for its end in the next piece of output."""
        return bool(self._carry)


def scan(data: bytes) -> list[TermSignal]:
    """The signals in one complete piece of output."""
    return SignalScanner().feed(data)
