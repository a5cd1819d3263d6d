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
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from app.adapters.store import Connection, StoreWriter, pane_and_state
from app.adapters.store_read import StoreReader
from app.adapters.tmux import Tmux, find_session, literal
from app.base.errors import ConductorError, TmuxServerNotRunning
from app.base.model import Job, JobKind, JobState, stamp
from app.observe.pane import WORKER_ID, panes_by_id
from app.observe.sessions import SESSION_ID, pane_session

# How each agent CLI starts: fresh, and back in one conversation ("{id}" is the session id).
# The one place these live: a CLI missing here comes back as a shell in its folder.
AGENT_COMMANDS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    "claude": (("claude",), ("claude", "--resume", "{id}")),
    "codex": (("codex",), ("codex", "resume", "{id}")),
    "gemini": (("gemini",), ("gemini", "--resume", "{id}")),
    "qwen": (("qwen",), ("qwen", "--resume", "{id}")),
    # opencode names its session to nobody (design/cost.md): the id is known only if a later
    # source gives it, and then this is how it goes back in.
    "opencode": (("opencode",), ("opencode", "--session", "{id}")),
    # No resume by id: comes back fresh, and the plan says so.
    "aider": (("aider",), None),
}

# A flag a CLI takes only in some releases, that keeps its agent the pane's own process: without
# --no-daemon, Codex 0.169 starts a shared background app-server that outlives the pane and
# resumes the thread through it (stuck at "Resuming session…" while that server starts or
# updates itself). Releases that predate the flag refuse it: the pane asks its own help first.
_PANE_OWNED_FLAG: Mapping[str, str] = {"codex": "--no-daemon"}

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
    host: str = "local"  # restored on that host's tmux (remote ones over its ssh connection)
    # What comes back with the pane: its goal and herd opt-in, the messages still queued for it
    # when it went, and whether a cycle was running (it comes back paused).
    goal: str = ""
    herd: bool = False
    messages: int = 0
    cycle_paused: bool = False

    def line(self) -> str:
        where = f"in {self.folder or 'its own folder'}" if self.how != SKIP else ""
        what = {RESUME: f"resume {self.cli} session {self.session_id}",
                FRESH: f"fresh {self.cli} ({self.why})", SHELL: f"shell ({self.why})",
                SKIP: f"skipped: {self.why}"}[self.how]
        carried = [*(["herd on"] if self.herd else []), *(["goal"] if self.goal else []),
                   *([f"{self.messages} queued"] if self.messages else []),
                   *(["cycle paused (needs you)"] if self.cycle_paused else [])]
        with_it = f"  with {', '.join(carried)}" if carried and self.how != SKIP else ""
        on = f"{self.host}:" if self.host != "local" else ""
        return f"{self.name} ({self.id})  {on}{self.tmux_session}:{self.tmux_window}  {what}  " \
               f"{where}{with_it}".rstrip()


def skipped(row: Mapping[str, Any], why: str) -> Planned:
    """A row that cannot come back (its host is not configured or does not answer)."""
    return Planned(row["id"], str(row.get("name") or row["id"]),
                   str(row.get("tmux_session") or ""), str(row.get("tmux_window") or ""),
                   "", str(row.get("cli_type") or ""), SKIP, why,
                   host=str(row.get("host") or "local"))


def plan(reader: StoreReader, workers: Iterable[Mapping[str, Any]], live: Collection[str],
         dead: Collection[str] = ()) -> list[Planned]:
    """The way back of each row not running on the tmux server now (``live``: the ids that are;
    ``dead``: those whose dead pane tmux kept, started again in place)."""
    return [_with_belongings(reader, _plan_one(reader, row, row["id"] in dead))
            for row in workers if row["id"] not in live]


# The detail the cycle step gives the jobs of a pane that went away (app/act/cycle/step.py): only
# those come back; one cancelled by hand stays cancelled.
PANE_GONE = "the pane is gone"
_REQUEUED = f"{PANE_GONE}; brought back by restore"


def _gone_with_pane(jobs: Iterable[Job]) -> tuple[list[Job], Job | None]:
    """The messages still queued when the pane went, and its latest cycle if it was running."""
    messages = [j for j in jobs if j.kind is JobKind.MESSAGE and j.state is JobState.DROPPED
                and j.detail == PANE_GONE]
    cycles = [j for j in jobs if j.kind is JobKind.CYCLE]
    latest = cycles[-1] if cycles else None
    running = latest if latest is not None and latest.state is JobState.DROPPED \
        and latest.detail == PANE_GONE else None
    return messages, running


def _with_belongings(reader: StoreReader, entry: Planned) -> Planned:
    if entry.how == SKIP:
        return entry
    herd = reader.kept_herd(entry.id) or reader.herd().get(entry.id) or {}
    messages, cycle = _gone_with_pane(reader.jobs(entry.id))
    return replace(entry, goal=str(herd.get("goal") or ""), herd=bool(herd.get("enabled")),
                   messages=len(messages), cycle_paused=cycle is not None)


