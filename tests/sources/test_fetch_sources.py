"""Fetching the huggingface, arxiv_query and feed sources from a real HTTP server on loopback.

Each test runs a real `PoliteFetcher` over a real `make_client()` against
`support.servers.feed_server()` serving the real payloads in tests/fixtures/, and checks what
each request asked for (path, query string, headers) and when it came. Time is controlled:
the fetcher's clock and sleep are a `FakeTime` whose sleep moves the clock at once, and the
server records arrivals by that same clock, so spacing, Retry-After and backoff are asserted
exactly and no test waits.
No mock of httpx, no network beyond 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import pytest
from support.clock import FakeTime
from support.paths import FIXTURES
from support.servers import FeedServer, Route, etag_of, feed_server, header

from bot import USER_AGENT
from bot.core.errors import FeedErrorResponse, FeedFormatError, IncompleteResults, SourceError
from bot.sources import FetchState, Harvest
from bot.sources.arxiv_query import ArxivQuerySource, search
from bot.sources.feed import FeedSource
from bot.sources.http import PoliteFetcher, make_client
from bot.sources.huggingface import HuggingFaceSource

HF_DIR = FIXTURES / "hf_daily_papers"
API_DIR = FIXTURES / "arxiv_api"
FEEDS_DIR = FIXTURES / "feeds"

T = TypeVar("T")


# -- a controlled clock shared by the fetcher and the server ---------------------------------


def controlled(server: FeedServer) -> FakeTime:
    """A fake time the server records request arrivals by."""
    fake = FakeTime()
    server.clock = fake.clock
    return fake


def fetch_with(fake: FakeTime, calls: Callable[[PoliteFetcher], Awaitable[T]], **options: Any) -> T:
    """Run `calls(fetcher)` with a PoliteFetcher over a real client and the fake clock."""

    async def main() -> T:
        async with make_client(timeout=10) as client:
            fetcher = PoliteFetcher(
                client, clock=fake.clock, sleep=fake.sleep, **{"min_interval": 3.0, **options}
            )
            return await calls(fetcher)

    return asyncio.run(main())


def paths(server: FeedServer) -> list[str]:
    return [path for path, _ in server.requests]


def gaps(server: FeedServer) -> list[float]:
    """Seconds between the arrivals of consecutive requests, by the controlled clock."""
    return [later - earlier for earlier, later in zip(server.times, server.times[1:], strict=False)]


# -- Hugging Face Daily Papers ------------------------------------------------------------------

HF_PATH = "/api/daily_papers"
HF_JSON = "application/json; charset=utf-8"
HF_FIXTURE_DAYS = sorted(
    date.fromisoformat(path.stem.removeprefix("hf_daily_papers_"))
    for path in HF_DIR.glob("hf_daily_papers_*.json")
)


def hf_fixture(day: date) -> Path:
    return HF_DIR / f"hf_daily_papers_{day.isoformat()}.json"


def hf_answer(path: str, headers: dict[str, str]) -> Route | None:
    """The real day's JSON where a fixture holds that day, else `[]` (what the API answers
    for a day without papers); None (a 404) for any other path."""
    parts = urlsplit(path)
    if parts.path != HF_PATH:
        return None
    (asked,) = parse_qs(parts.query)["date"]
    fixture = hf_fixture(date.fromisoformat(asked))
    return Route(fixture.read_bytes() if fixture.exists() else b"[]", content_type=HF_JSON)


def hf_source(server: FeedServer, days: int = 1) -> HuggingFaceSource:
    return HuggingFaceSource("hf", url=server.url(""), days=days)


def hf_harvest(source: HuggingFaceSource, now: datetime) -> Callable[[PoliteFetcher], Any]:
    return lambda http: source.harvest(http, FetchState(), now=now)


def noon(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "days", "asked"),
    [
        pytest.param(
            datetime(2024, 5, 27, 12, 0, tzinfo=UTC),
            2,
            ["2024-05-24", "2024-05-27"],
            id="monday-reaches-back-over-the-weekend-to-friday",
        ),
        pytest.param(
            datetime(2025, 1, 21, 9, 30, tzinfo=UTC),
            2,
            ["2025-01-20", "2025-01-21"],
            id="tuesday-and-monday",
        ),
        pytest.param(
            datetime(2024, 5, 27, 8, 0, tzinfo=timezone(timedelta(hours=9))),
            3,
            ["2024-05-22", "2024-05-23", "2024-05-24"],
            id="monday-morning-in-tokyo-is-still-sunday-utc",
        ),
        # Hugging Face has no weekend issue, and Friday's list still grows: the last weekday.
        pytest.param(
            datetime(2024, 6, 1, 12, 0, tzinfo=UTC), 1, ["2024-05-31"], id="saturday-asks-friday"
        ),
        pytest.param(
            datetime(2024, 6, 2, 12, 0, tzinfo=UTC), 14, None, id="fourteen-weekdays-on-a-sunday"
        ),
    ],
)
def test_hf_harvest_asks_each_utc_weekday_oldest_first_with_the_user_agent(
    now: datetime, days: int, asked: list[str] | None
) -> None:
    if asked is None:  # the last `days` weekdays, up to now's UTC day
        day = now.date()
        asked = []
        while len(asked) < days:
            if day.weekday() < 5:
                asked.insert(0, day.isoformat())
            day -= timedelta(days=1)
    with feed_server() as server:
        server.answer = hf_answer
        fake = controlled(server)
        harvest = fetch_with(fake, hf_harvest(hf_source(server, days), now))

    assert paths(server) == [f"{HF_PATH}?date={day}" for day in asked]
    assert all(header(headers, "User-Agent") == USER_AGENT for _, headers in server.requests)
    assert all(gap >= 3.0 for gap in gaps(server))
    expected = sum(
        len(json.loads(hf_fixture(date.fromisoformat(day)).read_text()))
        for day in asked
        if hf_fixture(date.fromisoformat(day)).exists()
    )
    assert len(harvest.papers) == expected
    if not expected:
        assert harvest.empty_reason


@pytest.mark.parametrize("day", HF_FIXTURE_DAYS, ids=str)
def test_hf_day_is_parsed_with_its_upvotes_and_rank(day: date) -> None:
    with feed_server() as server:
        server.answer = hf_answer
        harvest = fetch_with(controlled(server), hf_harvest(hf_source(server), noon(day)))

    assert paths(server) == [f"{HF_PATH}?date={day}"]
    items = json.loads(hf_fixture(day).read_text())
    assert [(p.id, p.upvotes) for p in harvest.papers] == [
        (item["paper"]["id"], item["paper"]["upvotes"]) for item in items
    ]
    assert all(p.hf_day == day and p.announced == day for p in harvest.papers)
    assert harvest.announced == day and not harvest.problems
    top = max(harvest.papers, key=lambda p: p.upvotes or 0)
    assert top.hf_rank == 1


@pytest.mark.parametrize(
    ("first", "gap"),
    [
        pytest.param(
            [Route(b"Too Many Requests", 429, "text/plain", {"Retry-After": "7"})],
            [7.0],
            id="429-retry-after-7-is-waited",
        ),
        pytest.param(
            [Route(b"Service Unavailable", 503, "text/plain")] * 2,
            [2.0, 4.0],
            id="503-twice-backs-off-2-then-4",
        ),
    ],
)
def test_hf_retries_a_busy_server_then_reads_the_day(first: list[Route], gap: list[float]) -> None:
    day = date(2025, 1, 21)
    with feed_server() as server:
        server.answer = hf_answer
        server.queued[HF_PATH] = list(first)
        fake = controlled(server)
        # No spacing: the gaps are the Retry-After and the backoff alone.
        harvest = fetch_with(fake, hf_harvest(hf_source(server), noon(day)), min_interval=0)

    assert paths(server) == [f"{HF_PATH}?date={day}"] * (len(first) + 1)
    assert gaps(server) == gap and fake.sleeps == gap
    assert [p.id for p in harvest.papers] == ["2501.08325"]


def test_hf_5xx_forever_is_a_source_error_naming_the_url_after_the_retries() -> None:
    day = date(2025, 3, 21)
    with feed_server() as server:
        server.answer = lambda path, headers: Route(
            b"<html><body><h1>502 Bad Gateway</h1></body></html>", 502, "text/html"
        )
        fake = controlled(server)
        source = hf_source(server)
        with pytest.raises(SourceError) as caught:
            fetch_with(fake, hf_harvest(source, noon(day)), min_interval=0)

    url = server.url(f"{HF_PATH}?date={day}")
    assert len(server.requests) == 4  # one try and three retries
    assert fake.sleeps == [2.0, 4.0, 8.0]
    error = caught.value
    assert url in error.message and "HTTP 502" in error.message and "4 attempts" in error.message
    assert (error.source, error.url) == ("hf", url)


def test_hf_error_answer_with_status_400_is_a_feed_error_response() -> None:
    day = date(2025, 7, 22)
    body = b'{"error":"\\"date\\" must be a valid date in the format YYYY-MM-DD"}'
    with feed_server() as server:
        server.answer = lambda path, headers: Route(body, 400, HF_JSON)
        with pytest.raises(FeedErrorResponse) as caught:
            fetch_with(controlled(server), hf_harvest(hf_source(server), noon(day)))

    assert len(server.requests) == 1  # a 400 is the answer, not a reason to retry
    message = caught.value.message
    assert server.url(f"{HF_PATH}?date={day}") in message
    assert "HTTP 400" in message and "must be a valid date" in message


def test_hf_404_is_an_error_naming_the_url_and_the_status() -> None:
    """The server answers 404 with no body (a wrong `url` base, say)."""
    day = date(2025, 10, 3)
    with feed_server() as server:
        source = HuggingFaceSource("hf", url=server.url("/mirror"), days=1)
        with pytest.raises(SourceError) as caught:
            fetch_with(controlled(server), hf_harvest(source, noon(day)))

    assert paths(server) == [f"/mirror{HF_PATH}?date={day}"]
    message = caught.value.message
    assert server.url(f"/mirror{HF_PATH}?date={day}") in message and "HTTP 404" in message


def test_hf_404_hint_points_at_the_url_not_at_a_cut_off_download() -> None:
    day = date(2025, 10, 3)
    with feed_server() as server:
        source = HuggingFaceSource("hf", url=server.url("/mirror"), days=1)
        with pytest.raises(SourceError) as caught:
            fetch_with(controlled(server), hf_harvest(source, noon(day)))

    error = caught.value
    assert "cut off" not in str(error)
    assert error.hint and "url" in error.hint


@pytest.mark.parametrize(
    ("today", "words"),
    [
        pytest.param(
            Route(b"<html><body><h1>500</h1></body></html>", 500, "text/html"),
            "HTTP 500",
            id="500-after-the-retries",
        ),
        pytest.param(Route(b"", 404, "text/plain"), "HTTP 404", id="404"),
        pytest.param(Route(b'[{"paper": {"id": "25', content_type=HF_JSON), "not JSON", id="cut"),
    ],
)
def test_hf_a_day_that_fails_leaves_the_days_read_and_is_a_problem(
    today: Route, words: str
) -> None:
    """Today's list failing (the API down, a cut-off body) loses none of yesterday's
    papers nor their upvotes: the failed day is a problem named by its date."""
    yesterday, day = date(2025, 1, 21), date(2025, 1, 22)
    with feed_server() as server:
        server.answer = hf_answer
        server.queued[f"{HF_PATH}?date={day}"] = [today] * 4
        harvest = fetch_with(
            controlled(server), hf_harvest(hf_source(server, days=2), noon(day)), min_interval=0
        )

    assert [p.id for p in harvest.papers] == ["2501.08325"]
    assert harvest.announced == yesterday
    (problem,) = harvest.problems
    assert problem.startswith(f"{day}: ") and words in problem
    assert server.url(f"{HF_PATH}?date={day}") in problem


def test_hf_every_day_failing_fails_the_poll() -> None:
    day = date(2025, 1, 22)
    with feed_server() as server:
        source = HuggingFaceSource("hf", url=server.url("/mirror"), days=2)
        with pytest.raises(SourceError) as caught:
            fetch_with(controlled(server), hf_harvest(source, noon(day)))

    assert len(server.requests) == 2
    assert "HTTP 404" in caught.value.message


# -- arXiv API ----------------------------------------------------------------------------------

API_PATH = "/api/query"
ATOM = "application/atom+xml; charset=utf-8"
MATH_QUERY = "cat:math.NT OR cat:math.AG"
MATH_ENCODED = "cat:math.NT%20OR%20cat:math.AG"
# The real first pages of MATH_QUERY fetched on 2026-06-29 (5 results) and 2026-06-24
# (3 results), newest first: read in turn they are what a lastUpdatedDate-descending query
# pages through, the later fetch first.
MATH_PAGE_1 = (API_DIR / "api2026_search_cat-math.NT-OR-math.AG_max5_2026-06-29.xml").read_bytes()
MATH_PAGE_2 = (API_DIR / "api2026_search_cat-math.NT-OR-math.AG_max3_2026-06-24.xml").read_bytes()
# Updated 2026-06-26 at 16:41, 16:17, 14:10, 13:52, 13:47, then 2026-06-23 at 17:51, 17:18, 15:39.
MATH_IDS = [
    "2606.28256",
    "2606.28227",
    "2606.28110",
    "2606.28091",
    "2606.28085",
    "2606.24872",
    "2606.24838",
    "2606.24717",
]
TESTING_100 = (API_DIR / "api2026_search_all-testing_start0_max100.xml").read_bytes()
TESTING_10_AT_10 = (API_DIR / "api2026_search_all-testing_start10_max10.xml").read_bytes()
TWO_RESULTS = (
    API_DIR / "api2016_search_au-del_maestro-AND-ti-quantum-criticality.xml"
).read_bytes()
EMPTY = (API_DIR / "edge_api2026_empty-result_idlist_0000.0000.xml").read_bytes()
ERROR_400 = (API_DIR / "edge_api2026_http400-error-entry_idlist_abc.xml").read_bytes()


def api_path(
    encoded: str,
    start: int,
    max_results: int,
    sort_by: str = "lastUpdatedDate",
    sort_order: str = "descending",
) -> str:
    """The exact path and query string a request must have."""
    return (
        f"{API_PATH}?search_query={encoded}&start={start}&max_results={max_results}"
        f"&sortBy={sort_by}&sortOrder={sort_order}"
    )


def api_pages(pages: dict[int, bytes]) -> Callable[[str, dict[str, str]], Route | None]:
    """Answer each API request with the body for its `start` (a 404 for any other)."""

    def answer(path: str, headers: dict[str, str]) -> Route | None:
        parts = urlsplit(path)
        if parts.path != API_PATH:
            return None
        body = pages.get(int(parse_qs(parts.query)["start"][0]))
        return None if body is None else Route(body, content_type=ATOM)

    return answer


def entry_ids(body: bytes) -> list[str]:
    """The arXiv ids (no version) of a body's entries, in order."""
    found = re.findall(rb"<id>http://arxiv\.org/abs/(\S+?)v\d+</id>", body)
    return [raw.decode() for raw in found]


