"""What every fake model server shares: scripted turns, a record of each answer as sent, and
the HTTP plumbing (one POST route, chunked SSE).

A test queues :class:`Say` and :class:`RunBash` turns; each "main" request (one carrying the
agent's tools) takes the next, and with none queued gets ``after_tool`` when the conversation
ends in a tool result, else ``default``. Every response is recorded with ``time.time()`` stamps
of its first and last byte: the ground truth for "the turn truly ended". The wire format is the
subclass's (:mod:`tests.support.fake_anthropic`, :mod:`tests.support.fake_openai`).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.loopback import LoopbackServer
from tests.support.waiting import retry_until

FILLER = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed",
          "do", "eiusmod", "tempor", "incididunt", "ut", "labore", "et", "dolore", "magna",
          "aliqua"]


@dataclass(frozen=True)
class Say:
    """Stream ``text`` one word per SSE delta, ``delay`` seconds apart, and end the turn.

    Both TUIs render whole lines, so a newline every ``line_words`` words keeps the screen
    moving while a long answer streams.
    """

    text: str
    delay: float = 0.0
    line_words: int = 8
    # The last word (so the turn's end) waits for this, when given: a test can be sure that what
    # watches the pane is up before the turn ends, however slowly the machine starts it.
    held_until: threading.Event | None = None

    def hold(self, index: int, stopping: threading.Event) -> bool:
        """Before chunk ``index``: wait for ``held_until`` if this is the last one; True when the
        server stops meanwhile."""
        if self.held_until is None or index != len(self.chunks()) - 1:
            return False
        while not self.held_until.wait(0.1):
            if stopping.is_set():
                return True
        return False

    @classmethod
    def words(cls, count: int, delay: float, prefix: str = "") -> Say:
        words = [FILLER[i % len(FILLER)] for i in range(count)]
        return cls(" ".join([prefix, *words]).strip(), delay)

    def chunks(self) -> list[str]:
        words = self.text.split(" ")
        out = []
        for i, word in enumerate(words):
            last = i == len(words) - 1
            breaks = self.line_words and (i + 1) % self.line_words == 0
            out.append(word if last else word + ("\n" if breaks else " "))
        return out


@dataclass(frozen=True)
class RunBash:
    """A short preamble, then a shell tool call that needs the user's approval.

    ``description`` is what the agent shows beside the command: Claude's Bash ``description``,
    Codex's escalation ``justification`` ("Reason: ...").
    """

    command: str
    description: str = "Run a shell command"
    preamble: str = "I will run a command."


@dataclass(frozen=True)
class CallTool:
    """A short preamble, then a call of any tool by name (an MCP tool: ``mcp__SERVER__TOOL``)."""

    name: str
    input: dict[str, Any]
    preamble: str = "I will call a tool."


Turn = Say | RunBash | CallTool


@dataclass
class Response:
    """One answer as sent. ``ended`` is None while it streams (or if the client hung up)."""

    no: int
    main: bool  # False for the session-title request
    stop_reason: str  # "end_turn" or "tool_use"
    started: float  # time.time() when the status line went out
    ended: float | None = None
    # The tokens the fake reported for it, as the API names them: each response reports its
    # own figures (see known_usage), so a test can add up what a CLI was told.
    usage: dict[str, int] = field(default_factory=dict)


@dataclass
class ScriptedModel(LoopbackServer):
    """Subclasses set ``route`` (the path they answer, query string aside) and write
    :meth:`answer`; anything else gets a JSON 404."""

    route = "/"

    default: Say = field(default_factory=lambda: Say("OK."))
    after_tool: Say = field(
        default_factory=lambda: Say.words(12, delay=0.1, prefix="The command finished. Summary:")
    )
    title: str = "Conductor test session"
    requests: list[dict[str, Any]] = field(default_factory=list)  # parsed bodies, in order
    responses: list[Response] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._script: deque[Turn] = deque()
        self._lock = threading.Lock()
        self._final_at = threading.local()  # per request thread: see final_event_begins
        LoopbackServer.__init__(self)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue(self, *turns: Turn) -> None:
        with self._lock:
            self._script.extend(turns)

    def main_responses(self) -> list[Response]:
        with self._lock:
            return [r for r in self.responses if r.main]

    def turn_ends(self) -> list[float]:
        """End times of the main responses that finished a turn (``end_turn``), oldest first."""
        return [r.ended for r in self.main_responses()
                if r.stop_reason == "end_turn" and r.ended is not None]

    def wait_for_turn_end(self, count: int, seconds: float = 60.0) -> float:
        """Block until ``count`` turns have ended in total; the end time of the last of them."""
        retry_until(lambda: len(self.turn_ends()) >= count, seconds, interval=0.05,
                    message=f"fewer than {count} turn ends: {self.responses}")
        return self.turn_ends()[count - 1]

    # for subclasses

    def answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        raise NotImplementedError

    def handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # every SSE chunk should reach the agent at once

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                if self.path.split("?")[0] != fake.route:
                    send_json(self, 404, {"type": "error", "error": {
                        "type": "not_found_error", "message": f"no route {self.path}"}})
                    return
                # The agent may hang up mid-stream (Esc, or it is being shut down).
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    fake.answer(self, body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def pick(self, ends_in_tool_result: bool) -> Turn:
        """The next scripted turn for a main request."""
        with self._lock:
            if self._script:
                return self._script.popleft()
        return self.after_tool if ends_in_tool_result else self.default

    def record(self, body: dict[str, Any], main: bool, stop_reason: str) -> Response:
        """Note a response as its status line goes out; set ``ended`` with :meth:`finished`."""
        with self._lock:
            self.requests.append(body)
            response = Response(len(self.requests), main, stop_reason, time.time())
            self.responses.append(response)
        return response

    def final_event_begins(self) -> None:
        """Called by a stream just before the event that ends its response: the turn's end is
        that moment, not when the last write returned (this thread may wait for the GIL a
        while after it, long enough for the CLI to have drawn its idle screen)."""
        self._final_at.value = time.time()

    def finished(self, response: Response) -> None:
        final_at = getattr(self._final_at, "value", None)
        self._final_at.value = None
        with self._lock:
            response.ended = final_at if final_at is not None else time.time()


def send_json(handler: BaseHTTPRequestHandler, status: int, obj: dict[str, Any]) -> None:
    payload = json.dumps(obj).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


def start_sse(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()


def send_sse(handler: BaseHTTPRequestHandler, event: str, data: dict[str, Any]) -> None:
    """One SSE event as one HTTP chunk, flushed."""
    chunk = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    handler.wfile.flush()


def end_sse(handler: BaseHTTPRequestHandler) -> None:
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()


def known_usage(no: int) -> dict[str, int]:
    """Token figures for response ``no``, different for each response so that a sum that
    missed or doubled one shows: input, output, cache read and cache write, by our names."""
    return {"input": 100 + no, "output": 40 + no, "cache_read": 11 * no, "cache_write": 7 * no}
