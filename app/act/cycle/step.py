"""What the watcher runs after each tick for jobs: advance every pane's cycle one step, deliver
at most one queued message per pane, write what changed in one transaction.

Nothing here blocks a poll: a check command runs in its own pool (``checks``: a deadline, its
tree killed at the end, a bounded tail of output) and an LLM assessment on another; each tick looks
whether they are done. Typing goes through ``handoff.send``, so a pane asking for confirmation
or holding a person's draft refuses, and nothing is typed; and prose goes only to a pane whose
screen is an agent CLI's (``jobs.prose_refusal``): a shell or a plain program gets nothing, the
cycle pauses "needs you" and a message waits. A check's output is cleaned
(``inputs.clean_output``) before it is stored. Nothing here may stop the watcher: a refusal
waits for the next tick (or pauses, for a cycle); a job the step cannot work at all (a check
that will not start, an unexpected fault) ends ``failed`` with its reason, logged once, and the
pane's queue moves on.

A check that a watcher's stop cut off is not run again by the next watcher: its cycle pauses
and asks for a person.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from app.act.budget import BUDGET, BudgetCheck
from app.act.cycle import decide
from app.act.cycle.checks import Check, CheckRunner, store_tag
from app.act.cycle.jobs import (
    CYCLE,
    DECIDING,
    DELIVERED,
    DROPPED,
    EXPIRED,
    FAILED,
    IDLE_SPIN,
    MESSAGE,
    PAUSED,
    QUEUED,
    STANDBY,
    WAITING,
    CycleSettings,
    prose_refusal,
    stamp,
)
from app.act.steps import ActingStep
from app.base.errors import ConductorError
from app.base.inputs import clean_output
from app.base.model import Job, JobState, Note, State
from app.base.redact import redact
from app.observe.one_pane import target_of

if TYPE_CHECKING:
    from app.observe.pane import Tracked

log = logging.getLogger(__name__)

_HOLDS_QUEUE = (QUEUED, WAITING, IDLE_SPIN, DECIDING, PAUSED)
_IN_MOTION = (QUEUED, WAITING, IDLE_SPIN, DECIDING)
# A cycle in motion is looked at this often between polls (a check may end at any moment); with
# none, the store is asked this often whether another process (a report) queued a job.
_LOOK_S = 0.25
_NEW_JOBS_S = 1.0
_BACKOFF_S = 5.0  # after a failed turn: the store may be locked; not four tracebacks a second
_PRUNE_EVERY_S = 3600.0
_KEEP_DONE_S = 7 * 86400.0


class CycleStep(ActingStep[CycleSettings]):
    source = "cycle"

    def setup(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="conductor-cycle")
        self._checks: dict[int, Future[Check]] = {}
        self._runner = CheckRunner(self.settings.cmd_timeout_s, self.settings.output_chars,
                                   store_tag(self.store.workers_dir),
                                   remote=self.tmux.via.wrap if self.tmux.via is not None else None)
        self._decisions: dict[int, Future[decide.Decision]] = {}
        self._tick: float | None = None
        self._latest: dict[str, Job] = {}
        self._pruned_at = 0.0
        self._moving = True  # until the first turn has looked at the jobs
        self._acted_at = 0.0
        self._store_version: int | None = None
        self._budget = BudgetCheck(self.store, self.settings.budget)

    # --- during the tick ------------------------------------------------------------------------

    def observe(self, tracked: Tracked, now: float) -> dict[str, Any]:
        """The pane's ``cycle`` column: the state of its newest cycle, "" when none."""
        try:
            if self._tick != now:
                self._tick = now
                self._latest = self.store.jobs.latest_cycles()
        except ConductorError as exc:
            log.error("cycle: cannot read jobs: %s", exc)
            return {}
        job = self._latest.get(tracked.worker_id)
        return {"cycle": job.state.shown if job else ""}

    # --- after the tick -------------------------------------------------------------------------

    def next_due(self, now: float) -> float | None:
        """Soon while a cycle is in motion (its check may be done: the decision should not wait
        for the next poll); at once when another process wrote to the store since our last
        look (a report may have queued a cycle); else in a second, to ask that again."""
        if self._moving or self._checks or self._decisions:
            return self._acted_at + _LOOK_S
        try:
            if self.store.others_wrote() != self._store_version:
                return now
        except ConductorError:
            return None  # the next poll's turn will say what is wrong
        return now + _NEW_JOBS_S

    def act(self, panes: Mapping[str, Tracked], gone: Collection[str], now: float
            ) -> dict[str, dict[str, Any]]:
        """The ``cycle`` column of each pane whose newest cycle moved."""
        self._acted_at = now
        try:
            return self._act(panes, set(gone), now)
        except Exception:
            self._acted_at = now + _BACKOFF_S
            log.exception("cycle: this tick's jobs failed; they wait for the next tick")
            return {}

    def _act(self, tracked: Mapping[str, Tracked], removed: set[str], now: float
             ) -> dict[str, dict[str, Any]]:
        # Before reading the jobs: a job queued while we work makes the version move again.
        self._store_version = self.store.others_wrote()
        jobs = self.store.jobs.open_jobs()
        self._end_checks_of_ended_cycles(jobs)
        latest = self.store.jobs.latest_cycles()
        updates: list[tuple[int, dict[str, Any]]] = []
        transcript: list[dict[str, Any]] = []
        typed: set[str] = set()
        shown: dict[str, str] = {}  # pane -> its newest cycle's new state, for `status`
        for job in jobs:
            if job.kind is not CYCLE:
                continue
            if job.pane in removed:
                updates.append((job.seq, _finish(job, DROPPED, now, "the pane is gone")))
                continue
            pane = tracked.get(job.pane)
            if pane is None:
                continue  # not listed yet this run
            try:
                fields = self._advance(job, pane, now, transcript)
            except ConductorError:
                raise  # the store or tmux, not this job: the whole tick tries again
            except Exception as exc:  # this job's own fault: end it, not every tick after
                fields = self._failed(job, pane, now, "the cycle step failed", exc, trace=True)
            if fields:
                updates.append((job.seq, fields))
                moved = job.updated(fields)
                if "state" in fields and latest.get(job.pane, job).seq == job.seq:
                    shown[job.pane] = moved.state.shown
                latest[job.pane] = moved
                if fields.get("state") == STANDBY:
                    typed.add(job.pane)
        seen: set[str] = set()
        for job in jobs:
            if job.kind is not MESSAGE:
                continue
            wid = job.pane
            if wid in removed:
                updates.append((job.seq, _finish(job, DROPPED, now, "the pane is gone")))
                continue
            if job.expires_ts is not None and now >= job.expires_ts:
                updates.append((job.seq, _finish(job, EXPIRED, now, "not delivered in time")))
                log.info("queue: job %s for %s expired undelivered", job.seq, wid)
                continue
            if wid in seen:
                continue  # oldest first: only the pane's oldest message may go this tick
            seen.add(wid)
            pane = tracked.get(wid)
            cycle = latest.get(wid)
            if pane is None or wid in typed or (cycle is not None and
                                                cycle.state in _HOLDS_QUEUE):
                continue
            try:
                delivered = self._deliver(job, pane, now)
            except ConductorError:
                raise
            except Exception as exc:  # as for a cycle: end it, and the next one may go
                delivered = self._failed(job, pane, now, "the delivery failed", exc,
                                         trace=True)
            if delivered:
                updates.append((job.seq, delivered))
        self._moving = any(job.state in _IN_MOTION and not job.finished
                           for job in latest.values())
        prune = now - self._pruned_at >= _PRUNE_EVERY_S
        if not (updates or transcript or prune):
            return {}
        with self.store.transaction() as conn:
            # In the transaction: what is unfinished now, not when this turn read the jobs.
            still_open = {job.seq for job in self.store.jobs.open_jobs()} if updates else set()
            for seq, fields in updates:
                if seq not in still_open:
                    # Read open, ended since by another process (a newer report superseded
                    # it, a person dropped or paused it): theirs is the last word.
                    log.info("cycle: job %s ended meanwhile; its step is not written", seq)
                    continue
                self.store.jobs.update_job(conn, seq, fields)
            for wid, state in shown.items():
                self.store.jobs.set_cycle(conn, wid, state)
            for row in transcript:
                self.store.jobs.add_transcript(conn, row, keep=self.settings.transcript_entries)
            if prune:
                self.store.jobs.prune_jobs(conn, now - _KEEP_DONE_S)
                self._pruned_at = now
        # What the watcher last wrote is kept true with it: it rewrites status.json from it.
        return {wid: {"cycle": state} for wid, state in shown.items()}

    # --- queued messages ------------------------------------------------------------------------

    def _deliver(self, job: Job, pane: Tracked, now: float) -> dict[str, Any] | None:
        a = pane.assessment
        # One per turn: the READY must have begun after the last send, ours or anyone's.
        if a is None or a.state is not State.READY or a.state_entered <= pane.signals.sent:
            return None
        refusal = prose_refusal(self.packs, pane) or self._type(pane, job.text or "", "queue")
        if refusal:
            if refusal != job.detail:
                log.info("queue: job %s for %s waits: %s", job.seq, pane.name, refusal)
                return {"detail": refusal}
            return None
        delay = now - job.created_ts
        log.info("queue: delivered job %s to %s after %.1f s", job.seq, pane.name, delay)
        return _finish(job, DELIVERED, now, f"delivered after {delay:.1f}s")

    def _type(self, pane: Tracked, text: str, origin: str) -> str:
        """Type through the safe path; the refusal, or "" once typed."""
        from app.act import handoff

        try:
            handoff.send(self.tmux, target_of(pane), text, self.packs, self.watch_settings,
                         self.store.workers_dir, origin=origin, agent_only=True,
                         writer=self.store)
        except ConductorError as exc:  # Refused, or the pane went away
            return str(exc)
        return ""

    # --- the cycle ------------------------------------------------------------------------------

    def _advance(self, job: Job, pane: Tracked, now: float,
                 transcript: list[dict[str, Any]]) -> dict[str, Any]:
        """Move the cycle as far as it can go this tick; the changed fields."""
        fields: dict[str, Any] = {}
        current = job
        for _ in range(4):  # at most QUEUED -> WAITING -> IDLE_SPIN -> DECIDING -> an end
            step = self._step(current, pane, now, transcript)
            if not step:
                break
            if "state" in step:
                step.setdefault("state_ts", now)
                step["timeline"] = stamp(current.timeline, step["state"], now)
                log.info("cycle %s (%s): %s -> %s%s", pane.name, job.seq, current.state,
                         step["state"], f" ({step['detail']})" if step.get("detail") else "")
            current = current.updated(step)
            fields.update(step)
            if current.finished:
                break
        return fields

    def _step(self, job: Job, pane: Tracked, now: float,
              transcript: list[dict[str, Any]]) -> dict[str, Any]:
        state, seq = job.state, job.seq
        if state is QUEUED:
            if job.wait_cmd:
                return self._begin_check(job, job.wait_cmd, pane, now) or \
                    {"state": WAITING, "detail": f"running {job.wait_cmd}"}
            return {"state": WAITING, "detail": f"waiting {self.settings.wait_s:g}s"}
        if state is WAITING:
            if not job.wait_cmd:
                if now - job.state_ts < self.settings.wait_s:
                    return {}
                return {"state": IDLE_SPIN, "detail": "waited"}
            future = self._checks.get(seq)
            if future is None:  # started by a watcher that stopped: its run is lost
                return self._cut_off(pane, now)
            if not future.done():
                return {}
            del self._checks[seq]
            try:
                code, output = future.result()
            except Exception as exc:
                return self._failed(job, pane, now, "the check could not run", exc)
            return {"state": IDLE_SPIN, "exit_code": code, "output": clean_output(output),
                    "detail": f"check exit {code}" if code is not None else "check did not finish"}
        if state is IDLE_SPIN:
            a = pane.assessment
            spun = now - job.state_ts
            if a is not None and a.state is State.READY:
                return {"state": DECIDING, "detail": "pane READY"}
            if a is not None and now - a.last_change >= self.settings.idle_s and \
                    spun >= self.settings.idle_s:
                return {"state": DECIDING, "detail": f"screen unchanged {self.settings.idle_s:g}s"
                        f" ({a.state.value})"}
            if spun >= self.settings.spin_max_s:
                return {"state": DECIDING, "detail": f"spin cap {self.settings.spin_max_s:g}s "
                        f"({a.state.value if a else 'no state'})"}
            return {}
        if state is DECIDING:
            decision = self._decide(job, pane)
            if decision is None:
                return {}
            return self._conclude(job, pane, decision, now, transcript)
        return {}

    def _begin_check(self, job: Job, command: str, pane: Tracked, now: float
                     ) -> dict[str, Any] | None:
        """Start the job's check; None once started, else the fields that end the job."""
        try:
            self._start_check(job.seq, command, pane.pane.cwd)
        except Exception as exc:
            return self._failed(job, pane, now, "the check could not start", exc)
        return None

    def _failed(self, job: Job, pane: Tracked, now: float, what: str,
                exc: Exception, *, trace: bool = False) -> dict[str, Any]:
        """End a job the step cannot work, saying why once: in the log (with the traceback of
        a fault of ours, ``trace``), in the job and to the person."""
        reason = f"{what}: {type(exc).__name__}: {redact(str(exc))[:200]}"
        log.error("%s %s (%s): %s", job.kind, pane.name, job.seq, reason,
                  exc_info=(type(exc), exc, exc.__traceback__) if trace else None)
        kind = "cycle" if job.kind is CYCLE else "queued message"
        self._tell(pane, Note("cycle", "needs_you", "needs you", f"{kind} failed: {reason}",
                              urgent=True))
        fields = _finish(job, FAILED, now, reason)
        if job.kind is CYCLE:
            fields["decision"] = FAILED
        return fields

    def _conclude(self, job: Job, pane: Tracked, decision: decide.Decision,
                  now: float, transcript: list[dict[str, Any]]) -> dict[str, Any]:
        done = {"decision": decision.decision, "done_ts": now}
        if decision.decision == decide.CONTINUE:
            fault = decide.typing_fault(decision.directive)
            spent = self._budget.budget_exceeded(pane.worker_id, now)
            refusal = (f"it may not be typed: {fault}" if fault else "") or \
                (f"{BUDGET}: {spent}" if spent else "") or \
                prose_refusal(self.packs, pane) or self._type(pane, decision.directive, "cycle")
            if not refusal:
                transcript.append({"id": pane.worker_id, "ts": now, "kind": "directive",
                                   "text": decision.directive})
                self._tell(pane, Note("cycle", "directive", "cycle typed a directive",
                                      decision.directive))
                return {**done, "state": STANDBY, "directive": decision.directive,
                        "detail": decision.rationale}
            why = f"the directive was not typed ({refusal})"
            self._tell(pane, Note("cycle", "needs_you", "needs you", f"cycle paused: {why}",
                                  urgent=True))
            return {**done, "state": PAUSED, "directive": decision.directive,
                    "detail": f"needs you: {why}"}
        if decision.decision == decide.STOP:
            self._tell(pane, Note("cycle", "goal_met", "goal met?", decision.rationale))
            return {**done, "state": PAUSED, "detail": f"goal met? {decision.rationale}"}
        self._tell(pane, Note("cycle", "needs_you", "needs you",
                              f"cycle paused: {decision.rationale}", urgent=True))
        return {**done, "state": PAUSED, "detail": f"needs you: {decision.rationale}"}

    def _decide(self, job: Job, pane: Tracked) -> decide.Decision | None:
        seq = job.seq
        future = self._decisions.get(seq)
        if future is not None:
            if not future.done():
                return None
            del self._decisions[seq]
            return future.result()
        goal = (self.store.herd.herd_rows().get(pane.worker_id) or {}).get("goal") or ""
        facts = decide.Facts(
            goal=str(goal), transcript=self.store.jobs.transcript(pane.worker_id),
            wait_cmd=job.wait_cmd or None, exit_code=job.exit_code,
            output=clean_output(job.output or ""), screen=redact(pane.text))
        llm = self.llm
        if llm is None or not llm.settings.enabled:
            return decide.without_llm(facts)
        if llm.settings.excluded(pane.worker_id, pane.name, pane.pane.pane_id):
            return decide.Decision(decide.PAUSE, "pane excluded from the LLM (llm.exclude)")
        self._decisions[seq] = self._pool.submit(decide.with_llm, llm, facts)
        return None

    def _start_check(self, seq: int, command: str, cwd: str) -> None:
        if seq not in self._checks:  # a tick whose write failed comes again: run it once
            self._checks[seq] = self._runner.submit(seq, command, cwd)

    def _cut_off(self, pane: Tracked, now: float) -> dict[str, Any]:
        """A check a watcher's stop cut off is not run again blindly (it may not be safe to run
        twice, and it may be why the watcher was restarted): pause, and tell the person."""
        why = "the check was cut off by a restart of the watcher; report again to rerun it"
        self._tell(pane, Note("cycle", "needs_you", "needs you", f"cycle paused: {why}",
                              urgent=True))
        return {"state": PAUSED, "decision": decide.PAUSE, "done_ts": now,
                "detail": f"needs you: {why}"}

    def _end_checks_of_ended_cycles(self, jobs: Iterable[Job]) -> None:
        """A cycle superseded, dropped or paused by hand takes its running check with it."""
        open_cycles = {job.seq for job in jobs if job.kind is CYCLE}
        for seq in [seq for seq in self._checks if seq not in open_cycles]:
            del self._checks[seq]
            self._runner.cancel(seq)

    def _tell(self, pane: Tracked, note: Note) -> None:
        log.info("cycle %s: %s%s", pane.name, note.title, f": {note.body}" if note.body else "")
        super()._tell(pane, note)

    def close(self) -> None:
        self._runner.close()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _finish(job: Job, state: JobState, now: float, detail: str) -> dict[str, Any]:
    return {"state": state, "state_ts": now, "done_ts": now, "detail": detail,
            "timeline": stamp(job.timeline, state, now)}