def first_entries(body: bytes, count: int) -> bytes:
    """The page of the same query with only its first `count` entries (what arXiv answers
    to max_results=`count` at start 0: the real start=10 page continues it exactly)."""
    head, *entries = body.split(b"<entry>")
    head = head.replace(
        b"<opensearch:itemsPerPage>100<", f"<opensearch:itemsPerPage>{count}<".encode()
    )
    kept = [b"<entry>" + entry.split(b"</entry>")[0] + b"</entry>\n" for entry in entries[:count]]
    return head + b"".join(kept) + b"</feed>\n"


def api_source(server: FeedServer, query: str = MATH_QUERY, **options: Any) -> ArxivQuerySource:
    return ArxivQuerySource("query", query=query, url=server.url(API_PATH), **options)


def api_harvest(source: ArxivQuerySource, now: datetime) -> Callable[[PoliteFetcher], Any]:
    return lambda http: source.harvest(http, FetchState(), now=now)


def api_search(server: FeedServer, **options: Any) -> Callable[[PoliteFetcher], Any]:
    """The API search of `server` these tests make: "testing", by relevance, in pages of
    10; `options` change those or add others (limit, max_pages, problems)."""
    arguments = {
        "base_url": server.url(API_PATH),
        "query": "testing",
        "page_size": 10,
        "source": "testing",
        "sort_by": "relevance",
        "sort_order": "descending",
    }
    return lambda http: search(http, **(arguments | options))


