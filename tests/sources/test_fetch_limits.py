"""Every fetch is bounded: a body that never ends stops at the size cap, a server that drips
stops at the request's deadline, neither is retried, and neither stops the other sources.
A daemon tick that outlives its deadline makes /healthz answer 503.

Real parts: `hostile_server` (tests/support/servers.py) is a raw HTTP server on loopback in the
test's loop, sending what a polite server never sends; the good source is the loopback
FeedServer with a real arXiv listing; the store is a real SQLite file; the fetcher goes
through a real `make_client()`.
"""

from __future__ import annotations

import asyncio
import math
import os
import tracemalloc
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.clock import Clock
from support.servers import HostileServer, Route, feed_server, hostile_server

from bot.config import parse_config
from bot.core.errors import ConfigError, SourceError
from bot.pipeline import build_fetcher, poll, wire, wire_daemon
from bot.pipeline.scheduler import Daemon
from bot.sources import MEGABYTE, FetchLimits, FetchState
from bot.sources.http import PoliteFetcher, make_client
from bot.store import Store
from bot.web.app import create_app

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def fetch(
    path: str,
    *,
    limits: FetchLimits | None = None,
    server: dict[str, Any] | None = None,
    trace: bool = True,
    **options: Any,
) -> tuple[HostileServer, SourceError | bytes | None, float]:
    """GET `path` from a fresh hostile server with default retries and backoff; what it
    gave (the error, or the body) and the peak of memory traced meanwhile, in MB."""

    async def main() -> tuple[HostileServer, SourceError | bytes | None, float]:
        async with hostile_server(**(server or {})) as hostile, make_client() as client:
            fetcher = PoliteFetcher(client, limits=limits, **options)
            if trace:
                tracemalloc.start()
            try:
                # Bounded here too: before the fix, /drip hangs and /endless reads 1 GB.
                async with asyncio.timeout(30):
                    result = await fetcher.get(hostile.url(path), FetchState(), source="bad")
                outcome: SourceError | bytes | None = result.body
            except SourceError as exc:
                outcome = exc
            finally:
                _, peak = tracemalloc.get_traced_memory()  # (0, 0) when not tracing
                tracemalloc.stop()
            return hostile, outcome, peak / MEGABYTE

    return asyncio.run(main())


# -- the size cap -------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/endless", "/endless-chunked", "/declared"])
def test_a_body_that_never_ends_stops_at_the_cap_once(path: str) -> None:
    hostile, outcome, peak = fetch(path, limits=FetchLimits(max_body=5 * MEGABYTE))

    assert isinstance(outcome, SourceError)
    assert outcome.url == hostile.url(path) and outcome.source == "bad"
    assert "larger than 5 MB" in outcome.message and hostile.url(path) in outcome.message
    assert outcome.hint and "max_body_mb" in outcome.hint
    assert hostile.requests == [path]  # not retried
    assert hostile.sent[path] < 64 * MEGABYTE  # stopped reading long before 1 GB
    assert peak < 3 * 5  # MB: about the cap, not the body


def test_with_the_default_cap_an_endless_body_holds_about_50_mb() -> None:
    hostile, outcome, peak = fetch("/endless")

    assert isinstance(outcome, SourceError) and "larger than 50 MB" in outcome.message
    assert hostile.requests == ["/endless"]
    assert 50 * MEGABYTE < hostile.sent["/endless"] < 200 * MEGABYTE
    assert peak < 2 * 50


def test_a_gzip_bomb_stops_at_the_cap_counted_unpacked() -> None:
    """The cap counts the bytes as unpacked; httpx unpacks one read (64 KiB) at a time,
    so memory stays within the cap plus what one read unpacks to: gzip at most about
    67 MB, which zlib builds in a growing buffer (measured: about 140 MB in all)."""
    hostile, outcome, peak = fetch("/gzip-bomb", limits=FetchLimits(max_body=5 * MEGABYTE))

    assert isinstance(outcome, SourceError) and "larger than 5 MB" in outcome.message
    assert hostile.requests == ["/gzip-bomb"]
    assert peak < 5 + 250  # MB, the server's own 16 MB of zeros included; not 1 GB


