"""Jobs for the daemon, and the commands that write them: ``send --queue``, ``report``,
``pause``/``resume``, ``queue drop``, plus ``dispatch`` (which needs no daemon).

A job is one row of the store's ``jobs`` table, read as an ``app.base.model.Job``; the states of
both kinds are one ``JobState`` vocabulary (the names below are its members). A queued message
(kind ``message``) waits in state ``queued`` until the watcher delivers it (``delivered``), it
expires (``expired``) or a person drops it (``dropped``). A cycle (kind ``cycle``) starts
``queued`` and moves through WAITING, IDLE_SPIN and DECIDING to STANDBY (a directive was typed)
or PAUSED (nothing typed, a person told); a newer report supersedes an unfinished cycle of the
same pane. A job is finished
once ``done_ts`` is set; the daemon reads unfinished jobs on every tick, so a job written while
no daemon runs is picked up when one starts. A job the watcher could not work (a check that
would not start, a step that failed) ends ``failed`` with the reason, so the queue moves on.

Checks are the person's: a report's check command runs as given when the person reports (the
CLI), but an agent's (MCP) only when the person declared it for the pane (``goal --check``) or
listed it in ``[cycle] allowed_checks``; otherwise the pane's declared check runs, or none.
Prose (directives, queued messages) is typed only into an agent CLI's own screen
(:func:`prose_refusal`), never into a shell or a plain program.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.base import inputs
from app.base.errors import ConductorError
from app.base.model import Job, JobKind, JobState, timeline_steps
from app.base.model import stamp as stamp
from app.base.prices import Budget
from app.base.redact import redact
from app.base.settings_table import default

if TYPE_CHECKING:
    from app.adapters.store import StoreWriter
    from app.adapters.tmux import Tmux
    from app.base.settings import WatchSettings
    from app.observe.one_pane import Target
    from app.observe.packs import Pack
    from app.observe.pane import Tracked

# The job vocabulary (app.base.model), by the names this module has always given it.
MESSAGE, CYCLE = JobKind.MESSAGE, JobKind.CYCLE
QUEUED = JobState.QUEUED
WAITING, IDLE_SPIN, DECIDING = JobState.WAITING, JobState.IDLE_SPIN, JobState.DECIDING
STANDBY, PAUSED = JobState.STANDBY, JobState.PAUSED
DELIVERED, EXPIRED, DROPPED = JobState.DELIVERED, JobState.EXPIRED, JobState.DROPPED
SUPERSEDED, RESUMED = JobState.SUPERSEDED, JobState.RESUMED
FAILED = JobState.FAILED


def timeline(row: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The timeline of a job's row as read by hand (a :class:`Job` has ``steps()``)."""
    return timeline_steps(row.get("timeline"))


MAX_TEXT_CHARS = inputs.MAX_QUEUED_CHARS
MAX_REPORT_CHARS = inputs.MAX_REPORT_CHARS

DEFAULT_WAIT_S = default("cycle.wait", float)
DEFAULT_IDLE_S = default("cycle.idle", float)
DEFAULT_SPIN_MAX_S = default("cycle.spin_max", float)
DEFAULT_CMD_TIMEOUT_S = default("cycle.command_timeout", float)
DEFAULT_OUTPUT_CHARS = default("cycle.output_chars", int)
DEFAULT_TRANSCRIPT_ENTRIES = default("cycle.transcript_entries", int)
DEFAULT_QUEUE_TTL_S = default("queue.ttl", float)


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
    # Check commands an agent may ask for in any pane (exact text), besides each pane's own.
    allowed_checks: tuple[str, ...] = ()
    budget: Budget = field(default_factory=Budget)  # [budget]: past it, no directive is typed


def _writer(workers_dir: Path) -> StoreWriter:
    from app.adapters.store import StoreWriter

    return StoreWriter(workers_dir)


