"""Local stand-ins of the services Apprise's plugins talk to, each an HTTP server on loopback
whose address the Apprise URL names: an ntfy server (`ntfy://127.0.0.1:PORT/topic`: JSON
posted to /), a Mattermost incoming webhook (`mmost://127.0.0.1:PORT/TOKEN`: JSON posted to
/hooks/TOKEN), and the generic JSON webhook (`json://127.0.0.1:PORT/path`).

Each keeps what it accepted (`messages`: the text as the service would show it, with its
title) and can be told to answer with an error first (`fail`: statuses to answer, in turn,
before it accepts again), or slowly (`delay`, seconds). They answer the way the services
do: ntfy's JSON errors (`{"code": 50001, "http": 500, ...}`), Mattermost's plain "ok".
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.servers import http_serving


@dataclass
class ChatMessage:
    """One message a stand-in accepted: its title (None: the service has none) and text."""

    title: str | None
    text: str
    path: str
    headers: dict[str, str]
    at: float


@dataclass
class ChatServer:
    """One stand-in: its kind ("ntfy", "mattermost", "json"), port, what it accepted, every
    request (accepted or not), and the errors it is told to answer first."""

    kind: str
    port: int = 0
    messages: list[ChatMessage] = field(default_factory=list)
    requests: list[tuple[str, int]] = field(default_factory=list)  # (path, status answered)
    answered: list[float] = field(default_factory=list)  # when each was answered (monotonic)
    fail: list[int] = field(default_factory=list)
    delay: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str = "") -> str:
        """The Apprise URL of this stand-in (`path`: the topic, token or webhook path)."""
        scheme = {"ntfy": "ntfy", "mattermost": "mmost", "json": "json"}[self.kind]
        return f"{scheme}://127.0.0.1:{self.port}/{path.lstrip('/')}"

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.messages]


def _read(kind: str, path: str, body: bytes) -> tuple[str | None, str]:
    data: Any = json.loads(body or b"{}")
    if kind == "ntfy":
        return data.get("title"), str(data.get("message", ""))
    if kind == "mattermost":
        return None, str(data.get("text", ""))
    return data.get("title"), str(data.get("message", ""))


def _error(kind: str, status: int) -> tuple[bytes, str]:
    if kind == "ntfy":
        body = {"code": status * 100 + 1, "http": status, "error": "stand-in refuses"}
        return json.dumps(body).encode(), "application/json"
    return b"stand-in refuses", "text/plain"


@contextmanager
def chat_server(kind: str) -> Iterator[ChatServer]:
    """A stand-in of `kind` ("ntfy", "mattermost", "json") on loopback, in a thread."""
    state = ChatServer(kind)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if state.delay:
                time.sleep(state.delay)
            with state.lock:
                status = state.fail.pop(0) if state.fail else 200
                state.requests.append((self.path, status))
                if status == 200:
                    title, text = _read(kind, self.path, body)
                    state.messages.append(
                        ChatMessage(title, text, self.path, dict(self.headers), time.monotonic())
                    )
            if status == 200:
                answer = b'{"id": "x"}' if kind != "mattermost" else b"ok"
                content_type = "application/json" if kind != "mattermost" else "text/plain"
            else:
                answer, content_type = _error(kind, status)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
            state.answered.append(time.monotonic())

        def log_message(self, *args: Any) -> None:
            pass

    with http_serving(Handler) as state.port:
        yield state
