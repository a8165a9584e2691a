"""PoliteFetcher: conditional GET, spacing, retries, Retry-After, file:// URLs.

Most tests run against `httpx.MockTransport` with a fake clock whose `sleep` advances time
instead of waiting, so spacing and backoff are asserted exactly and no test sleeps. One
test goes through a real `make_client()` to a real HTTP server on loopback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.clock import FakeTime
from support.paths import FIXTURES, FULL_FEED
from support.servers import Route, etag_of, feed_server, header

from bot import USER_AGENT
from bot.core.errors import SourceError
from bot.sources import FetchResult, FetchState
from bot.sources.http import PoliteFetcher, make_client

ERROR_FEED = FIXTURES / "arxiv_rss" / "edge_error-feed_bad-archive-astroph_2024-11-28.xml"
URL = "https://rss.arxiv.org/rss/cs.LG"

Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


class Recorder:
    """A MockTransport handler replaying canned responses and recording each request."""

    def __init__(self, fake: FakeTime, *responses: httpx.Response | Exception) -> None:
        self.fake = fake
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []
        self.times: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.times.append(self.fake.now)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)  # let a concurrent get() try to overtake
            answer = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
            if isinstance(answer, Exception):
                raise answer
            return answer
        finally:
            self.in_flight -= 1


def run(
    recorder: Recorder,
    fake: FakeTime,
    calls: Callable[[PoliteFetcher], Awaitable[object]],
    **options: Any,
) -> object:
    """Run `calls(fetcher)` with a fetcher over a MockTransport client; close the client."""

    async def main() -> object:
        async with httpx.AsyncClient(transport=httpx.MockTransport(recorder)) as client:
            fetcher = PoliteFetcher(client, clock=fake.clock, sleep=fake.sleep, **options)
            return await calls(fetcher)

    return asyncio.run(main())


def get(url: str = URL, state: FetchState | None = None):
    return lambda fetcher: fetcher.get(url, state or FetchState(), source="ml")


# -- headers and conditional GET ----------------------------------------------------------


def test_conditional_headers_and_user_agent_are_sent() -> None:
    fake = FakeTime()
    recorder = Recorder(
        fake,
        httpx.Response(
            200,
            content=b"<rss/>",
            headers={"ETag": '"v2"', "Last-Modified": "Fri, 29 Nov 2024 05:00:00 GMT"},
        ),
    )
    state = FetchState(etag='"v1"', last_modified="Thu, 28 Nov 2024 05:00:00 GMT")
    result = run(recorder, fake, get(state=state))

    (request,) = recorder.requests
    assert request.headers["If-None-Match"] == '"v1"'
    assert request.headers["If-Modified-Since"] == "Thu, 28 Nov 2024 05:00:00 GMT"
    assert request.headers["User-Agent"] == USER_AGENT
    assert result == FetchResult(
        url=URL,
        status=200,
        body=b"<rss/>",
        etag='"v2"',
        last_modified="Fri, 29 Nov 2024 05:00:00 GMT",
    )


def test_no_conditional_headers_without_state() -> None:
    fake = FakeTime()
    recorder = Recorder(fake, httpx.Response(200, content=b"x"))
    run(recorder, fake, get())
    (request,) = recorder.requests
    assert "If-None-Match" not in request.headers
    assert "If-Modified-Since" not in request.headers
    assert request.headers["User-Agent"] == USER_AGENT


def test_304_is_not_modified_and_keeps_the_validators() -> None:
    fake = FakeTime()
    recorder = Recorder(fake, httpx.Response(304))
    state = FetchState(etag='"v1"', last_modified="Thu, 28 Nov 2024 05:00:00 GMT")
    result = run(recorder, fake, get(state=state))
    assert isinstance(result, FetchResult)
    assert result.not_modified and result.status == 304 and result.body is None
    assert (result.etag, result.last_modified) == (state.etag, state.last_modified)
    assert len(recorder.requests) == 1


@pytest.mark.parametrize("status", [400, 403, 404, 410])
def test_client_errors_are_returned_as_is_for_the_parser(status: int) -> None:
    fake = FakeTime()
    body = ERROR_FEED.read_bytes()  # arXiv serves its error feed with HTTP 400
    recorder = Recorder(fake, httpx.Response(status, content=body))
    result = run(recorder, fake, get())
    assert isinstance(result, FetchResult)
    assert (result.status, result.body) == (status, body)
    assert len(recorder.requests) == 1 and fake.sleeps == []


# -- retries ------------------------------------------------------------------------------


def test_429_waits_for_retry_after_then_succeeds() -> None:
    fake = FakeTime()
    recorder = Recorder(
        fake,
        httpx.Response(429, headers={"Retry-After": "7"}),
        httpx.Response(200, content=b"ok"),
    )
    result = run(recorder, fake, get())
    assert isinstance(result, FetchResult)
    assert (result.status, result.body) == (200, b"ok")
    assert fake.sleeps == [7.0]
    assert recorder.times[1] - recorder.times[0] == 7.0


def test_retry_after_as_http_date_is_measured_against_the_server_date() -> None:
    fake = FakeTime()
    server_now = datetime(2024, 11, 28, 5, 0, 0, tzinfo=UTC)
    headers = {
        "Date": format_datetime(server_now, usegmt=True),
        "Retry-After": format_datetime(server_now + timedelta(seconds=30), usegmt=True),
    }
    recorder = Recorder(fake, httpx.Response(503, headers=headers), httpx.Response(200))
    run(recorder, fake, get())
    assert fake.sleeps == [30.0]


def test_retry_after_is_capped() -> None:
    fake = FakeTime()
    recorder = Recorder(
        fake, httpx.Response(429, headers={"Retry-After": "86400"}), httpx.Response(200)
    )
    run(recorder, fake, get(), max_retry_after=60)
    assert fake.sleeps == [60]


def test_short_retry_after_still_respects_the_spacing() -> None:
    fake = FakeTime()
    recorder = Recorder(
        fake, httpx.Response(429, headers={"Retry-After": "1"}), httpx.Response(200)
    )
    run(recorder, fake, get())
    assert recorder.times[1] - recorder.times[0] == 3.0  # min_interval wins over 1 s


def test_5xx_until_retries_run_out_raises_source_error() -> None:
    fake = FakeTime()
    recorder = Recorder(fake, httpx.Response(503))
    with pytest.raises(SourceError) as caught:
        run(recorder, fake, get(), min_interval=0)
    error = caught.value
    assert len(recorder.requests) == 4  # retries=3: one try and three retries
    assert fake.sleeps == [2.0, 4.0, 8.0]  # exponential backoff from 2 s
    assert URL in error.message and "HTTP 503" in error.message and "4 attempts" in error.message
    assert error.hint and "next poll" in error.hint
    assert (error.source, error.url) == ("ml", URL)


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_each_retryable_status_is_retried(status: int) -> None:
    fake = FakeTime()
    recorder = Recorder(fake, httpx.Response(status), httpx.Response(200, content=b"ok"))
    result = run(recorder, fake, get(), retries=1)
    assert isinstance(result, FetchResult) and result.body == b"ok"
    assert len(recorder.requests) == 2


def test_transport_errors_are_retried() -> None:
    fake = FakeTime()
    request = httpx.Request("GET", URL)
    recorder = Recorder(
        fake,
        httpx.ConnectError("connection refused", request=request),
        httpx.ReadTimeout("timed out", request=request),
        httpx.Response(200, content=b"ok"),
    )
    result = run(recorder, fake, get(), min_interval=0)
    assert isinstance(result, FetchResult) and result.body == b"ok"
    assert fake.sleeps == [2.0, 4.0]


def test_transport_errors_until_retries_run_out_name_the_last_error() -> None:
    fake = FakeTime()
    recorder = Recorder(fake, httpx.ConnectTimeout("timed out", request=httpx.Request("GET", URL)))
    with pytest.raises(SourceError) as caught:
        run(recorder, fake, get(), retries=2)
    assert "ConnectTimeout" in caught.value.message and URL in caught.value.message
    assert len(recorder.requests) == 3


def test_redirect_loop_is_not_retried() -> None:
    fake = FakeTime()
    recorder = Recorder(fake, httpx.Response(302, headers={"Location": URL}))

    async def main() -> object:
        transport = httpx.MockTransport(recorder)
        async with httpx.AsyncClient(
            transport=transport, follow_redirects=True, max_redirects=2
        ) as client:
            fetcher = PoliteFetcher(client, clock=fake.clock, sleep=fake.sleep)
            return await fetcher.get(URL, FetchState())

    with pytest.raises(SourceError, match="TooManyRedirects"):
        asyncio.run(main())
    assert len(recorder.requests) == 3 and fake.sleeps == [3.0, 3.0]  # each hop spaced


# -- spacing ------------------------------------------------------------------------------


def test_two_requests_to_one_host_are_spaced() -> None:
    fake = FakeTime()
    recorder = Recorder(fake, httpx.Response(200))

    async def two(fetcher: PoliteFetcher) -> None:
        await fetcher.get(URL, FetchState())
        fake.now += 0.5  # the caller did half a second of other work in between
        await fetcher.get("https://rss.arxiv.org/rss/stat.ML", FetchState())

    run(recorder, fake, two)
    assert recorder.times[1] - recorder.times[0] >= 3.0
    assert fake.sleeps == [2.5]


def test_concurrent_requests_to_one_host_go_one_at_a_time() -> None:
    fake = FakeTime()
    recorder = Recorder(fake, httpx.Response(200))

    async def three(fetcher: PoliteFetcher) -> None:
        await asyncio.gather(
            *(fetcher.get(f"{URL}+q{n}", FetchState()) for n in range(3)),
        )

    run(recorder, fake, three, min_interval=5)
    assert recorder.max_in_flight == 1
    assert [b - a for a, b in zip(recorder.times, recorder.times[1:], strict=False)] == [5, 5]


def test_different_hosts_do_not_wait_for_each_other() -> None:
    fake = FakeTime()
    recorder = Recorder(fake, httpx.Response(200))

    async def two(fetcher: PoliteFetcher) -> None:
        await fetcher.get(URL, FetchState())
        await fetcher.get("https://connect.biorxiv.org/biorxiv_xml/neuroscience", FetchState())

    run(recorder, fake, two)
    assert fake.sleeps == []


def test_all_arxiv_hosts_share_one_slot() -> None:
    """arXiv's terms limit requests to arXiv as a whole, not per host name."""
    fake = FakeTime()
    recorder = Recorder(fake, httpx.Response(200))

    async def two(fetcher: PoliteFetcher) -> None:
        await fetcher.get(URL, FetchState())
        await fetcher.get("https://export.arxiv.org/api/query", FetchState())

    run(recorder, fake, two)
    assert fake.sleeps == [3.0]


