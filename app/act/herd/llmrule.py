"""``type: llm`` herd rules: ask the model whether the rule's question holds for this screen.

The OpenRouter client, its key, budget and retries are the one LLM client's
(:class:`app.adapters.llm.LLMClient`). In go the redacted bottom of the screen, the pane's
status context and its goal; back comes strict JSON ``{match, command, variables}``, checked
here. Any fault (off, budget spent, HTTP error, bad JSON, a field missing or too long) is an
:class:`Answer` with ``error`` set: the caller logs it and types nothing.

Calls run on one worker thread so a slow API never stalls a poll; the caller asks again next
tick and gets the answer once it is there. One answer per (pane, screen, rule): the same screen
is never asked twice, so a failing API costs one logged line per screen.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from app.act.herd.rules import MAX_COMMAND_CHARS, Rule
from app.adapters.llm import LLMClient
from app.base.errors import LLMError
from app.base.redact import prepare_screen, redact

log = logging.getLogger(__name__)

MAX_VARIABLE_CHARS = 500
_KEEP = 256  # answers remembered, oldest dropped first

SYSTEM = """\
You help supervise an AI coding agent running in a terminal. A rule asks you one question \
about the agent's screen. Answer with JSON only: {"match": true|false, "command": "...", \
"variables": {...}}.
- match: true only if the answer to the rule's question is clearly yes from the bottom of \
the screen. When unsure, false.
- command: when match is true, the one line of text to type to the agent to keep it moving \
towards its goal; otherwise "".
- variables: a string for each name listed, "" when unknown.
- Never propose to approve a permission prompt, run destructive commands or share secrets.
- Secrets were replaced by [REDACTED]; ignore that marker."""


@dataclass(frozen=True)
class Answer:
    match: bool = False
    command: str = ""
    variables: Mapping[str, str] = field(default_factory=dict)
    error: str = ""  # non-empty: no nudge, and why


def schema(rule: Rule) -> dict[str, Any]:
    """Strict JSON schema: every property required, nothing else allowed."""
    return {
        "type": "object",
        "properties": {
            "match": {"type": "boolean"},
            "command": {"type": "string"},
            "variables": {
                "type": "object",
                "properties": {name: {"type": "string"} for name in rule.variables},
                "required": list(rule.variables),
                "additionalProperties": False,
            },
        },
        "required": ["match", "command", "variables"],
        "additionalProperties": False,
    }


def question(rule: Rule, screen: str, context: Mapping[str, object], max_chars: int) -> str:
    shown = {k: v for k, v in context.items() if k != "goal"}
    goal = redact(str(context.get("goal") or "")) or "(none given)"
    names = ", ".join(rule.variables) or "(none)"
    return (
        f"Rule question: {rule.prompt}\n"
        f"Variables to fill: {names}\n"
        f"The pane's goal: {goal}\n"
        f"Status: {redact(json.dumps(shown, ensure_ascii=False, default=str))}\n"
        "Screen (bottom of the terminal; secrets redacted):\n<<<SCREEN\n"
        f"{prepare_screen(screen, max_chars)}\nSCREEN>>>"
    )


def check(rule: Rule, reply: Mapping[str, Any]) -> Answer:
    """The model's reply validated against the rule, or an Answer carrying the fault."""
    match, command, variables = reply.get("match"), reply.get("command"), reply.get("variables")
    if set(reply) != {"match", "command", "variables"}:
        return Answer(error=f"reply keys {sorted(reply)} are not match, command, variables")
    if not isinstance(match, bool):
        return Answer(error="reply's 'match' is not true or false")
    if not isinstance(command, str) or len(command) > MAX_COMMAND_CHARS:
        return Answer(error="reply's 'command' is not text of a sensible length")
    if not isinstance(variables, dict) or set(variables) != set(rule.variables):
        return Answer(error=f"reply's 'variables' must be exactly {list(rule.variables)}")
    for name, value in variables.items():
        if not isinstance(value, str) or len(value) > MAX_VARIABLE_CHARS or "\n" in value:
            return Answer(error=f"reply's variable {name!r} is not one short line")
    if any(ord(c) < 32 and c not in "\t\n" for c in command):
        return Answer(error="reply's 'command' holds control characters")
    if match and not command.strip() and "{command}" in rule.command:
        return Answer(error="reply matched but proposed no command")
    return Answer(match=match, command=" ".join(command.split()), variables=dict(variables))


class Asker:
    """Asks in the background; :meth:`answer` is called every tick until it returns."""

    def __init__(self, client: LLMClient) -> None:
        self.client = client
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="conductor-herd-llm")
        self._lock = threading.Lock()
        self._jobs: OrderedDict[tuple[str, str, str], Future[Answer]] = OrderedDict()

    def answer(self, key: tuple[str, str, str], rule: Rule, screen: str,
               context: Mapping[str, object]) -> Answer | None:
        """The answer for (pane, screen hash, rule id), or None while the call runs."""
        with self._lock:
            job = self._jobs.get(key)
            if job is None:
                job = self._pool.submit(self._ask, rule, screen, dict(context))
                self._jobs[key] = job
                while len(self._jobs) > _KEEP:
                    self._jobs.popitem(last=False)
        return job.result() if job.done() else None

    def _ask(self, rule: Rule, screen: str, context: Mapping[str, object]) -> Answer:
        settings = self.client.settings
        try:
            reply = self.client.ask_json(
                SYSTEM, question(rule, screen, context, settings.max_screen_chars),
                "herd_rule", schema(rule))
        except LLMError as exc:
            return Answer(error=str(exc))
        except Exception as exc:  # the worker must survive anything; the pane gets no nudge
            return Answer(error=f"{type(exc).__name__}: {redact(str(exc))[:160]}")
        return check(rule, reply)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
