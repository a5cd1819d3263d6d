"""The watcher's own files: its log (rotated, private, every line redacted and cleaned of terminal
escapes) and its lock, through which a running watcher is found and stopped."""

from __future__ import annotations

import fcntl
import io
import logging
import logging.handlers
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from app.base.errors import ConductorError
from app.base.redact import redact
from app.base.render import printable

LOCK_NAME = "watch.lock"  # the daemon's InstanceLock file
LOG_NAME = "watch.log"
LOG_BYTES = 1_000_000
LOG_BACKUPS = 3


# --- the watcher's log file ----------------------------------------------------------------------


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log whose files are created 0600 and never through a symlink: pane names and
    summaries are the user's business."""

    def _open(self) -> io.TextIOWrapper:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.baseFilename, flags, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding or "utf-8", errors=self.errors)


class SafeFormatter(logging.Formatter):
    """Every line of the watcher's log, its tracebacks included, with secrets redacted and
    terminal escapes and controls removed, whatever the code that logged it passed in.

    Log lines quote what others wrote: an agent's check command (``mysql -pSECRET``), its
    report, a goal, a summary of a screen, a pane's name; and ``conductor pty logs`` prints them
    to a terminal. One filter at the end of the line, so no call site can forget it.
    """

    def format(self, record: logging.LogRecord) -> str:
        return redact(printable(super().format(record)))


def log_handler(workers_dir: Path) -> PrivateRotatingFileHandler:
    """The handler for ``<store>/watch.log``; raises OSError when it cannot be opened."""
    workers_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    handler = PrivateRotatingFileHandler(workers_dir / LOG_NAME, maxBytes=LOG_BYTES,
                                         backupCount=LOG_BACKUPS, encoding="utf-8")
    handler.setFormatter(SafeFormatter("%(asctime)s %(levelname)s %(message)s",
                                       "%Y-%m-%d %H:%M:%S"))
    return handler


LogPosition = tuple[int, int]  # (inode, byte offset) of watch.log


def read_log(workers_dir: Path, lines: int) -> list[str]:
    return read_log_at(workers_dir, lines)[0]


def read_log_at(workers_dir: Path, lines: int) -> tuple[list[str], LogPosition]:
    """The last ``lines`` lines of ``watch.log`` and where they end, for ``follow_log`` to go on
    from there: a line written in between is neither lost nor shown twice."""
    path = workers_dir / LOG_NAME
    try:
        with path.open("rb") as handle:
            data = handle.read()
            inode = os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        raise ConductorError(f"no watcher log at {path} yet: start `conductor pty watch`"
                             ) from None
    except OSError as exc:
        raise ConductorError(f"cannot read {path}: {exc.strerror or exc}") from None
    # A line still being written is left to follow_log, which shows it once it ends.
    complete = data[:data.rfind(b"\n") + 1]
    shown = complete.decode("utf-8", "replace").split("\n")[:-1]
    return (shown[-lines:] if lines else []), (inode, len(complete))


def follow_log(workers_dir: Path, poll_s: float = 0.5,
               stop: Callable[[], bool] = lambda: False,
               start: LogPosition | None = None) -> Iterator[str]:
    """New lines of ``watch.log`` as they are written, across rotations (the file is reopened
    when it is replaced or shrinks). A line still being written is held until it ends.

    ``start`` (from ``read_log_at``): go on from there rather than from the end of the file as
    it is when first opened; a file rotated since is read from its beginning."""
    path = workers_dir / LOG_NAME
    handle: BinaryIO | None = None
    inode = -1
    pending = b""
    try:
        while not stop():
            try:
                stat = path.stat()
            except FileNotFoundError:
                stat = None
            if stat is not None and (handle is None or stat.st_ino != inode
                                     or stat.st_size < handle.tell()):
                first = handle is None
                if handle is not None:
                    pending += handle.read()  # the rest of the file that was rotated away
                    handle.close()
                handle = path.open("rb")
                inode = stat.st_ino
                if first and start is None:
                    handle.seek(0, os.SEEK_END)
                elif first and start is not None and start[0] == inode \
                        and start[1] <= stat.st_size:
                    handle.seek(start[1])
            if handle is not None:
                pending += handle.read()
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.decode("utf-8", "replace")
            if not lines:
                time.sleep(poll_s)
    finally:
        if handle is not None:
            handle.close()


# --- stopping the running watcher ----------------------------------------------------------------


def running_pid(workers_dir: Path) -> int | None:
    """The pid of the watcher holding the store's lock, or None when no watcher holds it."""
    path = workers_dir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConductorError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 64).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None  # we could lock it: nobody holds it
    finally:
        os.close(fd)


def stop_watcher(workers_dir: Path, timeout: float = 15.0) -> int:
    """SIGTERM the watcher of this store and wait until it let go of its lock; its pid."""
    pid = running_pid(workers_dir)
    if pid is None:
        raise ConductorError(f"no watcher is running for {workers_dir}")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        raise ConductorError(f"the watcher (pid {pid}) is gone already") from None
    except PermissionError:
        raise ConductorError(f"not allowed to stop the watcher (pid {pid})") from None
    deadline = time.monotonic() + timeout
    while running_pid(workers_dir) is not None:
        if time.monotonic() > deadline:
            raise ConductorError(f"the watcher (pid {pid}) did not stop within {timeout:g} s")
        time.sleep(0.05)
    return pid
