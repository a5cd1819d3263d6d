"""MCP `status` through a real MCP client over stdio, with real tmux and a real watcher: each row
has its host and an id that is unique across hosts; exited panes only when asked."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from app.adapters.store import StoreWriter
from app.run.watcher import Watcher
from tests.front.test_explain_live import stored

pytest.importorskip("mcp")

from tests.front.test_mcp_server import session_calls, text_of  # after the skip


def a_remote_row(workers_dir: Path) -> None:
    """What a host's watch thread writes for pane %0 of host gpu (as the local one has a %0)."""
    store = StoreWriter(workers_dir)
    try:
        with store.transaction() as conn:
            store.upsert_pty(conn, {"id": "0123456789", "name": "far", "host": "gpu",
                                    "pane_id": "%0", "cwd": "/srv", "cli_type": "claude",
                                    "tmux_session": "w"})
            store.upsert_status(conn, [{
                "id": "0123456789", "state": "READY", "summary": "", "actions_needed": "",
                "confidence": 90, "reasons": ["stable_for_n"], "rule_id": "idle-prompt",
                "classifier": "pack:claude", "last_snapshot_hash": "h",
                "state_entered_ts": time.time(), "last_change_ts": time.time(),
                "stable_count": 3, "signals": []}])
    finally:
        store.close()


def test_status_rows_have_a_host_unique_ids_and_leave_exited_panes_out_unless_asked(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path) -> None:
    alive = session.new_window(window_name="alive", attach=False).active_pane
    gone = session.new_window(window_name="gone", attach=False)
    watcher.tick(time.time())
    gone.kill()
    watcher.tick(time.time())
    assert stored(isolated_env, "gone")["state"] == "EXITED"
    a_remote_row(isolated_env)

    _, [live, everything] = asyncio.run(session_calls(server, isolated_env, alive.pane_id, [
        ("status", {}), ("status", {"include_exited": True})]))
    assert not live.is_error and not everything.is_error, text_of(live)
    rows = {w["name"]: w for w in json.loads(text_of(live))}
    assert "gone" not in rows
    assert rows["alive"]["host"] == "local" and rows["alive"]["pane_id"] == alive.pane_id
    assert (rows["far"]["host"], rows["far"]["pane_id"]) == ("gpu", "gpu:%0")
    pane_ids = [w["pane_id"] for w in rows.values()]
    assert len(pane_ids) == len(set(pane_ids))
    assert "gone" in {w["name"] for w in json.loads(text_of(everything))}