@pytest.mark.parametrize(
    ("now", "days", "kept", "starts"),
    [
        pytest.param(
            datetime(2026, 6, 29, 15, 0, tzinfo=UTC), 3, 2, [0], id="inside-the-first-page"
        ),
        pytest.param(
            datetime(2026, 6, 26, 17, 30, tzinfo=UTC), 3, 6, [0, 5], id="inside-the-second-page"
        ),
        pytest.param(
            datetime(2026, 6, 26, 17, 18, 22, tzinfo=UTC),
            3,
            7,
            [0, 5],
            id="an-entry-updated-exactly-days-ago-is-kept",
        ),
    ],
)
def test_api_harvest_pages_until_an_entry_is_older_than_days(
    now: datetime, days: int, kept: int, starts: list[int]
) -> None:
    with feed_server() as server:
        server.answer = api_pages({0: MATH_PAGE_1, 5: MATH_PAGE_2})
        fake = controlled(server)
        source = api_source(server, page_size=5, days=days)
        harvest = fetch_with(fake, api_harvest(source, now))

    assert paths(server) == [api_path(MATH_ENCODED, start, 5) for start in starts]
    assert [p.id for p in harvest.papers] == MATH_IDS[:kept]
    assert all(gap >= 3.0 for gap in gaps(server))
    assert fake.sleeps == [3.0] * (len(starts) - 1)  # the first request did not wait


