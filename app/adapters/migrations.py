"""The schema of ``status.db``: its migrations, named and in the order they apply.

A migration that shipped is never edited (stores in the field recorded it by name as applied):
a change to the schema is a new function at the end, added to :func:`migrations`.
"""

from __future__ import annotations

# typing costs ~5 ms to import, and sqlite_utils ~150 ms: the status line imports the store's
# reader, which must not pull either in through here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from sqlite_utils import Database
    from sqlite_utils.db import Table
    from sqlite_utils.migrations import Migrations

MIGRATION_SET = "conductor_pty"


def migrations() -> Migrations:
    """Every migration, in order, as sqlite-utils applies them (each once per store)."""
    from sqlite_utils.migrations import Migrations

    applied_in_order = Migrations(MIGRATION_SET)
    for migration in ORDER:
        applied_in_order()(migration)
    return applied_in_order


def table(db: Database, name: str) -> Table:
    return db.table(name)


def m001_initial(db: Database) -> None:
    table(db, "ptys").create({
        "id": str, "name": str, "socket": str, "server_pid": int, "pane_id": str,
        "tmux_session": str, "tmux_window": str, "window_index": int, "pane_index": int,
        "cwd": str, "cli_type": str, "cli_forced": str, "command": str, "created_by": str,
        "first_seen_ts": float, "last_seen_ts": float,
    }, pk="id")
    table(db, "status").create({
        "id": str, "state": str, "summary": str, "actions_needed": str, "confidence": int,
        "reasons": str, "rule_id": str, "classifier": str, "last_snapshot_hash": str,
        "state_entered_ts": float, "last_change_ts": float,
        "stable_count": int,
    }, pk="id")
    table(db, "status_history").create({
        "seq": int, "id": str, "ts": float, "state": str, "previous_state": str,
        "summary": str, "actions_needed": str, "reasons": str, "rule_id": str,
        "classifier": str, "confidence": int,
    }, pk="seq")
    table(db, "status_history").create_index(["id", "ts"])
    table(db, "daemon").create({
        "name": str, "pid": int, "socket": str, "interval": float, "started_ts": float,
        "last_cycle_ts": float, "stopped_ts": float, "problem": str,
    }, pk="name")


def m002_events_and_signals(db: Database) -> None:
    # Hooks know their pane only as tmux does (TMUX_PANE plus the server pid from $TMUX), not
    # by our id: the watcher maps (server_pid, pane_id) to its panes.
    table(db, "events").create({
        "seq": int, "ts": float, "kind": str, "event": str, "name": str, "cli": str,
        "pane_id": str, "server_pid": int, "socket": str, "session_id": str, "detail": str,
    }, pk="seq")
    table(db, "events").create_index(["server_pid", "pane_id", "seq"])
    table(db, "status").add_column("signals", str)


def m003_herding(db: Database) -> None:
    # One row per pane someone opted in or gave a goal: the CLI writes the opt-in columns,
    # the watcher the counters, each only its own (upserts name their columns).
    table(db, "herd").create({
        "id": str, "enabled": int, "rules": str, "dry_run": int, "goal": str,
        "nudges": int, "last_nudge_ts": float, "turn": int, "updated_ts": float,
    }, pk="id")
    # Every herding decision that differed from the pane's previous one, and every nudge.
    table(db, "nudges").create({
        "seq": int, "id": str, "ts": float, "name": str, "eligible": int, "outcome": str,
        "reason": str, "rule_id": str, "text": str, "state": str, "detail": str,
    }, pk="seq")
    table(db, "nudges").create_index(["id", "seq"])
    table(db, "status").add_column("herd_eligible", int)
    table(db, "status").add_column("herd_reason", str)


def m004_jobs(db: Database) -> None:
    # Work for the daemon that outlives the command asking for it: queued messages
    # (kind "message") and post-report cycles (kind "cycle"). Written by `send --queue`,
    # `report`, `pause`/`resume` and the MCP server; advanced by the watcher.
    table(db, "jobs").create({
        "seq": int, "id": str, "kind": str, "state": str, "text": str, "wait_cmd": str,
        "origin": str, "created_ts": float, "state_ts": float, "expires_ts": float,
        "done_ts": float, "detail": str, "exit_code": int, "output": str,
        "decision": str, "directive": str, "timeline": str,
    }, pk="seq")
    table(db, "jobs").create_index(["id", "seq"])
    table(db, "jobs").create_index(["state"])
    # What the assessor reads: the agent's reports and our directives, bounded per pane.
    table(db, "transcript").create({
        "seq": int, "id": str, "ts": float, "kind": str, "text": str,
    }, pk="seq")
    table(db, "transcript").create_index(["id", "seq"])
    table(db, "status").add_column("cycle", str)


