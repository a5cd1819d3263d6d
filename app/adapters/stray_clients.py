"""Our control clients that outlived their connection to another host.

A ``tmux -C attach-session`` we run over ssh should end with its connection: its input ends and
tmux lets it go. CI saw one that did not (left on the host with init as its parent after the
connection was killed; as we read tmux 3.3a, it lets a control client go only once everything
it still had to write is written, which nobody reads once the connection is gone). So each
client over ssh says its
pid on the host as it attaches (app.adapters.control), every client that ended is remembered
here, and the next call that reaches the host (the next poll, or the watch stopping) ends any of
them still running there as our control client.
"""

from __future__ import annotations

import logging
import threading

from app.adapters.ssh import run_on
from app.adapters.tmux import Via
from app.base.errors import TmuxError

log = logging.getLogger(__name__)

# Run by the host's sh with the pids as arguments: a pid is ended only while it is still a tmux
# control client attached the way ours are (a pid the host gave to another program since is
# left alone), and echoed when it was.
_END_IF_OURS = ('for pid in "$@"; do case "$(ps -o args= -p "$pid" 2>/dev/null)" in '
                '*tmux*"-C attach-session"*) kill -KILL "$pid" 2>/dev/null && echo "$pid";; '
                'esac; done')
# How long the host may take to answer (seconds).
TIMEOUT_S = 5.0


class StrayClients:
    """The pids on one host of our control clients that ended here; thread-safe (the clients'
    reader threads report them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pids: set[int] = set()

    def ended(self, pid: int | None) -> None:
        if pid is not None:
            with self._lock:
                self._pids.add(pid)

    def pending(self) -> bool:
        with self._lock:
            return bool(self._pids)

    def end_on(self, via: Via, timeout: float = TIMEOUT_S) -> list[int]:
        """End those still running on the host; the pids that were. When the host cannot be
        reached, the pids stay remembered for the next call (and the fault is logged)."""
        with self._lock:
            pids = sorted(self._pids)
        if not pids:
            return []
        try:
            done = run_on(via, ["sh", "-c", _END_IF_OURS, "sh", *map(str, pids)],
                          timeout=timeout)
        except TmuxError as exc:
            log.info("host %s: our ended control clients not checked yet: %s", via.host, exc)
            return []
        with self._lock:
            self._pids.difference_update(pids)
        ended = [int(word) for word in done.stdout.split() if word.isdigit()]
        if ended:
            log.warning("host %s: ended %d control client(s) of ours that outlived their "
                        "connection (pids %s)", via.host, len(ended), " ".join(map(str, ended)))
        return ended