def _plan_one(reader: StoreReader, row: Mapping[str, Any], in_place: bool) -> Planned:
    folder = str(row.get("worktree") or row.get("cwd") or "")
    cli = str(row.get("cli_type") or "")
    base = {"id": row["id"], "name": str(row.get("name") or row["id"]),
            "tmux_session": str(row.get("tmux_session") or "conductor"),
            "tmux_window": str(row.get("tmux_window") or row.get("name") or "restored"),
            "folder": folder, "cli": cli, "host": str(row.get("host") or "local")}
    host = str(row.get("host") or "local")
    if cli == "conductor":
        return Planned(**base, how=SKIP, why="conductor's own view")
    if not WORKER_ID.fullmatch(str(row["id"])):
        return Planned(**base, how=SKIP, why="not an id the watcher could keep")
    # A dead pane has no current folder (tmux reports none): it starts again where it began.
    # Another host's folders are that host's: tmux there starts in its home if one is gone.
    missing = not folder or (host == "local" and not Path(folder).is_dir())
    if missing and not (in_place and not folder):
        return Planned(**base, how=SKIP, why=f"its folder {folder or '(none)'} is gone")
    if cli not in AGENT_COMMANDS:
        why = "was a shell" if cli in ("shell", "") else f"was running {cli}; comes back as a shell"
        return Planned(**base, how=SHELL, why=why)
    fresh, resume = AGENT_COMMANDS[cli]
    found = pane_session(reader, row)
    if found is None:
        return Planned(**base, how=FRESH, why="its session id is unknown",
                       command=agent_command(cli, fresh))
    if found.ended:
        return Planned(**base, how=FRESH, why=f"its session {found.id} had ended",
                       command=agent_command(cli, fresh))
    if resume is None:
        return Planned(**base, how=FRESH, why=f"{cli} cannot be resumed by id",
                       command=agent_command(cli, fresh))
    if not found.resumable or not SESSION_ID.fullmatch(found.id):
        return Planned(**base, how=FRESH, why="its session id is not a plain id",
                       command=agent_command(cli, fresh))
    # The CLI would refuse to resume it and exit: Gemini CLI 0.61 deletes a resumed session's
    # files at its next start in the folder (design/cost.md), and a Claude Code session with no
    # message yet has none. Another host's files are looked at there, not here.
    if host == "local" and found.transcript and not Path(found.transcript).is_file():
        return Planned(**base, how=FRESH,
                       why=f"its conversation file {found.transcript} is gone",
                       command=agent_command(cli, fresh))
    return Planned(**base, how=RESUME, why="", session_id=found.id,
                   transcript=found.transcript, command=agent_command(cli, resume, found.id))


def agent_command(cli: str, template: tuple[str, ...], session_id: str = "") -> str:
    """The shell command a restored pane runs: ``template`` with the (already checked) id, and
    the CLI's pane-owned flag wherever its installed release lists it in its help."""
    before_id = [part for part in template if part != "{id}"]
    after = [session_id] if "{id}" in template else []
    plain = shlex.join([*before_id, *after])
    flag = _PANE_OWNED_FLAG.get(cli)
    if flag is None:
        return plain
    asks = shlex.join([*before_id, "--help"])
    flagged = shlex.join([*before_id, flag, *after])
    return f"if {asks} 2>/dev/null | grep -q -e {shlex.quote(flag)}; " \
           f"then exec {flagged}; else exec {plain}; fi"


def as_json_rows(planned: Iterable[Planned]) -> list[dict[str, Any]]:
    return [asdict(p) for p in planned]


def dead_ids(tmux: Tmux) -> set[str]:
    return set(_panes(tmux, dead=True))


def live_ids(tmux: Tmux) -> set[str]:
    """The ids of the panes running on the server now (none when no server runs); a dead pane
    tmux keeps (remain-on-exit) is not one: restore starts it again in place."""
    return set(_panes(tmux, dead=False))


def _panes(tmux: Tmux, dead: bool) -> dict[str, str]:
    """Pane ids by row id, of the dead panes or of the running ones."""
    try:
        listing = tmux.list_panes()
    except TmuxServerNotRunning:
        return {}
    found = panes_by_id(tmux.label, listing.server_pid, listing.panes)
    return {wid: pane.pane_id for wid, pane in found.items() if pane.dead is dead}


@dataclass(frozen=True)
class Restored:
    planned: Planned
    pane_id: str


def carry_out(tmux: Tmux, workers_dir: Path, planned: Iterable[Planned]
              ) -> tuple[list[Restored], list[Planned]]:
    """Recreate the planned panes (SKIP ones aside) and point their rows at them; what came back,
    and the entries that could not (as SKIP, with tmux's reason): one failure stops no other."""
    done: list[Restored] = []
    failed: list[Planned] = []
    sessions: dict[str, str] = {}
    dead = _panes(tmux, dead=True)
    for entry in planned:
        if entry.how == SKIP:
            continue
        try:
            if entry.id in dead:
                pane_id = _respawn(tmux, entry, dead[entry.id])
            else:
                pane_id = _recreate(tmux, entry, sessions)
        except ConductorError as exc:
            failed.append(replace(entry, how=SKIP, why=f"could not be recreated: {exc}"))
            continue
        done.append(Restored(entry, pane_id))
    if done:
        _record(tmux, workers_dir, done)
    return done, failed


