"""The optional LLM classifier: a screen's state asked of the model, merged with the pack's.

The YAML packs stay the default and the fallback. When ``OPENROUTER_API_KEY`` is set (and
``CONDUCTOR_LLM`` is not off) the watcher may also ask a model about a *stable* screen whose hash
changed; never on every poll. The HTTP, its key, budget, retries and errors are the one client's
(:class:`app.adapters.llm.LLMClient`); this module owns what is asked about a screen and what the
answer means. Two layers:

* :class:`LLMClassifier` - one blocking call: a redacted, bounded prompt with the pack's example
  screens, a structured JSON reply validated into a :class:`~app.base.model.Verdict`, a cache by
  screen hash. Any failure is one :class:`~app.base.errors.LLMError` whose message never holds
  the key.
* :class:`AsyncLLM` - the watcher's non-blocking front: ``request`` queues, worker threads call the
  API, ``result`` reads what has arrived. A slow or hanging API never stalls the poll cycle.

Merge rule (:func:`merge`), chosen so that the LLM can take READY away but never grant it:

1. No LLM verdict (off, excluded, not arrived yet, failed): the pack verdict, unchanged.
2. The pack matched a rule for NEEDS_CONFIRMATION, BUSY or ERROR: the pack verdict stands,
   whatever the LLM says (the rules were written against real screens and are deterministic).
3. The pack says READY: if the LLM says NEEDS_CONFIRMATION, BUSY or ERROR, the LLM decides
   (a veto: reporting READY wrongly makes someone type into a busy pane or past a question).
   If the LLM says READY or UNKNOWN, the pack's READY stands.
4. The pack says UNKNOWN: if the LLM says NEEDS_CONFIRMATION, BUSY or ERROR, the LLM decides
   (it names what no rule recognised). If the LLM says READY, the state stays UNKNOWN with the
   reason ``llm_ready_unconfirmed``: READY needs a rule's positive evidence, as in the packs.
   If the LLM says UNKNOWN, the pack verdict stands.

So the merged state is READY only when the pack said READY. When the pack decides and the LLM
agrees on the state, the pack's empty ``summary``/``actions_needed`` are filled from the LLM's.
The merged verdict's ``classifier`` names who decided (``pack:<name>`` or ``llm:<model>``) and its
reasons end with ``decided_by_pack`` or ``decided_by_llm`` plus ``llm_said_<state>``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from app.adapters.llm import LLMClient, LLMSettings, one_line, scrub
from app.base.errors import LLMError
from app.base.model import SCREEN_STATES, State, Verdict
from app.base.redact import prepare_screen
from app.base.render import clean_text
from app.base.screen import normalise, screen_hash

if TYPE_CHECKING:
    from app.observe.packs import Example, Pack

logger = logging.getLogger("app.observe.llm")

LLM_CONFIDENCE = 70  # below a pack rule's default 90: the model is a guess, a rule is a match
MAX_EXAMPLES = 8
MAX_EXAMPLE_CHARS = 1200
CACHE_SIZE = 512

_NOT_READY = frozenset({State.NEEDS_CONFIRMATION, State.BUSY, State.ERROR})

STATE_DEFINITIONS = """\
READY: the program sits idle at its input prompt waiting for the user's next instruction; nothing \
is running and no question is pending, so typing now is safe.
BUSY: the program is working: generating text, thinking, running a tool or shell command, waiting \
on the network (spinners, elapsed timers, "esc to interrupt", progress bars).
NEEDS_CONFIRMATION: a question or dialog waits for a human decision: approve a command or an \
edit, yes/no, pick a numbered option, trust a folder, press Enter to continue.
ERROR: the program stopped on an error the user must look at: a crash or traceback, failed \
authentication, a rate limit or network failure it gave up on, the CLI exited.
UNKNOWN: the screen does not show enough to tell."""

SYSTEM_PROMPT = """\
You classify the state of a terminal pane running the command-line program "{cli}" (an AI \
coding agent or a shell) from a snapshot of its screen. Answer with JSON only: \
{{"state": ..., "summary": ..., "actions_needed": ...}}.

