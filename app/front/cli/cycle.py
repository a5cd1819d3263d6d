"""``conductor pty report|queue|dispatch|pause|resume``: parse, call app.act.cycle, print.

Registered on the ``pty`` group by ``app.front.cli.main``. Every command here but ``dispatch`` only
writes
a job and returns: the watcher does the work on its next tick.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import click

from app.base import render
from app.base.redact import redact
from app.front.cli.context import Context, echo_clean, friendly_errors, read_config, usage_error
from app.front.cli.output import emit, emit_rows

if TYPE_CHECKING:
    from app.base.model import Job


def target_id(obj: Context, ident: str | None) -> tuple[str, str]:
    """(worker id, label) of a pane named on the command line, or of the caller's own pane."""
    if ident is None:
        ident = os.environ.get("TMUX_PANE", "").strip()
        if not ident:
            raise usage_error("no pane given and not inside tmux ($TMUX_PANE is not set)")
    _, target = obj.resolve(ident)
    return target.worker_id, target.label


@click.command()
@click.argument("args", nargs=-1, required=True, metavar="[ID|NAME] STATUS_TEXT")
@click.option("--wait-cmd", default=None, metavar="CMD",
              help="A check to run on the host (sh -c, in the pane's folder) before assessing; "
                   "its exit status decides when no LLM is set up. Without it, the pane's "
                   "declared check (goal --check) runs, if any.")
@click.option("--json", "as_json", is_flag=True, help="What was done as a JSON object.")
@click.pass_obj
@friendly_errors
def report(obj: Context, args: tuple[str, ...], wait_cmd: str | None, as_json: bool) -> None:
    """Record an agent's status report and queue the post-report cycle; returns at once.

    The watcher then waits (the check command, or [cycle] wait seconds), waits for the pane to
    settle, assesses, and types one directive (STANDBY) or pauses and tells you (PAUSED).
    ID defaults to the pane this runs in ($TMUX_PANE). The command line is yours: its
    --wait-cmd runs as given (an agent's MCP report runs only checks you declared).
    """
    from app.front import commands

    if len(args) > 2:
        raise usage_error("give the status text as one argument (quote it), after an "
                          "optional ID")
    ident, text = (None, args[0]) if len(args) == 1 else (args[0], args[1])
    worker, label = target_id(obj, ident)
    done = commands.report(obj.workers_dir, worker, text, wait_cmd, read_config(),
                           by_agent=False)
    if as_json:
        emit({"id": worker, "label": label, "job": done.seq, "check": done.check})
        return
    check = f" with check: {render.clean_text(done.check)}" if done.check else ""
    click.echo(f"report recorded for {label}; cycle job {done.seq} queued{check}")


def redacted(row: dict[str, Any]) -> dict[str, Any]:
    """A job's columns as printed: its texts masked (:func:`app.base.redact.redact`)."""
    return {key: redact(value) if key in ("text", "wait_cmd", "detail") and
            isinstance(value, str) else value for key, value in row.items()}


@click.command()
@click.argument("args", nargs=-1, metavar="[ID|NAME] | drop JOB")
@click.option("--all", "show_all", is_flag=True, help="Finished jobs too (the newest 50).")
@click.option("--json", "as_json", is_flag=True, help="A JSON list.")
@click.pass_obj
@friendly_errors
def queue(obj: Context, args: tuple[str, ...], show_all: bool, as_json: bool) -> None:
    """Jobs waiting for the watcher (queued messages, cycles in progress); `queue drop JOB`
    cancels one."""
    from app.act.cycle import jobs
    from app.adapters.status import find_worker
    from app.adapters.store_read import StoreReader

    if args[:1] == ("drop",):
        if len(args) != 2 or not args[1].isdigit():
            raise usage_error("usage: conductor pty queue drop JOB (a job number)")
        dropped = jobs.drop(obj.workers_dir, int(args[1]))
        click.echo(f"dropped job {dropped.seq} ({dropped.kind}, {dropped.state})")
        return
    if len(args) > 1:
        raise usage_error("usage: conductor pty queue [ID] | conductor pty queue drop JOB")
    reader = StoreReader(obj.workers_dir)
    try:
        workers = reader.workers(obj.socket_name)
        worker_id = find_worker(workers, args[0])["id"] if args else None
        rows = reader.jobs(worker_id, open_only=not show_all)
    finally:
        reader.close()
    names = {w["id"]: w["name"] for w in workers}
    if obj.socket_name is not None:  # -L: that server's panes only
        rows = [r for r in rows if r.pane in names]
    if show_all:
        rows = rows[-50:]
    if as_json:
        emit_rows({**redacted(r.row()), "name": names.get(r.pane, ""),
                   "timeline": r.steps()} for r in rows)
        return
    if not rows:
        click.echo("no jobs waiting" + ("" if show_all else " (--all shows finished ones)"))
        return
    now = time.time()
    table = [("JOB", "PANE", "KIND", "STATE", "AGE", "TEXT")]
    for r in rows:
        text = r.text or ""
        if r.wait_cmd:
            text += f"  [check: {r.wait_cmd}]"
        if r.detail:
            text += f"  ({r.detail})"
        text = redact(text)  # a queued message is typed as written, and shown masked
        # An agent wrote the text and the check: cleaned before it is cut, so the cut counts
        # what the terminal shows.
        table.append((str(r.seq), names.get(r.pane, r.pane), str(r.kind), str(r.state) or "-",
                      render.duration(now - (r.created_ts or now)),
                      " ".join(render.clean_text(text).split())[:100]))
    echo_clean(render.columns(table))


