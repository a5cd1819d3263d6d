"""The soak of scripts/soak.py in a bounded form: a few SIGKILLs of the real watcher under hook
and reader load, the tmux server killed under it, and (as root) the store's disk filled up."""

from __future__ import annotations

import shutil

import pytest

from scripts import soak


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_short_soak_holds() -> None:
    figures = soak.run(panes=6, kills=3, seconds=40, interval=0.5)
    print(soak.report(figures))
    assert figures.problems == []
    assert figures.kills == 3
    assert figures.integrity == "ok"
    assert figures.rows_for_live_panes == figures.live_panes == 6
    assert figures.hook_calls > 0 and figures.events_recorded >= figures.hook_calls
    assert figures.reads > 0 and figures.read_errors == []
    assert figures.stale_seen_after_server_kill.startswith("after")
    assert figures.new_server_picked_up_s is not None
    assert "caught up" in figures.disk_full or figures.disk_full.startswith("skipped")
