"""The answer page over HTTP: ``GET /?key=…`` lists the questions, ``GET /a/<token>`` asks
"press it?", ``POST /a/<token>`` presses. Nothing else is served (app.run.answer_desk says what
the page may do).

- The list needs the page key (``serve`` prints the address with it); each option link carries
  its own signed token, so a notification service's button (ntfy's ``http`` action: a POST to the
  link) works without the page key.
- A GET never presses: link previews, prefetching browsers and crawlers only GET.
- Every text from a pane is escaped: it is data, never markup.
- An address that sends more bad keys, bad links or unknown paths in a minute than
  ``serve.bad_requests_per_minute`` is answered 429 until its minute has passed; the log says so
  once per address per minute.
- The log never holds a token or the page key: the request line is not logged.
"""

from __future__ import annotations

import html
import ipaddress
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from app.act.answer_links import LinkKeys, LinkRefused
from app.base.errors import ConductorError
from app.run.answer_desk import AnswerDesk, Question

log = logging.getLogger(__name__)

_WINDOW_S = 60.0
_MAX_BODY = 64 * 1024
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",  # the address holds a token
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}
# What each refusal of a link answers with.
_STATUS = {"invalid": HTTPStatus.FORBIDDEN, "expired": HTTPStatus.GONE,
           "used": HTTPStatus.GONE, "changed": HTTPStatus.CONFLICT,
           "gone": HTTPStatus.GONE}
_STYLE = ("body{font:16px/1.4 system-ui,sans-serif;margin:1em;max-width:40em}"
          ".q{border:1px solid #999;border-radius:6px;padding:.6em;margin:.8em 0}"
          ".o{display:inline-block;margin:.3em .4em 0 0;padding:.4em .8em;border:1px solid #555;"
          "border-radius:4px;text-decoration:none;color:inherit}"
          ".approve{background:#d8f0d8}.refuse{background:#f4d6d6}"
          "button{font-size:1.1em;padding:.5em 1.2em}")


