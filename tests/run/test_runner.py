"""The one loop the daemon and every host's thread drive (app.run.runner): back-off on repeated
failures, a stop that is immediate, and failures logged without flooding."""

from __future__ import annotations

import logging
import threading

import pytest

from app.base.errors import StoreError
from app.run.runner import QuietRepeats, Runner
from tests.support.waiting import retry_until


class Part:
    """A part whose ticks fail while ``failing`` holds an exception."""

    def __init__(self) -> None:
        self.failing: Exception | None = None
        self.ticks: list[tuple[float, bool]] = []
        self.failures: list[Exception] = []

    def tick(self, now: float, full: bool) -> bool:
        self.ticks.append((now, full))
        if self.failing is not None:
            raise self.failing
        return full

    def next_due(self) -> float | None:
        return None

    def failed(self, exc: Exception, now: float) -> bool:
        self.failures.append(exc)
        return False


def runner(part: Part, cap: float = 30.0, interval: float = 60.0) -> Runner:
    return Runner(part, interval, stop=threading.Event(), wake=threading.Event(), gather_s=0.0,
                  retry_cap_s=cap, label="host x: ")


def test_a_part_that_fails_every_tick_waits_longer_each_time_up_to_the_cap() -> None:
    part = Part()
    part.failing = RuntimeError("the same way every time")
    loop = runner(part, cap=30.0)
    pauses = []
    for _ in range(8):
        loop.iteration(1000.0)
        pauses.append(loop.retry_pause())
    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert len(part.failures) == 8
    # Back: the count starts again, and the next full poll comes one interval later.
    part.failing = None
    loop.iteration(1001.0)
    assert loop.failures == 0 and loop.ticks == 1 and part.ticks[-1] == (1001.0, True)
    loop.iteration(1002.0)
    assert part.ticks[-1] == (1002.0, False)  # a light tick in between


def test_a_failed_tick_is_tried_again_as_a_full_poll() -> None:
    part = Part()
    loop = runner(part)
    loop.iteration(1.0)
    loop.iteration(2.0)
    assert [full for _, full in part.ticks] == [True, False]
    part.failing = StoreError("disk full")
    loop.iteration(3.0)
    part.failing = None
    loop.iteration(4.0)
    assert part.ticks[-1] == (4.0, True)


def test_news_does_not_cut_a_back_off_short_but_a_stop_does() -> None:
    part = Part()
    part.failing = RuntimeError("refused")
    loop = runner(part, cap=600.0)
    for _ in range(9):  # a pause of 256 s now
        loop.iteration(0.0)
    done = threading.Event()

    def rest() -> None:
        loop.wake.set()  # output arrived: not a reason to try a broken part again
        loop.rest()
        done.set()

    thread = threading.Thread(target=rest)
    thread.start()
    assert not done.wait(0.3)
    loop.stop.set()
    retry_until(done.is_set, 10)
    thread.join(10)


def test_the_loop_stops_at_once_and_survives_a_failing_part(
        caplog: pytest.LogCaptureFixture) -> None:
    part = Part()
    part.failing = ValueError("bad row")
    loop = runner(part, cap=0.05, interval=0.05)
    thread = threading.Thread(target=loop.run)
    with caplog.at_level(logging.ERROR):
        thread.start()
        retry_until(lambda: len(part.failures) >= 3, 10)
        part.failing = None
        retry_until(lambda: loop.ticks >= 2, 10)
        loop.stop.set()
        thread.join(10)
    assert not thread.is_alive()
    failed = [r for r in caplog.records if "cycle failed" in r.getMessage()]
    # The same failure three times is one line (with its traceback), not three.
    assert len(failed) == 1 and failed[0].exc_info is not None
    assert failed[0].getMessage().startswith("host x: cycle failed; continuing: ValueError")


def test_identical_lines_are_logged_once_a_window_then_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = [0.0]
    quiet = QuietRepeats(logging.getLogger("test.quiet"), window_s=60.0, clock=lambda: clock[0])
    with caplog.at_level(logging.WARNING, logger="test.quiet"):
        for _ in range(100):
            quiet.log(logging.WARNING, "host x: refused")
        quiet.log(logging.WARNING, "host x: another line")
        clock[0] = 61.0
        quiet.log(logging.WARNING, "host x: refused")
        quiet.log(logging.WARNING, "host x: once only", window_s=float("inf"))
        clock[0] = 10_000.0
        quiet.log(logging.WARNING, "host x: once only", window_s=float("inf"))
    assert [r.getMessage() for r in caplog.records] == [
        "host x: refused", "host x: another line",
        "host x: refused (and 99 more times in the last 60 s)", "host x: once only"]


def test_a_fatal_failure_ends_the_loop() -> None:
    class Lost(Exception):
        pass

    part = Part()
    part.failing = Lost("the store's files changed")
    loop = Runner(part, 1.0, stop=threading.Event(), wake=threading.Event(), gather_s=0.0,
                  retry_cap_s=1.0, fatal=(Lost,))
    with pytest.raises(Lost):
        loop.run()
    assert part.failures == [] and len(part.ticks) == 1


def test_a_part_whose_failure_record_fails_too_keeps_its_loop(
        caplog: pytest.LogCaptureFixture) -> None:
    class Unrecorded(Part):
        def failed(self, exc: Exception, now: float) -> bool:
            raise StoreError("locked")

    part = Unrecorded()
    part.failing = RuntimeError("refused")
    loop = runner(part)
    with caplog.at_level(logging.ERROR):
        loop.iteration(1.0)
    assert loop.failures == 1
    assert [r.getMessage() for r in caplog.records] == [
        "host x: cycle skipped: locked", "host x: cycle failed; continuing: RuntimeError: refused"]