def test_a_body_packed_twice_is_refused_before_it_unpacks() -> None:
    """gzip over gzip multiplies the ratios: the few KB of one read unpack to 256 MB here
    (to gigabytes from a full read) before the cap is checked. No feed is sent so."""
    hostile, outcome, peak = fetch("/gzip-twice", limits=FetchLimits(max_body=MEGABYTE))

    assert isinstance(outcome, SourceError)
    assert "Content-Encoding: gzip, gzip" in outcome.message
    assert hostile.url("/gzip-twice") in outcome.message
    assert hostile.requests == ["/gzip-twice"]  # not retried
    assert peak < 64  # MB: the server's own 16 MB of zeros and its packing; not 256 MB


def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    _, outcome, _ = fetch("/declared", limits=FetchLimits(max_body=MEGABYTE))

    assert isinstance(outcome, SourceError)
    assert "declares 10,737,418,240 bytes" in outcome.message


def test_a_redirect_whose_body_never_ends_is_not_read() -> None:
    """httpx reads a redirect's body whole before following it; the fetcher does not."""
    hostile, outcome, peak = fetch("/redirect-endless", limits=FetchLimits(max_body=MEGABYTE))

    assert isinstance(outcome, bytes) and b"A paper that arrives" in outcome
    assert hostile.requests == ["/redirect-endless", "/feed"]
    assert hostile.sent["/redirect-endless"] < 64 * MEGABYTE and peak < 20


def test_a_body_at_the_cap_is_read_whole() -> None:
    from support.servers import FEED_ONE_ITEM

    size = len(FEED_ONE_ITEM)
    _, outcome, _ = fetch("/feed", limits=FetchLimits(max_body=size))
    assert outcome == FEED_ONE_ITEM
    _, outcome, _ = fetch("/feed", limits=FetchLimits(max_body=size - 1))
    assert isinstance(outcome, SourceError)


@settings(max_examples=60, deadline=None)
@given(
    pieces=st.lists(st.binary(max_size=1500), max_size=6),
    cap=st.integers(1, 5000),
    framing=st.sampled_from(["length", "chunked", "close"]),
)
def test_any_framing_gives_the_body_up_to_the_cap_and_an_error_past_it(
    pieces: list[bytes], cap: int, framing: str
) -> None:
    body = b"".join(pieces)
    _, outcome, _ = fetch(
        "/given",
        limits=FetchLimits(max_body=cap),
        server={"pieces": pieces, "framing": framing},
        trace=False,
    )
    if len(body) <= cap:
        assert outcome == body
    else:
        assert isinstance(outcome, SourceError) and "larger than" in outcome.message


@settings(max_examples=40, deadline=None)
@given(
    pieces=st.lists(st.binary(min_size=1, max_size=1500), min_size=1, max_size=4),
    declared=st.one_of(st.integers(0, 8000), st.just(10**12)),
    cap=st.integers(1, 5000),
)
def test_a_lying_content_length_is_an_error_or_the_declared_body(
    pieces: list[bytes], declared: int, cap: int
) -> None:
    """Content-Length shorter or longer than what comes: the body it declares (when the
    declaration is under the cap), else a SourceError; never another exception, never hung."""
    body = b"".join(pieces)
    _, outcome, _ = fetch(
        "/given",
        limits=FetchLimits(max_body=cap, deadline=10),
        server={"pieces": pieces, "declared": declared},
        trace=False,
        retries=0,
    )
    if declared > cap:
        assert isinstance(outcome, SourceError) and "larger than" in outcome.message
    elif declared <= len(body):
        assert outcome == body[:declared]
    else:  # the connection closed before the declared end
        assert isinstance(outcome, SourceError) and "gave up" in outcome.message


# -- the deadline -------------------------------------------------------------------------


