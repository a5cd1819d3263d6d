"""What the fronts do, written once: the CLI (``app.front.cli``) and the MCP server
(``app.front.mcp_server``) both call these for send, queue, answer, wait, report and goal, and
only parse their input and say the result in their own words.

A command takes the pane as the front resolved it (``resolve``: an id, name, id prefix or
``%N``), the tmux server, the store folder and the config file as the front read it. It refuses
with a :class:`ConductorError` (one line), which the CLI prints and the MCP server returns as a
tool error. Who may act on which pane (an agent only on its own, a person on any) is the front's
to decide before it calls.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

from app.act import handoff
from app.act.cycle import jobs
from app.base.errors import ConductorError
from app.base.model import JobKind, JobState, State
from app.base.redact import redact
from app.observe.pack_loading import load_packs

if TYPE_CHECKING:
    import threading

    from app.act.gate import Answered
    from app.adapters.tmux import Tmux
    from app.observe.assess import Assessment
    from app.run.configfile import Config

Target = handoff.Target
resolve = handoff.resolve


def send(tmux: Tmux, workers_dir: Path, target: Target, text: str, cfg: Config, *,
         enter: bool = True, force: bool = False, origin: str = "send") -> None:
    """Type ``text`` into the pane now, through the gate's refusals (``handoff.send``)."""
    handoff.send(tmux, target, text, load_packs(), cfg.watch, workers_dir, enter=enter,
                 force=force, origin=origin)


def queue(tmux: Tmux, workers_dir: Path, target: Target, text: str, cfg: Config) -> int:
    """Store a message for the watcher to type when the pane is next READY; its job number.
    Refused as ``send`` would refuse the text, and when the pane shows a shell or a plain
    program now: a queued message is prose for an agent CLI (the watcher checks again when it
    types)."""
    handoff.check_text(text)
    packs = load_packs()
    watch = handoff.PaneWatch(tmux, target, packs, cfg.watch, workers_dir)
    watch.poll()
    refusal = jobs.prose_refusal(packs, watch.tracked)
    if refusal:
        raise jobs.NotAnAgent(f"not queued: {refusal}; `send` types a command into it now")
    return jobs.queue_message(workers_dir, target.worker_id, text, cfg.cycle.queue_ttl_s)


def answer(tmux: Tmux, workers_dir: Path, target: Target, choice: str, cfg: Config,
           about: str | None = None) -> Answered:
    """Press the keys of the dialog's option ``choice`` (approve, refuse, a key or a label),
    only in a dialog about ``about`` when given."""
    from app.act import gate

    return gate.answer(tmux, target, choice, load_packs(), cfg.watch, workers_dir, about=about)


def wait_states(until: str, what: str) -> frozenset[State]:
    """The states a wait ends on, from "READY" or "READY,NEEDS_CONF" (``what``: how the front
    calls the parameter, for the refusal)."""
    from app.adapters.notify_settings import parse_states

    states = frozenset(parse_states(until.replace(",", " ").split()))
    if not states:
        raise ConductorError(f"{what} needs a state: READY, BUSY, NEEDS_CONFIRMATION or ERROR")
    return states


def wait(tmux: Tmux, workers_dir: Path, target: Target, until: Collection[State],
         timeout_s: float | None, cfg: Config, *, poll_s: float | None = None,
         on_change: Callable[[Assessment], None] | None = None,
         stop: threading.Event | None = None, quiet_poll_s: float | None = None
         ) -> tuple[handoff.PaneWatch, handoff.WaitResult]:
    """Block until the pane is in one of ``until`` or ``timeout_s`` passes (``handoff.wait``,
    every ``poll_s``, by default the config's, and every ``quiet_poll_s`` while nothing
    changes; ``stop`` set ends it early); the watch it looked through, and the result."""
    watch = handoff.PaneWatch(tmux, target, load_packs(), cfg.watch, workers_dir)
    result = handoff.wait(watch, until, timeout_s, poll_s or cfg.wait_poll_s,
                          on_change=on_change, stop=stop, quiet_poll_s=quiet_poll_s)
    return watch, result


def report(workers_dir: Path, worker_id: str, text: str, wait_cmd: str | None, cfg: Config, *,
           by_agent: bool) -> jobs.Reported:
    """Record a report (redacted: it is shown, and quoted to the LLM) and queue its cycle. A
    person's ``wait_cmd`` runs as given (once: what prints it masks it); an agent's only when
    the person declared or allowed it (``jobs.agent_report``)."""
    if by_agent:
        return jobs.agent_report(workers_dir, worker_id, redact(text), wait_cmd, cfg.cycle,
                                 origin="mcp")
    return jobs.person_report(workers_dir, worker_id, redact(text), wait_cmd, cfg.cycle)


def goal(workers_dir: Path, worker_id: str, text: str, check: str | None = None
         ) -> dict[str, str | None]:
    """Set what a pane works towards and, the person only, its declared check; both as they
    are now. The goal is stored redacted: it is printed, logged and put in the LLM's prompts.
    A check holding a secret is refused (:func:`refuse_secret_in_check`)."""
    refuse_secret_in_check(check, "--check")
    return jobs.set_goal(workers_dir, worker_id, redact(text), check)


def refuse_secret_in_check(command: str | None, what: str) -> None:
    """A declared check is kept for every later report and shown by ``goal``, ``explain`` and
    ``status``: stored as given it would keep the secret, stored masked it would no longer run.
    Refused, saying where the secret can live instead."""
    if command and redact(command) != command:
        raise ConductorError(f"{what} holds what looks like a secret (a password, a key or a "
                             "token), and a check is stored and shown as it is: read it from "
                             "the environment or a file instead (e.g. "
                             "PGPASSFILE, MYSQL_PWD, a .netrc)")


def paused(workers_dir: Path, worker_id: str) -> bool:
    """The pane's latest cycle is PAUSED (by hand or by the assessor): nothing is typed into it.
    No store is no cycle; any other store problem raises (a caller that types fails closed)."""
    from app.adapters.store_read import StoreMissing, StoreReader

    try:
        reader = StoreReader(workers_dir)
    except StoreMissing:
        return False
    try:
        cycles = [job for job in reader.jobs(worker_id) if job.kind is JobKind.CYCLE]
    finally:
        reader.close()
    return bool(cycles) and cycles[-1].state is JobState.PAUSED