States:
{definitions}

Rules:
- Judge from the bottom of the screen: lines higher up are history, and an answered question \
there is not a live one.
- An empty input box alone does not mean READY: some agents show it while they work. Look for \
busy markers and pending dialogs first.
- If unsure whether the program is READY, do not answer READY.
- summary: one short line saying what the pane shows (e.g. the command awaiting approval).
- actions_needed: what the human should do, or "" if nothing.
- Secrets were replaced by [REDACTED]; ignore that marker.
{examples}"""

RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "state": {"type": "string", "enum": [s.value for s in SCREEN_STATES]},
        "summary": {"type": "string", "description": "one line: what the pane shows"},
        "actions_needed": {"type": "string", "description": "what the human should do, or ''"},
    },
    "required": ["state", "summary", "actions_needed"],
    "additionalProperties": False,
}


# --- the blocking classifier ---------------------------------------------------------------------


class LLMClassifier:
    """Classify one screen with the client's model; blocking, thread-safe.

    ``classify`` returns a verdict or raises :class:`LLMError` after at most ``settings.timeout``
    seconds (plus the connect time of the attempt in progress), retries included.
    """

    def __init__(self, client: LLMClient) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], Verdict] = OrderedDict()

    # public API

    @property
    def settings(self) -> LLMSettings:
        return self.client.settings

    @property
    def name(self) -> str:
        return f"llm:{self.settings.model}"

    def cached(self, screen: str, cli: str) -> Verdict | None:
        with self._lock:
            return self._cache.get(self._cache_key(screen, cli))

    def classify(self, screen: str, cli: str, pack: Pack | None = None) -> Verdict:
        if not self.settings.api_key:
            raise LLMError("LLM classifier needs OPENROUTER_API_KEY")
        key = self._cache_key(screen, cli)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        system, user = self._prompt(screen, cli, pack)
        verdict = self._verdict(_parse_reply(
            self.client.ask_json(system, user, "pane_state", RESPONSE_SCHEMA)))
        with self._lock:
            self._cache[key] = verdict
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return verdict

    def payload(self, screen: str, cli: str, pack: Pack | None = None) -> dict[str, Any]:
        """The JSON body sent to ``/chat/completions`` (redacted; no key in it)."""
        system, user = self._prompt(screen, cli, pack)
        return self.client.request_body(system, user, "pane_state", RESPONSE_SCHEMA)

    def close(self) -> None:
        """Close the client: interrupt its backoff sleeps and close its HTTP sessions."""
        self.client.close()

    # internals

    def _cache_key(self, screen: str, cli: str) -> tuple[str, str]:
        return (cli, screen_hash(normalise(screen)))

    def _prompt(self, screen: str, cli: str, pack: Pack | None) -> tuple[str, str]:
        """The system and user messages about this screen (redacted, bounded)."""
        system = SYSTEM_PROMPT.format(
            cli=cli or "unknown",
            definitions=STATE_DEFINITIONS,
            examples=_examples_text(pack),
        )
        user = (
            f"Program: {cli or 'unknown'}\n"
            "Screen (bottom of the terminal; secrets redacted):\n"
            "<<<SCREEN\n"
            f"{prepare_screen(screen, self.settings.max_screen_chars)}\n"
            "SCREEN>>>"
        )
        return system, user

    def _verdict(self, reply: dict[str, str]) -> Verdict:
        key = self.settings.api_key
        return Verdict(
            state=State(reply["state"]),
            confidence=LLM_CONFIDENCE,
            reasons=("llm_verdict",),
            summary=one_line(clean_text(scrub(reply["summary"], key)), 200),
            actions_needed=one_line(clean_text(scrub(reply["actions_needed"], key)), 200),
            classifier=self.name,
        )


def _parse_reply(data: dict[str, Any]) -> dict[str, str]:
    """The ``{state, summary, actions_needed}`` of the reply's object, or LLMError."""
    for name in ("state", "summary", "actions_needed"):
        if name not in data:
            raise LLMError(f"LLM reply lacks {name!r}")
        if not isinstance(data[name], str):
            raise LLMError(f"LLM reply's {name!r} is not a string")
    state = data["state"].strip().upper()
    if state not in {s.value for s in SCREEN_STATES}:
        raise LLMError(f"LLM reply has unknown state {one_line(data['state'], 40)!r}")
    return {"state": state, "summary": data["summary"], "actions_needed": data["actions_needed"]}


