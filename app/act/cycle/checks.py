"""Check commands (a report's ``wait_cmd``) for the watcher: each runs on the host, in the pane's
folder, with a hard deadline, and leaves no process behind.

- Its own pool (``CHECK_WORKERS`` at once; more wait their turn), so an LLM assessment never waits
  behind a check.
- Output is read against the deadline, never until end of file: a child that keeps the pipe open
  cannot hold the read. Only the tail is kept (``output_chars``, redacted); a check that prints
  more than ``MAX_OUTPUT_BYTES`` in all is stopped.
- At the deadline, when the cycle ends (superseded, dropped, paused by hand, the pane gone) and
  when the watcher stops, the check's whole process tree is killed.

Linux: the check runs under ``check_reaper`` (its own child subreaper, see there), so a
descendant that ran ``setsid`` and forked away is still found, killed and reaped. As a second
net, every process of the check carries ``CONDUCTOR_CHECK=<store>:<watcher pid>:<job>:<nonce>``
in its environment; after each check the watcher kills this user's processes carrying that
value, and at start it kills those a previous watcher of the same store left (it may have been
killed with SIGKILL). A process that clears its environment and escapes the reaper's tree (only
possible if the reaper itself is killed) is not found.

macOS and other systems (no subreaper, no /proc): the check runs as ``sh -c`` in a new session
and the kill reaches its process group only; a descendant that calls ``setsid`` survives, and
keeps running until it ends by itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from app.act.cycle import check_reaper
from app.act.cycle.check_reaper import MARKER
from app.base.redact import redact

log = logging.getLogger(__name__)

Check = tuple[int | None, str]  # exit status (None: stopped or failed to start), output tail

CHECK_WORKERS = 4
MAX_OUTPUT_BYTES = 32 * 1024 * 1024
# Whether checks run under the reaper: Linux, where a process can be a child subreaper.
SUBREAPER = sys.platform.startswith("linux") and bool(sys.executable)
_REAPER = str(Path(check_reaper.__file__).resolve())
_PRIVATE_ENV = frozenset({"OPENROUTER_API_KEY", MARKER})
_POLL_S = 0.25  # the longest a reader sleeps without looking at its stop flag
_GRACE_S = 1.0  # for the reaper to end the tree after SIGTERM, before SIGKILL
_STOPPING = "the watcher is stopping"
_CYCLE_ENDED = "the cycle ended"


def store_tag(workers_dir: Path) -> str:
    """A short name for the store, in the marker: a later watcher of the same store knows its
    predecessor's checks by it."""
    return hashlib.sha256(str(workers_dir.resolve()).encode()).hexdigest()[:12]


@dataclass
class _Run:
    proc: subprocess.Popen[bytes]
    marker: str
    stop: str = ""  # why the check is being stopped early; "" while it may run on
    lock: threading.Lock = field(default_factory=threading.Lock)
    ended: bool = False


# How a check starts on another host (the one line of shell of ours there, constant; the folder,
# the deadline and the check arrive as its arguments): in the pane's folder, under the host's
# `timeout` where it has one, so the check ends there at the deadline too.
_REMOTE_START = ('cd -- "$1" || exit 126; shift; '
                 'command -v timeout >/dev/null 2>&1 && exec timeout -k 5 "$@"; shift; exec "$@"')


