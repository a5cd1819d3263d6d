"""Read-only access to ``status.db`` for every CLI command and the status line.

Stdlib ``sqlite3`` only, and nothing that imports ``typing``, ``json`` or ``sqlite_utils``: the
status line imports this module on every refresh (see app/adapters/store.py for the writer).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Mapping

from app.adapters.store import (
    BUSY_TIMEOUT_MS,
    CREATE_LOCK_NAME,
    NOFOLLOW,
    configure_connection,
    db_path,
    refuse_link,
    rows_as_dicts,
    store_error,
)
from app.adapters.store_tables import jobs_from_rows
from app.base.errors import StoreError

# typing costs ~5 ms to import; the status line imports this module on every refresh.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from app.base.model import Job

# Columns of status.json and of `status --json`, in display order.
PUBLIC_FIELDS = (
    "id", "name", "tmux_session", "tmux_window", "window_index", "pane_id", "cwd", "cli_type",
    # The tmux server: its socket (the -L name, "default", or a -S path) and its pid then.
    "socket", "server_pid",
    "state", "summary", "actions_needed", "confidence", "reasons", "rule_id", "classifier",
    "state_entered_ts", "last_change_ts", "signals",
    # Herding (app/herd): whether the watcher would nudge the pane now, else the gate that says
    # no; and the pane's goal.
    "eligible_for_herd", "herd_reason", "goal",
    # The post-report cycle (app/cycle): the state of the pane's latest cycle, "" when none.
    "cycle",
    # The git worktree `create --worktree` made for the pane (a path), None when it has none.
    "worktree",
    # The machine the pane runs on: "local", or a [hosts.NAME] of the config file (over ssh).
    "host",
    # 0 while a turn that ended is not yet seen by the person (DONE; app/run/seen.py), else 1.
    "seen",
    # The worker id of the pane whose agent started this one (design/states.md), or None.
    "lead",
)


class StoreMissing(StoreError):
    """There is no status.db yet."""


def _half_made(exc: sqlite3.Error) -> bool:
    """The error of a reader that looked while another process was still creating or migrating
    the schema (each migration commits on its own, so a reader can see it half done)."""
    text = str(exc)
    return "no such table" in text or "no such column" in text


def _wait_for_creator(path: str) -> None:
    """Wait until no process holds the creation lock (the StoreWriter that creates and
    migrates the schema holds it throughout); at once when there is no lock file."""
    try:
        fd = os.open(os.path.join(os.path.dirname(path), CREATE_LOCK_NAME),
                     os.O_RDONLY | NOFOLLOW)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)


class HistoryRow:
    __slots__ = ("id", "previous_state", "reasons", "seq", "state", "summary", "ts")

    def __init__(self, seq: int, id: str, ts: float, state: str, previous_state: str | None,
                 summary: str, reasons: list[str]) -> None:
        self.seq, self.id, self.ts, self.state = seq, id, ts, state
        self.previous_state, self.summary, self.reasons = previous_state, summary, reasons


class StoreReader:
    """Read-only access for every CLI command and the status line (stdlib sqlite3 only)."""

    def __init__(self, workers_dir: str | Path) -> None:
        self.path = db_path(workers_dir)
        try:
            os.stat(self.path)
        except PermissionError:
            # Another user's private store: it may well exist, but we may not look inside.
            raise StoreError(f"cannot read the status store {self.path}: permission denied"
                             ) from None
        except OSError:
            raise StoreMissing(f"no status store at {self.path}: start `conductor pty watch` "
                               "first") from None
        refuse_link(self.path)
        try:
            try:
                self.conn = self._open("mode=ro")
            except sqlite3.OperationalError as exc:
                if not _half_made(exc):
                    raise
                _wait_for_creator(self.path)
                self.conn = self._open("mode=ro")
        except sqlite3.OperationalError as exc:
            # A read-only mount, or another user's store: SQLite cannot create the WAL's shared
            # memory file beside it. Opened as immutable it reads the main file without it.
            if os.access(os.path.dirname(self.path), os.W_OK):
                raise store_error(exc, self.path) from exc
            try:
                self.conn = self._open("mode=ro&immutable=1")
            except sqlite3.Error as again:
                raise store_error(again, self.path) from again
        except sqlite3.Error as exc:
            raise store_error(exc, self.path) from exc

    def _open(self, options: str) -> sqlite3.Connection:
        # urllib.parse would cost the status line ~8 ms: these are the characters a URI path
        # cannot carry as they are.
        quoted = self.path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
        conn = sqlite3.connect(f"file:{quoted}?{options}", uri=True,
                               timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            configure_connection(conn)
            conn.row_factory = sqlite3.Row
            conn.execute("SELECT 1 FROM ptys LIMIT 1")
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        self.conn.close()

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        try:
            try:
                return self.conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if not _half_made(exc):
                    raise
                _wait_for_creator(self.path)
                return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise store_error(exc, self.path) from exc

    def quick_check(self) -> list[str]:
        """SQLite's ``PRAGMA quick_check``: ["ok"], or the problems it found (for ``doctor``)."""
        return [str(row[0]) for row in self._query("PRAGMA quick_check")]

    def workers(self, socket: str | None = None) -> list[dict[str, Any]]:
        """Every known pane with its status, as plain dicts with :data:`PUBLIC_FIELDS`; only
        the panes of one tmux socket (its label: the ``-L`` name or "default") when given, and
        rows that name none."""
        rows = self._query(
            "SELECT p.id, p.name, p.tmux_session, p.tmux_window, p.window_index, p.pane_id, "
            "p.cwd, p.cli_type, p.socket, p.server_pid, s.state, s.summary, s.actions_needed, "
            "s.confidence, s.reasons, s.rule_id, s.classifier, s.state_entered_ts, "
            "s.last_change_ts, s.signals, s.herd_eligible, s.herd_reason, h.goal, s.cycle, "
            "p.worktree, p.host, s.seen, p.lead "
            "FROM ptys p LEFT JOIN status s ON s.id = p.id LEFT JOIN herd h ON h.id = p.id "
            # Another host's panes belong to every local socket's watcher.
            "WHERE ? IS NULL OR p.socket = ? OR p.socket IS NULL OR p.host != 'local' "
            "ORDER BY p.tmux_session, p.window_index, p.pane_index", (socket, socket)
        )
        return [public_row(dict(row)) for row in rows]

    def history(self, worker_id: str, after_seq: int = 0, limit: int | None = None
                ) -> list[HistoryRow]:
        sql = "SELECT * FROM status_history WHERE id = ? AND seq > ? ORDER BY seq DESC"
        params: tuple[Any, ...] = (worker_id, after_seq)
        if limit is not None:
            sql += " LIMIT ?"
            params += (limit,)
        rows = self._query(sql, params)
        return [
            HistoryRow(seq=r["seq"], id=r["id"], ts=r["ts"], state=r["state"],
                       previous_state=r["previous_state"], summary=r["summary"] or "",
                       reasons=_codes(r["reasons"]))
            for r in reversed(rows)
        ]

    def pty(self, worker_id: str) -> dict[str, Any] | None:
        rows = self._query("SELECT * FROM ptys WHERE id = ?", (worker_id,))
        return dict(rows[0]) if rows else None

    def status(self, worker_id: str) -> dict[str, Any] | None:
        """The raw status row (with the screen hash the watcher judged), not the public view."""
        rows = self._query("SELECT * FROM status WHERE id = ?", (worker_id,))
        return dict(rows[0]) if rows else None

    def events(self, pane_id: str, server_pid: int | None, after_seq: int = 0
               ) -> list[dict[str, Any]]:
        """The events of one pane, oldest first (none when the store predates events)."""
        try:
            return rows_as_dicts(self.conn, "SELECT * FROM events WHERE pane_id = ? AND "
                           "(server_pid = ? OR ? IS NULL) AND seq > ? ORDER BY seq",
                           (pane_id, server_pid, server_pid, after_seq))
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise store_error(exc, self.path) from exc
        except sqlite3.Error as exc:
            raise store_error(exc, self.path) from exc

    def daemon(self) -> dict[str, Any] | None:
        rows = self._query("SELECT * FROM daemon WHERE name = 'watch'")
        return dict(rows[0]) if rows else None

    def hosts(self) -> dict[str, dict[str, Any]]:
        """How each configured host answered last, by name (none before the first watch)."""
        try:
            return {row["name"]: dict(row) for row in self._query("SELECT * FROM hosts")}
        except StoreError:
            return {}  # a store no watcher of several hosts has opened yet

    def herd(self) -> dict[str, dict[str, Any]]:
        """Every herd row (opt-in, rules, goal, counters) by pane id."""
        return {row["id"]: dict(row) for row in self._query("SELECT * FROM herd")}

    def jobs(self, worker_id: str | None = None, open_only: bool = False,
             limit: int | None = None) -> list[Job]:
        """Queued messages and cycles, oldest first (the newest ``limit`` when given)."""
        sql = "SELECT * FROM jobs WHERE 1"
        params: tuple[Any, ...] = ()
        if worker_id is not None:
            sql += " AND id = ?"
            params += (worker_id,)
        if open_only:
            sql += " AND done_ts IS NULL"
        sql += " ORDER BY seq DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params += (limit,)
        return jobs_from_rows(dict(row) for row in reversed(self._query(sql, params)))

    def transcript(self, worker_id: str) -> list[dict[str, Any]]:
        return [dict(row) for row in self._query(
            "SELECT * FROM transcript WHERE id = ? ORDER BY seq", (worker_id,))]

    def nudges(self, worker_id: str | None = None, after_seq: int = 0,
               limit: int | None = None) -> list[dict[str, Any]]:
        """The herding decisions log, oldest first (the newest ``limit`` when given)."""
        sql = "SELECT * FROM nudges WHERE seq > ?"
        params: tuple[Any, ...] = (after_seq,)
        if worker_id is not None:
            sql += " AND id = ?"
            params += (worker_id,)
        sql += " ORDER BY seq DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params += (limit,)
        return [dict(row) for row in reversed(self._query(sql, params))]

    def newest_session_event(self, pane_id: str, server_pid: int | None
                             ) -> dict[str, Any] | None:
        """The newest hook event of one pane that names the agent's session, or that says a new
        agent process forgot it (kind ``agent_start``, no session id). None: neither, or the
        store predates events."""
        try:
            rows = rows_as_dicts(
                self.conn, "SELECT * FROM events WHERE pane_id = ? AND server_pid IS ? AND "
                "((kind IN ('hook', 'restore') AND session_id != '') OR kind = 'agent_start') "
                "ORDER BY seq DESC LIMIT 1",
                (pane_id, server_pid))
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise store_error(exc, self.path) from exc
        except sqlite3.Error as exc:
            raise store_error(exc, self.path) from exc
        return rows[0] if rows else None

    def kept_herd(self, worker_id: str) -> dict[str, Any] | None:
        """The herd row a gone pane left (None: none, or a store from before migration m010)."""
        try:
            rows = self._query("SELECT * FROM herd_kept WHERE id = ?", (worker_id,))
        except StoreError:
            return None
        return dict(rows[0]) if rows else None

    def usage(self) -> list[dict[str, Any]]:
        """Tokens per pane, day and model (none: a store from before migration m011)."""
        try:
            return [dict(row) for row in self._query("SELECT * FROM usage")]
        except StoreError:
            return []

    def budget_resets(self) -> dict[str, dict[str, Any]]:
        """The spend each budget counts from, by scope (a pane id, or "day:DATE")."""
        try:
            rows = self._query("SELECT * FROM budget_resets")
        except StoreError:
            return {}
        return {row["scope"]: dict(row) for row in rows}


def _codes(text: str | None) -> list[str]:
    return text.split() if text else []


def public_row(row: Mapping[str, Any]) -> dict[str, Any]:
    out = {field: row.get(field) for field in PUBLIC_FIELDS}
    reasons = row.get("reasons")
    out["reasons"] = _codes(reasons) if isinstance(reasons, str) or reasons is None \
        else list(reasons)
    signals = row.get("signals")
    out["signals"] = _codes(signals) if isinstance(signals, str) or signals is None \
        else list(signals)
    out["state"] = out["state"] or "UNKNOWN"
    eligible = row.get("herd_eligible", row.get("eligible_for_herd"))
    out["eligible_for_herd"] = bool(eligible) if eligible is not None else False
    out["herd_reason"] = row.get("herd_reason") or ""
    if out["state"] == "EXITED":
        # The final row of a gone pane is written without the herd's step: no stale "eligible".
        out["eligible_for_herd"], out["herd_reason"] = False, "pane_exited"
    out["cycle"] = out["cycle"] or ""
    out["host"] = out["host"] or "local"
    out["summary"] = out["summary"] or ""
    out["actions_needed"] = out["actions_needed"] or ""
    return out
