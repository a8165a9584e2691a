"""Polite HTTP for sources: the only module in `bot.sources` that moves bytes over the network.
Its `capped_client` gives the model endpoints' clients (summaries, embeddings) the same
bound on an answer's size.

`PoliteFetcher.get` does what every feed poll needs and nothing more: a conditional GET
(ETag / Last-Modified), paperbell's User-Agent, one request in flight per host with at least
`min_interval` seconds between the starts of two requests to it, a redirect's next hop
included (arXiv's terms ask for one request every 3 seconds and one connection at a time),
and retries with exponential backoff on 429/5xx and transport errors, honouring
`Retry-After`. `file://` URLs are read from disk so a source can be pointed at a saved
feed.

Every read is bounded (`FetchLimits`): the body is streamed and reading stops past
`max_body` bytes (a body that never ends; one compressed twice over is refused unread),
and each attempt, connect to last byte across redirects, must finish within `deadline`
seconds (a server that drips a byte at a time passes every read timeout). Either ends as
a `SourceError` without retrying: another attempt would only double the damage, and the
next poll tries again. Redirects are followed here, not by httpx, which would read a
redirect's body without a bound.

It must not parse bodies or judge them: a 4xx other than 429 is returned as is, because
arXiv serves its error feed (a valid RSS body naming the bad category) with HTTP 400 and
only the source's parser can explain it. It builds no client at import time; the caller
injects one (`make_client()` builds the default), and the clock and sleep are injectable
so tests check the spacing without waiting.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import stat
import time
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx

from bot import USER_AGENT
from bot.core.errors import AnswerTooLarge, SourceError
from bot.core.plurals import plural
from bot.sources.base import MEGABYTE, FetchLimits, FetchResult, FetchState

log = logging.getLogger(__name__)

RETRY_STATUSES: frozenset[int] = frozenset({429, 500, 502, 503, 504})


def politeness_key(host: str) -> str:
    """The slot a host shares its request spacing with: every arXiv host (rss., export.,
    www.) is one service under arXiv's terms, so they share one slot."""
    host = host.lower().rstrip(".")
    return "arxiv.org" if host == "arxiv.org" or host.endswith(".arxiv.org") else host


def make_client(timeout: float = 30.0, *, follow_redirects: bool = True) -> httpx.AsyncClient:
    """The default client: one connection at a time, redirects followed (unless told not
    to), paperbell's UA."""
    return httpx.AsyncClient(
        timeout=timeout,
        limits=httpx.Limits(max_connections=1),
        follow_redirects=follow_redirects,
        headers={"User-Agent": USER_AGENT},
    )


def capped_client(max_body: int) -> httpx.AsyncClient:
    """A client for a library that reads whole answers itself (the openai client's
    `http_client`, for the model endpoints): each answer, redirects' too, is read here
    first and refused past `max_body` bytes, unpacked (AnswerTooLarge, which such a
    library does not retry). It goes through the environment's proxies, as httpx's
    default client does."""
    return httpx.AsyncClient(transport=_EnvironmentProxies(max_body), follow_redirects=True)


class _EnvironmentProxies(httpx.AsyncBaseTransport):
    """Capped transports, chosen per request as httpx's default client chooses: the proxy the
    environment names for the URL's scheme (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY), direct for
    a host in NO_PROXY. A client given a transport of its own takes no proxy from the
    environment, and a model endpoint is often reached only through one."""

    def __init__(self, max_body: int) -> None:
        proxies = urllib.request.getproxies()
        self.direct = _CappedTransport(httpx.AsyncHTTPTransport(), max_body)
        self.proxied: dict[str, _CappedTransport] = {}
        for scheme in ("http", "https"):
            if proxy := proxies.get(scheme) or proxies.get("all"):
                proxy = proxy if "://" in proxy else f"http://{proxy}"  # as httpx reads it
                inner = httpx.AsyncHTTPTransport(proxy=proxy)
                self.proxied[scheme] = _CappedTransport(inner, max_body)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        transport = self.proxied.get(request.url.scheme, self.direct)
        if transport is not self.direct and urllib.request.proxy_bypass(
            request.url.netloc.decode("ascii")
        ):
            transport = self.direct
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        for transport in (self.direct, *self.proxied.values()):
            await transport.aclose()


