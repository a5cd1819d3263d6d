"""``conductor pty explain ID``: why a pane has its state, the stored assessment beside the
watcher's own look at it now (app.run.live_check), and the last transitions; and how a
transition is written, for ``explain`` and ``tail``.

Registered on the ``pty`` group by ``app.front.cli.main``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from app.base import render
from app.front.cli.completion import complete_panes
from app.front.cli.context import MAX_ROWS, Context, echo_clean, friendly_errors, read_config
from app.front.cli.output import emit

if TYPE_CHECKING:
    from app.run.live_check import LiveCheck


@click.command()
@click.argument("ident", metavar="ID|NAME", shell_complete=complete_panes)
@click.option("-n", "lines", type=click.IntRange(min=0, max=MAX_ROWS), default=5,
              show_default=True,
              help="How many recent transitions to show.")
@click.option("--json", "as_json", is_flag=True, help="All of it as one JSON object.")
@click.pass_obj
@friendly_errors
def explain(obj: Context, ident: str, lines: int, as_json: bool) -> None:
    """Why a pane has its state: the stored assessment, the live screen's verdict, the rule that
    decided and the lines it matched, every rule tried, and the last transitions."""
    from app.adapters.status import find_worker
    from app.adapters.store_read import StoreReader
    from app.base.model import JobKind, JobState
    from app.observe import sessions

    reader = StoreReader(obj.workers_dir)
    try:
        # Its teammates are the other rows naming it their lead.
        worker = find_worker([dict(w) for w in render.with_teammates(
            reader.workers(obj.socket_name))], ident)
        history = reader.history(worker["id"], limit=lines) if lines else []
        jobs = reader.jobs(worker["id"], limit=20)
        session_event = sessions.pane_event(reader, worker)
        session = sessions.identity(worker, session_event)
    finally:
        reader.close()
    if as_json:
        emit(_explain_json(obj, worker, session, jobs, history))
        return
    for line in render.stored_assessment(worker, time.time()):
        echo_clean(line)
    echo_clean(f"  {sessions.describe(session, session_event)}")
    from app.front.cli.cost import spend_line
    from app.front.cli.cycle import cycle_line

    echo_clean(spend_line(obj, worker["id"]))

    echo_clean(cycle_line(jobs))
    queued = sum(1 for j in jobs if j.kind is JobKind.MESSAGE and j.state is JobState.QUEUED)
    if queued:
        click.echo(f"  queued messages: {queued} (see `conductor pty queue`)")
    if worker.get("cli_type") == "conductor":
        click.echo("live screen: conductor's own view, never read (see `status`)")
    else:
        for line in _live_lines(obj, worker):
            echo_clean(line)
    if history:
        click.echo("last transitions:")
        for row in history:
            echo_clean(f"  {history_text(row)}")


def _explain_json(obj: Context, worker: dict[str, Any], session: Any, jobs: list[Any],
                  history: list[Any]) -> dict[str, Any]:
    """``explain --json``: the stored row, the live check (the watcher's own look, as the text
    says it; None when the pane is gone or is conductor's own view), and the last transitions."""
    from app.base.model import JobKind, JobState
    from app.front.cli.cycle import redacted

    cycles = [j for j in jobs if j.kind is JobKind.CYCLE]
    live: dict[str, Any] | None = None
    found = _live_check(obj, worker) if worker.get("cli_type") != "conductor" else None
    if found is not None and not found.missing and found.verdict is not None:
        verdict = found.verdict
        live = {"pack": found.pack, "state": verdict.state.value, "rule": verdict.rule_id,
                "reasons": list(verdict.reasons), "summary": verdict.summary,
                "matched_lines": list(verdict.matched_lines),
                "live_state": found.assessment.state.value if found.assessment else None,
                "tried": [{"rule": t.rule_id, "state": t.state.value, "matched": t.matched,
                           "detail": t.detail} for t in found.traces]}
    return {"pane": worker, "session": session.public() if session is not None else None,
            "cycle": redacted(cycles[-1].row()) if cycles else None,
            "queued_messages": sum(1 for j in jobs if j.kind is JobKind.MESSAGE and
                                   j.state is JobState.QUEUED),
            "live": live, "history": [history_json(row) for row in history]}


def _live_lines(obj: Context, worker: dict[str, Any]) -> list[str]:
    """The live check's lines: the screen's verdict by the judge the watcher would use, the
    state with the title, hooks and sends folded in (the watcher's rules), every rule tried."""
    found = _live_check(obj, worker)
    if found.missing:
        return [f"live screen: {found.missing}"]
    verdict, a = found.verdict, found.assessment
    lines = []
    if verdict is not None:
        judge = f"pack {found.pack}" + (f" (foreground {found.program})" if found.program else "")
        lines.append(f"live screen, {judge}: {verdict.state.value} "
                     f"(rule {verdict.rule_id or 'none'})")
        lines += [f"  matched: {render.clean_text(line)}" for line in verdict.matched_lines]
    if a is not None:
        lines.append(f"live state: {a.state.value} [{', '.join(a.reasons) or '-'}] "
                     f"({', '.join(a.signals)})")
    return lines + [render.rule_trace(trace) for trace in found.traces]


def _live_check(obj: Context, worker: dict[str, Any]) -> LiveCheck:
    from app.observe.pack_loading import load_packs
    from app.run.live_check import live_check

    config = read_config()
    tmux = _server_of(worker) if (worker.get("host") or "local") == "local" else obj.tmux()
    return live_check(tmux, config.hosts, obj.workers_dir, worker, load_packs(), config.watch)


def _server_of(worker: dict[str, Any]) -> Any:
    """The local tmux server the pane was seen on (its socket), whatever -L this command got."""
    from app.adapters.tmux import Tmux

    socket = worker.get("socket") or "default"
    return Tmux(socket_path=socket) if socket.startswith("/") else \
        Tmux(socket_name=None if socket == "default" else socket)


def history_json(row: Any) -> dict[str, Any]:
    """One transition of ``tail`` and ``explain`` as JSON."""
    return {"seq": row.seq, "ts": row.ts, "state": row.state,
            "previous_state": row.previous_state, "summary": row.summary,
            "reasons": list(row.reasons)}


def history_text(row: Any) -> str:
    """One transition of ``tail`` and ``explain`` as a line."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row.ts))
    return render.history_line(stamp, row.state, row.previous_state, row.summary, row.reasons)