@pytest.mark.parametrize(
    ("max_papers", "starts"),
    [(3, [0]), (5, [0]), (7, [0, 5]), (8, [0, 5])],
    ids=lambda value: str(value),
)
def test_api_harvest_stops_at_max_papers(max_papers: int, starts: list[int]) -> None:
    now = datetime(2026, 6, 29, 5, 7, 48, tzinfo=UTC)  # when page 1 was fetched
    with feed_server() as server:
        server.answer = api_pages({0: MATH_PAGE_1, 5: MATH_PAGE_2})
        fake = controlled(server)
        source = api_source(server, page_size=5, days=30, max_papers=max_papers)
        harvest = fetch_with(fake, api_harvest(source, now))

    assert paths(server) == [api_path(MATH_ENCODED, start, 5) for start in starts]
    assert [p.id for p in harvest.papers] == MATH_IDS[:max_papers]
    assert all(gap >= 3.0 for gap in gaps(server))


def test_api_search_continues_after_the_entries_sent_with_spacing() -> None:
    """start=0 (the real page cut to 10 entries), then start=10 (the real start=10 page)."""
    with feed_server() as server:
        server.answer = api_pages({0: first_entries(TESTING_100, 10), 10: TESTING_10_AT_10})
        fake = controlled(server)
        found = fetch_with(
            fake,
            api_search(server, limit=15),
        )

    assert paths(server) == [
        api_path("testing", start, 10, "relevance", "descending") for start in (0, 10)
    ]
    assert [entry.paper.id for entry in found] == entry_ids(TESTING_100)[:15]
    assert gaps(server) == [3.0]


