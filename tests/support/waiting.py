"""Deadline-based waiting for tests: poll a condition instead of sleeping and hoping."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any

# A hang guard, not a speed claim, for a condition that needs a conductor process to start and
# look (a watcher, a CLI per poll): with three suites at once on two cores a CLI's start alone
# took 19 s.
STARTS_WITHIN_S = 60.0


class WaitTimeout(AssertionError):
    """The condition did not hold before the deadline.

    An ``AssertionError`` so pytest shows it as a failed expectation, not a crash.
    """


def retry_until(
    fn: Callable[[], object],
    seconds: float = 10.0,
    *,
    interval: float = 0.02,
    message: str = "",
) -> None:
    """Call ``fn`` until it returns something truthy; raise :class:`WaitTimeout` after ``seconds``.

    ``fn`` is called at least once, and once more right at the deadline, so a slow machine that
    satisfies the condition while we slept still passes. ``interval`` is the pause between calls.
    """
    deadline = time.monotonic() + seconds
    while True:
        if fn():
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(interval, remaining))
    if fn():
        return
    raise WaitTimeout(message or f"condition not met within {seconds} s: {fn!r}")


def stays_false(fn: Callable[[], object], seconds: float, *, interval: float = 0.02) -> bool:
    """True if ``fn`` stays falsy for the whole of ``seconds``.

    For asserting that something does *not* happen (a second notification, say): the only honest
    way is to watch for it for a bounded time.
    """
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if fn():
            return False
        time.sleep(interval)
    return not fn()


def stop_process(proc: subprocess.Popen[Any], seconds: float = 5.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``seconds``; always reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for_exit_status(server: Any, pane: Any, status: int, seconds: float = 30.0) -> None:
    """Wait until tmux has reaped ``pane``'s process and shows its exit status.

    tmux 3.3a sometimes misses the SIGCHLD of a pane's process when several servers start at
    once (seen with plain tmux, 1 server in 8 of 16 started together): the process stays a zombie,
    often with the pane not even marked dead, until another child of that server exits. A
    `run-shell true` is such a child, so every look makes one.
    """
    def reaped() -> bool:
        server.cmd("run-shell", "true")
        return bool(pane.display_message("#{pane_dead_status}", get_text=True) == [str(status)])

    retry_until(reaped, seconds, interval=0.2)


def wait_for_dead_summary(watcher: Any, server: Any, pane_id: str, read_summary: Any,
                          names: tuple[str, ...], generic: tuple[str, ...]) -> None:
    """Tick ``watcher`` until the summary of the dead ``pane_id`` names the program (one of
    ``names``) whenever tmux's screen and history show the shell's words, else is one of
    ``generic``: tmux may report the pane dead before it draws its last output (the watcher
    looks again for a moment), or lose that output entirely."""
    def says_what_the_pane_shows() -> bool:
        watcher.tick()
        summary = str(read_summary())
        shown = "\n".join(server.cmd("capture-pane", "-p", "-S", "-10", "-t", pane_id).stdout)
        if any(name in shown for name in names):
            return any(name in summary for name in names)
        return summary in generic

    retry_until(says_what_the_pane_shows, 20, interval=0.1, message=str(read_summary()))


def wait_for_shell_prompt(read_screen: Callable[[], str], seconds: float = 30.0) -> None:
    """Wait until a shell's prompt ends the screen ``read_screen`` returns (a shell started
    under load takes its time: a generous wait that ends as soon as the prompt shows)."""
    retry_until(lambda: read_screen().rstrip().endswith(("$", "#")), seconds, interval=0.05,
                message=f"no shell prompt: {read_screen()[-300:]!r}")
