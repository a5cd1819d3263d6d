"""Freshness per host, as every reader sees it: rows of a host that is unreachable, disabled,
removed from the config or whose thread is stuck are stale and never READY, never herded,
never first in `switch --next`; this machine's rows are never held back by a host.

The store is a real one, written as the watcher writes it (its heartbeat, the ``hosts`` table
and the panes' rows); the readers are the real ones (app.adapters.status, `status --json`)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from app.adapters.status import next_needing_human, short_line, shown, snapshot
from app.adapters.store import StoreWriter
from app.run.hosts import NOT_REACHED_YET, HostWatches, record_hooks
from tests.conftest import conductor

INTERVAL = 2.0


def write_store(workers: Path, hosts: dict[str, dict[str, Any]], *, watcher: bool = True
                ) -> None:
    """A READY pane on this machine and one on each of ``hosts`` (its ``hosts`` row)."""
    store = StoreWriter(workers)
    now = time.time()
    try:
        with store.transaction() as conn:
            store.heartbeat(conn, pid=os.getpid() if watcher else None, socket="t",
                            interval=INTERVAL, started_ts=now - 60, last_cycle_ts=now,
                            stopped_ts=None if watcher else now)
            for index, host in enumerate(["local", *hosts]):
                wid = f"{index:010x}"
                store.upsert_pty(conn, {
                    "id": wid, "name": f"agent-{host}", "socket": "t" if host == "local"
                    else f"{host}:default", "server_pid": 1, "pane_id": "%0",
                    "tmux_session": "work", "tmux_window": "agent", "window_index": index,
                    "pane_index": 0, "host": host, "first_seen_ts": now, "last_seen_ts": now})
                store.upsert_status(conn, [{
                    "id": wid, "state": "READY", "summary": "", "state_entered_ts": now - 30,
                    "last_change_ts": now - 30, "herd_eligible": 1, "herd_reason": ""}])
            for name, row in hosts.items():
                store.hosts.set_host(conn, name=name, socket=f"{name}:default", **row)
    finally:
        store.close()


def by_host(workers: Path) -> dict[str, dict[str, Any]]:
    return {w["host"]: w for w in snapshot(workers).workers}


def fresh(**more: Any) -> dict[str, Any]:
    now = time.time()
    return {"reachable": 1, "problem": "", "checked_ts": now, "reached_ts": now, "watched": 1,
            **more}


@pytest.mark.parametrize(("row", "reason", "problem"), [
    (fresh(reachable=0, problem="host b (b) unreachable: refused"), "host_unreachable",
     "refused"),
    (fresh(watched=0), "host_not_watched", "disabled in the config"),
    (fresh(watched=0, removed_ts=time.time()), "host_not_watched", "removed from the config"),
    (fresh(checked_ts=time.time() - 60), "host_not_watched", "has not reported"),
    (fresh(reachable=None, problem=NOT_REACHED_YET), "host_not_watched", "not reached yet"),
], ids=["unreachable", "disabled", "removed", "stuck", "not-reached-yet"])
def test_a_host_whose_rows_are_not_current_is_stale_everywhere_and_never_ready(
        isolated_env: Path, row: dict[str, Any], reason: str, problem: str) -> None:
    write_store(isolated_env, {"a": fresh(), "b": row})
    rows = by_host(isolated_env)
    b = rows["b"]
    assert b["stale_reason"] == reason and problem in b["host_problem"]
    assert b["state"] == "UNKNOWN" and b["last_state"] == "READY"
    assert not b["eligible_for_herd"] and b["herd_reason"] == reason
    # The other host and this machine are current and untouched.
    for other in ("a", "local"):
        assert rows[other]["state"] == "READY" and "stale_reason" not in rows[other]
        assert rows[other]["eligible_for_herd"]
    # switch --next: the stale pane is never chosen, even when it alone waits.
    only_b = [w for w in snapshot(isolated_env).workers if w["host"] == "b"]
    assert next_needing_human(only_b) is None
    # The status line names why instead of a state; --json and the table say stale.
    line = short_line(isolated_env)
    assert "[agent-a@a: READY]" in line and "[agent-local: READY]" in line
    assert "agent-b@b: READY" not in line
    done = conductor("pty", "status", "--json")
    listed = {w["host"]: w for w in json.loads(done.stdout)}
    if "removed" not in problem:
        assert listed["b"]["stale"] and listed["b"]["state"] == "UNKNOWN"
        assert "UNKNOWN (host " in conductor("pty", "status").stdout
    assert not listed["a"]["stale"] and not listed["local"]["stale"]


def test_no_watcher_no_host_row_is_current(isolated_env: Path) -> None:
    write_store(isolated_env, {"a": fresh()}, watcher=False)
    a = by_host(isolated_env)["a"]
    assert a["stale_reason"] == "host_not_watched" and a["state"] == "UNKNOWN"
    assert "not running" in a["host_problem"]


def test_rows_of_a_removed_host_leave_the_list_after_exited_shown(isolated_env: Path) -> None:
    now = time.time()
    write_store(isolated_env, {"old": fresh(watched=0, removed_ts=now - 100),
                               "new": fresh(watched=0, removed_ts=now - 1)})
    workers = snapshot(isolated_env).workers
    assert {w["host"] for w in shown(workers, now, exited_shown_s=30)} == {"local", "new"}
    assert {w["host"] for w in shown(workers, now, exited_shown_s=0)} == {"local"}
    assert "@new" not in short_line(isolated_env)  # nothing to act on there any more


def test_the_watcher_marks_disabled_and_removed_hosts_at_start(isolated_env: Path) -> None:
    from app.adapters.ssh import HostConfig
    from app.base.settings import WatchSettings

    write_store(isolated_env, {"gone": fresh(), "off": fresh(), "on": fresh()})
    store = StoreWriter(isolated_env)
    try:
        watches = HostWatches((HostConfig("off", "off", enabled=False),), store,
                              WatchSettings(), lambda *_: pytest.fail("nothing to watch"))
        watches.close()
        rows = store.hosts.host_rows()
    finally:
        store.close()
    assert rows["gone"]["removed_ts"] and not rows["gone"]["watched"]
    assert rows["off"]["watched"] == 0 and not rows["off"]["removed_ts"]
    reasons = {h: w.get("host_problem") for h, w in by_host(isolated_env).items()}
    assert reasons == {"local": None, "gone": "removed from the config",
                       "off": "disabled in the config", "on": "removed from the config"}


def test_hook_values_from_a_host_are_read_strictly(isolated_env: Path) -> None:
    store = StoreWriter(isolated_env)
    try:
        record_hooks(store, [("%1", "²³ claude Stop 1 2", 1.0),  # not a number for Python
                             ("%1", "12 claude", 1.0), ("1", "12 claude Stop", 1.0),
                             ("%1\n", "12 claude Stop", 1.0), ("%2", "12 claude Stop", 2.0)],
                     "a:default")
        events = store.events.events_after(0)
    finally:
        store.close()
    assert [(e["pane_id"], e["server_pid"]) for e in events] == [("%2", 12)]