def api_slices(body: bytes, unreadable: set[int] | None = None) -> Callable[..., Route | None]:
    """Answer each API request as arXiv would, from `body`'s entries: those from `start`,
    `max_results` of them; an entry whose index is in `unreadable` (None: every one) has
    no title, so it cannot be read as a paper."""
    head, *entries = body.split(b"<entry>")
    kept = [b"<entry>" + entry.split(b"</entry>")[0] + b"</entry>\n" for entry in entries]

    def answer(path: str, headers: dict[str, str]) -> Route | None:
        asked = parse_qs(urlsplit(path).query)
        start, count = int(asked["start"][0]), int(asked["max_results"][0])
        page = head.replace(b"<opensearch:startIndex>0<", b"<opensearch:startIndex>%d<" % start)
        for index in range(start, start + count):
            entry = kept[index % len(kept)]
            if unreadable is None or index in unreadable:
                entry = re.sub(rb"<title>[^<]*</title>", b"", entry)
            page += entry
        return Route(page + b"</feed>\n", content_type=ATOM)

    return answer


def test_api_search_skips_unreadable_entries_and_pages_by_the_entries_sent() -> None:
    """The 4th entry of the first page cannot be read, nor any of the second: the next page
    starts after every entry sent (not one early, reading an entry twice), and a page of
    unreadable entries is skipped with its problems, not the end of the search."""
    unreadable = {3, *range(10, 20)}
    problems: list[str] = []
    with feed_server() as server:
        server.answer = api_slices(TESTING_100, unreadable)
        found = fetch_with(
            controlled(server),
            api_search(server, limit=30, problems=problems),
        )

    assert paths(server) == [
        api_path("testing", start, 10, "relevance", "descending") for start in (0, 10, 20)
    ]
    ids = entry_ids(TESTING_100)
    assert [entry.paper.id for entry in found] == [
        ids[index] for index in range(30) if index not in unreadable
    ]
    assert len(problems) == 11 and all(problem.endswith(": no title") for problem in problems)


def test_api_poll_of_unreadable_pages_for_ever_stops_at_max_papers() -> None:
    with feed_server() as server:
        server.answer = api_slices(TESTING_100)
        source = api_source(server, page_size=10, max_papers=30)
        harvest = fetch_with(
            controlled(server), api_harvest(source, datetime(2026, 6, 29, tzinfo=UTC))
        )

    assert [int(parse_qs(urlsplit(path).query)["start"][0]) for path in paths(server)] == [
        0,
        10,
        20,
    ]
    assert harvest.papers == () and len(harvest.problems) == 30
    assert harvest.empty_reason == "30 results left out as unreadable"