class Limiter:
    """Counts each address's bad requests in the last minute; past the limit it is refused."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._per_minute = per_minute
        self._clock = clock
        self._bad: dict[str, deque[float]] = {}
        self._told: dict[str, float] = {}
        self._lock = threading.Lock()

    def blocked(self, client: str) -> bool:
        with self._lock:
            now = self._clock()
            recent = self._recent(client, now)
            if len(recent) < self._per_minute:
                return False
            if now - self._told.get(client, -_WINDOW_S) >= _WINDOW_S:
                self._told[client] = now
                log.warning("answer page: %s sent %d bad requests in a minute; refused for "
                            "now", client, len(recent))
            return True

    def failed(self, client: str) -> None:
        with self._lock:
            self._recent(client, self._clock()).append(self._clock())

    def _recent(self, client: str, now: float) -> deque[float]:
        recent = self._bad.setdefault(client, deque())
        while recent and now - recent[0] >= _WINDOW_S:
            recent.popleft()
        if len(self._bad) > 10_000:  # many addresses: forget the quiet ones
            for quiet in [c for c, d in self._bad.items() if not d and c != client]:
                del self._bad[quiet]
        return recent


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    desk: AnswerDesk
    links: LinkKeys
    limiter: Limiter


def make_server(desk: AnswerDesk, links: LinkKeys, address: str, port: int,
                bad_per_minute: int) -> ThreadingHTTPServer:
    """A server bound to ``address``:``port`` (0: any free port), not yet serving."""
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    server_class = type("AnswerServer", (_Server,), {"address_family": family})
    server: _Server = server_class((address, port), _Handler)
    server.desk, server.links, server.limiter = desk, links, Limiter(bad_per_minute)
    return server


def page_url(server: ThreadingHTTPServer, links: LinkKeys) -> str:
    host, port = server.server_address[:2]
    name = host.decode() if isinstance(host, bytes) else str(host)
    shown = f"[{name}]" if ":" in name else name
    return f"http://{shown}:{port}/?key={links.page_key()}"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "conductor"
    sys_version = ""

    def do_GET(self) -> None:
        self._guarded(self._get)

    def do_POST(self) -> None:
        self._guarded(self._post)

    def do_HEAD(self) -> None:
        self._reply(HTTPStatus.METHOD_NOT_ALLOWED, "Not here", "Only GET and POST.")

    def _guarded(self, handle: Callable[[str], None]) -> None:
        client = self.client_address[0]
        if self.server.limiter.blocked(client):
            self._reply(HTTPStatus.TOO_MANY_REQUESTS, "Too many bad requests",
                        "Too many bad links from this address; try again in a minute.")
            return
        try:
            handle(client)
        except ConductorError as exc:
            log.warning("answer page: %s", exc)
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, "Not available", str(exc))

    def _get(self, client: str) -> None:
        url = urlsplit(self.path)
        if url.path == "/":
            key = parse_qs(url.query).get("key", [""])[0]
            if not self.server.links.page_allowed(key):
                self._bad(client, HTTPStatus.FORBIDDEN, "This page needs its key.")
                return
            self._reply(HTTPStatus.OK, "Asking you", _list_body(self.server.desk.questions()),
                        refresh=True, raw=True)
            return
        token = _token_of(url.path)
        if token is None:
            self._bad(client, HTTPStatus.NOT_FOUND, "Nothing here.")
            return
        try:
            preview = self.server.desk.preview(token)
        except LinkRefused as exc:
            self._refused(client, exc)
            return
        body = (f"<p>Press <b>{html.escape(preview.choice)}</b> in "
                f"<b>{html.escape(preview.name)}</b>'s dialog?</p>"
                '<form method="post"><button type="submit">Press it</button></form>'
                "<p>It is pressed only if the pane still shows the dialog this link was made "
                "for.</p>")
        self._reply(HTTPStatus.OK, "Press it?", body, raw=True)

    def _post(self, client: str) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0  # a body we cannot size is not read: nothing in it counts anyway
        if 0 < length <= _MAX_BODY:
            self.rfile.read(length)  # nothing in it counts: the token is the whole request
        token = _token_of(urlsplit(self.path).path)
        if token is None:
            self._bad(client, HTTPStatus.NOT_FOUND, "Nothing here.")
            return
        try:
            answered = self.server.desk.press(token, client)
        except LinkRefused as exc:
            self._refused(client, exc)
            return
        except ConductorError as exc:
            self._reply(HTTPStatus.CONFLICT, "Not pressed", str(exc))
            return
        self._reply(HTTPStatus.OK, "Pressed", f"Pressed {answered.label!r}: "
                    f"{answered.subject or 'the dialog'}")

    def _refused(self, client: str, exc: LinkRefused) -> None:
        if exc.kind == "invalid":
            self.server.limiter.failed(client)
        self._reply(_STATUS.get(exc.kind, HTTPStatus.CONFLICT), "Not pressed", str(exc))

    def _bad(self, client: str, status: HTTPStatus, text: str) -> None:
        self.server.limiter.failed(client)
        self._reply(status, status.phrase, text)

    def _reply(self, status: HTTPStatus, title: str, body: str, *, refresh: bool = False,
               raw: bool = False) -> None:
        inner = body if raw else f"<p>{html.escape(body)}</p>"
        meta = '<meta http-equiv="refresh" content="15">' if refresh else ""
        page = ("<!doctype html><html><head><meta charset=\"utf-8\">"
                '<meta name="viewport" content="width=device-width,initial-scale=1">'
                f"{meta}<title>{html.escape(title)}</title><style>{_STYLE}</style></head>"
                f"<body><h1>{html.escape(title)}</h1>{inner}</body></html>").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        for name, value in _HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request line holds tokens; presses are logged by the desk

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        log.debug("answer page: %s %s", self.command, code)


def _token_of(path: str) -> str | None:
    prefix = "/a/"
    if not path.startswith(prefix) or "/" in path[len(prefix):]:
        return None
    return path[len(prefix):] or None


def _list_body(questions: list[Question]) -> str:
    if not questions:
        return "<p>No pane is asking you anything.</p>"
    parts = []
    for question in questions:
        options = "".join(
            f'<a class="o {html.escape(o.role)}" href="/a/{html.escape(o.token)}">'
            f"{html.escape(o.label)}</a>" for o in question.options)
        parts.append(f'<div class="q"><b>{html.escape(question.name)}</b>'
                     f"<p>{html.escape(question.subject)}</p>{options}</div>")
    return "".join(parts)