def queue_message(workers_dir: Path, worker_id: str, text: str, ttl_s: float,
                  origin: str = "send") -> int:
    """Store a message for the daemon to type when the pane is READY; its job number.

    Refused like ``send`` refuses (control characters), and longer than
    :data:`MAX_TEXT_CHARS`: what waits in the queue must be typeable when its turn comes.
    """
    from app.base.inputs import check_text

    if not text.strip():
        raise ConductorError("nothing to queue: the text is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise inputs.BadInput(f"text too long to queue ({len(text)} characters, at most "
                              f"{MAX_TEXT_CHARS})")
    check_text(text)
    now = time.time()
    store = _writer(workers_dir)
    try:
        with store.transaction() as conn:
            return store.jobs.add_job(conn, Job(
                seq=0, pane=worker_id, kind=MESSAGE, state=QUEUED, text=text, origin=origin,
                created_ts=now, state_ts=now, expires_ts=now + ttl_s,
                timeline=stamp(None, QUEUED, now)))
    finally:
        store.close()


@dataclass(frozen=True)
class Reported:
    """A recorded report: its cycle job, the check the cycle runs (None: it waits
    ``cycle.wait``), and the agent's own command when it was not taken."""

    seq: int
    check: str | None
    declined: str | None = None


def report(workers_dir: Path, worker_id: str, text: str, wait_cmd: str | None,
           settings: CycleSettings, origin: str = "report") -> int:
    """:func:`person_report`'s job number."""
    return person_report(workers_dir, worker_id, text, wait_cmd, settings, origin).seq


def person_report(workers_dir: Path, worker_id: str, text: str, wait_cmd: str | None,
                  settings: CycleSettings, origin: str = "report") -> Reported:
    """The person's report (``conductor pty report``): ``wait_cmd`` runs as given; without one,
    the pane's declared check."""
    return _report(workers_dir, worker_id, text, wait_cmd, settings, origin, trusted=True)


def agent_report(workers_dir: Path, worker_id: str, text: str, wait_cmd: str | None,
                 settings: CycleSettings, origin: str = "mcp") -> Reported:
    """An agent's report (the MCP tool): ``wait_cmd`` runs only when it is the check the person
    declared for the pane or one of ``[cycle] allowed_checks`` (exactly); otherwise the report
    is recorded all the same and the cycle runs the declared check, or just waits."""
    return _report(workers_dir, worker_id, text, wait_cmd, settings, origin, trusted=False)


def _report(workers_dir: Path, worker_id: str, text: str, wait_cmd: str | None,
            settings: CycleSettings, origin: str, *, trusted: bool) -> Reported:
    """Record the report in the transcript and queue a cycle.

    An unfinished cycle of the same pane is superseded: the newest report is the one to check.
    """
    text = " ".join(redact(inputs.report_text(text)).split())
    if not text:
        raise inputs.BadInput("the report is empty: say what was done")
    proposed = inputs.check_command(wait_cmd, "wait_cmd")
    now = time.time()
    store = _writer(workers_dir)
    try:
        with store.transaction() as conn:
            declared = (store.herd.herd_rows().get(worker_id) or {}).get("check_cmd") or None
            command, declined = proposed or declared, None
            if proposed and not trusted and proposed != declared and \
                    proposed not in settings.allowed_checks:
                command, declined = declared, proposed
            for job in store.jobs.open_jobs():
                if job.pane == worker_id and job.kind is CYCLE:
                    store.jobs.update_job(conn, job.seq, {
                        "state": SUPERSEDED, "done_ts": now, "detail": "a newer report came",
                        "timeline": stamp(job.timeline, SUPERSEDED, now)})
            store.jobs.add_transcript(conn, {"id": worker_id, "ts": now, "kind": "report",
                                             "text": text}, keep=settings.transcript_entries)
            detail = None if declined is None else \
                f"the agent's check was not run (not declared for this pane): {redact(declined)}"
            seq = store.jobs.add_job(conn, Job(
                seq=0, pane=worker_id, kind=CYCLE, state=QUEUED, text=text, wait_cmd=command,
                origin=origin, created_ts=now, state_ts=now, detail=detail,
                timeline=stamp(None, QUEUED, now)))
        return Reported(seq, command, declined)
    finally:
        store.close()


def set_goal(workers_dir: Path, worker_id: str, goal: str | None = None,
             check: str | None = None) -> dict[str, str | None]:
    """Set a pane's goal and, the person only, its declared check (``None`` leaves either as
    it is, ``""`` clears it); the pane's goal and check afterwards."""
    fields: dict[str, Any] = {"id": worker_id, "updated_ts": time.time()}
    if goal is not None:
        fields["goal"] = inputs.goal(goal) or None
    if check is not None:
        fields["check_cmd"] = inputs.check_command(check, "the check")
    store = _writer(workers_dir)
    try:
        with store.transaction() as conn:
            store.herd.upsert_herd(conn, fields)
        row = store.herd.herd_rows().get(worker_id) or {}
        return {"goal": row.get("goal"), "check": row.get("check_cmd")}
    finally:
        store.close()


class NotAnAgent(ConductorError):
    """Prose (a queued message) for a pane whose screen is not an agent CLI's."""


def prose_refusal(packs: Mapping[str, Pack], tracked: Tracked) -> str:
    """Why prose (a directive, a queued message) may not be typed into the pane now, or ""
    when its screen is an agent CLI's own: a shell would run it as a command, and a plain
    program (an editor, a REPL, ``less``) would take it as keys."""
    from app.observe.pack_detection import judge_for
    from app.observe.packs import GENERIC_PACK

    pane = tracked.pane
    if pane.dead:
        return f"{tracked.name} has exited"
    if tracked.pack is None:
        return f"{tracked.name} has not been classified yet"
    judge, program = judge_for(packs, tracked.pack, pane.current_command)
    if not judge.detect.weak and judge.name != GENERIC_PACK:
        return ""
    if program:
        shown = f"a program ({program})"
    elif judge.detect.weak:
        shown = f"a shell ({pane.current_command or judge.name})"
    else:
        shown = f"a program no agent pack knows ({pane.current_command or 'unknown'})"
    return f"{tracked.name} shows {shown}, not an agent CLI: prose is typed only into agent CLIs"


def pause(workers_dir: Path, worker_id: str) -> str:
    """Stop the pane's cycle where it is: nothing is typed into it (cycle or queue) until
    ``resume`` or a new report."""
    now = time.time()
    store = _writer(workers_dir)
    try:
        latest = store.jobs.latest_cycles().get(worker_id)
        with store.transaction() as conn:
            if latest is not None and latest.state is PAUSED:
                return "already paused"
            fields = {"state": PAUSED, "state_ts": now, "done_ts": now,
                      "detail": "paused by hand", "decision": "paused"}
            if latest is not None and not latest.finished:
                store.jobs.update_job(conn, latest.seq, {
                    **fields, "timeline": stamp(latest.timeline, PAUSED, now)})
                return f"paused its cycle (was {latest.state})"
            store.jobs.add_job(conn, Job(seq=0, pane=worker_id, kind=CYCLE, origin="pause",
                                         created_ts=now, state=PAUSED, state_ts=now, done_ts=now,
                                         detail="paused by hand", decision="paused",
                                         timeline=stamp(None, PAUSED, now)))
            return "paused"
    finally:
        store.close()


def resume(workers_dir: Path, worker_id: str) -> str:
    """End a pause (by hand or the assessor's): queued messages flow again; the next report
    starts a new cycle."""
    now = time.time()
    store = _writer(workers_dir)
    try:
        latest = store.jobs.latest_cycles().get(worker_id)
        if latest is None or latest.state is not PAUSED:
            return "not paused"
        with store.transaction() as conn:
            store.jobs.update_job(conn, latest.seq, {
                "state": RESUMED, "state_ts": now,
                "timeline": stamp(latest.timeline, RESUMED, now)})
        return "resumed"
    finally:
        store.close()


def drop(workers_dir: Path, seq: int) -> Job:
    """Cancel an unfinished job; the job as it was."""
    now = time.time()
    store = _writer(workers_dir)
    try:
        rows = [j for j in store.jobs.open_jobs() if j.seq == seq]
        if not rows:
            raise ConductorError(f"no unfinished job {seq}; see `conductor pty queue`")
        with store.transaction() as conn:
            store.jobs.update_job(conn, seq, {"state": DROPPED, "state_ts": now, "done_ts": now,
                                              "detail": "dropped by hand",
                                              "timeline": stamp(rows[0].timeline, DROPPED, now)})
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
        from app.act.cycle.clearing import clear as clear_conversation

        deadline = None if timeout_s is None else started + timeout_s
        done = clear_conversation(tmux, target, command, packs, settings, workers_dir, deadline,
                                  poll_s) + ", then sent"
        _forget_session(tmux, target, watch.pack.name if watch.pack is not None else "", command,
                        workers_dir)
    handoff.send(tmux, target, text, packs, settings, workers_dir, origin="dispatch")
    return done


def _forget_session(tmux: Tmux, target: Target, cli: str, command: str, workers_dir: Path
                    ) -> None:
    """After a clear that starts a conversation nothing names yet, the pane's old session is
    not its own any more: restore must not resume it, nor usage be read from its file."""
    from app.adapters.store import record_event
    from app.observe.agent_starts import NAMED_AFTER_A_TURN, cleared_row

    if cli in NAMED_AFTER_A_TURN:
        record_event(str(workers_dir), cleared_row(cli, target.pane.pane_id, target.server_pid,
                                                   tmux.label, command, time.time()))