# -- file:// and other schemes ------------------------------------------------------------


def test_file_url_is_read(tmp_path: Path) -> None:
    path = tmp_path / "saved feed.xml"
    path.write_bytes(ERROR_FEED.read_bytes())
    fake = FakeTime()
    recorder = Recorder(fake, httpx.Response(500))
    url = path.as_uri()  # file:///.../saved%20feed.xml
    state = FetchState(etag='"ignored"')

    async def twice(fetcher: PoliteFetcher) -> list[FetchResult]:
        return [await fetcher.get(url, state), await fetcher.get(url, state)]

    results = run(recorder, fake, twice)
    assert results == [FetchResult(url=url, status=200, body=ERROR_FEED.read_bytes())] * 2
    assert recorder.requests == [] and fake.sleeps == []  # no HTTP, no spacing


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.xml"
    fake = FakeTime()
    with pytest.raises(SourceError) as caught:
        run(Recorder(fake, httpx.Response(500)), fake, get(path.as_uri()))
    assert str(path) in caught.value.message and "not found" in caught.value.message
    assert caught.value.hint and "`url`" in caught.value.hint


def test_directory_is_not_a_feed_file(tmp_path: Path) -> None:
    fake = FakeTime()
    with pytest.raises(SourceError, match="cannot read feed file"):
        run(Recorder(fake, httpx.Response(500)), fake, get(tmp_path.as_uri()))


