"""The optional LLM classifier: OpenRouter's chat-completions API over requests.

The YAML packs stay the default and the fallback. When ``OPENROUTER_API_KEY`` is set (and
``CONDUCTOR_LLM`` is not off) the watcher may also ask a model about a *stable* screen whose hash
changed; never on every poll. Three layers:

* :class:`LLMSettings` - the settings, read from a mapping such as ``os.environ``.
* :class:`LLMClassifier` - one blocking call: redacted, bounded prompt, structured JSON reply,
  validation, retries with backoff inside one deadline, a cache by screen hash and a per-minute
  call budget. Any failure is one :class:`~app.base.errors.LLMError` whose message never holds the
  key.
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

``requests`` is imported inside the functions that send, never at module import: the CLI's
status-line path imports this module's neighbours and must not pay ~180 ms for it.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from app.base.errors import ConfigError, LLMError
from app.base.model import SCREEN_STATES, State, Verdict
from app.base.redact import MASK, prepare_screen, redact
from app.base.render import clean_text
from app.base.screen import normalise, screen_hash

if TYPE_CHECKING:
    import requests

    from app.observe.packs import Example, Pack

logger = logging.getLogger("app.observe.llm")

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
# Cheap, fast, and routed by OpenRouter to providers that honour json_schema structured output.
DEFAULT_MODEL = "openai/gpt-4o-mini"
DEFAULT_TIMEOUT = 10.0  # seconds for one classify call, retries included
DEFAULT_CALLS_PER_MINUTE = 20
DEFAULT_MAX_SCREEN_CHARS = 4000
DEFAULT_MAX_RETRIES = 2
# Accepted ranges, shared by the environment variables and the config file.
TIMEOUT_RANGE = (0.1, 600.0)
CALLS_PER_MINUTE_RANGE = (1, 10_000)
MAX_SCREEN_CHARS_RANGE = (200, 200_000)
# Longest we sleep inside one call for a 429's Retry-After; longer waits end the call instead.
RETRY_AFTER_CAP = 10.0
# After 401/402 the key or the account is broken: calling again soon only burns the budget.
AUTH_COOLDOWN = 300.0
LLM_CONFIDENCE = 70  # below a pack rule's default 90: the model is a guess, a rule is a match
MAX_EXAMPLES = 8
MAX_EXAMPLE_CHARS = 1200
MAX_REPLY_BYTES = 1_000_000
CACHE_SIZE = 512

_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}
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


# --- settings ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMSettings:
    """How (and whether) to call the LLM. ``api_key`` never shows in ``repr`` or ``str``."""

    api_key: str = field(default="", repr=False)
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_MODEL
    timeout: float = DEFAULT_TIMEOUT  # seconds for one classify call, retries included
    calls_per_minute: int = DEFAULT_CALLS_PER_MINUTE  # HTTP requests, retries included
    switch: bool | None = None  # CONDUCTOR_LLM: None = on when a key is set
    exclude: tuple[str, ...] = ()  # pane ids, names or fnmatch globs never sent to the LLM
    max_screen_chars: int = DEFAULT_MAX_SCREEN_CHARS  # the bottom of the screen is kept
    max_retries: int = DEFAULT_MAX_RETRIES

    @classmethod
    def from_env(cls, env: Mapping[str, str], defaults: LLMSettings | None = None) -> LLMSettings:
        """Read the settings; a malformed value raises :class:`ConfigError` naming the variable.

        ``defaults`` (the config file's values) stand wherever a variable is unset or empty, so
        the environment always wins. The key and ``CONDUCTOR_LLM`` come from ``env`` alone.
        """
        base = cls() if defaults is None else defaults
        switch_raw = env.get("CONDUCTOR_LLM", "").strip().lower()
        if switch_raw and switch_raw not in _ON | _OFF:
            raise ConfigError(f"CONDUCTOR_LLM must be on or off, got {switch_raw!r}")
        exclude = tuple(
            p.strip() for p in env.get("CONDUCTOR_LLM_EXCLUDE", "").replace(";", ",").split(",")
            if p.strip()
        ) or base.exclude
        base_url = (env.get("OPENROUTER_BASE_URL", "").strip() or base.base_url).rstrip("/")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"OPENROUTER_BASE_URL must start with http:// or https://, "
                              f"got {base_url!r}")
        return cls(
            api_key=env.get("OPENROUTER_API_KEY", "").strip(),
            base_url=base_url,
            model=env.get("CONDUCTOR_LLM_MODEL", "").strip() or base.model,
            timeout=_number(env, "CONDUCTOR_LLM_TIMEOUT", base.timeout, *TIMEOUT_RANGE),
            calls_per_minute=int(_number(env, "CONDUCTOR_LLM_CALLS_PER_MINUTE",
                                         base.calls_per_minute, *CALLS_PER_MINUTE_RANGE,
                                         whole=True)),
            switch=None if not switch_raw else switch_raw in _ON,
            exclude=exclude,
            max_screen_chars=int(_number(env, "CONDUCTOR_LLM_MAX_SCREEN_CHARS",
                                         base.max_screen_chars, *MAX_SCREEN_CHARS_RANGE,
                                         whole=True)),
            max_retries=base.max_retries,
        )

    @property
    def enabled(self) -> bool:
        """On when a key is set, unless ``CONDUCTOR_LLM`` switched it off."""
        return bool(self.api_key) and self.switch is not False

    @property
    def status(self) -> str:
        """One line for ``explain``/``status``: why the LLM is on or off (never the key)."""
        if self.switch is False:
            return "LLM off (CONDUCTOR_LLM=off)"
        if not self.api_key:
            return "LLM off (OPENROUTER_API_KEY not set)"
        return f"LLM on ({self.model} via {self.base_url})"

    def excluded(self, *names: str) -> bool:
        """True if any of the pane's ids or names matches an exclusion (exact or glob)."""
        return any(
            name and fnmatch.fnmatchcase(name, pattern)
            for pattern in self.exclude
            for name in names
        )


def _number(env: Mapping[str, str], name: str, default: float, low: float, high: float,
            whole: bool = False) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise ConfigError(f"{name} must be {kind}, got {raw!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low:g} and {high:g}, got {raw!r}")
    return value


# --- the blocking classifier ---------------------------------------------------------------------


class _Retryable(Exception):
    """One attempt failed in a way another attempt may fix."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class LLMClassifier:
    """Classify one screen with one model; blocking, thread-safe.

    ``classify`` returns a verdict or raises :class:`LLMError` after at most ``settings.timeout``
    seconds (plus the connect time of the attempt in progress), retries included.
    """

    def __init__(
        self,
        settings: LLMSettings,
        session: requests.Session | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._session = session
        self._local = threading.local()  # one requests.Session per worker thread
        self._sessions: list[requests.Session] = []  # every one opened, to close them all
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], Verdict] = OrderedDict()
        self._calls: deque[float] = deque()  # monotonic times of HTTP requests in the last minute
        self._paused_until = 0.0
        self._paused_why = ""
        self._closed = threading.Event()
        self.http_requests = 0  # HTTP requests sent, retries included: for the replay's figures

    # public API

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
        verdict = self._call(self.payload(screen, cli, pack))
        with self._lock:
            self._cache[key] = verdict
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return verdict

    def payload(self, screen: str, cli: str, pack: Pack | None = None) -> dict[str, Any]:
        """The JSON body sent to ``/chat/completions`` (redacted; no key in it)."""
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
        return {
            "model": self.settings.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
            "max_tokens": 300,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "pane_state", "strict": True, "schema": RESPONSE_SCHEMA},
            },
            # Route only to providers that honour response_format, rather than get prose back.
            "provider": {"require_parameters": True},
        }

    def close(self) -> None:
        """Interrupt backoff sleeps and close the HTTP sessions this classifier opened."""
        self._closed.set()
        with self._lock:
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()

    # internals

    def _cache_key(self, screen: str, cli: str) -> tuple[str, str]:
        return (cli, screen_hash(normalise(screen)))

    def ask_json(self, system: str, user: str, schema_name: str, schema: dict[str, Any],
                 max_tokens: int = 300) -> dict[str, Any]:
        """One structured question besides classifying (herd's llm rules): the same key, budget,
        retries, deadline and error handling; the reply's JSON object, or :class:`LLMError`.

        The caller redacts what it puts in ``user`` (see :func:`prepare_screen`) and validates
        the object against its own rules: ``strict`` asks providers to, it does not guarantee.
        """
        if not self.settings.api_key:
            raise LLMError("the LLM needs OPENROUTER_API_KEY")
        payload = {
            "model": self.settings.model,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user}],
            "temperature": 0,
            "max_tokens": max_tokens,
            "response_format": {"type": "json_schema", "json_schema": {
                "name": schema_name, "strict": True, "schema": schema}},
            "provider": {"require_parameters": True},
        }
        return _reply_object(self._request(payload))

    def _call(self, payload: dict[str, Any]) -> Verdict:
        return self._verdict(_parse_reply(self._request(payload)))

    def _request(self, payload: dict[str, Any]) -> bytes:
        """The 200 reply's body, after retries within the deadline; else :class:`LLMError`."""
        settings = self.settings
        deadline = self._clock() + settings.timeout
        last = "no attempt made"
        for attempt in range(settings.max_retries + 1):
            remaining = deadline - self._clock()
            if remaining <= 0:
                break
            self._check_allowed()
            try:
                body = self._post(payload, remaining)
            except _Retryable as exc:
                last = _scrub(exc.reason, settings.api_key)
                delay = exc.retry_after
                if delay is not None and delay > RETRY_AFTER_CAP:
                    self._pause(delay, f"rate limited, Retry-After {delay:.0f}s")
                    raise LLMError(f"LLM call failed: {last} (Retry-After {delay:.0f}s)") from None
                if delay is None:
                    delay = min(0.25 * 2**attempt, 2.0)
                if attempt == settings.max_retries or self._clock() + delay >= deadline:
                    if exc.retry_after is not None:
                        self._pause(exc.retry_after, "rate limited")
                    break
                logger.info("LLM attempt %d failed (%s); retrying in %.2fs",
                            attempt + 1, last, delay)
                if self._closed.wait(delay):
                    raise LLMError("LLM classifier closed") from None
                continue
            return body
        raise LLMError(f"LLM call failed after {attempt + 1} attempt(s) within "
                       f"{settings.timeout:g}s: {last}")

    def _check_allowed(self) -> None:
        now = self._clock()
        with self._lock:
            if self._closed.is_set():
                raise LLMError("LLM classifier closed")
            if now < self._paused_until:
                raise LLMError(f"LLM paused for {self._paused_until - now:.0f}s "
                               f"({self._paused_why})")
            while self._calls and self._calls[0] <= now - 60.0:
                self._calls.popleft()
            if len(self._calls) >= self.settings.calls_per_minute:
                raise LLMError(f"LLM call budget spent ({self.settings.calls_per_minute} per "
                               "minute); keeping the pack verdict")
            self._calls.append(now)
            self.http_requests += 1

    def _pause(self, seconds: float, why: str) -> None:
        with self._lock:
            self._paused_until = max(self._paused_until, self._clock() + min(seconds, 3600.0))
            self._paused_why = why

    def _http(self) -> requests.Session:
        if self._session is not None:
            return self._session
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            import requests  # lazily: ~180 ms the status line must not pay

            session = requests.Session()
            self._local.session = session
            with self._lock:
                self._sessions.append(session)
        return session

    def _post(self, payload: dict[str, Any], remaining: float) -> bytes:
        import requests  # lazily: ~180 ms the status line must not pay

        settings = self.settings
        url = f"{settings.base_url}/chat/completions"
        headers = {
            "Authorization": f"Bearer {settings.api_key}",
            "Content-Type": "application/json",
            "X-Title": "conductor pty",
        }
        deadline = self._clock() + remaining
        try:
            # No redirects: each one would be another request against the per-minute budget
            # (requests follows 30), carrying the key and the screen to wherever it points.
            response = self._http().post(
                url, json=payload, headers=headers, stream=True,
                timeout=(min(remaining, 5.0), remaining), allow_redirects=False,
            )
            try:
                status = response.status_code
                body = _read_until(response, deadline, self._clock)
            finally:
                response.close()
        except requests.exceptions.Timeout:
            raise _Retryable(f"no answer within {remaining:.1f}s") from None
        except requests.exceptions.ConnectionError as exc:
            text = str(exc).lower()
            if "timed out" in text or "timeout" in text:
                raise _Retryable(f"no answer within {remaining:.1f}s") from None
            if "refused" in text:
                raise _Retryable(f"connection refused by {_host(url)}") from None
            raise _Retryable(f"cannot reach {_host(url)}") from None
        except requests.exceptions.RequestException as exc:
            raise LLMError(f"LLM request failed: {type(exc).__name__}") from None

        if status == 200:
            return body
        if 300 <= status < 400:
            where = _host(response.headers.get("Location", "")) or "nowhere"
            raise LLMError(f"OpenRouter answered with a redirect (HTTP {status}) to {where}; "
                           "not followed: check OPENROUTER_BASE_URL")
        detail = _error_detail(body, settings.api_key)
        if status in (401, 403):
            self._pause(AUTH_COOLDOWN, f"HTTP {status}")
            raise LLMError(f"OpenRouter refused the API key (HTTP {status}){detail}")
        if status == 402:
            self._pause(AUTH_COOLDOWN, "HTTP 402")
            raise LLMError(f"OpenRouter account has no credit left (HTTP 402){detail}")
        if status == 429:
            raise _Retryable(f"rate limited (HTTP 429){detail}",
                             _retry_after(response.headers.get("Retry-After")))
        if status == 408 or status >= 500:
            raise _Retryable(f"server error (HTTP {status}){detail}")
        raise LLMError(f"OpenRouter rejected the request (HTTP {status}){detail}")

    def _verdict(self, reply: dict[str, str]) -> Verdict:
        key = self.settings.api_key
        return Verdict(
            state=State(reply["state"]),
            confidence=LLM_CONFIDENCE,
            reasons=("llm_verdict",),
            summary=_one_line(clean_text(_scrub(reply["summary"], key)), 200),
            actions_needed=_one_line(clean_text(_scrub(reply["actions_needed"], key)), 200),
            classifier=self.name,
        )


def _read_until(response: requests.Response, deadline: float,
                clock: Callable[[], float]) -> bytes:
    """Read the body, giving up at ``deadline``: a server trickling bytes defeats a read timeout."""
    import requests  # lazily, as above

    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(8192):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise LLMError(f"LLM reply larger than {MAX_REPLY_BYTES} bytes")
        if clock() > deadline:
            raise requests.exceptions.ReadTimeout("reply not complete by the deadline")
    return b"".join(chunks)


def _parse_reply(body: bytes) -> dict[str, str]:
    """The ``{state, summary, actions_needed}`` inside a chat-completions body, or LLMError."""
    data = _reply_object(body)
    for name in ("state", "summary", "actions_needed"):
        if name not in data:
            raise LLMError(f"LLM reply lacks {name!r}")
        if not isinstance(data[name], str):
            raise LLMError(f"LLM reply's {name!r} is not a string")
    state = data["state"].strip().upper()
    if state not in {s.value for s in SCREEN_STATES}:
        raise LLMError(f"LLM reply has unknown state {_one_line(data['state'], 40)!r}")
    return {"state": state, "summary": data["summary"], "actions_needed": data["actions_needed"]}


def _reply_object(body: bytes) -> dict[str, Any]:
    """The JSON object a chat-completions body carries as its message, or LLMError."""
    try:
        envelope = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise LLMError("LLM reply is not JSON (malformed chat-completions body)") from None
    if not isinstance(envelope, dict):
        raise LLMError("LLM reply is not a chat-completions object")
    choices = envelope.get("choices")
    if not isinstance(choices, list) or not choices:
        error = envelope.get("error")
        if isinstance(error, dict) and error.get("message"):
            raise LLMError(f"LLM provider error: {_one_line(str(error['message']), 120)}")
        raise LLMError("LLM reply has no choices")
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str) or not content.strip():
        refusal = message.get("refusal") if isinstance(message, dict) else None
        if isinstance(refusal, str) and refusal.strip():
            raise LLMError(f"LLM refused: {_one_line(refusal, 120)}")
        raise LLMError("LLM reply is empty")
    text = content.strip()
    # Some providers wrap JSON in a code fence despite response_format; that much is tolerated.
    if text.startswith("```") and text.endswith("```"):
        text = text[3:-3].strip()
        if text[:4].lower() == "json":
            text = text[4:].strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise LLMError(f"LLM reply is not a JSON object: {_one_line(text, 60)!r}") from None
    if not isinstance(data, dict):
        raise LLMError("LLM reply is JSON but not an object")
    return data


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


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils  # lazily: ~15 ms, and only a 429 with a date needs it

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_detail(body: bytes, key: str) -> str:
    try:
        data = json.loads(body.decode("utf-8"))
        message = data["error"]["message"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        return ""
    return f": {_one_line(_scrub(str(message), key), 120)}" if message else ""


def _scrub(text: str, key: str) -> str:
    """Hide the key (whatever its form) and anything else that looks like a secret."""
    if key:
        text = text.replace(key, MASK)
    return redact(text)


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _host(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0]


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
                             _one_line(_scrub(str(exc), self.classifier.settings.api_key), 160))
            with self._cond:
                if self._inflight.get(pane_key) == job.screen_hash:
                    del self._inflight[pane_key]
                self._results[pane_key] = (job.screen_hash, verdict, self._clock())
