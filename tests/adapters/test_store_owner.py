"""The watcher's writes are what every reader sees (issue 28): no descriptor of status.db is ever
opened and closed beside a live connection, and a store whose files changed under the writer is
reopened with nothing lost."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.adapters.store import StoreWriter, db_path
from tests.support.processes import deleted_store_files

# What `send`, `answer` and an agent's hook do in their own process: open the store, write one
# row, close. Closing the last connection it believes exists checkpoints and deletes the WAL.
_OTHER_PROCESS_WRITES = """
import sys
from app.adapters.store import record_event
record_event(sys.argv[1], {"ts": 1.0, "kind": "send", "event": "send", "pane_id": "%1"})
"""

_OTHER_PROCESS_READS = """
import sys
from app.adapters.store_read import StoreReader
reader = StoreReader(sys.argv[1])
print(",".join(sorted(s for s in (w["summary"] for w in reader.workers()) if s)))
"""


_READ_ALL = """
import json, sqlite3, sys
from app.adapters.store import db_path
from app.adapters.store_read import StoreReader
reader = StoreReader(sys.argv[1])
summaries = {w["id"]: w["summary"] for w in reader.workers()}
history = [row.summary for row in reader.history("2")]
reader.close()
check = sqlite3.connect(db_path(sys.argv[1]))
integrity = check.execute("PRAGMA integrity_check").fetchone()[0]
print(json.dumps({"summaries": summaries, "history": history, "integrity": integrity}))
"""


def _in_other_process(script: str, workers: Path) -> str:
    done = subprocess.run([sys.executable, "-c", script, str(workers)], capture_output=True,
                          text=True, timeout=60, check=True, cwd=Path(__file__).parents[2])
    return done.stdout.strip()


def _write_pane(store: StoreWriter, worker_id: str, summary: str) -> None:
    with store.transaction() as conn:
        store.upsert_pty(conn, {"id": worker_id, "name": worker_id, "pane_id": f"%{worker_id}"})
        store.upsert_status(conn, [{"id": worker_id, "state": "READY", "summary": summary}])




def test_a_second_writer_in_the_process_leaves_the_first_ones_writes_visible(
        isolated_env: Path) -> None:
    """The dark store: another writer opened in the watcher's process (a host's thread did) used
    to drop the process's locks; the next `send` then deleted the WAL the watcher wrote into."""
    watcher_store = StoreWriter(isolated_env)
    _write_pane(watcher_store, "1", "before")
    opened: list[StoreWriter] = []
    thread = threading.Thread(target=lambda: opened.append(StoreWriter(isolated_env)))
    thread.start()
    thread.join()
    _in_other_process(_OTHER_PROCESS_WRITES, isolated_env)
    _write_pane(watcher_store, "2", "after")

    assert deleted_store_files() == []
    assert _in_other_process(_OTHER_PROCESS_READS, isolated_env) == "after,before"
    for store in (*opened, watcher_store):
        store.close()
    check = sqlite3.connect(db_path(isolated_env))
    assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    check.close()


_REPLAY_IN_OTHER_PROCESS = """
import json, sys
from pathlib import Path

import pytest
from app.adapters.store import StoreWriter
store = StoreWriter(Path(sys.argv[1]))
print(store.replay(json.loads(sys.stdin.read())))
store.close()
"""


def test_a_wal_deleted_under_the_writer_is_noticed_and_what_it_wrote_since_can_be_replayed(
        isolated_env: Path) -> None:
    store = StoreWriter(isolated_env)
    store.keep_journal()
    _write_pane(store, "1", "written before the loss")
    assert store.verify() is None
    assert store.journal() == []
    _write_pane(store, "2", "lost with the wal")
    with store.transaction() as conn:
        store.add_history(conn, [{"id": "2", "ts": 5.0, "state": "READY", "summary": "once"}])
    # What a foreign process that believed it held the last connection does.
    Path(db_path(isolated_env) + "-wal").unlink()
    Path(db_path(isolated_env) + "-shm").unlink()
    _write_pane(store, "3", "written into the orphan")

    problem = store.verify()

    assert problem is not None and "-wal" in problem
    journal = store.journal()
    # Twice: a statement already in the store (a history row) is not added again.
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", _REPLAY_IN_OTHER_PROCESS, str(isolated_env)],
            input=json.dumps(journal), capture_output=True, text=True, timeout=60, check=True,
            cwd=Path(__file__).parents[2])
        assert int(done.stdout) == len(journal)
    # Read elsewhere: this process still holds the lost connection, which is never closed.
    seen = json.loads(_in_other_process(_READ_ALL, isolated_env))
    assert seen == {"summaries": {"2": "lost with the wal", "3": "written into the orphan"},
                    "history": ["once"], "integrity": "ok"}


def test_one_writer_shared_by_threads_keeps_their_transactions_apart(isolated_env: Path) -> None:
    """The watcher's loop and each host's thread write through one writer."""
    store = StoreWriter(isolated_env)
    errors: list[BaseException] = []

    def write(prefix: str) -> None:
        try:
            for n in range(50):
                _write_pane(store, f"{prefix}{n}", prefix)
                store.statuses()
        except BaseException as exc:  # reported below: a thread's exception is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(p,)) for p in "abc"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store.statuses()) == 150
    store.close()


def test_a_store_made_by_the_writer_is_private(isolated_env: Path) -> None:
    store = StoreWriter(isolated_env)
    _write_pane(store, "1", "x")
    deadline = time.monotonic() + 5
    while not Path(db_path(isolated_env) + "-wal").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    for suffix in ("", "-wal", "-shm"):
        assert Path(db_path(isolated_env) + suffix).stat().st_mode & 0o777 == 0o600
    store.close()


def test_a_reader_that_sees_the_watchers_beat_but_not_its_rows_says_stale(
        isolated_env: Path) -> None:
    from app.adapters.status import snapshot, write_beat

    store = StoreWriter(isolated_env)
    now = time.time()
    with store.transaction() as conn:
        store.heartbeat(conn, pid=os.getpid(), interval=1.0, last_cycle_ts=now - 8, started_ts=0)
    store.close()
    write_beat(isolated_env, os.getpid(), now - 6)
    assert snapshot(isolated_env).stale_for(now) is None  # within two intervals and 3 s

    write_beat(isolated_env, os.getpid(), now)
    snap = snapshot(isolated_env)

    assert snap.stale_for(now) == pytest.approx(8, abs=0.5)
    assert snap.watcher_problem is not None and "newest writes" in snap.watcher_problem
    write_beat(isolated_env, os.getpid() + 1, now)  # another watcher's beat says nothing here
    assert snapshot(isolated_env).stale_for(now) is None
