"""The real Claude Code's `/exit`, in a pane tmux keeps (remain-on-exit, as `create` sets it),
watched by a real watcher with a real notifier: EXITED "exited normally", and nobody is told."""

from __future__ import annotations

import time
from pathlib import Path

from app.adapters.notify import NotificationEvent, Notifier, Receiver
from app.adapters.notify_settings import TERMINAL, NotifySettings
from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.model import State
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.run.daemon import _notify_with
from app.run.watcher import Watcher
from tests.support.agents import ClaudeInTmux
from tests.support.waiting import retry_until


def test_exit_in_claude_code_is_exited_normally_and_no_notification(
        claude: ClaudeInTmux, isolated_env: Path) -> None:
    told: list[NotificationEvent] = []
    notifier = Notifier(NotifySettings(kinds=frozenset({TERMINAL}), min_interval=0), None,
                        receivers=[Receiver(TERMINAL, told.append)])
    with claude:
        claude.tmux("set-option", "-w", "-t", claude.pane_id, "remain-on-exit", "on")
        store = StoreWriter(isolated_env)
        watcher = Watcher(Tmux(socket_name=claude.socket_name), store, load_packs(),
                          WatchSettings(interval_s=1, ready_min_s=0),
                          on_transition=_notify_with(notifier))
        try:
            def settled_ready() -> bool:
                watcher.tick(time.time())
                tracked = next(iter(watcher.tracked.values()), None)
                return tracked is not None and tracked.news.settled and \
                    tracked.assessment is not None and tracked.assessment.state is State.READY

            retry_until(settled_ready, 60, interval=0.3, message=claude.capture())
            claude.type_text("/exit")
            claude.send_keys("Enter")

            def exited() -> bool:
                claude.tmux("run-shell", "true")  # tmux 3.3a may miss a SIGCHLD: see waiting.py
                watcher.tick(time.time())
                tracked = next(iter(watcher.tracked.values()))
                return tracked.assessment is not None and \
                    tracked.assessment.state is State.EXITED

            retry_until(exited, 60, interval=0.3, message=claude.capture())
            tracked = next(iter(watcher.tracked.values()))
            assert tracked.pane.dead_status == 0
            assert tracked.assessment is not None
            assert tracked.assessment.summary == "Exited normally (status 0)"
        finally:
            watcher.close()
            store.close()
    assert notifier.close()
    assert [e.state for e in told if e.state in (State.ERROR, State.EXITED)] == []