def m005_declared_check(db: Database) -> None:
    # The check the person declared for a pane (`goal ID TEXT --check CMD`): the one
    # command an agent's report may ask the watcher to run there.
    table(db, "herd").add_column("check_cmd", str)


def m006_worktree(db: Database) -> None:
    # The git worktree `create --worktree BRANCH` made for the pane (its path), so
    # `worktree remove ID` finds it and `status --json` shows it.
    table(db, "ptys").add_column("worktree", str)


def m007_hosts(db: Database) -> None:
    """Several hosts (issue 23): the machine each pane runs on, and how each configured host
    answered last (its panes are stale while it does not)."""
    db.table("ptys").add_column("host", str, not_null_default="local")
    db.table("hosts").create({
        "name": str, "socket": str, "reachable": int, "problem": str, "checked_ts": float,
        "reached_ts": float,
    }, pk="name")


def m008_host_heartbeat(db: Database) -> None:
    """Freshness per host (issue 28): whether the running watcher watches the host at all (a
    disabled one it does not), and since when a host is gone from the config. ``checked_ts`` is
    the host's heartbeat: each of its full ticks writes it."""
    db.table("hosts").add_column("watched", int)
    db.table("hosts").add_column("removed_ts", float)


def m009_session_identity(db: Database) -> None:
    """Session identity (issue 33): the agent's own conversation file a hook payload names,
    beside the session id the events table already keeps, so `restore` can resume each pane's
    own conversation."""
    db.table("events").add_column("transcript", str)


def m010_keep_herd_of_gone_panes(db: Database) -> None:
    """A pane that is gone takes its herd row (opt-in, rules, goal) with it; `restore` brings
    the pane back, so the row is kept aside as it is deleted, for `restore` to put back."""
    db.table("herd_kept").create({
        "id": str, "enabled": int, "rules": str, "dry_run": int, "goal": str, "check_cmd": str,
        "kept_ts": float,
    }, pk="id")
    db.execute(
        "CREATE TRIGGER herd_kept_on_delete BEFORE DELETE ON herd BEGIN "
        "INSERT OR REPLACE INTO herd_kept (id, enabled, rules, dry_run, goal, check_cmd, kept_ts) "
        "VALUES (old.id, old.enabled, old.rules, old.dry_run, old.goal, old.check_cmd, "
        "(julianday('now') - 2440587.5) * 86400.0); END")


def m011_seen(db: Database) -> None:
    """DONE (unseen), issue 34: whether the person has looked at the pane since its turn ended
    (app/run/seen.py); 1 for every row written before."""
    db.table("status").add_column("seen", int, not_null_default=1)


def m012_usage(db: Database) -> None:
    """Tokens and cost per pane (issue 33): what each pane's agent used, per day and model (the
    name and host kept beside, as the pane's own row goes when the pane does); where reading its
    usage file stopped; and the spend each budget counted from when a person reset it."""
    db.table("usage").create({
        "id": str, "day": str, "model": str, "name": str, "host": str, "input": int,
        "output": int, "cache_read": int, "cache_write": int, "updated_ts": float,
    }, pk=("id", "day", "model"))
    db.table("usage_files").create({
        "id": str, "path": str, "kind": str, "inode": int, "offset": int, "memo": str,
        "updated_ts": float,
    }, pk="id")
    db.table("budget_resets").create({
        "scope": str, "usd": float, "tokens": int, "ts": float,
    }, pk="scope")


def m013_lead(db: Database) -> None:
    """The pane whose agent started this one (its worker id), for `lead` in status: recorded
    by `create` when run from inside a pane of the same tmux server (design/states.md)."""
    table(db, "ptys").add_column("lead", str)


ORDER = (m001_initial, m002_events_and_signals, m003_herding, m004_jobs, m005_declared_check,
         m006_worktree, m007_hosts, m008_host_heartbeat, m009_session_identity,
         m010_keep_herd_of_gone_panes, m011_seen, m012_usage, m013_lead)
