"""Jobs for the daemon, and the commands that write them: ``send --queue``, ``report``,
``pause``/``resume``, ``queue drop``, plus ``dispatch`` (which needs no daemon).

A job is one row of the store's ``jobs`` table. A queued message (kind ``message``) waits in
state ``queued`` until the watcher delivers it (``delivered``), it expires (``expired``) or a
person drops it (``dropped``). A cycle (kind ``cycle``) starts ``queued`` and moves through
WAITING, IDLE_SPIN and DECIDING to STANDBY (a directive was typed) or PAUSED (nothing typed, a
person told); a newer report supersedes an unfinished cycle of the same pane. A job is finished
once ``done_ts`` is set; the daemon reads unfinished jobs on every tick, so a job written while
no daemon runs is picked up when one starts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.base.errors import ConductorError
from app.base.redact import redact

if TYPE_CHECKING:
    from app.act.handoff import Target
    from app.adapters.store import StoreWriter
    from app.adapters.tmux import Tmux
    from app.base.settings import WatchSettings
    from app.observe.packs import Pack

MESSAGE, CYCLE = "message", "cycle"
QUEUED = "queued"
WAITING, IDLE_SPIN, DECIDING = "WAITING", "IDLE_SPIN", "DECIDING"
STANDBY, PAUSED = "STANDBY", "PAUSED"
DELIVERED, EXPIRED, DROPPED = "delivered", "expired", "dropped"
SUPERSEDED, RESUMED = "superseded", "resumed"
# Cycle states shown in `status`; a resumed, superseded or dropped cycle shows nothing.
SHOWN = {QUEUED: "QUEUED", WAITING: WAITING, IDLE_SPIN: IDLE_SPIN, DECIDING: DECIDING,
         STANDBY: STANDBY, PAUSED: PAUSED}

MAX_TEXT_CHARS = 20_000  # a queued message; a report is cut shorter (it goes to the LLM)
MAX_REPORT_CHARS = 2_000

DEFAULT_WAIT_S = 15.0
DEFAULT_IDLE_S = 3.0
DEFAULT_SPIN_MAX_S = 45.0
DEFAULT_CMD_TIMEOUT_S = 600.0
DEFAULT_OUTPUT_CHARS = 4_000
DEFAULT_TRANSCRIPT_ENTRIES = 20
DEFAULT_QUEUE_TTL_S = 3600.0


@dataclass(frozen=True)
class CycleSettings:
    """The config file's ``[cycle]`` and ``[queue]`` tables."""

    wait_s: float = DEFAULT_WAIT_S  # sleep before assessing when a report names no command
    idle_s: float = DEFAULT_IDLE_S  # a screen unchanged this long counts as settled
    spin_max_s: float = DEFAULT_SPIN_MAX_S  # assess after this long even if never settled
    cmd_timeout_s: float = DEFAULT_CMD_TIMEOUT_S
    output_chars: int = DEFAULT_OUTPUT_CHARS  # the tail of the command's output kept
    transcript_entries: int = DEFAULT_TRANSCRIPT_ENTRIES
    queue_ttl_s: float = DEFAULT_QUEUE_TTL_S


def stamp(timeline: str | None, state: str, ts: float) -> str:
    """The job's timeline with one more ``STATE@epoch`` entry (space separated, oldest first)."""
    entry = f"{state}@{ts:.3f}"
    return f"{timeline} {entry}" if timeline else entry


def timeline(row: Mapping[str, Any]) -> list[tuple[str, float]]:
    out = []
    for entry in str(row.get("timeline") or "").split():
        state, _, ts = entry.partition("@")
        out.append((state, float(ts)))
    return out


def _writer(workers_dir: Path) -> StoreWriter:
    from app.adapters.store import StoreWriter

    return StoreWriter(workers_dir)