def test_a_dripping_server_ends_at_the_deadline_and_is_not_retried() -> None:
    """A byte every 2 s passes every read timeout (30 s); the attempt's deadline does not,
    and with the default retries (3) and backoff the server is still asked only once."""
    started = datetime.now(UTC)
    hostile, outcome, _ = fetch("/drip", limits=FetchLimits(deadline=2.5))
    took = (datetime.now(UTC) - started).total_seconds()

    assert isinstance(outcome, SourceError)
    assert "no complete answer within 2.5 s" in outcome.message
    assert outcome.hint and "request_deadline_seconds" in outcome.hint
    assert hostile.requests == ["/drip"]  # given up once, not retried
    assert 1 <= hostile.sent["/drip"] <= 2
    assert took < 25  # generous: the deadline (2.5 s), not the test's bound (30 s)


def test_transport_errors_are_still_retried_within_the_deadline() -> None:
    """The deadline ends an attempt; a refused connection is still tried again."""

    sleeps: list[float] = []

    async def main() -> str:

        async def sleep(seconds: float) -> None:
            sleeps.append(seconds)

        async with make_client() as client:
            fetcher = PoliteFetcher(
                client, limits=FetchLimits(deadline=5), min_interval=0, sleep=sleep
            )
            with pytest.raises(SourceError) as caught:
                await fetcher.get("http://127.0.0.1:9/feed", FetchState())
        return caught.value.message

    assert "gave up after 4 attempts" in asyncio.run(main())
    assert sleeps == [2.0, 4.0, 8.0]


# -- file:// ------------------------------------------------------------------------------


def test_a_file_over_the_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.xml"
    big.write_bytes(b"<" * (MEGABYTE + 1))
    small = tmp_path / "small.xml"
    small.write_bytes(b"<rss/>")

    async def main(path: Path) -> bytes | None:
        async with make_client() as client:
            fetcher = PoliteFetcher(client, limits=FetchLimits(max_body=MEGABYTE))
            return (await fetcher.get(path.as_uri(), FetchState(), source="saved")).body

    with pytest.raises(SourceError, match="larger than 1 MB") as caught:
        asyncio.run(main(big))
    assert caught.value.hint and "max_body_mb" in caught.value.hint
    assert asyncio.run(main(small)) == b"<rss/>"


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_file_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    """/dev/zero never ends and reports size 0; a FIFO blocks: neither is read."""
    fifo = tmp_path / "feed.fifo"
    os.mkfifo(fifo)

    async def main(url: str) -> None:
        async with make_client() as client:
            fetcher = PoliteFetcher(client, limits=FetchLimits(max_body=MEGABYTE, deadline=5))
            await fetcher.get(url, FetchState())

    for url in ("file:///dev/zero", fifo.as_uri()):
        with pytest.raises(SourceError, match="not a regular file"):
            asyncio.run(main(url))


def test_the_fetcher_refuses_limits_that_bound_nothing() -> None:
    client = httpx.AsyncClient()
    for limits in (
        FetchLimits(max_body=0),
        FetchLimits(deadline=0),
        FetchLimits(deadline=math.inf),
    ):
        with pytest.raises(ValueError, match="positive and finite"):
            PoliteFetcher(client, limits=limits)
    with pytest.raises(ValueError, match="positive and finite"):
        PoliteFetcher(client, source_limits={"x": FetchLimits(deadline=math.nan)})


# -- configuration ------------------------------------------------------------------------


def config_with(
    sources: list[dict[str, Any]], database: str = "sqlite:///unused.sqlite", **sections: Any
) -> Any:
    return parse_config(
        {"version": 1, "database": {"url": database}, "sources": sources, **sections},
        environ={},
    )


KINDS = [
    {"kind": "arxiv", "categories": ["cs.LG"]},
    {"kind": "feed", "url": "https://journal.example/rss"},
    {"kind": "huggingface"},
    {"kind": "arxiv_query", "query": "cat:cs.LG"},
]


