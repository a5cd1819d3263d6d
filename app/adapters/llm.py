"""The one LLM HTTP client: OpenRouter's chat-completions API over requests.

Every model call goes through here: the screen classifier (:mod:`app.observe.llm`), herd's
``type: llm`` rules (:mod:`app.act.herd.llmrule`) and the report cycle's assessor
(:mod:`app.act.cycle.decide`). They share one client, so one key, one per-minute budget and one
pause after the account or the rate limit said stop.

* :class:`LLMSettings` - the settings, read from a mapping such as ``os.environ`` over the config
  file's defaults.
* :class:`LLMClient` - one blocking structured question (:meth:`LLMClient.ask_json`): a strict
  JSON schema asked for, retries with backoff inside one deadline, a per-minute call budget, a
  pause after 401/402 or a long Retry-After, redirects refused, the reply's size bounded. Any
  failure is one :class:`~app.base.errors.LLMError` whose message never holds the key.

The caller redacts what it sends (:func:`app.base.redact.prepare_screen`) and validates the
object that comes back against its own rules: ``strict`` asks providers to, it does not guarantee.

``requests`` is imported inside the functions that send, never at module import: the CLI's
status-line path imports this module's neighbours and must not pay ~180 ms for it.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.base.errors import ConfigError, LLMError
from app.base.redact import MASK, redact
from app.base.settings_table import bounds, default

if TYPE_CHECKING:
    import requests

logger = logging.getLogger("app.adapters.llm")

DEFAULT_BASE_URL = default("llm.base_url", str)
# Cheap, fast, and routed by OpenRouter to providers that honour json_schema structured output.
DEFAULT_MODEL = default("llm.model", str)
DEFAULT_TIMEOUT = default("llm.timeout", float)  # seconds for one question, retries included
DEFAULT_CALLS_PER_MINUTE = default("llm.calls_per_minute", int)
DEFAULT_MAX_SCREEN_CHARS = default("llm.max_screen_chars", int)
DEFAULT_MAX_RETRIES = 2
# Accepted ranges, shared by the environment variables and the config file.
TIMEOUT_RANGE = bounds("llm.timeout")
CALLS_PER_MINUTE_RANGE = bounds("llm.calls_per_minute")
MAX_SCREEN_CHARS_RANGE = bounds("llm.max_screen_chars")
# Longest we sleep inside one call for a 429's Retry-After; longer waits end the call instead.
RETRY_AFTER_CAP = 10.0
# After 401/402 the key or the account is broken: calling again soon only burns the budget.
AUTH_COOLDOWN = 300.0
MAX_REPLY_BYTES = 1_000_000

_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}


# --- settings ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMSettings:
    """How (and whether) to call the LLM. ``api_key`` never shows in ``repr`` or ``str``."""

    api_key: str = field(default="", repr=False)
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_MODEL
    timeout: float = DEFAULT_TIMEOUT  # seconds for one question, retries included
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


# --- the client ----------------------------------------------------------------------------------


class _Retryable(Exception):
    """One attempt failed in a way another attempt may fix."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class LLMClient:
    """Ask one model structured questions; blocking, thread-safe.

    ``ask_json`` returns the reply's JSON object or raises :class:`LLMError` after at most
    ``settings.timeout`` seconds (plus the connect time of the attempt in progress), retries
    included.
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
        self._calls: deque[float] = deque()  # monotonic times of HTTP requests in the last minute
        self._paused_until = 0.0
        self._paused_why = ""
        self._closed = threading.Event()
        self.http_requests = 0  # HTTP requests sent, retries included: for the replay's figures

    def request_body(self, system: str, user: str, schema_name: str, schema: dict[str, Any],
                     max_tokens: int = 300) -> dict[str, Any]:
        """The JSON body :meth:`ask_json` sends to ``/chat/completions`` (no key in it)."""
        return {
            "model": self.settings.model,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user}],
            "temperature": 0,
            "max_tokens": max_tokens,
            "response_format": {"type": "json_schema", "json_schema": {
                "name": schema_name, "strict": True, "schema": schema}},
            # Route only to providers that honour response_format, rather than get prose back.
            "provider": {"require_parameters": True},
        }

    def ask_json(self, system: str, user: str, schema_name: str, schema: dict[str, Any],
                 max_tokens: int = 300) -> dict[str, Any]:
        """Ask once (retries within the deadline); the reply's JSON object, or :class:`LLMError`.

        The caller redacts what it puts in ``user`` and validates the object it gets back.
        """
        if not self.settings.api_key:
            raise LLMError("the LLM needs OPENROUTER_API_KEY")
        body = self.request_body(system, user, schema_name, schema, max_tokens)
        return _reply_object(self._request(body))

    def close(self) -> None:
        """Interrupt backoff sleeps and close the HTTP sessions this client opened."""
        self._closed.set()
        with self._lock:
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()

    # internals

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
                last = scrub(exc.reason, settings.api_key)
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
                    raise LLMError("LLM client closed") from None
                continue
            return body
        raise LLMError(f"LLM call failed after {attempt + 1} attempt(s) within "
                       f"{settings.timeout:g}s: {last}")

    def _check_allowed(self) -> None:
        now = self._clock()
        with self._lock:
            if self._closed.is_set():
                raise LLMError("LLM client closed")
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
            raise LLMError(f"LLM provider error: {one_line(str(error['message']), 120)}")
        raise LLMError("LLM reply has no choices")
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str) or not content.strip():
        refusal = message.get("refusal") if isinstance(message, dict) else None
        if isinstance(refusal, str) and refusal.strip():
            raise LLMError(f"LLM refused: {one_line(refusal, 120)}")
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
        raise LLMError(f"LLM reply is not a JSON object: {one_line(text, 60)!r}") from None
    if not isinstance(data, dict):
        raise LLMError("LLM reply is JSON but not an object")
    return data


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
    return f": {one_line(scrub(str(message), key), 120)}" if message else ""


def scrub(text: str, key: str) -> str:
    """Hide the key (whatever its form) and anything else that looks like a secret."""
    if key:
        text = text.replace(key, MASK)
    return redact(text)


def one_line(text: str, limit: int) -> str:
    """``text`` on one line of at most ``limit`` characters (an ellipsis marks a cut)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _host(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0]
