"""The store: the schema migrations produce, WAL, read-only readers, and a locked database."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from app.adapters.store import StoreWriter
from app.adapters.store_read import StoreReader
from app.base.errors import StoreError

EXPECTED = {
    "ptys": ["id", "name", "socket", "server_pid", "pane_id", "tmux_session", "tmux_window",
             "window_index", "pane_index", "cwd", "cli_type", "cli_forced", "command",
             "created_by", "first_seen_ts", "last_seen_ts", "worktree", "host", "lead"],
    "hosts": ["name", "socket", "reachable", "problem", "checked_ts", "reached_ts", "watched",
              "removed_ts"],
    "status": ["id", "state", "summary", "actions_needed", "confidence", "reasons", "rule_id",
               "classifier", "last_snapshot_hash", "state_entered_ts", "last_change_ts",
               "stable_count", "signals", "herd_eligible", "herd_reason", "cycle", "seen"],
    "status_history": ["seq", "id", "ts", "state", "previous_state", "summary",
                       "actions_needed", "reasons", "rule_id", "classifier", "confidence"],
    "daemon": ["name", "pid", "socket", "interval", "started_ts", "last_cycle_ts", "stopped_ts",
               "problem"],
    "events": ["seq", "ts", "kind", "event", "name", "cli", "pane_id", "server_pid", "socket",
               "session_id", "detail", "transcript"],
    "herd": ["id", "enabled", "rules", "dry_run", "goal", "nudges", "last_nudge_ts", "turn",
             "updated_ts", "check_cmd"],
    "nudges": ["seq", "id", "ts", "name", "eligible", "outcome", "reason", "rule_id", "text",
               "state", "detail"],
    "jobs": ["seq", "id", "kind", "state", "text", "wait_cmd", "origin", "created_ts",
             "state_ts", "expires_ts", "done_ts", "detail", "exit_code", "output", "decision",
             "directive", "timeline"],
    "transcript": ["seq", "id", "ts", "kind", "text"],
    "herd_kept": ["id", "enabled", "rules", "dry_run", "goal", "check_cmd", "kept_ts"],
    "usage": ["id", "day", "model", "name", "host", "input", "output", "cache_read",
              "cache_write", "updated_ts"],
    "usage_files": ["id", "path", "kind", "inode", "offset", "memo", "updated_ts"],
    "budget_resets": ["scope", "usd", "tokens", "ts"],
}


def test_a_blank_store_migrates_to_exactly_the_schema_in_wal_mode(tmp_path: Path) -> None:
    StoreWriter(tmp_path).close()
    StoreWriter(tmp_path).close()  # applying again is a no-op
    conn = sqlite3.connect(tmp_path / "status.db")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables - {"_sqlite_migrations", "sqlite_sequence"} == set(EXPECTED)
    for table, columns in EXPECTED.items():
        assert [r[1] for r in conn.execute(f"PRAGMA table_info({table})")] == columns
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    applied = [r[0] for r in conn.execute("SELECT name FROM _sqlite_migrations")]
    assert applied == ["m001_initial", "m002_events_and_signals", "m003_herding", "m004_jobs",
                       "m005_declared_check", "m006_worktree", "m007_hosts",
                       "m008_host_heartbeat", "m009_session_identity",
                       "m010_keep_herd_of_gone_panes", "m011_seen", "m012_usage", "m013_lead"]


def test_a_store_from_the_first_release_gains_events_and_keeps_its_rows(tmp_path: Path) -> None:
    StoreWriter(tmp_path).close()
    conn = sqlite3.connect(tmp_path / "status.db")
    # Back to what the first release wrote: no events table, no signals column.
    conn.execute("DROP TABLE events")
    conn.execute("ALTER TABLE status DROP COLUMN signals")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm002_events_and_signals'")
    conn.execute("INSERT INTO status (id, state, state_entered_ts) VALUES ('abc', 'READY', 1.5)")
    conn.commit()
    conn.close()

    writer = StoreWriter(tmp_path)
    assert writer.statuses()["abc"]["state_entered_ts"] == 1.5
    assert writer.statuses()["abc"]["signals"] is None
    assert writer.events.events_after(0) == []
    writer.close()


def test_a_store_of_the_previous_release_gains_herding_and_keeps_its_rows(
        tmp_path: Path) -> None:
    StoreWriter(tmp_path).close()
    conn = sqlite3.connect(tmp_path / "status.db")
    # Back to what the release before herding wrote.
    conn.execute("DROP TABLE herd")
    conn.execute("DROP TABLE nudges")
    conn.execute("ALTER TABLE status DROP COLUMN herd_eligible")
    conn.execute("ALTER TABLE status DROP COLUMN herd_reason")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm003_herding'")
    conn.execute("INSERT INTO ptys (id, name, pane_id) VALUES ('abc', 'api', '%1')")
    conn.execute("INSERT INTO status (id, state, signals) VALUES ('abc', 'READY', 'sent')")
    conn.execute("INSERT INTO events (ts, kind, event, name, pane_id) "
                 "VALUES (2.0, 'send', 'send', 'send', '%1')")
    conn.commit()
    conn.close()

    writer = StoreWriter(tmp_path)
    assert writer.statuses()["abc"]["signals"] == "sent"
    assert writer.statuses()["abc"]["herd_eligible"] is None
    assert writer.herd.herd_rows() == {}
    assert writer.herd.person_sends(0.0) == {("%1", None): 2.0}
    writer.close()
    reader = StoreReader(tmp_path)
    [worker] = reader.workers()
    assert (worker["state"], worker["eligible_for_herd"], worker["goal"]) == ("READY", False, None)
    assert reader.nudges() == []
    reader.close()


def test_a_store_of_the_herding_release_gains_jobs_and_keeps_its_rows(tmp_path: Path) -> None:
    StoreWriter(tmp_path).close()
    conn = sqlite3.connect(tmp_path / "status.db")
    # Back to what the herding release wrote.
    conn.execute("DROP TABLE jobs")
    conn.execute("DROP TABLE transcript")
    conn.execute("ALTER TABLE status DROP COLUMN cycle")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm004_jobs'")
    conn.execute("INSERT INTO ptys (id, name, pane_id) VALUES ('abc', 'api', '%1')")
    conn.execute("INSERT INTO status (id, state, herd_reason) VALUES ('abc', 'READY', 'busy')")
    conn.execute("INSERT INTO herd (id, goal) VALUES ('abc', 'tests pass')")
    conn.commit()
    conn.close()

    writer = StoreWriter(tmp_path)
    assert writer.statuses()["abc"]["herd_reason"] == "busy"
    assert writer.statuses()["abc"]["cycle"] is None
    assert writer.herd.herd_rows()["abc"]["goal"] == "tests pass"
    assert writer.jobs.open_jobs() == []
    writer.close()
    reader = StoreReader(tmp_path)
    [worker] = reader.workers()
    assert (worker["state"], worker["goal"], worker["cycle"]) == ("READY", "tests pass", "")
    assert reader.jobs() == []
    reader.close()


def test_a_store_of_the_cycle_release_gains_declared_checks_and_keeps_its_goals(
        tmp_path: Path) -> None:
    StoreWriter(tmp_path).close()
    conn = sqlite3.connect(tmp_path / "status.db")
    # That release had no kept herd rows either (m010's trigger names check_cmd).
    conn.execute("DROP TRIGGER herd_kept_on_delete")
    conn.execute("DROP TABLE herd_kept")
    conn.execute("ALTER TABLE herd DROP COLUMN check_cmd")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name IN "
                 "('m005_declared_check', 'm010_keep_herd_of_gone_panes')")
    conn.execute("INSERT INTO herd (id, goal) VALUES ('abc', 'tests pass')")
    conn.commit()
    conn.close()

    writer = StoreWriter(tmp_path)
    assert writer.herd.herd_rows()["abc"]["goal"] == "tests pass"
    assert writer.herd.herd_rows()["abc"]["check_cmd"] is None
    writer.close()


def test_readers_cannot_write(tmp_path: Path) -> None:
    StoreWriter(tmp_path).close()
    reader = StoreReader(tmp_path)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.conn.execute("DELETE FROM ptys")
    reader.close()


def test_history_is_bounded_per_pane_and_by_age(tmp_path: Path) -> None:
    store = StoreWriter(tmp_path)
    with store.transaction() as conn:
        store.add_history(conn, [{"id": "a", "ts": float(ts), "state": "BUSY"}
                                 for ts in range(10)])
        store.add_history(conn, [{"id": "b", "ts": 1.0, "state": "READY"}])
        store.prune_history(conn, keep_per_pane=3, older_than_ts=5.0)
    rows = store.conn.execute("SELECT id, ts FROM status_history ORDER BY seq").fetchall()
    assert rows == [("a", 7.0), ("a", 8.0), ("a", 9.0), ("b", 1.0)]  # b's newest row stays
    store.close()


def test_a_store_locked_by_another_writer_is_one_clear_error(tmp_path: Path) -> None:
    store = StoreWriter(tmp_path)
    blocker = sqlite3.connect(tmp_path / "status.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    store.conn.execute("PRAGMA busy_timeout = 100")
    try:
        with pytest.raises(StoreError, match="is locked by another process"), \
                store.transaction() as conn:
            store.heartbeat(conn, pid=1)
        # Readers are not blocked by the writer's lock (WAL).
        reader = StoreReader(tmp_path)
        assert reader.workers() == []
        reader.close()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        store.close()


def test_public_rows_carry_herd_eligibility_and_an_exited_pane_is_never_eligible() -> None:
    from app.adapters.store_read import public_row

    live = public_row({"id": "a", "state": "READY", "herd_eligible": 1, "herd_reason": ""})
    assert (live["eligible_for_herd"], live["herd_reason"]) == (True, "")
    gone = public_row({"id": "a", "state": "EXITED", "herd_eligible": 1, "herd_reason": ""})
    assert (gone["eligible_for_herd"], gone["herd_reason"]) == (False, "pane_exited")
    blank = public_row({"id": "a"})
    assert (blank["eligible_for_herd"], blank["herd_reason"], blank["goal"]) == (False, "", None)


def test_a_job_goes_into_the_store_and_comes_back_the_same_job(tmp_path: Path) -> None:
    from dataclasses import replace

    from app.base.model import Job, JobKind, JobState, stamp

    writer = StoreWriter(tmp_path)
    queued = Job(seq=0, pane="abc", kind=JobKind.CYCLE, state=JobState.QUEUED,
                 text="tests pass", wait_cmd="make test", origin="report", created_ts=100.0,
                 state_ts=100.0, timeline=stamp(None, JobState.QUEUED, 100.0))
    with writer.transaction() as conn:
        seq = writer.jobs.add_job(conn, queued)
    [stored] = writer.jobs.open_jobs()
    assert stored == replace(queued, seq=seq)
    assert stored.kind is JobKind.CYCLE and stored.state is JobState.QUEUED

    waited = stored.updated({"state": JobState.WAITING, "state_ts": 101.5,
                             "timeline": stamp(stored.timeline, JobState.WAITING, 101.5)})
    with writer.transaction() as conn:
        writer.jobs.update_job(conn, seq, {k: v for k, v in waited.row().items()
                                           if k not in ("seq", "id")})
    assert writer.jobs.latest_cycles() == {"abc": waited}
    assert waited.steps() == [("queued", 100.0), ("WAITING", 101.5)]
    writer.close()

    # The strings on disk are the ones every release wrote: no migration, old stores read.
    conn = sqlite3.connect(tmp_path / "status.db")
    assert conn.execute("SELECT kind, state FROM jobs").fetchall() == [("cycle", "WAITING")]
    conn.close()
    reader = StoreReader(tmp_path)
    assert reader.jobs("abc") == [waited]
    assert reader.jobs("abc")[0].row() == waited.row()
    reader.close()


def test_jobs_written_by_hand_with_every_stored_state_read_as_typed_jobs(tmp_path: Path) -> None:
    from app.base.model import JobKind, JobState

    StoreWriter(tmp_path).close()
    conn = sqlite3.connect(tmp_path / "status.db")
    stored = ["queued", "WAITING", "IDLE_SPIN", "DECIDING", "STANDBY", "PAUSED", "delivered",
              "expired", "dropped", "superseded", "resumed", "failed", "LATER_STATE"]
    for n, state in enumerate(stored, start=1):
        conn.execute("INSERT INTO jobs (id, kind, state, created_ts, state_ts, done_ts) "
                     "VALUES ('abc', ?, ?, ?, ?, ?)",
                     ("message" if state.islower() else "cycle", state, n, n,
                      None if state == "queued" else n))
    conn.commit()
    conn.close()

    reader = StoreReader(tmp_path)
    jobs = reader.jobs()
    reader.close()
    assert [job.state for job in jobs] == stored
    assert [job.state.value for job in jobs[:-1]] == [s.value for s in JobState]
    # A state a newer release wrote reads as itself; status shows nothing for it.
    assert str(jobs[-1].state) == "LATER_STATE" and jobs[-1].state.shown == ""
    assert [job.state.shown for job in jobs[:7]] == ["QUEUED", "WAITING", "IDLE_SPIN",
                                                     "DECIDING", "STANDBY", "PAUSED", ""]
    assert jobs[0].kind is JobKind.MESSAGE and not jobs[0].finished and jobs[1].finished
    writer = StoreWriter(tmp_path)
    assert [job.seq for job in writer.jobs.open_jobs()] == [1]
    with writer.transaction() as conn:
        later = writer.jobs.add_job(conn, {"id": "abc", "kind": "later_kind", "state": "queued"})
    [job] = [job for job in writer.jobs.open_jobs() if job.seq == later]
    assert job.kind == "later_kind" and job.kind not in (JobKind.MESSAGE, JobKind.CYCLE)
    writer.close()


def test_a_reader_that_comes_while_the_schema_is_being_migrated_waits_for_it(
        tmp_path: Path) -> None:
    import fcntl
    import threading

    from app.adapters.store import CREATE_LOCK_NAME

    StoreWriter(tmp_path).close()
    raw = sqlite3.connect(tmp_path / "status.db", isolation_level=None)
    raw.execute("ALTER TABLE status DROP COLUMN cycle")  # a migration not applied yet
    # This test plays the process that is migrating: it holds the creation lock.
    with (tmp_path / CREATE_LOCK_NAME).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        got: list[object] = []

        def read() -> None:
            try:
                got.append(StoreReader(tmp_path).workers())
            except StoreError as exc:
                got.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        reader.join(0.5)
        assert got == []  # waiting for the creator, not failing on the missing column
        raw.execute("ALTER TABLE status ADD COLUMN cycle TEXT")
        raw.close()
        fcntl.flock(lock, fcntl.LOCK_UN)
    reader.join(30)
    assert got == [[]]


def _add_jobs_in_threads(workers_dir: Path, threads: int, out: Any) -> None:
    """One process's share of the race below: each thread opens a writer of its own (as each
    MCP tool call and hook does) and adds a job in a transaction that reads first."""
    from app.base.model import Job, JobKind, JobState

    seqs: list[int] = []

    def add() -> None:
        writer = StoreWriter(workers_dir)
        try:
            with writer.transaction() as conn:
                writer.jobs.open_jobs()
                seqs.append(writer.jobs.add_job(conn, Job(
                    seq=0, pane="abc", kind=JobKind.CYCLE, state=JobState.QUEUED, text="t",
                    origin="report", created_ts=1.0, state_ts=1.0)))
        finally:
            writer.close()

    running = [threading.Thread(target=add) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    out.put(seqs)


def test_writers_in_threads_of_several_processes_never_lose_or_share_a_row(
        tmp_path: Path) -> None:
    # Closing any descriptor of the database file drops the whole process's POSIX locks on
    # it, SQLite's own: a writer opening in one thread once let another thread's transaction
    # run beside another process's (the same job number twice, rows lost).
    context = multiprocessing.get_context("spawn")
    for round_number in range(6):
        folder = tmp_path / str(round_number)
        StoreWriter(folder).close()
        out = context.Queue()
        workers = [context.Process(target=_add_jobs_in_threads, args=(folder, 3, out))
                   for _ in range(3)]
        for worker in workers:
            worker.start()
        seqs = sorted(seq for _ in workers for seq in out.get(timeout=60))
        for worker in workers:
            worker.join(timeout=60)
        with sqlite3.connect(folder / "status.db") as conn:
            stored = sorted(row[0] for row in conn.execute("SELECT seq FROM jobs"))
        assert seqs == stored == list(range(1, 10)), round_number
