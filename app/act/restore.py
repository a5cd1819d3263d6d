"""``restore``: bring back the panes a dead tmux server (reboot, crash, kill-server) or an exit
took, each agent in its own conversation.

The plan is made from the store alone: each row's session, window, folder (its worktree when it
has one) and CLI, and the session its agent's hooks named last (app.observe.sessions). An agent
with a known, live session is resumed into exactly that one (never "the newest of the folder",
which every pane of a repository shares); one whose id is unknown or whose session the person
ended starts fresh, and the plan says so. Shells come back as shells in their folder.

A recreated pane carries its row's id in the pane option ``@conductor-id``; the watcher honours
it (app.observe.pane.panes_by_id), so the row, its history and its herd log continue.
Names and folders reach tmux through :func:`literal`; a session id reaches a command line only
after it fullmatched :data:`app.observe.sessions.SESSION_ID`, and as one shell-quoted word.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.adapters.store import StoreReader, StoreWriter
from app.adapters.tmux import Tmux, literal
from app.base.errors import ConductorError, TmuxServerNotRunning
from app.observe.pane import WORKER_ID, panes_by_id
from app.observe.sessions import SESSION_ID, pane_session

# How each agent CLI starts: fresh, and back in one conversation ("{id}" is the session id).
# The one place these live: a CLI missing here comes back as a shell in its folder.
AGENT_COMMANDS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    "claude": (("claude",), ("claude", "--resume", "{id}")),
    "codex": (("codex",), ("codex", "resume", "{id}")),
    "gemini": (("gemini",), ("gemini", "--resume", "{id}")),
    # No resume by id we could verify: these come back fresh, and the plan says so.
    "qwen": (("qwen",), None),
    "opencode": (("opencode",), None),
    "aider": (("aider",), None),
}

RESUME, FRESH, SHELL, SKIP = "resume", "fresh", "shell", "skip"
# What a new agent window runs until respawn-pane starts the agent, as Tmux.new_window does:
# an agent that exits at once leaves a dead pane that shows why.
_PLACEHOLDER = "sleep 2147483647"


@dataclass(frozen=True)
class Planned:
    """One row's way back. ``how`` is RESUME, FRESH, SHELL or SKIP; ``why`` says it in words."""

    id: str
    name: str
    tmux_session: str
    tmux_window: str
    folder: str
    cli: str
    how: str
    why: str
    session_id: str = ""
    transcript: str = ""
    command: str = ""

    def line(self) -> str:
        where = f"in {self.folder}" if self.how != SKIP else ""
        what = {RESUME: f"resume {self.cli} session {self.session_id}",
                FRESH: f"fresh {self.cli} ({self.why})", SHELL: f"shell ({self.why})",
                SKIP: f"skipped: {self.why}"}[self.how]
        return f"{self.name} ({self.id})  {self.tmux_session}:{self.tmux_window}  {what}  " \
               f"{where}".rstrip()


def plan(reader: StoreReader, workers: Iterable[Mapping[str, Any]], live: Collection[str]
         ) -> list[Planned]:
    """The way back of each row not on the tmux server now (``live``: the ids that are)."""
    return [_plan_one(reader, row) for row in workers if row["id"] not in live]


def _plan_one(reader: StoreReader, row: Mapping[str, Any]) -> Planned:
    folder = str(row.get("worktree") or row.get("cwd") or "")
    cli = str(row.get("cli_type") or "")
    base = {"id": row["id"], "name": str(row.get("name") or row["id"]),
            "tmux_session": str(row.get("tmux_session") or "conductor"),
            "tmux_window": str(row.get("tmux_window") or row.get("name") or "restored"),
            "folder": folder, "cli": cli}
    if row.get("host") not in (None, "local"):
        return Planned(**base, how=SKIP, why=f"on host {row['host']} (restore runs locally only)")
    if cli == "conductor":
        return Planned(**base, how=SKIP, why="conductor's own view")
    if not WORKER_ID.fullmatch(str(row["id"])):
        return Planned(**base, how=SKIP, why="not an id the watcher could keep")
    if not folder or not Path(folder).is_dir():
        return Planned(**base, how=SKIP, why=f"its folder {folder or '(none)'} is gone")
    if cli not in AGENT_COMMANDS:
        why = "was a shell" if cli in ("shell", "") else f"was running {cli}; comes back as a shell"
        return Planned(**base, how=SHELL, why=why)
    fresh, resume = AGENT_COMMANDS[cli]
    found = pane_session(reader, row)
    if found is None:
        return Planned(**base, how=FRESH, why="its session id is unknown",
                       command=shlex.join(fresh))
    if found.ended:
        return Planned(**base, how=FRESH, why=f"its session {found.id} had ended",
                       command=shlex.join(fresh))
    if resume is None:
        return Planned(**base, how=FRESH, why=f"{cli} cannot be resumed by id",
                       command=shlex.join(fresh))
    if not found.resumable or not SESSION_ID.fullmatch(found.id):
        return Planned(**base, how=FRESH, why="its session id is not a plain id",
                       command=shlex.join(fresh))
    argv = [found.id if part == "{id}" else part for part in resume]
    return Planned(**base, how=RESUME, why="", session_id=found.id,
                   transcript=found.transcript, command=shlex.join(argv))