def test_api_backfill_of_unreadable_pages_for_ever_stops_at_its_pages() -> None:
    with feed_server() as server:
        server.answer = api_slices(TESTING_100)
        with pytest.raises(IncompleteResults) as caught:
            fetch_with(
                controlled(server),
                api_search(server, sort_by="submittedDate", sort_order="ascending", max_pages=3),
            )

    assert len(server.requests) == 3 and caught.value.found == ()
    assert caught.value.message == "more than 3 pages of 10 results: stopped after 0 results"


def test_api_search_stops_at_the_limit_at_a_page_end_without_another_request() -> None:
    with feed_server() as server:
        server.answer = api_pages({0: TESTING_100})
        found = fetch_with(
            controlled(server),
            api_search(server, page_size=100, limit=100),
        )

    assert paths(server) == [api_path("testing", 0, 100, "relevance", "descending")]
    assert [entry.paper.id for entry in found] == entry_ids(TESTING_100)
    assert len(found) == 100


def test_api_search_ends_when_total_results_are_read() -> None:
    """totalResults 2: one request, though the page could hold 10."""
    query = 'au:del_maestro AND ti:"quantum criticality"'
    with feed_server() as server:
        server.answer = api_pages({0: TWO_RESULTS})
        found = fetch_with(
            controlled(server),
            api_search(server, query=query, source="maestro"),
        )

    encoded = "au:del_maestro%20AND%20ti:%22quantum%20criticality%22"
    assert paths(server) == [api_path(encoded, 0, 10, "relevance", "descending")]
    assert [entry.paper.id for entry in found] == ["1111.2011", "cond-mat/0607501"]


@pytest.mark.parametrize(
    ("query", "encoded"),
    [
        ('cat:cs.RO AND ti:"diffusion policy"', "cat:cs.RO%20AND%20ti:%22diffusion%20policy%22"),
        (MATH_QUERY, MATH_ENCODED),
        ('abs:"R&D" ANDNOT ti:C++', "abs:%22R%26D%22%20ANDNOT%20ti:C%2B%2B"),
        ("au:Müller", "au:M%C3%BCller"),
    ],
)
def test_api_request_carries_the_query_encoded_and_the_paging_parameters(
    query: str, encoded: str
) -> None:
    with feed_server() as server:
        server.answer = api_pages({0: EMPTY})
        source = api_source(server, query=query)  # page_size 500 by default
        fetch_with(controlled(server), api_harvest(source, datetime(2026, 4, 13, tzinfo=UTC)))

    ((path, headers),) = server.requests
    assert path == api_path(encoded, 0, 500)
    assert parse_qs(urlsplit(path).query) == {
        "search_query": [query],
        "start": ["0"],
        "max_results": ["500"],
        "sortBy": ["lastUpdatedDate"],
        "sortOrder": ["descending"],
    }
    assert header(headers, "User-Agent") == USER_AGENT


def test_api_empty_result_is_no_papers_after_one_request() -> None:
    with feed_server() as server:
        server.answer = api_pages({0: EMPTY})
        harvest = fetch_with(
            controlled(server), api_harvest(api_source(server), datetime(2026, 4, 13, tzinfo=UTC))
        )

    assert len(server.requests) == 1
    assert harvest.papers == () and harvest.empty_reason


def test_api_error_entry_with_http_400_is_a_feed_error_response() -> None:
    with feed_server() as server:
        server.answer = lambda path, headers: Route(ERROR_400, 400, ATOM)
        source = api_source(server, query="id:abc")
        with pytest.raises(FeedErrorResponse) as caught:
            fetch_with(controlled(server), api_harvest(source, datetime(2026, 4, 13, tzinfo=UTC)))

    assert len(server.requests) == 1  # a 400 is the answer, not a reason to retry
    error = caught.value
    assert "incorrect id format for abc" in error.message and "HTTP 400" in error.message
    assert error.url == server.url(api_path("id:abc", 0, 500)) and error.url in error.message