@pytest.mark.parametrize("url", ["ftp://example.org/feed.xml", "rss.arxiv.org/rss/cs"])
def test_other_schemes_are_refused(url: str) -> None:
    fake = FakeTime()
    recorder = Recorder(fake, httpx.Response(200))
    with pytest.raises(SourceError, match="unsupported URL scheme"):
        run(recorder, fake, get(url))
    assert recorder.requests == []


def test_make_client_defaults() -> None:
    async def main() -> None:
        async with make_client(timeout=12.5) as client:
            assert client.follow_redirects is True
            assert client.timeout == httpx.Timeout(12.5)
            assert client.headers["User-Agent"] == USER_AGENT

    asyncio.run(main())


# -- a real server on loopback ------------------------------------------------------------


def test_real_server_conditional_get() -> None:
    body = FULL_FEED.read_bytes()
    with feed_server() as server:
        server.routes["/rss/astro-ph+cs"] = Route(body)
        url = server.url("/rss/astro-ph+cs")

        async def main() -> tuple[FetchResult, FetchResult]:
            async with make_client(timeout=10) as client:
                fetcher = PoliteFetcher(client, min_interval=0.2)
                first = await fetcher.get(url, FetchState(), source="all")
                state = FetchState(etag=first.etag, last_modified=first.last_modified)
                second = await fetcher.get(url, state, source="all")
                return first, second

        first, second = asyncio.run(main())
    assert first.status == 200 and first.body == body
    assert first.etag == etag_of(body)
    assert second.not_modified and second.body is None and second.etag == etag_of(body)

    (_, headers1), (_, headers2) = server.requests
    assert header(headers1, "User-Agent") == header(headers2, "User-Agent") == USER_AGENT
    assert header(headers1, "If-None-Match") is None
    assert header(headers2, "If-None-Match") == etag_of(body)
    # min_interval between request starts; the server sees the first one late by the time
    # its new connection takes (5-20 ms, more on a busy machine), the second one at once.
    t1, t2 = server.times
    assert t2 - t1 >= 0.15