def _examples_text(pack: Pack | None) -> str:
    if pack is None or not pack.examples:
        return ""
    # Round-robin over states, so a pack with many READY examples still shows a dialog.
    by_state: dict[State, list[Example]] = {}
    for example in pack.examples:
        by_state.setdefault(example.state, []).append(example)
    picked: list[Example] = []
    while len(picked) < MAX_EXAMPLES and any(by_state.values()):
        for queue in by_state.values():
            if queue and len(picked) < MAX_EXAMPLES:
                picked.append(queue.pop(0))
    parts = [f"\nExamples of this program's screens (from the '{pack.name}' pack):"]
    for number, example in enumerate(picked, 1):
        parts.append(f"--- example {number}: state {example.state.value} ---\n"
                     f"{prepare_screen(example.screen, MAX_EXAMPLE_CHARS)}")
    return "\n".join(parts) + "\n"


# --- merging -------------------------------------------------------------------------------------


def merge(pack_verdict: Verdict, llm_verdict: Verdict | None) -> Verdict:
    """Combine the pack's verdict with the LLM's (see the module docstring for the rule).

    The merged state is READY only if the pack said READY.
    """
    if llm_verdict is None:
        return pack_verdict
    said = f"llm_said_{llm_verdict.state.value.lower()}"
    pack_state = pack_verdict.state
    llm_state = llm_verdict.state

    if pack_state in (State.READY, State.UNKNOWN) and llm_state in _NOT_READY:
        how = "llm_overrode_pack_ready" if pack_state is State.READY else "llm_filled_unknown"
        return replace(
            llm_verdict,
            reasons=(*llm_verdict.reasons, how, "decided_by_llm", said),
            tried=pack_verdict.tried,
        )
    if pack_state is State.UNKNOWN and llm_state is State.READY:
        return replace(
            pack_verdict,
            reasons=(*pack_verdict.reasons, "llm_ready_unconfirmed", "decided_by_pack", said),
            summary=pack_verdict.summary or llm_verdict.summary,
        )
    # The pack decides: a rule matched NEEDS_CONFIRMATION/BUSY/ERROR, or READY the LLM agrees
    # with or abstains on, or UNKNOWN the LLM cannot resolve either.
    agree = llm_state is pack_state
    return replace(
        pack_verdict,
        reasons=(*pack_verdict.reasons, "decided_by_pack", said),
        summary=pack_verdict.summary or (llm_verdict.summary if agree else ""),
        actions_needed=pack_verdict.actions_needed or (llm_verdict.actions_needed if agree else ""),
    )


def worth_asking(pack_verdict: Verdict) -> bool:
    """Whether an LLM verdict could change what :func:`merge` returns for this pack verdict.

    A rule's NEEDS_CONFIRMATION, BUSY or ERROR always stands, so asking about those screens only
    spends the budget; READY (which the LLM may veto) and UNKNOWN (which it may name) are worth it.
    """
    return pack_verdict.state in (State.READY, State.UNKNOWN)


# --- the watcher's non-blocking front ------------------------------------------------------------


@dataclass(frozen=True)
class _Job:
    screen_hash: str
    screen: str
    cli: str
    pack: Pack | None


