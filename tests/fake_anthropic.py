"""A loopback fake of the Anthropic Messages API, just enough to drive the real Claude Code.

Claude Code 2.1.197 sends ``POST /v1/messages?beta=true`` with ``stream: true``: one "main"
request per model step (it carries the tools) and a tool-less one per session for the title,
which wants ``{"title": ...}`` back. Main requests take the next scripted :class:`Say` or
:class:`RunBash`; with none queued, a conversation ending in a tool result gets ``after_tool``
and anything else gets ``default``. Every response is recorded with ``time.time()`` stamps of
its first and last byte: the ground truth for "the turn truly ended".

    with FakeAnthropic() as fake:
        fake.queue(Say.words(20, delay=0.3))
        ...  # ANTHROPIC_BASE_URL=fake.base_url claude
        fake.wait_for_turn_end(1)
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

from tests.loopback import LoopbackServer
from tests.waiting import retry_until

FILLER = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed",
          "do", "eiusmod", "tempor", "incididunt", "ut", "labore", "et", "dolore", "magna",
          "aliqua"]


@dataclass(frozen=True)
class Say:
    """Stream ``text`` one word per SSE delta, ``delay`` seconds apart, and end the turn.

    Claude's TUI renders whole lines, so a newline every ``line_words`` words keeps the screen
    moving while a long answer streams.
    """

    text: str
    delay: float = 0.0
    line_words: int = 8

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
    """A short preamble, then a ``Bash`` tool_use: Claude shows its permission prompt."""

    command: str
    description: str = "Run a shell command"
    preamble: str = "I will run a command."


Turn = Say | RunBash


@dataclass
class Response:
    """One answer as sent. ``ended`` is None while it streams (or if the client hung up)."""

    no: int
    main: bool  # False for the title request
    stop_reason: str  # "end_turn" or "tool_use"
    started: float  # time.time() when the status line went out
    ended: float | None = None


@dataclass
class FakeAnthropic(LoopbackServer):
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
        LoopbackServer.__init__(self)

    thread_name = "fake-anthropic"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # every SSE chunk should reach Claude at once

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                if not self.path.split("?")[0].endswith("/v1/messages"):
                    self._send_json(404, {"type": "error", "error": {
                        "type": "not_found_error", "message": f"no route {self.path}"}})
                    return
                # Claude may hang up mid-stream (Esc, or it is being shut down).
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    fake._answer(self, body)

            def _send_json(self, status: int, obj: dict[str, Any]) -> None:
                payload = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    # scripting and inspection

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

    # the answer

    def _pick(self, body: dict[str, Any]) -> Turn:
        with self._lock:
            if self._script:
                return self._script.popleft()
        messages = body.get("messages") or []
        content = messages[-1].get("content") if messages else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        ):
            return self.after_tool
        return self.default

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        # A request without tools is the session title (or a max_tokens=1 probe): answer at once
        # and never consume a scripted turn.
        main = bool(body.get("tools")) and int(body.get("max_tokens") or 0) > 1
        turn = self._pick(body) if main else Say(json.dumps({"title": self.title}))
        blocks: list[dict[str, Any]] = []
        if isinstance(turn, RunBash):
            blocks.append({"type": "text", "chunks": Say(turn.preamble).chunks(), "delay": 0.0})
            blocks.append({"type": "tool_use", "name": "Bash",
                           "input": {"command": turn.command, "description": turn.description}})
            stop_reason = "tool_use"
        else:
            blocks.append({"type": "text", "chunks": turn.chunks(), "delay": turn.delay})
            stop_reason = "end_turn"
        with self._lock:
            self.requests.append(body)
            response = Response(len(self.requests), main, stop_reason, time.time())
            self.responses.append(response)
        message_id = f"msg_fake_{response.no}"
        model = body.get("model", "claude-fake")
        if not body.get("stream"):
            self._non_stream(handler, message_id, model, blocks, stop_reason)
        elif not self._stream(handler, message_id, model, blocks, stop_reason):
            return  # cut short by stop(): it never ended
        with self._lock:
            response.ended = time.time()

    def _non_stream(self, handler: BaseHTTPRequestHandler, message_id: str, model: str,
                    blocks: list[dict[str, Any]], stop_reason: str) -> None:
        content = [
            {"type": "text", "text": "".join(b["chunks"])} if b["type"] == "text"
            else {"type": "tool_use", "id": f"toolu_{message_id}", "name": b["name"],
                  "input": b["input"]}
            for b in blocks
        ]
        payload = json.dumps({
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        }).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _stream(self, handler: BaseHTTPRequestHandler, message_id: str, model: str,
                blocks: list[dict[str, Any]], stop_reason: str) -> bool:
        def send(event: str, data: dict[str, Any]) -> None:
            chunk = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            handler.wfile.flush()

        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        send("message_start", {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 1}}})
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                send("content_block_start", {"type": "content_block_start", "index": index,
                                             "content_block": {"type": "text", "text": ""}})
                for chunk in block["chunks"]:
                    send("content_block_delta", {"type": "content_block_delta", "index": index,
                                                 "delta": {"type": "text_delta", "text": chunk}})
                    if block["delay"] and self.stopping.wait(block["delay"]):
                        return False
            else:
                send("content_block_start", {"type": "content_block_start", "index": index,
                                             "content_block": {"type": "tool_use",
                                                               "id": f"toolu_{message_id}",
                                                               "name": block["name"],
                                                               "input": {}}})
                send("content_block_delta", {"type": "content_block_delta", "index": index,
                                             "delta": {"type": "input_json_delta",
                                                       "partial_json": json.dumps(block["input"])}})
            send("content_block_stop", {"type": "content_block_stop", "index": index})
        send("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                               "usage": {"output_tokens": 42}})
        send("message_stop", {"type": "message_stop"})
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
        return True
