"""A small HTTP server on loopback, in a daemon thread, for the demo's stand-ins (the Slack
stand-in): every GET and POST is handed, as path, headers and body, to one function whose
`Answer` is sent back (a dict as JSON, a str as plain text).

Standard library only (`http.server.ThreadingHTTPServer`); it knows nothing of what it
serves, and is not meant to face anything but the tests and the demo.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    """What to answer one request: a status, a body (a dict is sent as JSON, a str as plain
    text) and extra headers; sent after `delay` seconds, or never (`hang_up`: the connection
    is closed without an answer)."""

    status: int
    body: dict[str, Any] | str
    headers: dict[str, str]
    delay: float = 0.0
    hang_up: bool = False


Handle = Callable[[str, dict[str, str], bytes], Answer]  # path, headers, body -> answer


class LoopbackServer:
    """Serves `handle` on 127.0.0.1 on a free port (`port`, once started) until stopped."""

    def __init__(self, handle: Handle, *, name: str, version: str) -> None:
        self.handle = handle
        self.name = name  # the thread's
        self.version = version  # the Server header's
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        if self._server is not None:
            return
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            args=(0.01,),  # the poll interval: stop() returns quickly
            name=self.name,
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        handle = self.handle
        version = self.version

        class Handler(BaseHTTPRequestHandler):
            server_version = version

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = dict(self.headers.items())
                answer = handle(self.path, headers, body)
                if answer.delay:
                    time.sleep(answer.delay)
                if answer.hang_up:
                    self.close_connection = True
                    return
                if isinstance(answer.body, dict):
                    payload = json.dumps(answer.body).encode()
                    content_type = "application/json; charset=utf-8"
                else:
                    payload = answer.body.encode()
                    content_type = "text/plain; charset=utf-8"
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client stopped waiting for a late answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
