"""A terminal resize with real tmux, a real watcher and notifier: the READY agent's screen,
rewrapped and redrawn for the new size, is no transition, no notification and no restart of
herding's stall clock."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from app.adapters.notify import Notifier
from app.adapters.store_read import StoreReader
from app.base.model import State
from app.observe.pane import Tracked
from app.run.watcher import Watcher
from tests.conftest import REPO, read_jsonl
from tests.support.waiting import retry_until

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"


def the_agent(watcher: Watcher, pane_id: str) -> Tracked | None:
    return next((t for t in watcher.tracked.values() if t.pane.pane_id == pane_id), None)


def settled_on_new_screen(watcher: Watcher, pane_id: str, seen: set[str | None]) -> Tracked:
    """Tick until the watcher judged a screen not seen before, then until it was judged still
    three more times: any BUSY a redraw caused would have turned READY again by then."""
    def judged() -> Tracked | None:
        watcher.tick(time.time())
        tracked = the_agent(watcher, pane_id)
        return tracked if tracked is not None and tracked.assessment is not None \
            and tracked.news.settled else None

    def new_screen() -> bool:
        tracked = judged()
        return tracked is not None and tracked.text_hash not in seen

    retry_until(new_screen, 30, interval=0.1, message=f"{pane_id}: no new screen")
    tracked = the_agent(watcher, pane_id)
    assert tracked is not None and tracked.assessment is not None
    first = tracked.assessment.stable_count

    def still() -> bool:
        tracked = judged()
        return tracked is not None and tracked.assessment is not None \
            and tracked.assessment.stable_count >= first + 3

    retry_until(still, 30, interval=0.1, message=f"{pane_id}: the new screen never held still")
    tracked = the_agent(watcher, pane_id)
    assert tracked is not None
    return tracked


def test_two_resizes_of_a_ready_agent_are_no_transition_no_note_and_keep_the_stall_clock(
        server: Any, session: Any, notified: tuple[Watcher, Notifier, Path],
        isolated_env: Path) -> None:
    watcher, notifier, out = notified
    window = session.new_window(window_name="agent", window_shell=AGENT, attach=False)
    pane = window.active_pane
    retry_until(lambda: "? for shortcuts" in "\n".join(pane.capture_pane()), 10)
    tracked = settled_on_new_screen(watcher, pane.pane_id, set())
    assert tracked.assessment is not None and tracked.assessment.state is State.READY
    before = tracked.assessment
    seen = {tracked.text_hash}
    notes_before = len(read_jsonl(out))

    for width in (90, 110):  # the rule of 120 cells wraps, then wraps elsewhere
        window.cmd("resize-window", "-x", str(width), "-y", "40")
        tracked = settled_on_new_screen(watcher, pane.pane_id, seen)
        seen.add(tracked.text_hash)
        assert tracked.pane.width == width

    after = tracked.assessment
    assert after is not None
    assert (after.state, after.state_entered, after.last_change) == (
        State.READY, before.state_entered, before.last_change)
    reader = StoreReader(isolated_env)
    try:
        history = reader.history(tracked.worker_id)
    finally:
        reader.close()
    assert [h.state for h in history if h.ts > before.state_entered] == []
    assert notifier.close()
    assert len(read_jsonl(out)) == notes_before
