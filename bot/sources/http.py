"""Polite HTTP for sources: the only module in `bot.sources` that moves bytes over the network.

`PoliteFetcher.get` does what every feed poll needs and nothing more: a conditional GET
(ETag / Last-Modified), paperbell's User-Agent, one request in flight per host with at least
`min_interval` seconds between the starts of two requests to it (arXiv's terms ask for one
request every 3 seconds and one connection at a time), and retries with exponential backoff
on 429/5xx and transport errors, honouring `Retry-After`. `file://` URLs are read from disk
so a source can be pointed at a saved feed.

It must not parse bodies or judge them: a 4xx other than 429 is returned as is, because
arXiv serves its error feed (a valid RSS body naming the bad category) with HTTP 400 and
only the source's parser can explain it. It builds no client at import time; the caller
injects one (`make_client()` builds the default), and the clock and sleep are injectable
so tests check the spacing without waiting.
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx

from bot import USER_AGENT
from bot.errors import SourceError
from bot.sources import FetchResult, FetchState

log = logging.getLogger(__name__)

RETRY_STATUSES: frozenset[int] = frozenset({429, 500, 502, 503, 504})


def politeness_key(host: str) -> str:
    """The slot a host shares its request spacing with: every arXiv host (rss., export.,
    www.) is one service under arXiv's terms, so they share one slot."""
    host = host.lower().rstrip(".")
    return "arxiv.org" if host == "arxiv.org" or host.endswith(".arxiv.org") else host


def make_client(timeout: float = 30.0) -> httpx.AsyncClient:
    """The default client: one connection at a time, redirects followed, paperbell's UA."""
    return httpx.AsyncClient(
        timeout=timeout,
        limits=httpx.Limits(max_connections=1),
        follow_redirects=True,
        headers={"User-Agent": USER_AGENT},
    )


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
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if min_interval < 0 or retries < 0 or backoff < 0 or max_retry_after < 0:
            raise ValueError("min_interval, retries, backoff and max_retry_after must be >= 0")
        self.client = client
        self.min_interval = min_interval
        self.retries = retries
        self.backoff = backoff
        self.max_retry_after = max_retry_after
        self._clock = clock
        self._sleep = sleep
        self._locks: dict[str, asyncio.Lock] = {}
        self._last_start: dict[str, float] = {}

    async def get(self, url: str, state: FetchState, *, source: str = "") -> FetchResult:
        """Fetch `url` (https, http or file); a 304 gives a result with `body=None`."""
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme == "file":
            return await _read_file(url, source=source)
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
            return await self._get_with_retries(url, host, state, source=source)

    async def _get_with_retries(
        self, url: str, host: str, state: FetchState, *, source: str
    ) -> FetchResult:
        headers = {"User-Agent": USER_AGENT}
        if state.etag:
            headers["If-None-Match"] = state.etag
        if state.last_modified:
            headers["If-Modified-Since"] = state.last_modified

        attempts = self.retries + 1
        last_problem = ""
        for attempt in range(attempts):
            await self._wait_turn(host)
            self._last_start[host] = self._clock()
            retry_after: float | None = None
            try:
                log.debug("GET %s (attempt %d of %d)", url, attempt + 1, attempts)
                response = await self.client.get(url, headers=headers)
            except httpx.TransportError as exc:
                last_problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            except httpx.HTTPError as exc:  # redirects loop, bad URL ...: retrying will not help
                raise SourceError(
                    f"could not fetch {url}: {type(exc).__name__}: {exc}",
                    source=source,
                    url=url,
                    hint="check the `url` of the source",
                ) from exc
            else:
                if response.status_code not in RETRY_STATUSES:
                    return _result(url, response, state)
                last_problem = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
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
            f"could not fetch {url}: gave up after {attempts} attempt"
            f"{'s' if attempts != 1 else ''}; last: {last_problem}",
            source=source,
            url=url,
            hint="the service may be down or rate-limiting; the next poll will try again "
            "(check the URL and the network if this persists)",
        )

    async def _wait_turn(self, host: str) -> None:
        """Sleep until `min_interval` has passed since the last request to `host` started."""
        last = self._last_start.get(host)
        if last is None:
            return
        wait = last + self.min_interval - self._clock()
        if wait > 0:
            await self._sleep(wait)


def _result(url: str, response: httpx.Response, state: FetchState) -> FetchResult:
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
        body=response.content,
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


async def _read_file(url: str, *, source: str) -> FetchResult:
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
        body = await asyncio.to_thread(path.read_bytes)
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
    return FetchResult(url=url, status=200, body=body)