def _recreate(tmux: Tmux, entry: Planned, sessions: dict[str, str]) -> str:
    command = [_PLACEHOLDER] if entry.command else []
    target = sessions.get(entry.tmux_session) or find_session(tmux, entry.tmux_session)
    where = ["new-window", "-d", "-t", f"{target}:"] if target else \
        ["new-session", "-d", "-s", literal(entry.tmux_session), "-x", "200", "-y", "50"]
    done = tmux.run(*where, "-P", "-F", "#{session_id} #{pane_id}",
                    "-n", literal(entry.tmux_window), "-c", literal(entry.folder), *command,
                    check=False)
    if done.returncode != 0:
        raise ConductorError(' '.join(done.stderr.split())[:200] or "tmux failed")
    session_id, _, pane_id = done.stdout.strip().partition(" ")
    sessions[entry.tmux_session] = session_id
    # Not expanded (no -F), and an id of ten hex digits: nothing in it for tmux to read.
    tmux.run("set-option", "-p", "-t", pane_id, "@conductor-id", entry.id)
    if entry.command:
        tmux.run("set-option", "-w", "-t", pane_id, "remain-on-exit", "on")
        tmux.run("respawn-pane", "-k", "-t", pane_id, "-c", literal(entry.folder),
                 entry.command)
    return pane_id


def _respawn(tmux: Tmux, entry: Planned, pane_id: str) -> str:
    """Start a dead pane (its program exited; tmux kept it) again in place."""
    command = entry.command
    if not command:
        # Without a command tmux would run the pane's first program again: a shell is asked for.
        shell = tmux.run("show-options", "-gv", "default-shell", check=False).stdout.strip()
        command = shlex.quote(shell or "/bin/sh")
    tmux.run("set-option", "-p", "-t", pane_id, "@conductor-id", entry.id)
    where = ["-c", literal(entry.folder)] if entry.folder else []
    tmux.run("respawn-pane", "-k", "-t", pane_id, *where, command)
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
                if _judged_since(conn, item, server_pid):
                    # The watcher saw the new pane first (over control mode it may be quicker
                    # than these rows): its row is the truth, and an UNKNOWN written over it
                    # would stay, since the watcher writes a row only when it changes.
                    _record_session(store, conn, item, tmux.label, server_pid, now)
                    continue
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
                _record_session(store, conn, item, tmux.label, server_pid, now)
        for item in done:
            _bring_back_belongings(store, item.planned.id, now)
    finally:
        store.close()


def _judged_since(conn: Connection, item: Restored, server_pid: int) -> bool:
    """Whether the watcher already wrote its own rows of the new pane: the pane's row names the
    new pane, and its state is no longer the EXITED it was planned from."""
    row = pane_and_state(conn, item.planned.id)
    return row is not None and row == (item.pane_id, server_pid, row[2]) and row[2] != "EXITED"


def _record_session(store: StoreWriter, conn: Connection, item: Restored, socket: str,
                    server_pid: int, now: float) -> None:
    entry = item.planned
    if entry.how == RESUME:
        store.events.add_event(conn, {
            "ts": now, "kind": "restore", "event": "other", "name": "restore",
            "cli": entry.cli, "pane_id": item.pane_id, "server_pid": server_pid,
            "socket": socket, "session_id": entry.session_id,
            "transcript": entry.transcript, "detail": "resumed by restore",
        })


def _bring_back_belongings(store: StoreWriter, wid: str, now: float) -> None:
    """The herd row the pane left, its messages queued again, its running cycle paused (one
    transaction of its own: the pane is back whether or not its belongings are)."""
    with store.transaction() as conn:
        kept = store.herd.kept(wid)
        if kept is not None:
            if wid not in store.herd.herd_rows():
                store.herd.upsert_herd(conn, {
                    "id": wid, "enabled": kept["enabled"], "rules": kept["rules"],
                    "dry_run": kept["dry_run"], "goal": kept["goal"],
                    "check_cmd": kept["check_cmd"], "updated_ts": now})
            store.herd.drop_kept(conn, wid)
        messages, cycle = _gone_with_pane(store.jobs.of(wid))
        for job in messages:
            store.jobs.add_job(conn, replace(job, seq=0, state=JobState.QUEUED, state_ts=now,
                                        done_ts=None, detail="queued again by restore",
                                        timeline=stamp(job.timeline, JobState.QUEUED, now)))
            store.jobs.update_job(conn, job.seq, {"detail": _REQUEUED})
        if cycle is not None:
            # Whatever it was doing is stale now: it waits for the person (`resume`).
            store.jobs.add_job(conn, replace(cycle, seq=0, state=JobState.PAUSED, state_ts=now,
                                        done_ts=None, decision="paused",
                                        detail="the pane was restored; resume it when ready",
                                        timeline=stamp(cycle.timeline, JobState.PAUSED, now)))
            store.jobs.update_job(conn, cycle.seq, {"detail": _REQUEUED})
            store.jobs.set_cycle(conn, wid, JobState.PAUSED.shown)