@pytest.mark.parametrize("source", KINDS, ids=lambda s: s["kind"])
def test_every_kind_takes_its_own_limits(source: dict[str, Any]) -> None:
    config = config_with(
        [{**source, "name": "own", "max_body_mb": 0.5, "request_deadline_seconds": 7}],
        polling={"max_body_mb": 20, "request_deadline_seconds": 30},
    )
    fetcher = build_fetcher(config, httpx.AsyncClient())
    assert fetcher.limits == FetchLimits(max_body=20 * MEGABYTE, deadline=30)
    assert fetcher.limits_of("own") == FetchLimits(max_body=MEGABYTE // 2, deadline=7)
    assert fetcher.limits_of("another") == fetcher.limits


def test_the_defaults_are_50_mb_and_60_seconds() -> None:
    fetcher = build_fetcher(config_with([{"kind": "arxiv", "categories": ["cs"]}]), None)
    assert fetcher.limits == FetchLimits(max_body=50 * MEGABYTE, deadline=60)
    assert fetcher.limits_of("arxiv") == fetcher.limits == FetchLimits()


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("max_body_mb", 0, "greater than 0"),
        ("max_body_mb", -1, "greater than 0"),
        ("max_body_mb", math.inf, "finite"),
        ("max_body_mb", math.nan, "finite"),
        ("max_body_mb", 1e9, "less than or equal to 4096"),
        ("max_body_mb", "lots", "valid number"),
        ("request_deadline_seconds", 0, "greater than 0"),
        ("request_deadline_seconds", math.inf, "finite"),
        ("request_deadline_seconds", 1e308, "less than or equal to 3600"),
    ],
)
def test_limits_out_of_bounds_are_refused_at_their_key(
    where: str, value: Any, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        config_with([{"kind": "arxiv", "categories": ["cs"]}], polling={where: value})
    assert any(p.startswith(f"polling.{where}: ") and message in p for p in caught.value.problems)
    for source in KINDS:
        with pytest.raises(ConfigError) as caught:
            config_with([{**source, where: value}])
        assert any(
            p.startswith(f"sources[0].{where}: ") and message in p for p in caught.value.problems
        ), caught.value.problems


def test_the_tick_deadline_must_outlast_every_request() -> None:
    with pytest.raises(ConfigError) as caught:
        config_with(
            [{"kind": "feed", "url": "https://j.example/rss", "request_deadline_seconds": 900}],
            daemon={"tick_deadline_seconds": 600},
        )
    assert caught.value.problems == [
        "daemon.tick_deadline_seconds: 600 must be longer than the longest "
        "request_deadline_seconds (900)"
    ]
    for bad in (0, 59, math.inf, math.nan, 1e9):
        with pytest.raises(ConfigError, match=r"daemon\.tick_deadline_seconds"):
            config_with([], daemon={"tick_deadline_seconds": bad})
    assert config_with([]).daemon.tick_deadline_seconds == 1800


# -- a poll beside hostile sources ---------------------------------------------------------


@pytest.mark.database
def test_a_poll_stores_the_good_source_beside_an_endless_and_a_dripping_one(
    database_url: str, full_feed_bytes: bytes
) -> None:
    async def main() -> tuple[list[Any], int, HostileServer]:
        with feed_server() as good:
            good.routes["/rss/cs"] = Route(full_feed_bytes)
            async with hostile_server() as hostile:
                config = config_with(
                    [
                        {
                            "kind": "feed",
                            "name": "endless",
                            "url": hostile.url("/endless"),
                            "max_body_mb": 5,
                        },
                        {
                            "kind": "feed",
                            "name": "drip",
                            "url": hostile.url("/drip"),
                            "request_deadline_seconds": 2,
                        },
                        {"kind": "arxiv", "categories": ["cs"], "url": good.url("/rss/cs")},
                    ],
                    database=database_url,
                )
                store = Store.open(config.database_url())
                async with make_client() as client:
                    fetcher = build_fetcher(config, client, min_interval=0)
                    async with asyncio.timeout(60):
                        reports = await poll(config, store, fetcher, now=NOW)
                count = store.papers.count()
                store.close()
                return reports, count, hostile

    reports, count, hostile = asyncio.run(main())
    by_name = {r.source: r for r in reports}
    assert by_name["endless"].result == "error" and "larger than 5 MB" in str(
        by_name["endless"].error
    )
    assert by_name["drip"].result == "error" and "within 2 s" in str(by_name["drip"].error)
    assert by_name["arxiv"].result == "ok" and by_name["arxiv"].new > 1000
    assert count == by_name["arxiv"].new
    assert hostile.requests == ["/endless", "/drip"]  # each asked once


# -- /healthz and the tick's deadline ------------------------------------------------------


async def wait_for(condition: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(20):
            while not condition():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"waited 20 s for {what}") from None


def test_healthz_says_stuck_past_the_tick_deadline_and_the_tick_still_ends(tmp_path: Path) -> None:
    """The daemon's clock is the test's: a tick hangs on a dripping source; past
    [daemon] tick_deadline_seconds /healthz answers 503 "stuck"; the request's deadline
    (real time, 2 s) then ends the poll, the tick finishes and /healthz is 200 again."""

    async def main() -> None:
        async with hostile_server() as hostile:
            config = config_with(
                [{"kind": "feed", "name": "drip", "url": hostile.url("/drip")}],
                database=f"sqlite:///{tmp_path / 'paperbell.sqlite'}",
                polling={"request_deadline_seconds": 2},
                daemon={"tick_deadline_seconds": 300},
            )
            store = Store.open(config.database_url())
            clock = Clock(NOW)
            async with make_client() as client:
                parts = wire(config, store, {})
                daemon = Daemon(
                    parts,
                    wire_daemon(config, parts, clock=clock),
                    fetcher=build_fetcher(config, client, min_interval=0),
                    clock=clock,
                    owner="test",
                )
                daemon.counters.started = clock.now
                transport = httpx.ASGITransport(app=create_app(daemon))
                async with httpx.AsyncClient(transport=transport, base_url="http://pb") as web:

                    async def health() -> tuple[int, dict[str, Any]]:
                        answer = await web.get("/healthz")
                        return answer.status_code, answer.json()

                    tick = asyncio.create_task(daemon.tick())
                    await wait_for(lambda: hostile.requests == ["/drip"], "the poll")

                    clock.advance(seconds=299)
                    status, body = await health()
                    assert status == 200 and body["status"] == "starting"
                    assert body["tick_running_since"] == NOW.isoformat()
                    assert body["tick_deadline"] == (NOW + timedelta(seconds=300)).isoformat()

                    clock.advance(seconds=2)
                    status, body = await health()
                    assert status == 503 and body["status"] == "stuck"

                    report = await asyncio.wait_for(tick, 20)  # the request's deadline ends it
                    (poll_report,) = report.polls
                    assert poll_report.result == "error" and "within 2 s" in str(poll_report.error)
                    status, body = await health()
                    assert status == 200 and body["status"] == "ok" and body["ticks"] == 1
            store.close()

    asyncio.run(main())


def test_healthz_reads_failing_ticks_as_stalled_not_running(tmp_path: Path) -> None:
    """A tick that raised is over: /healthz no longer reports it as running (200) but
    reads the age of the last good tick (503 "stalled" once it is old)."""

    async def main() -> None:
        config = config_with([], database=f"sqlite:///{tmp_path / 'paperbell.sqlite'}")
        store = Store.open(config.database_url())
        clock = Clock(NOW)
        parts = wire(config, store, {})
        own = wire_daemon(config, parts, clock=clock)
        daemon = Daemon(parts, own, fetcher=None, clock=clock, owner="test")
        daemon.counters.started = clock.now
        await daemon.tick()
        good_tick: Callable[[], Awaitable[Any]] = daemon.tick

        async def failing() -> Any:
            daemon.counters.tick_started = clock()
            raise RuntimeError("the database went away")

        daemon.tick = failing  # type: ignore[method-assign]
        transport = httpx.ASGITransport(app=create_app(daemon))
        async with httpx.AsyncClient(transport=transport, base_url="http://pb") as web:
            for _ in range(10):  # ten minutes of failing ticks
                clock.advance(minutes=1)
                assert await daemon._guarded_tick() is None
            answer = await web.get("/healthz")
            assert answer.status_code == 503 and answer.json()["status"] == "stalled"
            assert answer.json()["tick_errors"] == 10
            assert "tick_running_since" not in answer.json()
            daemon.tick = good_tick  # type: ignore[method-assign]
            await daemon._guarded_tick()
            answer = await web.get("/healthz")
            assert answer.status_code == 200 and answer.json()["status"] == "ok"
        store.close()

    asyncio.run(main())