@pytest.mark.parametrize(
    ("busy", "gap"),
    [
        pytest.param(
            Route(b"Rate exceeded.", 429, "text/plain", {"Retry-After": "5"}),
            5.0,
            id="429-waits-its-retry-after",
        ),
        pytest.param(
            Route(b"Service Unavailable", 503, "text/plain"),
            3.0,
            id="503-backoff-of-2-is-raised-to-the-3-s-spacing",
        ),
    ],
)
def test_api_retries_a_busy_answer_then_reads_the_page(busy: Route, gap: float) -> None:
    now = datetime(2026, 6, 29, 5, 7, 48, tzinfo=UTC)
    with feed_server() as server:
        server.answer = api_pages({0: MATH_PAGE_1})
        server.queued[API_PATH] = [busy]
        source = api_source(server, page_size=5, days=30, max_papers=5)
        harvest = fetch_with(controlled(server), api_harvest(source, now))

    assert paths(server) == [api_path(MATH_ENCODED, 0, 5)] * 2
    assert gaps(server) == [gap]
    assert [p.id for p in harvest.papers] == MATH_IDS[:5]


def test_api_backfill_day_asks_the_submitted_date_range_oldest_first() -> None:
    """The 2026-06-24 page holds the papers submitted on 2026-06-23; its totalResults counts
    the whole category, so the loop asks once more and the real empty page ends it."""
    with feed_server() as server:
        server.answer = api_pages({0: MATH_PAGE_2, 3: EMPTY})
        fake = controlled(server)
        source = api_source(server, page_size=3)
        papers = fetch_with(fake, lambda http: source.backfill_day(http, date(2026, 6, 23)))

    encoded = (
        "%28cat:math.NT%20OR%20cat:math.AG%29%20AND%20"
        "submittedDate:%5B202606230000%20TO%20202606232359%5D"
    )
    assert paths(server) == [
        api_path(encoded, start, 3, "submittedDate", "ascending") for start in (0, 3)
    ]
    (asked,) = parse_qs(urlsplit(server.requests[0][0]).query)["search_query"]
    assert asked == f"({MATH_QUERY}) AND submittedDate:[202606230000 TO 202606232359]"
    assert [p.id for p in papers] == MATH_IDS[5:]
    assert gaps(server) == [3.0]


# -- a plain feed -------------------------------------------------------------------------------

FEEDS = [
    pytest.param(
        "/loi/tzme20?af=R",
        FEEDS_DIR / "tandf_zoology-middle-east_tzme20_2021-12-21.xml",
        13,
        id="tandf-rss1",
    ),
    pytest.param(
        "/publication/science/10557903",
        FEEDS_DIR / "sciencedirect_mol-phylogenetics-evolution_2021-12-21.xml",
        51,
        id="sciencedirect-rss2",
    ),
]
TANDF_PATH = "/loi/tzme20?af=R"
TANDF = (FEEDS_DIR / "tandf_zoology-middle-east_tzme20_2021-12-21.xml").read_bytes()
NOW = datetime(2021, 12, 21, 9, 30, tzinfo=UTC)


def feed_harvest(source: FeedSource, state: FetchState) -> Callable[[PoliteFetcher], Any]:
    return lambda http: source.harvest(http, state, now=NOW)


@pytest.mark.parametrize(("path", "fixture", "count"), FEEDS)
def test_feed_etag_round_trip_gives_not_modified(path: str, fixture: Path, count: int) -> None:
    body = fixture.read_bytes()
    with feed_server() as server:
        server.routes[path] = Route(body)
        source = FeedSource("journal", url=server.url(path))

        async def twice(http: PoliteFetcher) -> tuple[Harvest, Harvest]:
            first = await source.harvest(http, FetchState(), now=NOW)
            return first, await source.harvest(http, first.state, now=NOW)

        first, second = fetch_with(controlled(server), twice)

    assert len(first.papers) == count and not first.not_modified
    assert first.state.etag == etag_of(body)
    assert second.not_modified and second.papers == () and second.state == first.state
    (path1, headers1), (path2, headers2) = server.requests
    assert path1 == path2 == path
    assert header(headers1, "If-None-Match") is None
    assert header(headers2, "If-None-Match") == etag_of(body)
    assert all(header(h, "User-Agent") == USER_AGENT for h in (headers1, headers2))
    assert gaps(server) == [3.0]