@click.command()
@click.argument("ident", metavar="ID|NAME|%PANE")
@click.argument("words", nargs=-1, required=True, metavar="TEXT...")
@click.option("--clear", is_flag=True,
              help="First send the CLI's clear command (its pack's clear_command, e.g. /clear) "
                   "and wait for READY again.")
@click.option("--timeout", type=click.FloatRange(min=0), default=None,
              help="Give up (exit 1, nothing more sent) after this many seconds in all.")
@click.option("--json", "as_json", is_flag=True, help="What was done as a JSON object.")
@click.pass_obj
@friendly_errors
def dispatch(obj: Context, ident: str, words: tuple[str, ...], clear: bool,
             timeout: float | None, as_json: bool) -> None:
    """Wait for READY, optionally clear the agent's conversation, then send TEXT.

    A `wait` after `dispatch` waits for TEXT's turn, never for the clear's.
    """
    from app.act.cycle import jobs
    from app.observe.pack_loading import load_packs

    tmux, target = obj.resolve(ident)
    cfg = read_config()
    done = jobs.dispatch(tmux, target, " ".join(words), load_packs(), cfg.watch, obj.workers_dir,
                         clear=clear, timeout_s=timeout, poll_s=cfg.wait_poll_s)
    if as_json:
        emit({"id": target.worker_id, "label": target.label, "done": done})
        return
    click.echo(f"{target.label}: {done}")


@click.command()
@click.argument("ident", metavar="ID|NAME|%PANE")
@click.option("--json", "as_json", is_flag=True, help="What was done as a JSON object.")
@click.pass_obj
@friendly_errors
def pause(obj: Context, ident: str, as_json: bool) -> None:
    """Pause a pane's cycle: nothing is typed into it (directive or queued message) until
    `resume` or its next report."""
    from app.act.cycle import jobs

    worker, label = target_id(obj, ident)
    said(worker, label, jobs.pause(obj.workers_dir, worker), as_json)


@click.command()
@click.argument("ident", metavar="ID|NAME|%PANE")
@click.option("--json", "as_json", is_flag=True, help="What was done as a JSON object.")
@click.pass_obj
@friendly_errors
def resume(obj: Context, ident: str, as_json: bool) -> None:
    """End a pause: queued messages flow again; the next report starts a new cycle."""
    from app.act.cycle import jobs

    worker, label = target_id(obj, ident)
    said(worker, label, jobs.resume(obj.workers_dir, worker), as_json)


def said(worker_id: str, label: str, done: str, as_json: bool) -> None:
    """What a command that acts on one pane did, as a line or as JSON (``acted.json``)."""
    if as_json:
        emit({"id": worker_id, "label": label, "done": done})
    else:
        click.echo(f"{label}: {done}")


def queue_send(obj: Context, ident: str, text: str, as_json: bool = False) -> None:
    """`send --queue`: store the message for the watcher and return. Refused as `send` would
    refuse the text, and when the pane shows a shell or a plain program now: a queued message
    is prose for an agent CLI (the watcher checks again when it types)."""
    from app.act import handoff
    from app.front import commands

    handoff.check_text(text)  # before looking for the pane: a bad text is told first
    tmux, target = obj.resolve(ident)
    seq = commands.queue(tmux, obj.workers_dir, target, text, read_config())
    if as_json:
        emit({"id": target.worker_id, "name": target.name, "pane_id": target.pane.pane_id,
              "sent": False, "queued": True, "job": seq, "enter": True})
        return
    click.echo(f"queued job {seq} for {target.label}; the watcher types it when the pane is "
               "READY")


def cycle_line(jobs: list[Job]) -> str:
    """explain's line about the newest cycle: its state, why, and its timeline."""
    from app.base.model import JobKind, JobState

    cycles = [job for job in jobs if job.kind is JobKind.CYCLE]
    if not cycles:
        return "  cycle: -"
    last = cycles[-1]
    steps = last.steps()
    start = steps[0][1] if steps else 0.0
    # In status's words (QUEUED, not queued): one vocabulary wherever a cycle shows.
    times = " → ".join(f"{JobState(s).shown or s} +{t - start:.1f}s" for s, t in steps)
    why = f": {last.detail}" if last.detail else ""
    state = last.state.shown or last.state
    return f"  cycle: {state} (job {last.seq}){why}\n    {times}"
