"""The writer's tables by feature: herding, the cycle's jobs, events and hosts.

They write through their :class:`~app.adapters.store.StoreWriter` (``writer.herd``,
``writer.jobs``, ``writer.events``, ``writer.hosts``), so every statement still runs on its one
connection, under its lock, and into its journal (see verify() and journal() there): a table
class never opens or holds a connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# typing costs ~5 ms to import; the status line imports this module (through the reader).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any, Protocol

    from app.base.model import Job

    class Journalled(Protocol):
        """What a table needs of the writer (not imported: the writer builds the tables)."""

        conn: sqlite3.Connection

        def run(self, conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = (),
                once: bool = False) -> sqlite3.Cursor: ...

        def insert(self, conn: sqlite3.Connection, table: str, row: Mapping[str, Any],
                   conflict_key: str | None = None) -> None: ...

        def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]: ...


# The most tokens one row holds. A transcript is the agent's file, so any number may be in it;
# SQLite holds 2**63 - 1 at most, and a larger one would fail the watcher's whole store write.
# Held at the cap rather than dropped: past any budget, automation leaves the pane alone.
MAX_TOKENS = 10**15
_TOKEN_COLUMNS = ("input", "output", "cache_read", "cache_write")


class HerdTables:
    """The ``herd`` rows (opt-in, goal, counters) and the ``nudges`` log (app/act/herd)."""

    def __init__(self, writer: Journalled) -> None:
        self._writer = writer

    def herd_rows(self) -> dict[str, dict[str, Any]]:
        return {row["id"]: row for row in self._writer.rows("SELECT * FROM herd")}

    def upsert_herd(self, conn: sqlite3.Connection, row: Mapping[str, Any]) -> None:
        self._writer.insert(conn, "herd", row, conflict_key="id")

    def add_nudge(self, conn: sqlite3.Connection, row: Mapping[str, Any]) -> None:
        self._writer.insert(conn, "nudges", row)

    def forget_herd(self, conn: sqlite3.Connection, ids: Iterable[str]) -> None:
        """A pane that is gone takes its opt-in and counters with it; its log ages out."""
        for worker_id in ids:
            self._writer.run(conn, "DELETE FROM herd WHERE id = ?", (worker_id,))

    def kept(self, worker_id: str) -> dict[str, Any] | None:
        """The herd row a gone pane left (migration m010), None when it left none."""
        rows = self._writer.rows("SELECT * FROM herd_kept WHERE id = ?", (worker_id,))
        return rows[0] if rows else None

    def drop_kept(self, conn: sqlite3.Connection, worker_id: str) -> None:
        self._writer.run(conn, "DELETE FROM herd_kept WHERE id = ?", (worker_id,))

    def prune_nudges(self, conn: sqlite3.Connection, older_than_ts: float) -> None:
        self._writer.run(conn, "DELETE FROM nudges WHERE ts < ?", (older_than_ts,))

    def person_sends(self, since_ts: float) -> dict[tuple[str, int | None], float]:
        """The newest send from anyone but the herd, per (pane_id, server_pid), after a time."""
        rows = self._writer.rows(
            "SELECT pane_id, server_pid, MAX(ts) AS ts FROM events WHERE kind = 'send' AND "
            "COALESCE(name, '') != 'herd' AND ts > ? GROUP BY pane_id, server_pid", (since_ts,))
        return {(row["pane_id"], row["server_pid"]): row["ts"] for row in rows}


class JobTables:
    """Queued messages and post-report cycles (``jobs``), and the ``transcript`` the assessor
    reads (app/act/cycle)."""

    def __init__(self, writer: Journalled) -> None:
        self._writer = writer

    def add_job(self, conn: sqlite3.Connection, job: Job | Mapping[str, Any]) -> int:
        """Store a new job (a :class:`Job` whose ``seq`` is 0, or its columns); its ``seq``."""
        from app.base.model import Job

        if isinstance(job, Job):
            job = {k: v for k, v in job.row().items() if k != "seq"}
        self._writer.insert(conn, "jobs", job)
        return int(conn.execute("SELECT last_insert_rowid()").fetchone()[0])

    def update_job(self, conn: sqlite3.Connection, seq: int, fields: Mapping[str, Any]) -> None:
        self._writer.insert(conn, "jobs", {"seq": seq, **fields}, conflict_key="seq")

    def open_jobs(self, states: Iterable[str] = ()) -> list[Job]:
        """Jobs in one of ``states`` (default: every job not finished), oldest first."""
        wanted = list(states)
        if not wanted:
            rows = self._writer.rows("SELECT * FROM jobs WHERE done_ts IS NULL ORDER BY seq")
        else:
            marks = ", ".join("?" for _ in wanted)
            rows = self._writer.rows(
                f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY seq", tuple(wanted))
        return jobs_from_rows(rows)

    def set_cycle(self, conn: sqlite3.Connection, worker_id: str, shown: str) -> None:
        """The status row's ``cycle`` column, as the cycle step just moved it (``status`` reads
        it; the watcher would otherwise rewrite it only with the pane's next change)."""
        self._writer.run(conn, "UPDATE status SET cycle = ? WHERE id = ?", (shown, worker_id))

    def latest_cycles(self) -> dict[str, Job]:
        """The newest cycle job of every pane that has one."""
        rows = self._writer.rows("SELECT * FROM jobs WHERE seq IN (SELECT MAX(seq) FROM jobs "
                                 "WHERE kind = 'cycle' GROUP BY id)")
        return {job.pane: job for job in jobs_from_rows(rows)}

    def add_transcript(self, conn: sqlite3.Connection, row: Mapping[str, Any],
                       keep: int) -> None:
        """One report or directive; the pane keeps only its newest ``keep`` entries."""
        self._writer.insert(conn, "transcript", row)
        self._writer.run(conn, "DELETE FROM transcript WHERE id = ? AND seq NOT IN (SELECT seq "
                         "FROM transcript WHERE id = ? ORDER BY seq DESC LIMIT ?)",
                         (row["id"], row["id"], keep))

    def transcript(self, worker_id: str) -> list[dict[str, Any]]:
        return self._writer.rows("SELECT * FROM transcript WHERE id = ? ORDER BY seq", (worker_id,))

    def of(self, worker_id: str) -> list[Job]:
        """Every stored job of one pane, oldest first."""
        return jobs_from_rows(self._writer.rows(
            "SELECT * FROM jobs WHERE id = ? ORDER BY seq", (worker_id,)))

    def prune_jobs(self, conn: sqlite3.Connection, older_than_ts: float) -> None:
        self._writer.run(conn, "DELETE FROM jobs WHERE done_ts IS NOT NULL AND done_ts < ? "
                         "AND seq NOT IN (SELECT MAX(seq) FROM jobs WHERE kind = 'cycle' "
                         "GROUP BY id)", (older_than_ts,))