def as_json_rows(planned: Iterable[Planned]) -> list[dict[str, Any]]:
    return [asdict(p) for p in planned]


def live_ids(tmux: Tmux) -> set[str]:
    """The ids of the panes on the server now (none when no server runs)."""
    try:
        listing = tmux.list_panes()
    except TmuxServerNotRunning:
        return set()
    return set(panes_by_id(tmux.label, listing.server_pid, listing.panes))


@dataclass(frozen=True)
class Restored:
    planned: Planned
    pane_id: str


def carry_out(tmux: Tmux, workers_dir: Path, planned: Iterable[Planned]) -> list[Restored]:
    """Recreate the planned panes (SKIP ones aside) and point their rows at them."""
    done: list[Restored] = []
    sessions: dict[str, str] = {}
    for entry in planned:
        if entry.how == SKIP:
            continue
        pane_id = _recreate(tmux, entry, sessions)
        done.append(Restored(entry, pane_id))
    if done:
        _record(tmux, workers_dir, done)
    return done


def _recreate(tmux: Tmux, entry: Planned, sessions: dict[str, str]) -> str:
    command = [_PLACEHOLDER] if entry.command else []
    target = sessions.get(entry.tmux_session) or tmux.find_session(entry.tmux_session)
    where = ["new-window", "-d", "-t", f"{target}:"] if target else \
        ["new-session", "-d", "-s", literal(entry.tmux_session), "-x", "200", "-y", "50"]
    done = tmux.run(*where, "-P", "-F", "#{session_id} #{pane_id}",
                    "-n", literal(entry.tmux_window), "-c", literal(entry.folder), *command,
                    check=False)
    if done.returncode != 0:
        raise ConductorError(f"could not recreate {entry.name}: "
                             f"{' '.join(done.stderr.split())[:200] or 'tmux failed'}")
    session_id, _, pane_id = done.stdout.strip().partition(" ")
    sessions[entry.tmux_session] = session_id
    # Not expanded (no -F), and an id of ten hex digits: nothing in it for tmux to read.
    tmux.run("set-option", "-p", "-t", pane_id, "@conductor-id", entry.id)
    if entry.command:
        tmux.run("set-option", "-w", "-t", pane_id, "remain-on-exit", "on")
        tmux.run("respawn-pane", "-k", "-t", pane_id, "-c", literal(entry.folder),
                 entry.command)
    return pane_id


def _record(tmux: Tmux, workers_dir: Path, done: list[Restored]) -> None:
    """The rows follow their new panes; a resumed one's session is known on its new pane before
    its agent's first hook (kind "restore": the watcher's state rules read no such event)."""
    now = time.time()
    server_pid = tmux.list_panes().server_pid
    store = StoreWriter(workers_dir)
    try:
        with store.transaction() as conn:
            for item in done:
                entry = item.planned
                store.upsert_pty(conn, {
                    "id": entry.id, "socket": tmux.label, "server_pid": server_pid,
                    "pane_id": item.pane_id, "tmux_session": entry.tmux_session,
                    "tmux_window": entry.tmux_window, "cwd": entry.folder, "last_seen_ts": now,
                })
                summary = f"restored: {entry.how}" + (f" ({entry.why})" if entry.why else "")
                store.upsert_status(conn, [{
                    "id": entry.id, "state": "UNKNOWN", "summary": summary, "actions_needed": "",
                    "reasons": ["restored"], "rule_id": "restore", "classifier": "restore",
                    "confidence": 0, "state_entered_ts": now, "last_change_ts": now,
                    "last_snapshot_hash": None, "stable_count": 0, "signals": [],
                }])
                store.add_history(conn, [{
                    "id": entry.id, "ts": now, "state": "UNKNOWN", "previous_state": "EXITED",
                    "summary": summary, "actions_needed": "", "reasons": ["restored"],
                    "rule_id": "restore", "classifier": "restore", "confidence": 0,
                }])
                if entry.how == RESUME:
                    store.add_event(conn, {
                        "ts": now, "kind": "restore", "event": "other", "name": "restore",
                        "cli": entry.cli, "pane_id": item.pane_id, "server_pid": server_pid,
                        "socket": tmux.label, "session_id": entry.session_id,
                        "transcript": entry.transcript, "detail": "resumed by restore",
                    })
    finally:
        store.close()
