"""Real servers on loopback for the tests: an HTTP feed server (and what arXiv's feed serves
day by day), an HTTP forward proxy, an SMTP sink (aiosmtpd), a web server for the app, and a
hostile HTTP server."""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import os
import socket
import subprocess
import threading
import time
import urllib.parse
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from bot.demo import free_port


@dataclass
class Route:
    body: bytes
    status: int = 200
    content_type: str = "application/rss+xml; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)  # e.g. Retry-After


@dataclass
class FeedServer:
    """Serves `routes` (path -> Route) with ETags, answering 304 to a matching If-None-Match."""

    routes: dict[str, Route] = field(default_factory=dict)
    bodies: dict[str, Any] = field(default_factory=dict)  # path -> callable giving the body
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    port: int = 0
    # Any request whose path (with its query) no route names: `answer(path, headers)`
    # gives the Route, or None for a 404. Queued routes for a path are served first, one
    # per request (a 429, then a 503, then the real body).
    answer: Any = None
    queued: dict[str, list[Route]] = field(default_factory=dict)
    # When each request came, by `clock` (a test's controlled clock, if it sets one).
    clock: Any = time.monotonic
    times: list[float] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def etag_of(body: bytes) -> str:
    """The ETag `feed_server` gives a body."""
    return '"' + hashlib.sha256(body).hexdigest()[:16] + '"'


def header(headers: dict[str, str], name: str) -> str | None:
    """A request header (of `FeedServer.requests`) by name, whatever its case on the wire."""
    return {key.lower(): value for key, value in headers.items()}.get(name.lower())


