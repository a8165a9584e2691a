"""A TCP listener on loopback that records every connection made to it (who connected, and
the first bytes they sent), for the tests that check a connection never happens: the
server's own network as a stranger's destination would reach it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


@dataclass
class Listener:
    """What connected: (peer address, the first bytes they sent) each, in order."""

    host: str
    port: int = 0
    connections: list[tuple[str, bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def netloc(self) -> str:
        """host:port as a URL writes it ([::1]:PORT for IPv6)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def seen(self) -> list[tuple[str, bytes]]:
        with self.lock:
            return list(self.connections)


@contextmanager
def listener(host: str = "127.0.0.1") -> Iterator[Listener]:
    """A listener on `host` (127.0.0.1, 127.0.0.2, ::1) on a free port, in a thread: it reads
    what a client sends first, answers an HTTP 200, and closes."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, 0))
    server.listen(16)
    server.settimeout(0.05)
    state = Listener(host, server.getsockname()[1])
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(0.5)
                try:
                    first = conn.recv(4096)
                    conn.sendall(ANSWER)
                except OSError:
                    first = b""
            with state.lock:
                state.connections.append((str(peer[0]), first))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        thread.join(2)
        server.close()
