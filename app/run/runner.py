"""One loop for this machine's tmux server and for every host's: the daemon and each host's
thread are drivers of one :class:`Runner`, each with a :class:`Part` of its own (what a tick
does, when it is due next, what a failure means there).

A loop iteration (:meth:`Runner.iteration`) takes ``now`` and runs one tick: a full poll every
``interval_s``, a light tick when woken in between. Waits are on Events, so a stop is immediate.
A tick that fails is logged and survived, and the next try waits longer each time it fails
again (1, 2, 4 … s, up to ``retry_cap_s``): a part that fails the same way every tick is never
retried in a busy loop, and it does not flood the log either (identical lines are held back
for a minute and then counted).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from app.base.errors import StoreError
from app.run.watcher import rest

log = logging.getLogger(__name__)

# The first pause after a failed tick (seconds); doubled with each failure in a row.
FIRST_RETRY_S = 1.0
# Identical warning lines are logged at most once per this many seconds.
REPEAT_WINDOW_S = 60.0
# Distinct lines remembered for that; the oldest are forgotten past this.
_REMEMBERED_LINES = 256


class Part(Protocol):
    """What one driver of the runner does."""

    def tick(self, now: float, full: bool) -> bool:
        """One tick (a full poll when ``full``); True when it was one. Raises when it failed."""
        ...

    def next_due(self) -> float | None:
        """When (epoch seconds) a light tick has something to do; None: nothing before news."""
        ...

    def failed(self, exc: Exception, now: float) -> bool:
        """A tick raised ``exc``: record what that means here; True when the part already said
        it in the log (the runner then says nothing)."""
        ...


class QuietRepeats:
    """Log lines, each identical one at most once per ``window_s``; the next one that gets
    through says how many were held back. A host failing every tick then costs one line a
    minute, not kilobytes a second that rotate the history out of the log."""

    def __init__(self, logger: logging.Logger, window_s: float = REPEAT_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.window_s = window_s
        self.clock = clock
        self._seen: dict[tuple[int, str], tuple[float, int]] = {}  # -> (last logged, held)
        self._lock = threading.Lock()

    def log(self, level: int, message: str, *, exc_info: BaseException | None = None,
            window_s: float | None = None) -> bool:
        """Log ``message`` unless it was logged less than the window (``window_s`` for this
        line, inf: once) ago; True when logged."""
        key = (level, message)
        now = self.clock()
        window = self.window_s if window_s is None else window_s
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last[0] < window:
                self._seen[key] = (last[0], last[1] + 1)
                return False
            held = last[1] if last is not None else 0
            self._seen.pop(key, None)
            self._seen[key] = (now, 0)
            while len(self._seen) > _REMEMBERED_LINES:
                del self._seen[next(iter(self._seen))]
        suffix = f" (and {held} more times in the last {self.window_s:g} s)" if held else ""
        self.logger.log(level, "%s%s", message, suffix, exc_info=exc_info)
        return True


class Runner:
    """Drives one :class:`Part` until ``stop`` is set (see the module's docstring).

    ``wake`` is set by whoever has news for a light tick (control mode's clients); ``label``
    starts every line this runner logs ("" for this machine, "host NAME: " for a host).
    """

    def __init__(self, part: Part, interval_s: float, *, stop: threading.Event,
                 wake: threading.Event, gather_s: float, retry_cap_s: float,
                 label: str = "", quiet: QuietRepeats | None = None,
                 fatal: tuple[type[Exception], ...] = ()) -> None:
        self.part = part
        # Failures that end the loop instead (raised out of run()): one the process answers
        # as a whole, as a store whose files changed under it.
        self.fatal = fatal
        self.interval_s = interval_s
        self.stop = stop
        self.wake = wake
        self.gather_s = gather_s
        self.retry_cap_s = max(FIRST_RETRY_S, retry_cap_s)
        self.label = label
        self.quiet = quiet or QuietRepeats(log)
        self.failures = 0  # ticks failed in a row
        self.ticks = 0  # ticks that succeeded
        self._next_full = 0.0  # monotonic
        self._retry_at: float | None = None  # monotonic; set after a failed tick

    def run(self, once: bool = False) -> None:
        while not self.stop.is_set():
            # Cleared before the tick takes what control mode reported: a report arriving
            # during the tick wakes the next wait at once.
            self.wake.clear()
            self.iteration(time.time())
            if once:
                return
            self.rest()

    def iteration(self, now: float) -> None:
        """One tick, full when one is due; a failure is recorded and sets the pause before
        the next try."""
        started = time.monotonic()
        full = started >= self._next_full
        try:
            was_full = self.part.tick(now, full)
        except self.fatal:
            raise
        except Exception as exc:
            self.failures += 1
            try:
                said = self.part.failed(exc, now)
            except Exception as again:  # recording a failure must not end the loop either
                self._log_failure(again)
                said = False
            if not said:
                self._log_failure(exc)
            self._next_full = 0.0  # the try after the pause looks at everything again
            self._retry_at = started + self.retry_pause()
            return
        self.failures = 0
        self.ticks += 1
        if was_full:
            self._next_full = started + self.interval_s

    def retry_pause(self) -> float:
        """Seconds before the next try after ``failures`` failed ticks in a row."""
        return min(self.retry_cap_s, FIRST_RETRY_S * 2.0 ** min(self.failures - 1, 30))

    def rest(self) -> None:
        if self._retry_at is not None:
            # A failing part waits out its pause even when output arrives: news cannot make
            # a broken store or a refusing host work sooner, and would make a busy loop.
            self.stop.wait(max(0.0, self._retry_at - time.monotonic()))
            self._retry_at = None
            return
        rest(self._next_full, self.part.next_due(), self.wake, self.stop, self.gather_s)

    def _log_failure(self, exc: Exception) -> None:
        if isinstance(exc, StoreError):
            self.quiet.log(logging.ERROR, f"{self.label}cycle skipped: {exc}")
        else:
            self.quiet.log(logging.ERROR, f"{self.label}cycle failed; continuing: "
                           f"{type(exc).__name__}: {exc}", exc_info=exc)