def test_feed_last_modified_round_trip_gives_not_modified() -> None:
    """The server judges by If-Modified-Since alone: 304 when it names its Last-Modified."""
    last_modified = "Tue, 21 Dec 2021 09:15:10 GMT"

    def answer(path: str, headers: dict[str, str]) -> Route:
        if header(headers, "If-Modified-Since") == last_modified:
            return Route(b"", 304)
        return Route(TANDF, headers={"Last-Modified": last_modified})

    with feed_server() as server:
        server.answer = answer
        source = FeedSource("journal", url=server.url(TANDF_PATH))

        async def twice(http: PoliteFetcher) -> tuple[Harvest, Harvest]:
            first = await source.harvest(http, FetchState(), now=NOW)
            return first, await source.harvest(http, first.state, now=NOW)

        first, second = fetch_with(controlled(server), twice)

    assert first.state.last_modified == last_modified and len(first.papers) == 13
    (_, headers1), (_, headers2) = server.requests
    assert header(headers1, "If-Modified-Since") is None
    assert header(headers2, "If-Modified-Since") == last_modified
    assert second.not_modified and second.papers == ()
    assert second.state.last_modified == last_modified


def test_feed_503_then_200_is_retried() -> None:
    with feed_server() as server:
        server.routes[TANDF_PATH] = Route(TANDF)
        server.queued[TANDF_PATH] = [Route(b"Service Unavailable", 503, "text/plain")]
        source = FeedSource("journal", url=server.url(TANDF_PATH))
        harvest = fetch_with(controlled(server), feed_harvest(source, FetchState()))

    assert paths(server) == [TANDF_PATH, TANDF_PATH]
    assert gaps(server) == [3.0]  # the 2 s backoff, raised to the 3 s spacing
    assert len(harvest.papers) == 13 and harvest.state.etag == etag_of(TANDF)


def test_feed_html_page_with_status_200_is_a_feed_format_error() -> None:
    html = (
        b"<!DOCTYPE html><html><head><title>Access denied | tandfonline.com</title></head>"
        b"<body><h1>Please enable cookies.</h1><p>Checking your browser...</p></body></html>"
    )
    with feed_server() as server:
        server.routes[TANDF_PATH] = Route(html, content_type="text/html; charset=utf-8")
        source = FeedSource("journal", url=server.url(TANDF_PATH))
        with pytest.raises(FeedFormatError) as caught:
            fetch_with(controlled(server), feed_harvest(source, FetchState()))

    assert len(server.requests) == 1
    assert server.url(TANDF_PATH) in caught.value.message
    assert "HTML" in caught.value.message or "html" in caught.value.message


# -- one host, several sources ------------------------------------------------------------------


def test_sources_on_one_host_share_the_spacing_of_one_fetcher() -> None:
    """A Hugging Face source (two days) and a feed polled at once on the same host: the three
    requests go one at a time, min_interval apart."""
    with feed_server() as server:
        server.answer = hf_answer
        server.routes[TANDF_PATH] = Route(TANDF)
        fake = controlled(server)
        hf = hf_source(server, days=2)
        journal = FeedSource("journal", url=server.url(TANDF_PATH))

        async def both(http: PoliteFetcher) -> list[Harvest]:
            return list(
                await asyncio.gather(
                    hf.harvest(http, FetchState(), now=datetime(2025, 1, 21, 9, 30, tzinfo=UTC)),
                    journal.harvest(http, FetchState(), now=NOW),
                )
            )

        from_hf, from_feed = fetch_with(fake, both, min_interval=3.0)

    assert sorted(paths(server)) == sorted(
        [f"{HF_PATH}?date=2025-01-20", f"{HF_PATH}?date=2025-01-21", TANDF_PATH]
    )
    assert len(gaps(server)) == 2 and all(gap >= 3.0 for gap in gaps(server))
    assert [p.id for p in from_hf.papers] == ["2501.08325"] and len(from_feed.papers) == 13


# -- redirects ----------------------------------------------------------------------------------


def test_a_redirect_is_a_request_of_its_own_spaced_like_any_other() -> None:
    """arXiv's old listing URLs redirect to rss.arxiv.org, and http to https: the request
    after the redirect reaches the same service and waits its turn like any other, or each
    poll asks arXiv twice at once."""
    old, new = "/rss/cs.LG", "/new/rss/cs.LG"
    with feed_server() as server:
        server.routes[old] = Route(b"moved", 301, "text/plain", {"Location": server.url(new)})
        server.routes[new] = Route(TANDF)
        fake = controlled(server)
        result = fetch_with(fake, lambda http: http.get(server.url(old), FetchState()))

    assert result.status == 200 and result.body == TANDF
    assert paths(server) == [old, new]
    assert gaps(server) == [3.0]
