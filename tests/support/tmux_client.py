"""A real tmux client in a pseudo-terminal of the test's, to see what its terminal receives."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import termios
import threading
from collections.abc import Mapping, Sequence


class AttachedClient:
    """``tmux attach`` in a pseudo-terminal of ours: everything tmux writes to that terminal,
    and everything written to the client's tty from outside, lands in :attr:`seen`."""

    def __init__(self, server: Sequence[str], session: str, term: str,
                 env: Mapping[str, str] | None = None) -> None:
        """``server``: tmux's arguments naming the server (``["-L", "name"]``)."""
        pid, fd = pty.fork()
        if pid == 0:  # the child: become the tmux client
            child_env = {k: v for k, v in (env or os.environ).items() if k != "TMUX"}
            child_env["TERM"] = term
            try:
                os.execvpe("tmux", ["tmux", *server, "attach", "-t", session], child_env)
            finally:
                os._exit(127)
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.pid, self.fd = pid, fd
        self._seen = bytearray()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self._seen += chunk

    @property
    def seen(self) -> bytes:
        with self._lock:
            return bytes(self._seen)

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        os.waitpid(self.pid, 0)
        self._reader.join(5)
        os.close(self.fd)
