"""Notifications as terminal escape sequences, written to the terminals of tmux's clients.

A desktop notification pops up on the machine the watcher runs on, often a server reached over
ssh; the person's own terminal is at the other end of the tmux client's tty. Bytes written to
that tty go to the terminal emulator (through ssh when the client runs remotely) without passing
through tmux, so they need no tmux passthrough, except when the client's own terminal is a tmux
(a client attached from inside another tmux, ``client_termname`` ``tmux-*``/``screen*``): then
the outer tmux sees them as a pane's output and forwards them only wrapped in
``ESC P tmux; … ESC \\`` with ``allow-passthrough on``.

Every text of a notification came from a pane (its name, its question): it is cleaned of every
control character here again, whatever cleaned it before, and on a remote host it travels as a
``printf`` argument behind ``%s``, never as part of a format or a shell string.
"""

from __future__ import annotations

import logging
import os
import re
import select
import stat
import subprocess
import threading
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from app.adapters.tmux import Tmux, client_terminals
from app.base.errors import ConductorError

logger = logging.getLogger(__name__)

ESC, BEL, ST = "\x1b", "\x07", "\x1b\\"
_MAX_TEXT = 200  # characters of one text: a notification, not a screen
# A client tty as tmux reports it: a device path, nothing a shell or a path walk could read
# otherwise.
_TTY = re.compile(r"/dev/[A-Za-z0-9_][A-Za-z0-9_./-]*")
_NESTED_TERMS = ("tmux", "screen")


def clean(text: str) -> str:
    """``text`` as one printable line: control and format characters gone (C0, DEL, C1,
    bidirectional overrides), ``;`` made ``,`` because OSC 777 and kitty's OSC 99 split their
    fields at it, whitespace runs made one space, and at most ``_MAX_TEXT`` characters."""
    kept = "".join(" " if ch.isspace() else ch for ch in text
                   if ch.isspace() or unicodedata.category(ch)[0] != "C")
    line = " ".join(kept.replace(";", ",").split())
    return line if len(line) <= _MAX_TEXT else line[:_MAX_TEXT - 1] + "…"


@dataclass(frozen=True)
class Part:
    """A piece of a sequence: bytes of ours (``text=False``) or a text from a pane."""

    value: str
    text: bool = False


def notification(title: str, body: str) -> list[Part]:
    """OSC 9 (iTerm2, WezTerm, Ghostty, Windows Terminal), OSC 99 (kitty) and OSC 777 (VTE,
    WezTerm, Ghostty) saying ``title`` and ``body``, both cleaned: a terminal shows the one it
    knows and ignores the others."""
    title, body = clean(title), clean(body)
    line = f"{title} — {body}" if body else title
    return [Part(f"{ESC}]9;"), Part(line, True), Part(BEL),
            Part(f"{ESC}]99;;"), Part(line, True), Part(ST),
            Part(f"{ESC}]777;notify;"), Part(title, True), Part(";"), Part(body, True),
            Part(BEL)]


def payload(title: str, body: str, *, bell: bool, wrap: bool) -> list[Part]:
    """What one client's terminal gets: the notification, wrapped for a tmux's passthrough when
    ``wrap`` (every ESC of ours doubled inside ``ESC P tmux; … ESC \\``; the texts hold none),
    then, with ``bell``, a BEL. The bell stays outside the wrapping: an outer tmux rings it as
    its window's bell, which is what a bell from there should do."""
    parts = notification(title, body)
    if wrap:
        parts = [Part(f"{ESC}Ptmux;"),
                 *(p if p.text else Part(p.value.replace(ESC, ESC * 2)) for p in parts),
                 Part(ST)]
    return [*parts, Part(BEL)] if bell else parts


def nested(termname: str) -> bool:
    """The client's terminal is itself a tmux (or screen): what it shows passes through it."""
    return termname.startswith(_NESTED_TERMS)


def render(parts: Sequence[Part]) -> bytes:
    return "".join(p.value for p in parts).encode()


def printf_args(parts: Sequence[Part]) -> list[str]:
    """``parts`` as a ``printf`` format and its arguments: our bytes written as octal escapes
    in the format, every text an argument behind ``%s`` (printf never reads an escape or a
    ``%`` in an argument of ``%s``)."""
    fmt, args = [], []
    for part in parts:
        if part.text:
            _check_text(part.value)
            fmt.append("%s")
            args.append(part.value)
        else:
            fmt.append("".join(_printf_char(ch) for ch in part.value))
    return ["".join(fmt), *args]