class AsyncLLM:
    """Ask the LLM from worker threads so the poll cycle never waits for the network.

    Per pane, at most one request waits in the queue (a newer screen replaces an older one that
    has not started: nobody needs the verdict for a screen already gone) and one is in flight.
    ``result`` returns the verdict for exactly that pane and screen hash, or None (not asked, not
    arrived, failed, excluded). After a failure the same screen is not asked again for
    ``failure_cooldown`` seconds, so a down API costs one logged line per screen, not one per poll.
    """

    def __init__(
        self,
        classifier: LLMClassifier,
        workers: int = 2,
        failure_cooldown: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.classifier = classifier
        self._failure_cooldown = failure_cooldown
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: OrderedDict[str, _Job] = OrderedDict()
        self._inflight: dict[str, str] = {}
        self._results: dict[str, tuple[str, Verdict | None, float]] = {}
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"conductor-llm-{n}", daemon=True)
            for n in range(max(1, workers))
        ]
        for thread in self._threads:
            thread.start()

    def request(
        self,
        pane_key: str,
        screen_hash: str,
        screen: str,
        cli: str,
        pack: Pack | None,
        names: Iterable[str] = (),
    ) -> None:
        """Queue a classification of this pane's screen; returns at once.

        ``names`` are the pane's other names (``session:window``, the worker name) checked against
        ``CONDUCTOR_LLM_EXCLUDE`` together with ``pane_key``. No-op when excluded, closed, already
        answered, queued or in flight for this hash, or failed within the cooldown.
        """
        settings = self.classifier.settings
        if not settings.enabled or settings.excluded(pane_key, *names):
            return
        with self._cond:
            if self._closed:
                return
            done = self._results.get(pane_key)
            if done is not None and done[0] == screen_hash and (
                done[1] is not None or self._clock() - done[2] < self._failure_cooldown
            ):
                return
            if self._inflight.get(pane_key) == screen_hash:
                return
            queued = self._queue.get(pane_key)
            if queued is not None and queued.screen_hash == screen_hash:
                return
        hit = self.classifier.cached(screen, cli)  # outside the lock: it normalises and hashes
        with self._cond:
            if hit is not None:
                self._results[pane_key] = (screen_hash, hit, self._clock())
                return
            self._queue.pop(pane_key, None)
            self._queue[pane_key] = _Job(screen_hash, screen, cli, pack)
            self._cond.notify()

    def result(self, pane_key: str, screen_hash: str) -> Verdict | None:
        """The LLM's verdict for this pane's screen ``screen_hash``, if it has arrived."""
        with self._cond:
            done = self._results.get(pane_key)
        if done is None or done[0] != screen_hash:
            return None
        return done[1]

    def busy(self) -> int:
        """Requests queued or in flight."""
        with self._cond:
            return len(self._queue) + len(self._inflight)

    def forget(self, pane_key: str) -> None:
        """Drop what is kept for a pane that has gone."""
        with self._cond:
            self._queue.pop(pane_key, None)
            self._results.pop(pane_key, None)

    def close(self, wait: float = 1.0) -> None:
        """Stop the workers. A call stuck on the network is abandoned (the threads are daemons),
        so closing never takes much longer than ``wait`` seconds."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
        self.classifier.close()
        end = time.monotonic() + wait
        for thread in self._threads:
            thread.join(max(0.0, end - time.monotonic()))

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                pane_key, job = self._queue.popitem(last=False)
                self._inflight[pane_key] = job.screen_hash
            verdict: Verdict | None = None
            try:
                verdict = self.classifier.classify(job.screen, job.cli, job.pack)
            except LLMError as exc:
                if self._closed:
                    return  # shutting down: the abandoned call is not worth a warning
                logger.warning("LLM gave no verdict for pane %s, keeping the pack verdict: %s",
                               pane_key, exc)
            except Exception as exc:  # a worker must survive anything, or the LLM silently stops
                logger.error("LLM worker error for pane %s, keeping the pack verdict: %s: %s",
                             pane_key, type(exc).__name__,
                             one_line(scrub(str(exc), self.classifier.settings.api_key), 160))
            with self._cond:
                if self._inflight.get(pane_key) == job.screen_hash:
                    del self._inflight[pane_key]
                self._results[pane_key] = (job.screen_hash, verdict, self._clock())
