"""The only SQLite user: the daemon's writer and the readers (the schema: migrations.py).

One writer (the watcher, plus ``create`` registering a window) and any number of readers. Every
connection uses WAL and a busy timeout, so readers never see "database is locked" while the
watcher writes. The reader uses only the stdlib ``sqlite3`` (the status line starts it every few
seconds; ``sqlite_utils`` costs ~150 ms to import), the writer uses sqlite-utils migrations.
"""

from __future__ import annotations

import _thread
import fcntl
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from app.adapters.migrations import MIGRATION_SET, migrations
from app.adapters.store_tables import (
    EventTables,
    HerdTables,
    HostTables,
    JobTables,
    UsageTables,
)
from app.base.errors import StoreError

# typing costs ~5 ms to import; the status line imports this module on every refresh.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

DB_NAME = "status.db"
BUSY_TIMEOUT_MS = 5000

# Rows of the events table: what happened to a pane besides its screen. ``kind`` is "send" (our
# own `send`, or keys `answer` pressed), "hook" (an agent CLI's hook) or "refused" (the gate,
# app/act/gate.py, would not type: ``detail`` says why, ``name`` who asked); ``event`` is what the
# fusion rules read (turn_start, working, turn_end, permission, idle, session_end, other, or
# "send").
EVENT_KINDS = ("send", "hook", "refused")
_MAX_SQL_INT = 2**63 - 1
# app.base.model.State's values, spelled out: importing the model costs the status line several ms.
KNOWN_STATES = ("READY", "BUSY", "NEEDS_CONFIRMATION", "ERROR", "UNKNOWN", "EXITED")
# What a writer's transaction yields, named here so its users need not import sqlite3.
Connection = sqlite3.Connection


def db_path(workers_dir: str | Path) -> str:
    return os.path.join(workers_dir, DB_NAME)


