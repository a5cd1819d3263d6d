"""``handoff.wait`` as an agent's MCP server runs it: slower polls while the pane shows the same
screen, the usual pace as soon as it changes, and a stop that ends it between polls."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from app.act import handoff
from app.adapters.tmux import Tmux
from app.base.model import State
from app.base.settings import WatchSettings
from app.observe.assess import Assessment
from app.observe.pack_loading import load_packs
from tests.support.waiting import retry_until


class CountedWatch(handoff.PaneWatch):
    """A real PaneWatch on a real pane that counts its looks."""

    looks = 0

    def poll(self, now: float | None = None) -> Assessment:
        self.looks += 1
        return super().poll(now)


def watch_of(server: Any, pane: Any, workers_dir: Path) -> CountedWatch:
    tmux = Tmux(socket_name=server.socket_name)
    target = handoff.resolve(tmux, workers_dir, pane.pane_id)
    return CountedWatch(tmux, target, load_packs(), WatchSettings(), workers_dir)


def test_a_quiet_pane_is_looked_at_less_often(server: Any, session: Any,
                                              isolated_env: Path) -> None:
    pane = session.active_window.active_pane
    pane.send_keys("clear; echo still", enter=True)
    retry_until(lambda: "still" in "\n".join(pane.capture_pane()), 10)
    quiet = watch_of(server, pane, isolated_env)
    result = handoff.wait(quiet, {State.EXITED}, 15.0, poll_s=0.5, quiet_poll_s=2.0)
    assert not result.reached
    # Every 0.5 s until the pane has settled (its state found within 2 s) and QUIET_AFTER_S
    # more (at most 15 looks), then every 2 s (at most 4 more): 31 at the usual pace. A loaded
    # machine only looks less often.
    assert handoff.QUIET_AFTER_S == 5.0
    assert quiet.looks <= 20


def test_a_change_brings_the_usual_pace_back(server: Any, session: Any,
                                             isolated_env: Path) -> None:
    pane = session.active_window.active_pane
    watch = watch_of(server, pane, isolated_env)
    stop = threading.Event()
    ticker = threading.Thread(target=_type_every_second, args=(pane, stop))
    ticker.start()
    try:
        handoff.wait(watch, {State.EXITED}, 8.0, poll_s=0.5, quiet_poll_s=4.0)
    finally:
        stop.set()
        ticker.join()
    # The screen changed every second, so it was never quiet for 5 s: the usual pace.
    assert watch.looks >= 10


def _type_every_second(pane: Any, stop: threading.Event) -> None:
    count = 0
    while not stop.wait(1.0):
        count += 1
        pane.send_keys(f"echo tick {count}", enter=True)


def test_a_stopped_wait_ends_at_once(server: Any, session: Any, isolated_env: Path) -> None:
    pane = session.active_window.active_pane
    watch = watch_of(server, pane, isolated_env)
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    started = time.monotonic()
    with pytest.raises(handoff.WaitStopped, match="was stopped"):
        handoff.wait(watch, {State.EXITED}, 600.0, poll_s=0.5, quiet_poll_s=2.0, stop=stop)
    # A hang guard, not a speed claim: without the stop it would run for 600 s.
    assert time.monotonic() - started < 300