def queue_message(workers_dir: Path, worker_id: str, text: str, ttl_s: float,
                  origin: str = "send") -> int:
    """Store a message for the daemon to type when the pane is READY; its job number."""
    if not text.strip():
        raise ConductorError("nothing to queue: the text is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise ConductorError(f"text too long to queue ({len(text)} characters, at most "
                             f"{MAX_TEXT_CHARS})")
    now = time.time()
    store = _writer(workers_dir)
    try:
        with store.transaction() as conn:
            return store.add_job(conn, {
                "id": worker_id, "kind": MESSAGE, "state": QUEUED, "text": text,
                "origin": origin, "created_ts": now, "state_ts": now,
                "expires_ts": now + ttl_s, "timeline": stamp(None, QUEUED, now),
            })
    finally:
        store.close()


def report(workers_dir: Path, worker_id: str, text: str, wait_cmd: str | None,
           settings: CycleSettings, origin: str = "report") -> int:
    """Record the agent's report in the transcript and queue a cycle; its job number.

    An unfinished cycle of the same pane is superseded: the newest report is the one to check.
    """
    text = " ".join(redact(text).split())
    if not text:
        raise ConductorError("the report is empty: say what was done")
    text = text[:MAX_REPORT_CHARS]
    command = (wait_cmd or "").strip() or None
    now = time.time()
    store = _writer(workers_dir)
    try:
        with store.transaction() as conn:
            for job in store.open_jobs():
                if job["id"] == worker_id and job["kind"] == CYCLE:
                    store.update_job(conn, job["seq"], {
                        "state": SUPERSEDED, "done_ts": now, "detail": "a newer report came",
                        "timeline": stamp(job["timeline"], SUPERSEDED, now)})
            store.add_transcript(conn, {"id": worker_id, "ts": now, "kind": "report",
                                        "text": text}, keep=settings.transcript_entries)
            return store.add_job(conn, {
                "id": worker_id, "kind": CYCLE, "state": QUEUED, "text": text,
                "wait_cmd": command, "origin": origin, "created_ts": now, "state_ts": now,
                "timeline": stamp(None, QUEUED, now),
            })
    finally:
        store.close()


def pause(workers_dir: Path, worker_id: str) -> str:
    """Stop the pane's cycle where it is: nothing is typed into it (cycle or queue) until
    ``resume`` or a new report."""
    now = time.time()
    store = _writer(workers_dir)
    try:
        latest = store.latest_cycles().get(worker_id)
        with store.transaction() as conn:
            if latest is not None and latest["state"] == PAUSED:
                return "already paused"
            fields = {"state": PAUSED, "state_ts": now, "done_ts": now,
                      "detail": "paused by hand", "decision": "paused"}
            if latest is not None and latest["done_ts"] is None:
                store.update_job(conn, latest["seq"], {
                    **fields, "timeline": stamp(latest["timeline"], PAUSED, now)})
                return f"paused its cycle (was {latest['state']})"
            store.add_job(conn, {"id": worker_id, "kind": CYCLE, "origin": "pause",
                                 "created_ts": now, **fields,
                                 "timeline": stamp(None, PAUSED, now)})
            return "paused"
    finally:
        store.close()


def resume(workers_dir: Path, worker_id: str) -> str:
    """End a pause (by hand or the assessor's): queued messages flow again; the next report
    starts a new cycle."""
    now = time.time()
    store = _writer(workers_dir)
    try:
        latest = store.latest_cycles().get(worker_id)
        if latest is None or latest["state"] != PAUSED:
            return "not paused"
        with store.transaction() as conn:
            store.update_job(conn, latest["seq"], {
                "state": RESUMED, "state_ts": now,
                "timeline": stamp(latest["timeline"], RESUMED, now)})
        return "resumed"
    finally:
        store.close()


def drop(workers_dir: Path, seq: int) -> dict[str, Any]:
    """Cancel an unfinished job; the job as it was."""
    now = time.time()
    store = _writer(workers_dir)
    try:
        rows = [j for j in store.open_jobs() if j["seq"] == seq]
        if not rows:
            raise ConductorError(f"no unfinished job {seq}; see `conductor pty queue`")
        with store.transaction() as conn:
            store.update_job(conn, seq, {"state": DROPPED, "state_ts": now, "done_ts": now,
                                         "detail": "dropped by hand",
                                         "timeline": stamp(rows[0]["timeline"], DROPPED, now)})
        return rows[0]
    finally:
        store.close()


def dispatch(tmux: Tmux, target: Target, text: str, packs: Mapping[str, Pack],
             settings: WatchSettings, workers_dir: Path, *, clear: bool,
             timeout_s: float | None, poll_s: float) -> str:
    """Wait for READY, optionally clear the conversation and wait for READY again, then send.

    The second wait reads the clear's own send event, so it cannot take the idle screen that
    was up before the clear for the clear's turn end; and since TEXT is sent before we return,
    a ``wait`` after ``dispatch`` starts from TEXT's send. Returns what was done, for one line.
    """
    from app.act import handoff
    from app.base.model import State

    started = time.monotonic()

    def ready(step: str) -> None:
        remaining = None if timeout_s is None else max(0.0, timeout_s - (time.monotonic()
                                                                           - started))
        watch = handoff.PaneWatch(tmux, target, packs, settings, workers_dir)
        result = handoff.wait(watch, {State.READY}, remaining, poll_s)
        if not result.reached:
            a = result.assessment
            raise ConductorError(f"not sent: {target.label} still {a.state.value} {step} after "
                                 f"{result.waited_s:.0f}s{': ' + a.summary if a.summary else ''}")

    ready("before dispatch")
    done = "sent"
    if clear:
        watch = handoff.PaneWatch(tmux, target, packs, settings, workers_dir)
        watch.poll()
        command = watch.pack.clear_command if watch.pack is not None else ""
        if not command:
            cli = watch.pack.name if watch.pack is not None else "this pane"
            raise ConductorError(f"not sent: {cli} has no clear command (pack key "
                                 "clear_command); dispatch without --clear")
        handoff.send(tmux, target, command, packs, settings, workers_dir, origin="dispatch")
        ready(f"after {command}")
        done = f"cleared with {command}, then sent"
    handoff.send(tmux, target, text, packs, settings, workers_dir, origin="dispatch")
    return done