CREATE_LOCK_NAME = "store.lock"
# O_NOFOLLOW: a link planted in a shared store folder must not make us write through it.
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def make_private_dir(path: str | Path) -> None:
    """Create the store folder (and its parents) as 0700; refuse one that is a symlink."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    if os.path.islink(path):
        raise OSError(f"{path} is a symbolic link; the store folder must be a real folder")


def open_private(path: str, flags: int) -> int:
    """``os.open`` for our own files: created 0600, never through a symbolic link."""
    try:
        return os.open(path, flags | os.O_CREAT | NOFOLLOW, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise OSError(f"{path} is a symbolic link; refusing to open it") from exc
        raise


def refuse_link(path: str) -> None:
    if os.path.islink(path):
        raise StoreError(f"status store {path} is a symbolic link; refusing to open it")


def configure_connection(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


class StoreLocked(StoreError):
    """Another process held the database past the busy timeout (or SQLite would not wait)."""


def store_error(exc: sqlite3.Error, path: str) -> StoreError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StoreLocked(f"status store {path} is locked by another process; try again")
    return StoreError(f"status store {path}: {text}")


def _check_not_newer(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a database a newer release migrated: this one would misread its tables (and
    every cycle would fail) rather than say so once."""
    try:
        applied = {row[0] for row in conn.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", (MIGRATION_SET,))}
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return  # a new or pre-migrations store
        raise
    unknown = applied - {m.name for m in migrations()._migrations}
    if unknown:
        raise StoreError(f"status store {path} was written by a newer conductor pty (migration "
                         f"{', '.join(sorted(unknown))}); upgrade conductor pty, or point "
                         "--workers-dir at another folder")
    states = {row[0] for row in conn.execute("SELECT DISTINCT state FROM status")}
    strange = sorted(str(s) for s in states - set(KNOWN_STATES) - {None})
    if strange:
        raise StoreError(f"status store {path} holds states this release does not know "
                         f"({', '.join(strange)[:80]}): it was written by a newer conductor pty; "
                         "upgrade, or point --workers-dir at another folder")


# Why nothing of ours ever opens or closes a plain descriptor of status.db (or its -wal and -shm)
# while a connection may be open in the same process:
#
# SQLite coordinates processes with POSIX advisory locks (fcntl). Those locks belong to a process
# and a file, not to a descriptor: closing *any* descriptor of the file drops every lock the process
# holds on it. SQLite keeps its own connections safe from this (one record per file and process,
# closes deferred while a lock is held), but a descriptor opened and closed beside it, by Python
# code, bypasses that bookkeeping ("How To Corrupt An SQLite Database File", section 2.2). With its
# locks gone, our connection looks absent to every other process: the next one to close its
# connection believes it is the last, checkpoints, and deletes the -wal file that our connection
# still appends to. From then on the watcher writes into an unlinked file no reader sees (a "dark
# store"), and when it finally closes, its checkpoint of that orphan overwrites pages others wrote:
# "database disk image is malformed".
#
# So: the database file is created (0600, before SQLite makes -wal and -shm with its mode) only when
# it does not exist, with O_EXCL, which gives a new inode no connection can hold; and
# _OPENING keeps this process's other threads from connecting while that descriptor is open. A
# long-running process (the watcher) opens one StoreWriter and hands it to every thread that writes.
_OPENING = _thread.allocate_lock()


def _create_database_file(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600)
    except FileExistsError:
        refuse_link(path)
        return
    os.close(fd)


class _Identity:
    """Which files our connection writes to: the database's and its WAL's (device, inode)."""

    __slots__ = ("database", "wal")

    def __init__(self, database: tuple[int, int] | None, wal: tuple[int, int] | None) -> None:
        self.database, self.wal = database, wal

    @classmethod
    def now(cls, path: str) -> _Identity:
        return cls(_file_id(path), _file_id(path + "-wal"))


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


# Statements kept since the last check that the store's files are the ones we write to, at most.
_JOURNAL_MAX = 20_000


class StoreWriter:
    """The watcher's (and ``create``'s) handle on the store.

    Thread-safe: the watcher's loop, each host's thread and each job share one writer (see
    _OPENING for why a process must not open more than it needs); a transaction holds the
    writer's lock, so another thread's statements never land inside it.
    """

    def __init__(self, workers_dir: Path) -> None:
        import threading

        self.workers_dir = workers_dir
        self.path = db_path(workers_dir)
        self._lock = threading.RLock()
        # With keep_journal(): the statements since the store's files were last seen to be ours,
        # replayed into a reopened connection (see verify()).
        self._journal: list[tuple[str, tuple[Any, ...], bool]] | None = None
        self._identity: _Identity | None = None
        self.herd = HerdTables(self)
        self.jobs = JobTables(self)
        self.hosts = HostTables(self)
        self.events = EventTables(self)
        self.usage = UsageTables(self)
        lock_fd = -1
        try:
            make_private_dir(workers_dir)
            # Creating and migrating the schema is serialised between processes: ten hooks
            # firing at once on a new store would otherwise race inside the migrations.
            lock_fd = open_private(os.path.join(workers_dir, CREATE_LOCK_NAME), os.O_RDWR)
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            with _OPENING:
                _create_database_file(self.path)
                self.conn = self._connect()
        except sqlite3.Error as exc:
            raise store_error(exc, self.path) from exc
        except OSError as exc:
            raise StoreError(f"cannot create the status store in {workers_dir}: "
                             f"{exc.strerror or exc}") from exc
        finally:
            if lock_fd >= 0:
                os.close(lock_fd)  # drops the flock (of store.lock, never of the database)

    def _connect(self) -> sqlite3.Connection:
        from sqlite_utils import Database

        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000,
                               isolation_level=None, check_same_thread=False)
        try:
            configure_connection(conn)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            # Plugins installed in the user's environment must not touch our database.
            self.db = Database(conn, execute_plugins=False)
            _check_not_newer(conn, self.path)
            migrations().apply(self.db)
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    # --- are our writes seen? ----------------------------------------------------------------

    def keep_journal(self) -> None:
        """Check from now on that the files we write are the store's (call :meth:`verify`
        often): the watcher's writes must be what every reader sees."""
        with self._lock:
            self._journal = []
            self._identity = _Identity.now(self.path)

    def verify(self) -> str | None:
        """None while the database and its WAL are still the files our connection writes (the
        statements kept since are then forgotten); otherwise what changed, in one line. Costs
        two ``stat`` calls.

        A writer that lost its files cannot be mended in its own process: SQLite keeps one
        record per database file and process, so a second connection there fails, and closing
        this one would checkpoint its orphaned WAL over pages others wrote since. The watcher
        therefore starts itself anew (app/run/daemon.py) and replays :meth:`journal`.
        """
        with self._lock:
            if self._identity is None or self._journal is None:
                return None
            seen = _Identity.now(self.path)
            if self._identity.wal is None and seen.wal is not None \
                    and seen.database == self._identity.database:
                self._identity.wal = seen.wal  # the WAL of a store just created
            problem = self._identity_problem(seen)
            if problem is None:
                self._journal.clear()
            return problem

    def _identity_problem(self, seen: _Identity) -> str | None:
        assert self._identity is not None
        if seen.database is None:
            return "the database file is gone"
        if seen.database != self._identity.database:
            return "the database file was replaced"
        if self._identity.wal is not None and seen.wal != self._identity.wal:
            return ("its -wal file was deleted or replaced under the watcher (another process "
                    "took our connection for gone)")
        return None

    def journal(self) -> list[tuple[str, tuple[Any, ...], bool]]:
        """The statements written since the files were last seen to be ours, oldest first."""
        with self._lock:
            return list(self._journal or [])

    def replay(self, statements: Iterable[tuple[str, tuple[Any, ...], bool]]) -> int:
        """Write again what a previous writer wrote into files no reader saw, in one
        transaction; plain inserts only where no identical row is there. How many."""
        count = 0
        with self.transaction() as conn:
            for sql, params, once in statements:
                conn.execute(_insert_once(sql) if once else sql,
                             tuple(params) + tuple(params) if once else tuple(params))
                count += 1
        return count

    def run(self, conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = (),
            once: bool = False) -> sqlite3.Cursor:
        """Every write goes through here, the table classes' too (writer.herd, .jobs, .events,
        .hosts), so the journal misses none: ``once`` marks a plain INSERT, replayed only when
        no identical row is there."""
        cursor = conn.execute(sql, params)
        if self._journal is not None:
            if len(self._journal) >= _JOURNAL_MAX:
                del self._journal[: _JOURNAL_MAX // 2]
            self._journal.append((sql, params, once))
        return cursor

    def insert(self, conn: sqlite3.Connection, table: str, row: Mapping[str, Any],
               conflict_key: str | None = None) -> None:
        sql, params = _insert_sql(table, row, conflict_key)
        self.run(conn, sql, params, once=conflict_key is None)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                mark = len(self._journal) if self._journal is not None else 0
                try:
                    yield self.conn
                    self.conn.execute("COMMIT")
                except BaseException:
                    # A failed COMMIT (disk full) may or may not have ended the transaction.
                    if self.conn.in_transaction:
                        self.conn.execute("ROLLBACK")
                    if self._journal is not None:
                        del self._journal[mark:]
                    raise
            except sqlite3.Error as exc:
                raise store_error(exc, self.path) from exc
            except OverflowError as exc:  # an integer SQLite cannot hold (a setting out of range)
                raise StoreError(f"status store {self.path}: {exc}") from exc

    def upsert_pty(self, conn: sqlite3.Connection, row: Mapping[str, Any]) -> None:
        self.insert(conn, "ptys", row, conflict_key="id")

    def set_worktree(self, conn: sqlite3.Connection, worker_id: str, path: str | None) -> None:
        self.run(conn, "UPDATE ptys SET worktree = ? WHERE id = ?", (path, worker_id))

    def upsert_status(self, conn: sqlite3.Connection, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.insert(conn, "status", row, conflict_key="id")

    def add_history(self, conn: sqlite3.Connection, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.insert(conn, "status_history", row)

    def remove(self, conn: sqlite3.Connection, ids: Iterable[str]) -> None:
        for worker_id in ids:
            for table in ("ptys", "status", "status_history"):
                self.run(conn, f"DELETE FROM {table} WHERE id = ?", (worker_id,))

    def heartbeat(self, conn: sqlite3.Connection, **fields: Any) -> None:
        self.insert(conn, "daemon", {"name": "watch", **fields}, conflict_key="name")

    def prune_history(self, conn: sqlite3.Connection, keep_per_pane: int,
                      older_than_ts: float) -> None:
        """Bound the history: at most ``keep_per_pane`` rows per pane, none older than the cut-off
        (the newest row of each pane is kept whatever its age)."""
        keep_per_pane = min(keep_per_pane, _MAX_SQL_INT)
        older_than_ts = max(older_than_ts, -1e300)
        self.run(
            conn,
            "DELETE FROM status_history WHERE ts < ? AND seq NOT IN "
            "(SELECT MAX(seq) FROM status_history GROUP BY id)",
            (older_than_ts,),
        )
        self.run(
            conn,
            "DELETE FROM status_history WHERE seq IN (SELECT seq FROM (SELECT seq, ROW_NUMBER() "
            "OVER (PARTITION BY id ORDER BY seq DESC) AS n FROM status_history) WHERE n > ?)",
            (keep_per_pane,),
        )
        self.run(conn, "DELETE FROM events WHERE ts < ?", (older_than_ts,))

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """A read, under the writer's lock: another thread's transaction is never half seen."""
        with self._lock:
            return rows_as_dicts(self.conn, sql, params)

    def others_wrote(self) -> int:
        """A number that changes whenever another connection (a report, a hook, a send)
        committed to the store: a cheap way to know whether to look at the jobs again."""
        try:
            with self._lock:
                return int(self.conn.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error as exc:
            raise store_error(exc, self.path) from exc

    def known_ids(self) -> set[str]:
        return {row["id"] for row in self.rows("SELECT id FROM ptys")}

    def live_ids(self, socket: str | None = None) -> set[str]:
        """Panes not yet given their final EXITED row (of one tmux socket, or of none known,
        when given)."""
        return {row["id"] for row in self.rows(
            "SELECT p.id FROM ptys p LEFT JOIN status s ON s.id = p.id "
            "WHERE (s.state IS NULL OR s.state != 'EXITED') AND "
            "(? IS NULL OR p.socket = ? OR p.socket IS NULL)", (socket, socket))}

    def prune_exited(self, conn: sqlite3.Connection, older_than_ts: float) -> list[str]:
        """Remove the panes that exited before the cut-off, with their history; their ids."""
        ids = [row[0] for row in conn.execute(
            "SELECT id FROM status WHERE state = 'EXITED' AND state_entered_ts < ?",
            (older_than_ts,))]
        self.remove(conn, ids)
        return ids

    def pty(self, worker_id: str) -> dict[str, Any] | None:
        rows = self.rows("SELECT * FROM ptys WHERE id = ?", (worker_id,))
        return rows[0] if rows else None

    def statuses(self) -> dict[str, dict[str, Any]]:
        return {row["id"]: row for row in self.rows("SELECT * FROM status")}

def pane_and_state(conn: sqlite3.Connection, worker_id: str) -> tuple[str, int, str] | None:
    """A row's pane, its server and its state, read inside the caller's transaction."""
    row = conn.execute("SELECT p.pane_id, p.server_pid, s.state FROM ptys p JOIN status s "
                       "ON s.id = p.id WHERE p.id = ?", (worker_id,)).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def rows_as_dicts(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]
            ) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


# How long a hook keeps trying to record its event while others hold or create the store.
RECORD_RETRY_S = 10.0


def record_event(workers_dir: str, row: Mapping[str, Any]) -> None:
    """Append one row to the events table, creating the store if there is none yet.

    Stdlib only on the usual path, and one short transaction: ``conductor pty hook`` runs this
    inside the agent's own hook, which waits for it. A locked store is tried again for
    RECORD_RETRY_S: a dozen hooks firing at once on a new store can see SQLite give up at once
    while the creator switches the journal to WAL, and a lost event would be a lost turn end.
    """
    deadline = time.monotonic() + RECORD_RETRY_S
    while True:
        try:
            _record_event_once(workers_dir, row)
            return
        except StoreLocked:
            if time.monotonic() >= deadline:
                raise
            import random  # here, not at the top: the status line imports this module

            time.sleep(random.uniform(0.02, 0.15))  # apart, so they do not collide again


def _record_event_once(workers_dir: str, row: Mapping[str, Any]) -> None:
    path = db_path(workers_dir)
    if os.path.exists(path):
        refuse_link(path)
        try:
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            try:
                configure_connection(conn)
                conn.execute("BEGIN IMMEDIATE")
                _insert(conn, "events", row)
                conn.execute("COMMIT")
                return
            finally:
                conn.close()
        except sqlite3.OperationalError as exc:
            # A store another process is still creating has no tables yet, and while it turns
            # its journal to WAL SQLite can answer "locked" without waiting: the way below
            # queues behind the creator's lock instead.
            text = str(exc)
            if not any(word in text for word in ("no such table", "locked", "busy")):
                raise store_error(exc, path) from exc
        except sqlite3.Error as exc:
            raise store_error(exc, path) from exc
    from pathlib import Path

    writer = StoreWriter(Path(workers_dir))  # creates the store and brings its schema up to date
    try:
        with writer.transaction() as conn:
            writer.events.add_event(conn, row)
    finally:
        writer.close()


def _insert(conn: sqlite3.Connection, table: str, row: Mapping[str, Any],
            conflict_key: str | None = None) -> None:
    sql, params = _insert_sql(table, row, conflict_key)
    conn.execute(sql, params)


def _insert_sql(table: str, row: Mapping[str, Any], conflict_key: str | None
                ) -> tuple[str, tuple[Any, ...]]:
    """One row; with ``conflict_key``, an upsert that updates only the columns given (so a caller
    never blanks a column it did not mention). Table and column names are ours, never input."""
    columns = list(row)
    sql = (f"INSERT INTO {table} ({', '.join(columns)}) "
           f"VALUES ({', '.join('?' for _ in columns)})")
    if conflict_key is not None:
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != conflict_key)
        sql += f" ON CONFLICT({conflict_key}) DO UPDATE SET {updates}"
    return sql, tuple(_cell(row[c]) for c in columns)


def _insert_once(sql: str) -> str:
    """A plain INSERT built by _insert_sql, as one that adds its row only when no row with the
    same values is there (its parameters are then given twice)."""
    head, _, _ = sql.partition(" VALUES ")
    table, _, columns = head.removeprefix("INSERT INTO ").partition(" (")
    names = columns.rstrip(")").split(", ")
    marks = ", ".join("?" for _ in names)
    same = " AND ".join(f"{name} IS ?" for name in names)
    return (f"INSERT INTO {table} ({', '.join(names)}) SELECT {marks} "
            f"WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE {same})")


def _cell(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        # Reason codes are identifiers, stored space-separated: readers on the status-line path
        # then need no json module (~10 ms with its imports).
        return " ".join(str(v) for v in value)
    return value