class EventTables:
    """What happened to a pane besides its screen: sends, hooks, refusals (the ``events``)."""

    def __init__(self, writer: Journalled) -> None:
        self._writer = writer

    def events_after(self, seq: int) -> list[dict[str, Any]]:
        return self._writer.rows("SELECT * FROM events WHERE seq > ? ORDER BY seq", (seq,))

    def add_event(self, conn: sqlite3.Connection, row: Mapping[str, Any]) -> None:
        self._writer.insert(conn, "events", row)


class HostTables:
    """How each configured host answered last (the ``hosts`` rows)."""

    def __init__(self, writer: Journalled) -> None:
        self._writer = writer

    def set_host(self, conn: sqlite3.Connection, **fields: Any) -> None:
        """How a configured host answered (``name`` required; the other columns given)."""
        self._writer.insert(conn, "hosts", fields, conflict_key="name")

    def host_rows(self) -> dict[str, dict[str, Any]]:
        """The ``hosts`` table by name: what the watcher last recorded of each host."""
        return {row["name"]: row for row in self._writer.rows("SELECT * FROM hosts")}


def jobs_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[Job]:
    # Here, not at the top: the status line imports this module and never reads a job.
    from app.base.model import Job

    return [Job.from_row(row) for row in rows]


class UsageTables:
    """Tokens per pane, day and model (``usage``), where reading each pane's usage file stopped
    (``usage_files``), and the spend each budget counts from (``budget_resets``)."""

    def __init__(self, writer: Journalled) -> None:
        self._writer = writer

    def add(self, conn: sqlite3.Connection, row: Mapping[str, Any]) -> None:
        """Add one pane's tokens of one day and model to what the store holds; a count past
        :data:`MAX_TOKENS` (a transcript line no model wrote) is held as that many."""
        counts = tuple(min(max(int(row[k]), 0), MAX_TOKENS) for k in _TOKEN_COLUMNS)
        summed = ", ".join(f"{k} = MIN({k} + excluded.{k}, {MAX_TOKENS})" for k in _TOKEN_COLUMNS)
        self._writer.run(
            conn, "INSERT INTO usage (id, day, model, name, host, input, output, cache_read, "
            "cache_write, updated_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(id, day, model) DO UPDATE SET name = excluded.name, "
            f"host = excluded.host, {summed}, updated_ts = excluded.updated_ts",
            (*(row[k] for k in ("id", "day", "model", "name", "host")), *counts,
             row["updated_ts"]))

    def tails(self) -> dict[str, dict[str, Any]]:
        return {row["id"]: row for row in self._writer.rows("SELECT * FROM usage_files")}

    def set_tail(self, conn: sqlite3.Connection, row: Mapping[str, Any]) -> None:
        self._writer.insert(conn, "usage_files", row, conflict_key="id")

    def session_events_after(self, seq: int) -> list[dict[str, Any]]:
        """Hook and restore events that name an agent's session, and those that say a new agent
        process forgot it (kind ``agent_start``, no session id), after ``seq``, oldest first."""
        return self._writer.rows(
            "SELECT seq, pane_id, server_pid, event, detail, cli, session_id, transcript, ts "
            "FROM events WHERE seq > ? AND ((kind IN ('hook', 'restore') AND session_id != '') "
            "OR kind = 'agent_start') ORDER BY seq", (seq,))

    def rows(self) -> list[dict[str, Any]]:
        return self._writer.rows("SELECT * FROM usage")

    def resets(self) -> dict[str, dict[str, Any]]:
        return {row["scope"]: row for row in self._writer.rows("SELECT * FROM budget_resets")}

    def reset(self, conn: sqlite3.Connection, scope: str, usd: float, tokens: int,
              ts: float) -> None:
        """A budget counts from here: the spend of ``scope`` (a pane id, or "day:DATE") now."""
        self._writer.insert(conn, "budget_resets",
                            {"scope": scope, "usd": usd, "tokens": tokens, "ts": ts},
                            conflict_key="scope")
