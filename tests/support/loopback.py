"""The part every loopback test server shares: a threaded HTTP server on 127.0.0.1 and a free
port, started and stopped around a test (``with Server() as s:``)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TypeVar

S = TypeVar("S", bound="LoopbackServer")


class LoopbackServer:
    """Subclasses give the request handler; ``stopping`` is set first on stop, so handlers that
    hang or stream on purpose can end early instead of holding the shutdown up."""

    thread_name = "loopback-test"

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def start(self: S) -> S:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, args=(0.05,),
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    def __enter__(self: S) -> S:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