def _printf_char(ch: str) -> str:
    if ch == "%":
        return "%%"
    if ch == "\\":
        return "\\\\"
    if " " <= ch <= "~":
        return ch
    return "".join(f"\\{byte:03o}" for byte in ch.encode())


def _check_text(text: str) -> None:
    if any(unicodedata.category(ch)[0] == "C" for ch in text):
        raise ValueError("a notification text still holds a control character")


def tty_checked(path: str) -> str:
    """``path`` when it looks like a terminal device, else ValueError: it comes from a tmux
    server's answer (on a remote host, from another machine) and is written to."""
    if not _TTY.fullmatch(path) or "/../" in f"{path}/":
        raise ValueError(f"{path!r} is not a terminal device path")
    return path


def write_local(path: str, data: bytes, timeout: float) -> None:
    """Write ``data`` to the terminal ``path``, waiting on it ``timeout`` seconds at most (a
    terminal stopped with ctrl-s or a dead ssh link must not hold the notifier): OSError when
    it would not take it all. Once a part is written the rest is waited for, not dropped: a
    sequence cut short would leave the terminal reading tmux's next output as its text."""
    fd = os.open(tty_checked(path), os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        if not stat.S_ISCHR(os.fstat(fd).st_mode) or not os.isatty(fd):
            raise OSError(f"{path} is not a terminal")
        deadline = time.monotonic() + timeout
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([], [fd], [], left)[1]:
                    raise OSError(f"{path} took {len(data) - len(view)} of {len(data)} "
                                  f"bytes in {timeout:g} s") from None
    finally:
        os.close(fd)


# Run on a remote host as ``sh -c SCRIPT sh TTY FORMAT ARG...``: every value is a positional
# parameter, none is part of the script.
REMOTE_SCRIPT = 'tty=$1; shift; printf "$@" > "$tty"'


def remote_argv(path: str, parts: Sequence[Part]) -> list[str]:
    """The command line writing ``parts`` to the terminal ``path`` of a remote host."""
    return ["sh", "-c", REMOTE_SCRIPT, "sh", tty_checked(path), *printf_args(parts)]


class Terminals:
    """The tmux servers whose clients hear about their panes, by host name; the daemon adds
    each host's server when it starts watching it (from that host's thread: hence the lock)."""

    def __init__(self, *servers: Tmux) -> None:
        self._lock = threading.Lock()
        self._servers = {t.host: t for t in servers}

    def add(self, tmux: Tmux) -> None:
        with self._lock:
            self._servers[tmux.host] = tmux

    def server(self, host: str) -> Tmux | None:
        with self._lock:
            return self._servers.get(host)

    def tell(self, host: str, pane_id: str, title: str, body: str, *, bell: bool,
             timeout: float) -> int:
        """Write the notification to the terminal of every client attached to the session of
        ``pane_id`` on ``host``; returns how many were written to. A client that cannot be
        written to is logged and skipped; no server for ``host`` is a ConductorError."""
        tmux = self.server(host)
        if tmux is None:
            raise ConductorError(f"no tmux server known for host {host!r}")
        told = 0
        for tty, term in client_terminals(tmux, pane_id):
            parts = payload(title, body, bell=bell, wrap=nested(term))
            try:
                if tmux.via is None:
                    write_local(tty, render(parts), timeout)
                else:
                    _write_remote(tmux, tty, parts, timeout)
            except (OSError, ValueError, ConductorError, subprocess.SubprocessError) as e:
                logger.warning("terminal notification to %s:%s failed: %s", host, tty, e)
            else:
                told += 1
        return told


def _write_remote(tmux: Tmux, tty: str, parts: Sequence[Part], timeout: float) -> None:
    assert tmux.via is not None
    done = subprocess.run(tmux.via.wrap(remote_argv(tty, parts)), capture_output=True,
                          text=True, errors="replace", timeout=timeout, check=False,
                          stdin=subprocess.DEVNULL)
    failed = tmux.via.failure(done.returncode, done.stderr)
    if failed is not None:
        raise failed
    if done.returncode != 0:
        raise OSError(" ".join(done.stderr.split())[:200] or f"exit {done.returncode}")