class _CappedTransport(httpx.AsyncBaseTransport):
    """Reads each answer whole, up to `max_body` bytes, before the client sees it."""

    def __init__(self, inner: httpx.AsyncBaseTransport, max_body: int) -> None:
        self.inner = inner
        self.max_body = max_body

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        limit = f"larger than {_megabytes(self.max_body)} MB"
        try:
            declared = response.headers.get("Content-Length", "").strip()
            if declared.isdigit() and int(declared) > self.max_body:
                raise AnswerTooLarge(
                    f"the answer is {limit} (it declares {declared})", request=request
                )
            codings = response.headers.get_list("Content-Encoding", split_commas=True)
            if len([c for c in codings if c.strip().lower() not in ("", "identity")]) > 1:
                raise AnswerTooLarge("the answer is compressed more than once", request=request)
            body = bytearray()
            async for chunk in response.aiter_bytes():  # unpacked
                body += chunk
                if len(body) > self.max_body:
                    raise AnswerTooLarge(f"the answer is {limit}; stopped reading", request=request)
        finally:
            await response.aclose()
        unpacked = ("content-encoding", "content-length", "transfer-encoding")
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in unpacked]
        return httpx.Response(
            response.status_code,
            headers=headers,
            content=bytes(body),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class PoliteFetcher:
    """Conditional, spaced, retrying GETs; one instance is shared by all sources of a run."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        min_interval: float = 3.0,
        retries: int = 3,
        backoff: float = 2.0,
        max_retry_after: float = 300,
        limits: FetchLimits | None = None,
        source_limits: Mapping[str, FetchLimits] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if min_interval < 0 or retries < 0 or backoff < 0 or max_retry_after < 0:
            raise ValueError("min_interval, retries, backoff and max_retry_after must be >= 0")
        limits = limits or FetchLimits()
        for bound in (limits, *(source_limits or {}).values()):
            if bound.max_body < 1 or not 0 < bound.deadline < math.inf:
                raise ValueError(f"fetch limits must be positive and finite: {bound}")
        self.client = client
        # The defaults, and each source's own (by the name it passes to `get`).
        self.limits = limits
        self.source_limits = dict(source_limits or {})
        self.min_interval = min_interval
        self.retries = retries
        self.backoff = backoff
        self.max_retry_after = max_retry_after
        self._clock = clock
        self._sleep = sleep
        self._locks: dict[str, asyncio.Lock] = {}
        self._last_start: dict[str, float] = {}

    def limits_of(self, source: str) -> FetchLimits:
        """The limits of a request made for `source`: its own, else the defaults."""
        return self.source_limits.get(source, self.limits)

    async def get(self, url: str, state: FetchState, *, source: str = "") -> FetchResult:
        """Fetch `url` (https, http or file); a 304 gives a result with `body=None`."""
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        limits = self.limits_of(source)
        if scheme == "file":
            return await _read_file(url, limits, source=source)
        if scheme not in ("http", "https"):
            raise SourceError(
                f"cannot fetch {url!r}: unsupported URL scheme {scheme or '(none)'!r}",
                source=source,
                url=url,
                hint="use an https://, http:// or file:// URL",
            )
        host = politeness_key(httpx.URL(url).host or "")
        lock = self._locks.setdefault(host, asyncio.Lock())
        # Held across retries and their waits: a host that asked us to back off gets no
        # other request from this fetcher in the meantime.
        async with lock:
            return await self._get_with_retries(url, host, state, limits, source=source)

    async def _get_with_retries(
        self, url: str, host: str, state: FetchState, limits: FetchLimits, *, source: str
    ) -> FetchResult:
        headers = {"User-Agent": USER_AGENT}
        if state.etag:
            headers["If-None-Match"] = state.etag
        if state.last_modified:
            headers["If-Modified-Since"] = state.last_modified

        attempts = self.retries + 1
        last_problem, hint = "", _BUSY_HINT
        for attempt in range(attempts):
            await self._wait_turn(host)
            self._last_start[host] = self._clock()
            retry_after: float | None = None
            try:
                log.debug("GET %s (attempt %d of %d)", url, attempt + 1, attempts)
                async with asyncio.timeout(limits.deadline):
                    response, body = await self._attempt(url, headers, limits, source=source)
            except TimeoutError as exc:  # the whole attempt, not one read: never retried
                raise SourceError(
                    f"could not fetch {url}: no complete answer within {limits.deadline:g} s "
                    "(the server sends too slowly or never finishes)",
                    source=source,
                    url=url,
                    hint=_raise_hint(source, "request_deadline_seconds")
                    + "; the next poll will try again",
                ) from exc
            except httpx.TransportError as exc:
                last_problem, hint, final = _transport_problem(exc, url)
                if final:  # a host name that does not exist: asking again will not help
                    raise SourceError(
                        f"could not fetch {url}: {last_problem}", source=source, url=url, hint=hint
                    ) from exc
            except httpx.HTTPError as exc:  # redirects loop, bad URL ...: retrying will not help
                raise SourceError(
                    f"could not fetch {url}: {type(exc).__name__}: {exc}",
                    source=source,
                    url=url,
                    hint="check the `url` of the source",
                ) from exc
            else:
                if response.status_code not in RETRY_STATUSES:
                    return _result(url, response, body, state)
                last_problem = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
                hint = _BUSY_HINT
                retry_after = _retry_after(response)

            if attempt + 1 == attempts:
                break
            delay = self.backoff * 2**attempt
            if retry_after is not None:
                delay = min(retry_after, self.max_retry_after)
            log.warning(
                "%s%s: %s; retrying in %.1f s (attempt %d of %d)",
                f"{source}: " if source else "",
                url,
                last_problem,
                delay,
                attempt + 2,
                attempts,
            )
            if delay > 0:
                await self._sleep(delay)

        raise SourceError(
            f"could not fetch {url}: gave up after {plural(attempts, 'attempt')}; "
            f"last: {last_problem}",
            source=source,
            url=url,
            hint=hint,
        )

    async def _attempt(
        self, url: str, headers: dict[str, str], limits: FetchLimits, *, source: str
    ) -> tuple[httpx.Response, bytes]:
        """One request, its redirects followed, and its body read up to `limits.max_body`
        (no body for a status that is retried: it is not needed)."""
        request = self.client.build_request("GET", url, headers=headers)
        redirects = 0
        while True:
            response = await self.client.send(request, stream=True, follow_redirects=False)
            try:
                if response.next_request is None or not self.client.follow_redirects:
                    if response.status_code in RETRY_STATUSES or response.status_code == 304:
                        return response, b""
                    return response, await _read_body(response, url, limits, source=source)
            finally:
                await response.aclose()
            redirects += 1
            if redirects > self.client.max_redirects:
                raise httpx.TooManyRedirects("Exceeded maximum allowed redirects.", request=request)
            request = response.next_request
            # The next hop is a request of its own, usually to the same service (arXiv's old
            # listing URLs, http to https): it waits its turn, as arXiv's terms ask.
            hop = politeness_key(request.url.host or "")
            await self._wait_turn(hop)
            self._last_start[hop] = self._clock()

    async def _wait_turn(self, host: str) -> None:
        """Sleep until `min_interval` has passed since the last request to `host` started."""
        last = self._last_start.get(host)
        if last is None:
            return
        wait = last + self.min_interval - self._clock()
        if wait > 0:
            await self._sleep(wait)


async def _read_body(
    response: httpx.Response, url: str, limits: FetchLimits, *, source: str
) -> bytes:
    """The (decoded) body, or a SourceError as soon as it passes `limits.max_body` bytes:
    a body that never ends holds no more than about the limit in memory."""
    _check_codings(response, url, source=source)
    declared = response.headers.get("Content-Length", "").strip()
    if declared.isdigit() and int(declared) > limits.max_body:
        raise _too_large(url, limits, source=source, declared=int(declared))
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limits.max_body:
            raise _too_large(url, limits, source=source)
        chunks.append(chunk)
    return b"".join(chunks)


def _check_codings(response: httpx.Response, url: str, *, source: str) -> None:
    """Refuse a body compressed more than once (`Content-Encoding: gzip, gzip`): httpx
    unpacks one read through every layer before the size cap sees it, and each layer
    multiplies the ratio, so a few KB become gigabytes in memory. No feed is sent so."""
    codings = [
        coding
        for coding in response.headers.get_list("Content-Encoding", split_commas=True)
        if coding.strip().lower() not in ("", "identity")
    ]
    if len(codings) > 1:
        said = ", ".join(coding.strip() for coding in codings)
        raise SourceError(
            f"could not fetch {url}: the answer is compressed {len(codings)} times over "
            f"(Content-Encoding: {said[:80]}); refused before unpacking it",
            source=source,
            url=url,
            hint="this is no feed server's answer: check the source's `url`; the next poll "
            "will try again",
        )


def _too_large(
    url: str, limits: FetchLimits, *, source: str, declared: int | None = None
) -> SourceError:
    said = f" (it declares {declared:,} bytes)" if declared is not None else ""
    return SourceError(
        f"could not fetch {url}: the answer is larger than {_megabytes(limits.max_body)} MB"
        f"{said}; stopped reading",
        source=source,
        url=url,
        hint=_raise_hint(source, "max_body_mb") + " if this source is really that large",
    )


def _megabytes(size: int) -> str:
    return f"{size / MEGABYTE:g}"


_DNS_HINT = (
    "check this machine's network and DNS (and the host name, if the source has a `url` of "
    "its own); the next poll will try again"
)
_REFUSED_HINT = (
    "nothing answers at that address: check the source's `url` (and, for a server of "
    "yours, that it runs); the next poll will try again"
)
_BUSY_HINT = (
    "the service may be down or rate-limiting; the next poll will try again (check the "
    "URL and the network if this persists)"
)


def _transport_problem(exc: httpx.TransportError, url: str) -> tuple[str, str, bool]:
    """What went wrong on the way to `url`, in a person's words, what to check, and
    whether it is final for this poll: a host name the resolver does not know (`cannot
    resolve HOST`: a typo, or no network at all) is; a resolver that failed for now, a
    refused connection, a dropped one are worth another attempt."""
    parts = httpx.URL(url)
    host = parts.host or "?"
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, socket.gaierror):
            final = cause.errno == socket.EAI_NONAME
            return f"cannot resolve {host} ({cause.strerror or cause})", _DNS_HINT, final
        if isinstance(cause, ConnectionRefusedError):
            port = parts.port or (443 if parts.scheme == "https" else 80)
            return f"cannot connect to {host} port {port} (refused)", _REFUSED_HINT, False
        cause = cause.__cause__ or cause.__context__
    problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return problem, _BUSY_HINT, False


def _raise_hint(source: str, option: str) -> str:
    where = f"the source's `{option}`" if not source else f"`{option}` of source {source!r}"
    return f"raise {where} (or [polling] {option} for every source)"


def _result(url: str, response: httpx.Response, body: bytes, state: FetchState) -> FetchResult:
    etag = response.headers.get("ETag")
    last_modified = response.headers.get("Last-Modified")
    if response.status_code == 304:
        # A 304 may omit the validators; the ones we sent are still the current ones.
        return FetchResult(
            url=url,
            status=304,
            body=None,
            etag=etag or state.etag,
            last_modified=last_modified or state.last_modified,
        )
    return FetchResult(
        url=url,
        status=response.status_code,
        body=body,
        etag=etag,
        last_modified=last_modified,
    )


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta-seconds or HTTP-date), if any."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        log.debug("ignoring unparsable Retry-After %r", value)
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    # Measure against the server's own clock when it sends one: immune to our clock's skew.
    now = datetime.now(UTC)
    date_header = response.headers.get("Date")
    if date_header:
        try:
            server_now = parsedate_to_datetime(date_header)
        except (TypeError, ValueError, IndexError):
            server_now = None
        if server_now is not None:
            now = server_now if server_now.tzinfo else server_now.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


async def _read_file(url: str, limits: FetchLimits, *, source: str) -> FetchResult:
    parts = urllib.parse.urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise SourceError(
            f"cannot read {url!r}: file:// URLs on another host are not supported",
            source=source,
            url=url,
            hint="use file:///absolute/path/to/feed.xml",
        )
    path = Path(urllib.request.url2pathname(parts.path))
    try:
        async with asyncio.timeout(limits.deadline):
            # A thread cannot be stopped: past the deadline it is left to finish alone.
            body = await asyncio.to_thread(_read_bounded, path, limits.max_body)
    except TimeoutError as exc:
        raise SourceError(
            f"cannot read feed file {path}: not read within {limits.deadline:g} s",
            source=source,
            url=url,
            hint=_raise_hint(source, "request_deadline_seconds"),
        ) from exc
    except FileNotFoundError as exc:
        raise SourceError(
            f"feed file not found: {path}",
            source=source,
            url=url,
            hint="check the `url` of the source (file:///absolute/path/to/feed.xml)",
        ) from exc
    except OSError as exc:
        raise SourceError(
            f"cannot read feed file {path}: {exc.strerror or exc}",
            source=source,
            url=url,
            hint="check the `url` of the source and the file's permissions",
        ) from exc
    if body is None:
        raise _too_large(url, limits, source=source)
    return FetchResult(url=url, status=200, body=body)


def _read_bounded(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes, or None when it holds more than `limit` bytes (sized before
    reading, and read at most one byte past the limit should it grow meanwhile)."""
    # Non-blocking open: a FIFO would otherwise block here until someone writes to it.
    with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):  # /dev/zero, a FIFO: endless or blocking
            raise OSError(0, "not a regular file")
        if info.st_size > limit:
            return None
        body = file.read(limit + 1)
    return None if len(body) > limit else body
