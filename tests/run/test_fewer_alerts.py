"""Fewer, truer alerts with a real tmux and a real watcher: a dialog redrawn or resized is the
same dialog, the same question after some work is a new one. (The focused pane and terminal
notifications: tests/adapters/test_terminal_notifications.py.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.adapters.notify import NotificationEvent, Notifier, Receiver
from app.adapters.notify_settings import TERMINAL, NotifySettings
from app.adapters.store import StoreWriter
from app.adapters.store_read import StoreReader
from app.adapters.tmux import Tmux
from app.base.model import State
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.run.daemon import _notify_with
from app.run.watcher import Watcher
from tests.run.test_terminal_signals import BUSY_SCREEN, DIALOG_SCREEN, Player
from tests.support.waiting import retry_until

BLANK = "blank"


class Alerts:
    """An in-process receiver: what went out, in order."""

    def __init__(self) -> None:
        self.events: list[NotificationEvent] = []

    def receiver(self, kind: str) -> Receiver:
        return Receiver(kind, self.events.append)


@pytest.fixture
def watched(server: Any, session: Any, isolated_env: Path, tmp_path: Path
            ) -> Iterator[tuple[Watcher, Notifier, Alerts, Player]]:
    alerts = Alerts()
    notifier = Notifier(NotifySettings(kinds=frozenset({TERMINAL}), min_interval=0), None,
                        receivers=[alerts.receiver(TERMINAL)])
    store = StoreWriter(isolated_env)
    player = Player(session, tmp_path)
    yield (Watcher(Tmux(socket_name=server.socket_name), store, load_packs(),
                   WatchSettings(interval_s=1, ready_min_s=0),
                   on_transition=_notify_with(notifier)), notifier, alerts, player)
    store.close()
    notifier.close()


def state_of(workers_dir: Path, pane_id: str) -> str:
    reader = StoreReader(workers_dir)
    try:
        return next((str(w["state"]) for w in reader.workers() if w.get("pane_id") == pane_id),
                    "")
    finally:
        reader.close()


def tick_until(watcher: Watcher, workers_dir: Path, pane_id: str, *states: str) -> None:
    def reached() -> bool:
        watcher.tick(time.time())
        return state_of(workers_dir, pane_id) in states

    retry_until(reached, 30, interval=0.2,
                message=f"{pane_id} never {states}: {state_of(workers_dir, pane_id)}")


def test_a_dialog_redrawn_and_resized_alerts_once_and_again_after_work(
        watched: tuple[Watcher, Notifier, Alerts, Player], isolated_env: Path,
        tmp_path: Path) -> None:
    watcher, notifier, alerts, player = watched
    pane = player.pane.pane_id
    blank = tmp_path / BLANK
    blank.write_text("\n")
    player.do(f"show {DIALOG_SCREEN}")
    tick_until(watcher, isolated_env, pane, "NEEDS_CONFIRMATION")
    # Redrawn: gone for a moment, then the very same dialog; then the window made narrower.
    player.do(f"show {blank}")
    tick_until(watcher, isolated_env, pane, "UNKNOWN", "READY")
    player.do(f"show {DIALOG_SCREEN}")
    tick_until(watcher, isolated_env, pane, "NEEDS_CONFIRMATION")
    player.pane.cmd("resize-window", "-x", "150", "-y", "50")
    player.do(f"show {blank}")
    tick_until(watcher, isolated_env, pane, "UNKNOWN", "READY")
    player.do(f"show {DIALOG_SCREEN}")
    tick_until(watcher, isolated_env, pane, "NEEDS_CONFIRMATION")
    # Work, then the same question: a new one.
    player.do(f"show {BUSY_SCREEN}")
    tick_until(watcher, isolated_env, pane, "BUSY")
    player.do(f"show {DIALOG_SCREEN}")
    tick_until(watcher, isolated_env, pane, "NEEDS_CONFIRMATION")
    assert notifier.close()
    asked = [e for e in alerts.events if e.state is State.NEEDS_CONFIRMATION]
    assert len(asked) == 2, [(e.previous, e.state, e.actions_needed[:20]) for e in alerts.events]