class CheckRunner:
    def __init__(self, timeout_s: float, output_chars: int, tag: str,
                 workers: int = CHECK_WORKERS,
                 max_output_bytes: int = MAX_OUTPUT_BYTES,
                 remote: Callable[[Sequence[str]], list[str]] | None = None) -> None:
        """``remote``: the panes are on another host, and this makes the local command line
        that runs an argv there (``app.adapters.ssh.SshVia.wrap``); nothing of our environment
        reaches the check there."""
        self.remote = remote
        self.timeout_s = timeout_s
        self.output_chars = output_chars
        self.max_output_bytes = max_output_bytes
        self.tag = tag
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="conductor-check")
        self._lock = threading.Lock()
        self._runs: dict[int, _Run] = {}
        self._queued: dict[int, Future[Check]] = {}
        self._closed = False
        self._sweep_leftovers()

    def submit(self, key: int, command: str, cwd: str) -> Future[Check]:
        """Run ``command`` with ``sh -c`` in ``cwd`` when a worker is free; ``key`` (the job)
        names it for ``cancel``. A command no process can be given (a NUL in it, from a store
        written before commands were checked at entry) raises here, so its job ends at once."""
        if "\x00" in command or "\x00" in cwd:
            raise ValueError("the command holds a NUL, which no program can be given")
        with self._lock:
            if self._closed:
                done: Future[Check] = Future()
                done.set_result((None, f"[not run: {_STOPPING}]"))
                return done
            future = self._pool.submit(self._guarded, key, command, cwd)
            self._queued[key] = future
        future.add_done_callback(lambda _: self._forget(key, future))
        return future

    def cancel(self, key: int) -> None:
        """Stop the check of ``key`` (the cycle ended): not started, it never starts; running,
        its tree is killed and its future answers soon."""
        with self._lock:
            future = self._queued.get(key)
            run = self._runs.get(key)
        if future is not None:
            future.cancel()
        if run is not None:
            self._stop(run, _CYCLE_ENDED)

    def close(self) -> None:
        """Kill every running check's tree, within about ``_GRACE_S``; queued ones never run."""
        with self._lock:
            self._closed = True
            runs = list(self._runs.values())
        for run in runs:
            self._stop(run, _STOPPING)
        until = time.monotonic() + _GRACE_S
        for run in runs:
            self._end(run, until)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # --- on a worker thread ---------------------------------------------------------------------

    def _guarded(self, key: int, command: str, cwd: str) -> Check:
        try:
            return self._run(key, command, cwd)
        except Exception as exc:  # a worker thread must survive anything; the cycle pauses
            log.exception("cycle: check of job %s failed", key)
            return None, f"[the check could not be run to its end: {type(exc).__name__}]"

    def _run(self, key: int, command: str, cwd: str) -> Check:
        marker = f"{self.tag}:{os.getpid()}:{key}:{secrets.token_hex(4)}"
        # The check is the agent's command, not ours: it gets no LLM key of ours.
        env = {k: v for k, v in os.environ.items() if k not in _PRIVATE_ENV}
        env[MARKER] = marker
        argv = [sys.executable, "-I", "-S", _REAPER, command] if SUBREAPER \
            else ["/bin/sh", "-c", command]
        if self.remote is not None:
            argv = self.remote(["sh", "-c", _REMOTE_START, "conductor-check", cwd or ".",
                                f"{max(1, round(self.timeout_s))}", "sh", "-c", command])
            cwd = ""
        try:
            proc = subprocess.Popen(argv, cwd=cwd or None, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        except OSError as exc:
            return None, f"cannot run the check: {exc}"
        run = _Run(proc, marker)
        with self._lock:
            self._runs[key] = run
            if self._closed:
                run.stop = _STOPPING
        try:
            tail, stopped = self._read(run)
        finally:
            self._end(run, time.monotonic() + _GRACE_S)
            with self._lock:
                if self._runs.get(key) is run:
                    del self._runs[key]
            assert proc.stdout is not None
            proc.stdout.close()  # here only: a reader may be looking at it until now
        text = redact(tail.decode("utf-8", errors="replace"))[-self.output_chars:]
        if stopped:
            return None, f"{text}\n[{stopped}]"
        return proc.returncode, text

    def _read(self, run: _Run) -> tuple[bytearray, str]:
        """Read the check's output until it exits, the deadline passes or it is stopped; the
        tail, and why it was stopped ("" when it exited)."""
        proc = run.proc
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        deadline = time.monotonic() + self.timeout_s
        tail, total, limit = bytearray(), 0, self.output_chars
        nap = 0.005
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                if run.stop:
                    return tail, f"stopped: {run.stop}"
                left = deadline - time.monotonic()
                if left <= 0:
                    return tail, f"stopped after {self.timeout_s:g}s"
                exited = _exited(proc)
                if not selector.get_map():  # end of file: only the exit is awaited
                    if exited:
                        return tail, ""
                    time.sleep(min(left, nap))
                    nap = min(2 * nap, _POLL_S)
                    continue
                ready = selector.select(0 if exited else min(left, _POLL_S))
                if not ready and exited:  # a child that kept the pipe is not waited for
                    return tail, ""
                chunk = _read_some(fd)
                if chunk is None or run.stop:  # once stopped, what it says is our doing
                    continue
                if not chunk:
                    selector.unregister(fd)
                    continue
                total += len(chunk)
                tail += chunk
                if len(tail) > 8 * limit:  # bytes; trimmed to characters by the caller
                    del tail[:-4 * limit]
                if total > self.max_output_bytes:
                    return tail, f"stopped: more than {self.max_output_bytes:,} bytes of output"

    # --- stopping -------------------------------------------------------------------------------

    def _stop(self, run: _Run, why: str) -> None:
        """Ask the check to end at once: its reader sees ``why``; the reaper ends the tree."""
        run.stop = run.stop or why
        if not run.lock.acquire(blocking=False):
            return  # being ended already
        try:
            if run.ended:
                return
            if SUBREAPER:
                _signal(run.proc, signal.SIGTERM)
            else:
                _kill_group(run.proc)
        finally:
            run.lock.release()

    def _end(self, run: _Run, until: float) -> None:
        """Leave nothing of the check running; reap the process we started. Idempotent."""
        with run.lock:
            if run.ended:
                return
            proc = run.proc
            if SUBREAPER and not _exited(proc):
                _signal(proc, signal.SIGTERM)
                while not _exited(proc) and time.monotonic() < until:
                    time.sleep(0.01)
            # Before the reap: while unreaped, the process group's number cannot be reused.
            _kill_group(proc)
            try:
                proc.wait(timeout=max(0.1, until - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("cycle: check pid %d did not die after SIGKILL", proc.pid)
            if SUBREAPER:
                killed = check_reaper.kill_marked(f"{MARKER}={run.marker}\0".encode())
                if killed:
                    log.warning("cycle: killed %d process(es) a check left outside its tree",
                                killed)
            run.ended = True

    def _forget(self, key: int, future: Future[Check]) -> None:
        with self._lock:
            if self._queued.get(key) is future:
                del self._queued[key]

    def _sweep_leftovers(self) -> None:
        """Kill what checks of an earlier watcher of this store left running."""
        if not SUBREAPER:
            return
        ours = f"{MARKER}={self.tag}:".encode()
        mine = f"{MARKER}={self.tag}:{os.getpid()}:".encode()

        def left_over(pid: int) -> bool:
            return check_reaper.carries(pid, ours) and not check_reaper.carries(pid, mine)

        killed = sum(check_reaper.signal_if(pid, signal.SIGKILL, left_over)
                     for pid in check_reaper.marked(ours) if left_over(pid))
        if killed:
            log.warning("cycle: killed %d process(es) left by an earlier watcher's checks", killed)


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether ``proc`` has exited, without reaping it where the system allows (its pid, and
    so its process group's number, stays ours until ``wait``)."""
    if proc.returncode is not None:
        return True
    if not hasattr(os, "waitid"):  # macOS before Python 3.13
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _read_some(fd: int) -> bytes | None:
    """Up to 64 KiB; b"" at end of file; None when nothing is there yet."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return None


def _signal(proc: subprocess.Popen[bytes], signum: int) -> None:
    if proc.returncode is None:  # unreaped: the pid is still ours
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signum)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # Where ``_exited`` had to reap, the group may outlive its leader: kill it still.
    if proc.returncode is None or not hasattr(os, "waitid"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