@contextmanager
def feed_server() -> Iterator[FeedServer]:
    state = FeedServer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.times.append(state.clock())
            state.requests.append((self.path, dict(self.headers.items())))
            route = state.routes.get(self.path)
            if self.path in state.bodies:
                route = Route(state.bodies[self.path]())
            base = self.path.split("?", 1)[0]
            for key in (self.path, base):
                if state.queued.get(key):
                    route = state.queued[key].pop(0)
                    break
            else:
                if route is None and state.answer is not None:
                    route = state.answer(self.path, dict(self.headers.items()))
            if route is None:
                self.send_response(404)
                self.end_headers()
                return
            etag = etag_of(route.body)
            if route.status == 200 and self.headers.get("If-None-Match") == etag:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.end_headers()
                return
            self.send_response(route.status)
            for name, value in {**state.headers, **route.headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Type", route.content_type)
            self.send_header("Content-Length", str(len(route.body)))
            self.send_header("ETag", etag)
            self.end_headers()
            self.wfile.write(route.body)

        def log_message(self, *args: Any) -> None:
            pass

    with http_serving(Handler) as state.port:
        yield state


@contextmanager
def http_serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """`handler` served on 127.0.0.1 on a free port (yielded), in a thread, until the block
    ends: the feed server's and the chat services' stand-ins share it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass
class ForwardProxy:
    """What `forward_proxy` forwarded: each request's method and absolute URL, in order."""

    port: int = 0
    forwarded: list[tuple[str, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


# Headers of one hop, not passed on (and those the proxy's own answer sets).
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer"}
    | {"transfer-encoding", "upgrade", "content-length", "date", "server"}
)


@contextmanager
def forward_proxy() -> Iterator[ForwardProxy]:
    """An HTTP forward proxy on loopback, as on a university's network: it takes GET and POST
    requests for absolute http:// URLs, forwards each and sends back its whole answer (no
    CONNECT, so no https)."""
    state = ForwardProxy()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            target = urllib.parse.urlsplit(self.path)
            if target.scheme != "http" or not target.hostname:
                self.send_error(400, "a proxy needs an absolute http:// URL")
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            state.forwarded.append((self.command, self.path))
            path = target.path or "/"
            upstream = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=10)
            try:
                upstream.request(
                    self.command,
                    f"{path}?{target.query}" if target.query else path,
                    body=body,
                    headers=headers,
                )
                answer = upstream.getresponse()
                payload = answer.read()
            except OSError:
                self.send_error(502)
                return
            finally:
                upstream.close()
            self.send_response(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in _HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_POST = do_GET

    with http_serving(Handler) as state.port:
        yield state


class SinkHandler:
    """Keeps every message received; can be told to refuse some recipients."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.raw: list[bytes] = []  # each message as it came over the wire
        self.envelopes: list[tuple[str, list[str]]] = []
        # Each DATA command's MAIL FROM parameters (SIZE=..., SMTPUTF8, BODY=...), kept
        # whatever the answer.
        self.mail_options: list[list[str]] = []
        self.refuse: dict[str, str] = {}  # recipient -> SMTP reply
        self.stall = 0.0  # seconds to wait before answering DATA (a slow or hung server)
        self.transient: dict[str, int] = {}  # recipient -> how many times to answer 451 first
        self.drop_data = 0  # how many DATA commands to answer by dropping the connection
        self.delay = 0.0  # seconds to wait before accepting a message (a slow server)
        self.data_started = 0  # DATA commands received (a message being sent, or sent)
        # Called with each message just before the server answers "250 accepted" (from the
        # server's thread): a test makes something happen at that moment.
        self.on_accept: Callable[[EmailMessage], None] | None = None

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        if address in self.refuse:
            return self.refuse[address]
        if self.transient.get(address, 0) > 0:
            self.transient[address] -= 1
            return "451 4.7.1 greylisted, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.data_started += 1
        self.mail_options.append(list(envelope.mail_options))
        if self.drop_data > 0:
            self.drop_data -= 1
            server.transport.close()  # mid-DATA: the message was not accepted
            return "421 closing"
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.stall:
            await asyncio.sleep(self.stall)
            return "451 4.3.0 too slow, try again"
        raw = envelope.original_content or envelope.content
        received = message_from_bytes(raw, policy=policy.default)
        self.messages.append(received)  # type: ignore[arg-type]
        self.raw.append(bytes(raw))
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        if self.on_accept is not None:
            self.on_accept(received)  # type: ignore[arg-type]
        return "250 Message accepted for delivery"


@contextmanager
def smtp_sink(
    handler: SinkHandler | None = None, port: int | None = None, *, password: str | None = None
) -> Iterator[tuple[SinkHandler, int]]:
    """An SMTP server on loopback keeping what it receives (`handler`: a SinkHandler of the
    test's own, such as one that answers otherwise; `port`: a given one, else a free one;
    `password`: the one its AUTH takes, with any username, over plain TCP)."""
    handler = handler or SinkHandler()
    port = port or free_port()
    auth: dict[str, Any] = {}
    if password is not None:

        def authenticate(
            server: Any, session: Any, envelope: Any, mechanism: str, data: Any
        ) -> AuthResult:
            return AuthResult(success=data.password == password.encode(), handled=False)

        auth = {"authenticator": authenticate, "auth_require_tls": False}
    controller = Controller(handler, hostname="127.0.0.1", port=port, **auth)
    controller.start()
    try:
        yield handler, port
    finally:
        controller.stop()


def first_items(listing: bytes, count: int) -> bytes:
    """A real RSS listing cut to its first `count` items: the same day on less data, for a
    test whose point is not the day's size."""
    head, _, rest = listing.partition(b"<item>")
    items = [b"<item>" + part for part in rest.split(b"<item>")][:count]
    items[-1], _, _ = items[-1].partition(b"</channel>")
    return head + b"".join(items) + b"</channel>\n</rss>\n"


class ArxivDays:
    """What rss.arxiv.org serves at a given moment, built from the real listing of 2024-11-28.

    Each feed day gets its own slice of the real papers (distinct ids), re-dated to that day;
    weekends and holidays serve the real empty feed, re-dated. The listing of a day appears
    at its rebuild time (00:00 US Eastern unless `rebuild` says otherwise, to play a late
    listing); until then the feed still holds the previous day's batch. `short` cuts a
    day's listing to its first items (arXiv's RSS has served 16 of 239)."""

    ORIGINAL_DATE = b"Thu, 28 Nov 2024"

    def __init__(self, listing: bytes, empty: bytes, calendar: Any, slices: int = 20) -> None:
        head, _, rest = listing.partition(b"<item>")
        items = [b"<item>" + part for part in rest.split(b"<item>")]
        items[-1], _, _ = items[-1].partition(b"</channel>")
        self.head, self.items, self.empty = head, items, empty
        self.calendar = calendar
        self.slices = slices
        self.rebuild: dict[Any, Any] = {}  # feed day -> time of day (Eastern) it appears
        self.short: dict[Any, int] = {}  # feed day -> the only items its listing serves

    @staticmethod
    def _redate(body: bytes, day: Any) -> bytes:
        return body.replace(ArxivDays.ORIGINAL_DATE, f"{day:%a}, {day:%d %b %Y}".encode())

    def papers_of(self, day: Any) -> list[bytes]:
        """The items (raw XML) of a feed day's listing."""
        index = day.toordinal() % self.slices
        return self.items[index :: self.slices][: self.short.get(day)]

    def body(self, at: Any) -> bytes:
        from datetime import time, timedelta

        from bot.core.calendar import eastern, eastern_date

        day = eastern_date(at)
        if not self.calendar.day(day).announces:
            return self._redate(self.empty, day)
        if at < eastern(day, self.rebuild.get(day, time(0, 0))):
            day = self.calendar.last_feed_day(day - timedelta(days=1))
        listing = self.head + b"".join(self.papers_of(day)) + b"</channel>\n</rss>\n"
        return self._redate(listing, day)


@contextmanager
def web_server(app: Any, *, trusted_proxies: tuple[str, ...] = ()) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on loopback, in a thread, as `paperbell serve` does
    (`trusted_proxies`: [web] trusted_proxies); yields its base URL."""
    import time

    from bot.web.app import make_server

    port = free_port()
    server = make_server(app, host="127.0.0.1", port=port, trusted_proxies=trusted_proxies)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the web app did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@dataclass
class HostileServer:
    """What `hostile_server` served: the paths asked for and the bytes sent on each."""

    port: int = 0
    drip_seconds: float = 2.0  # between two bytes of /drip
    total: int = 1 << 30  # what /endless sends at most (1 GB), as fast as it is read
    requests: list[str] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)
    # What /given serves: its body in these pieces, framed by "length" (Content-Length:
    # `declared`, the true length if None), "chunked" (one chunk a piece) or "close".
    pieces: list[bytes] = field(default_factory=list)
    framing: str = "length"
    declared: int | None = None
    twice: int = 256 * 1024 * 1024  # what /gzip-twice unpacks to (256 MB of zeros)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def gzip_twice(size: int) -> bytes:
    """`size` zeros packed by gzip, and the result packed by gzip again: a few KB."""
    inner = zlib.compressobj(1, zlib.DEFLATED, 31)
    zeros = bytes(16 * 1024 * 1024)
    packed = b"".join(inner.compress(zeros) for _ in range(size // len(zeros))) + inner.flush()
    outer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return outer.compress(packed) + outer.flush()


@asynccontextmanager
async def hostile_server(**settings: Any) -> AsyncIterator[HostileServer]:
    """A raw HTTP server in the test's loop, for what a polite server never does:

    - `/endless`: a 200 whose body goes on (up to `total` bytes) with no Content-Length;
    - `/endless-chunked`: the same in chunked transfer encoding;
    - `/declared`: a 200 declaring a 10 GB Content-Length, then sending as /endless;
    - `/drip`: a 200 whose body comes one byte every `drip_seconds`, forever;
    - `/redirect-endless`: a 302 to /feed whose own body never ends;
    - `/gzip-bomb`: a gzip body that unpacks to zeros without end (about 1000:1);
    - `/gzip-twice`: a body packed by gzip twice (`Content-Encoding: gzip, gzip`): a few KB
      that unpack to `twice` bytes of zeros in one read;
    - `/given`: the body in `pieces`, framed as `framing` and `declared` say;
    - `/feed`: a small, valid RSS feed with one item."""
    state = HostileServer(**settings)
    chunk = b"<item>" + b"x" * (64 * 1024 - 6)

    async def endless(writer: asyncio.StreamWriter, path: str, *, chunked: bool) -> None:
        while state.sent[path] < state.total:
            data = b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk
            writer.write(data)
            state.sent[path] += len(chunk)
            await writer.drain()

    handlers: set[asyncio.Task[Any]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            handlers.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode()
            state.requests.append(path)
            state.sent[path] = 0
            ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\n"
            if path == "/endless":
                writer.write(ok + b"Connection: close\r\n\r\n")
                await endless(writer, path, chunked=False)
            elif path == "/endless-chunked":
                writer.write(ok + b"Transfer-Encoding: chunked\r\n\r\n")
                await endless(writer, path, chunked=True)
            elif path == "/declared":
                writer.write(ok + b"Content-Length: 10737418240\r\n\r\n")
                await endless(writer, path, chunked=False)
            elif path == "/drip":
                writer.write(ok + b"Connection: close\r\n\r\n<")
                while True:
                    await writer.drain()
                    await asyncio.sleep(state.drip_seconds)
                    writer.write(b"r")
                    state.sent[path] += 1
            elif path == "/gzip-bomb":
                writer.write(ok + b"Content-Encoding: gzip\r\nConnection: close\r\n\r\n")
                packer = zlib.compressobj(9, zlib.DEFLATED, 31)
                zeros = bytes(16 * 1024 * 1024)
                while state.sent[path] < state.total:
                    packed = packer.compress(zeros) + packer.flush(zlib.Z_SYNC_FLUSH)
                    writer.write(packed)
                    state.sent[path] += len(zeros)  # counted as it unpacks
                    await writer.drain()
            elif path == "/gzip-twice":
                body = gzip_twice(state.twice)
                writer.write(
                    ok + b"Content-Encoding: gzip, gzip\r\nContent-Length: %d\r\n" % len(body)
                )
                writer.write(b"Connection: close\r\n\r\n" + body)
                state.sent[path] = state.twice
            elif path == "/given":
                body = b"".join(state.pieces)
                if state.framing == "chunked":
                    writer.write(ok + b"Transfer-Encoding: chunked\r\n\r\n")
                    for piece in state.pieces:
                        if piece:
                            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                            await writer.drain()
                    writer.write(b"0\r\n\r\n")
                else:
                    length = len(body) if state.declared is None else state.declared
                    framing = (
                        b"Connection: close\r\n"
                        if state.framing == "close"
                        else b"Content-Length: %d\r\nConnection: close\r\n" % length
                    )
                    writer.write(ok + framing + b"\r\n")
                    for piece in state.pieces:
                        writer.write(piece)
                        await writer.drain()
            elif path == "/redirect-endless":
                writer.write(b"HTTP/1.1 302 Found\r\nLocation: /feed\r\nConnection: close\r\n\r\n")
                await endless(writer, path, chunked=False)
            else:
                feed = FEED_ONE_ITEM
                writer.write(
                    ok + b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(feed), feed)
                )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client stopped reading: what the tests want
        except asyncio.CancelledError:
            pass  # the server is closing (below): end quietly
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()
        for task in handlers:  # still dripping or sending: stop them
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


FEED_ONE_ITEM = b"""<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>A small journal</title><link>https://journal.example/</link>
<item><title>A paper that arrives</title><link>https://journal.example/paper/1</link>
<guid>https://journal.example/paper/1</guid><description>Its abstract.</description>
<pubDate>Tue, 24 Nov 2026 08:00:00 GMT</pubDate></item>
</channel></rss>
"""


POSTFIX_SINK = Path("/usr/sbin/smtp-sink")


AS_NOBODY = ["-u", "nobody"] if os.geteuid() == 0 else []  # it refuses to run as root


@contextmanager
def postfix_sink(folder: Path, port: int, *options: str) -> Iterator[None]:
    """Postfix's smtp-sink on loopback `port`, answering as `options` say (-Q CONNECT: 421
    as paperbell connects; -Q RCPT: 421 to each recipient), until the block ends."""
    sink = subprocess.Popen(
        [str(POSTFIX_SINK), *AS_NOBODY, *options, f"127.0.0.1:{port}", "10"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _listening(port), timeout=10)
        yield
    finally:
        sink.terminate()
        sink.wait(timeout=10)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def wait_for(condition: object, *, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
