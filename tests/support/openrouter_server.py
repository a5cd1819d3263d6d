"""A real HTTP server on loopback that speaks OpenRouter's ``POST /chat/completions``.

Tests script the replies (status, headers such as Retry-After, body, a delay or a hang) and read
back every request the server received, headers and JSON included. Nothing in ``requests`` is
mocked: the classifier under test opens a real TCP connection to 127.0.0.1.

    with OpenRouterServer() as server:
        server.script(Reply.verdict("BUSY"), Reply(status=500))
        settings = LLMSettings(api_key="sk-or-v1-test", base_url=server.base_url)
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.loopback import LoopbackServer


def completion(content: str | None, model: str = "test/model") -> dict[str, Any]:
    """A chat-completions response body whose one choice says ``content``."""
    return {
        "id": "gen-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


@dataclass(frozen=True)
class Reply:
    """One scripted answer. ``body`` may be bytes, text, or a JSON-able object."""

    status: int = 200
    body: bytes | str | dict[str, Any] | list[Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0  # seconds before the status line is sent
    hang: bool = False  # never answer (released when the server stops)

    @classmethod
    def verdict(cls, state: str, summary: str = "", actions_needed: str = "") -> Reply:
        content = json.dumps({"state": state, "summary": summary, "actions_needed": actions_needed})
        return cls(body=completion(content))

    @classmethod
    def content(cls, text: str | None) -> Reply:
        return cls(body=completion(text))

    @classmethod
    def error(cls, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
        return cls(
            status=status, body={"error": {"code": status, "message": message}}, headers=headers
        )


@dataclass(frozen=True)
class Recorded:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]  # header names lower-cased
    body: bytes
    received: float  # time.monotonic() when the body had been read

    @property
    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))

    @property
    def text(self) -> str:
        """Everything the client sent, headers and body, for "is X anywhere in it" checks."""
        head = "\n".join(f"{k}: {v}" for k, v in self.headers.items())
        return f"{self.method} {self.path}\n{head}\n\n{self.body.decode('utf-8', 'replace')}"


Responder = Callable[[Recorded], Reply]


@dataclass
class OpenRouterServer(LoopbackServer):
    """Scripted replies are used in order; when they run out, ``default`` answers."""

    default: Reply | Responder = field(default_factory=lambda: Reply.verdict("UNKNOWN"))
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        LoopbackServer.__init__(self)

    thread_name = "openrouter-test"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes; with Nagle on, the client's delayed ACK
            # adds ~40 ms to every reply and the latency figures would measure that, not us.
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorded = Recorded(
                    method="POST",
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    received=time.monotonic(),
                )
                reply = server._record(recorded)
                if reply.hang:
                    server.stopping.wait()
                    return
                if reply.delay and server.stopping.wait(reply.delay):
                    return
                if not recorded.path.endswith("/chat/completions"):
                    reply = Reply.error(404, f"no route {recorded.path}")
                payload = _encode(reply.body)
                try:
                    self.send_response(reply.status)
                    names = {name.lower() for name, _ in reply.headers}
                    if "content-type" not in names:
                        self.send_header("Content-Type", "application/json")
                    for name, value in reply.headers:
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (its timeout); that is what some tests test

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        return Handler

    # scripting and inspection

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def _record(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if self._script:
                return self._script.popleft()
        return self.default if isinstance(self.default, Reply) else self.default(recorded)


def _encode(body: bytes | str | dict[str, Any] | list[Any] | None) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body).encode("utf-8")


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released), for refused-connection tests."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
