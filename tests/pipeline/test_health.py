"""Sources' health, "why no papers today?": a listing that stops moving is stale, one that
comes short is short, both are filled in from the arXiv API, and `status`, /healthz and
/metrics say so; a digest day with nothing says why.

The daemon runs in the simulated world (`support.world`): the real listing served on
loopback, one slice per feed day; the arXiv API is the same server answering with a real
API response (re-dated by its query, like the listing: the window arXiv's schedule gives).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from time import sleep
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from hypothesis import given
from hypothesis import strategies as st
from support.cli import invoke
from support.config import sink_email, toml_table
from support.paths import FIXTURES
from support.servers import Route
from support.world import World

from bot.core.calendar import ArxivCalendar, announcement_day, submission_window
from bot.pipeline.health import Usual, is_short, usual_size
from bot.pipeline.poll import check_listing
from bot.sources.arxiv_api import parse_api
from bot.store.sources import Listing
from bot.web.app import create_app

CALENDAR = ArxivCalendar.default()
API_RESPONSE = FIXTURES / "arxiv_api" / "api2026_search_all-testing_start0_max100.xml"
BERLIN_DAILY = {
    "name": "berlin",
    "email": "berlin@example.org",
    "rules": ["learning OR testing"],
    "timezone": "Europe/Berlin",
    "time": "08:00",
    "notify_empty": True,
}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# -- the calendar's inverse ----------------------------------------------------------------


@given(
    st.datetimes(
        min_value=datetime(2026, 1, 1), max_value=datetime(2026, 12, 20), timezones=st.just(UTC)
    )
)
def test_the_submission_window_holds_exactly_the_days_submissions(moment: datetime) -> None:
    """A submission falls in the window of the feed day arXiv's schedule lists it on, and
    in no other (weekends, Thanksgiving, Christmas included)."""
    day = announcement_day(CALENDAR, moment)
    start, end = submission_window(CALENDAR, day)
    assert start <= moment < end
    for other in (day - timedelta(days=n) for n in range(1, 6)):
        if CALENDAR.day(other).announces:
            first, last = submission_window(CALENDAR, other)
            assert not first <= moment < last


# -- the usual size ------------------------------------------------------------------------


def listing(day: date, items: int, repaired: int | None = None) -> Listing:
    seen = at("2026-11-01T00:00")
    return Listing("arxiv", day, items, seen, None, None, repaired, 0, None)


def test_the_usual_size_is_the_same_weekdays_median_else_recent_days() -> None:
    tuesdays = [date(2026, 11, 17), date(2026, 11, 10), date(2026, 11, 3)]
    history = [listing(tuesdays[0], 230), listing(tuesdays[1], 16, 239), listing(tuesdays[2], 250)]
    # A repaired day counts what the arXiv API had: 239, not 16.
    assert usual_size(history, 1) == Usual(239, "Tuesdays")
    assert is_short(16, Usual(239, "Tuesdays")) and not is_short(60, Usual(239, "Tuesdays"))
    # Fewer than two Mondays: the median of the recent days of any weekday, if five.
    assert usual_size(history, 0) is None
    week = [listing(date(2026, 11, d), n) for d, n in ((20, 80), (19, 90), (18, 100), (17, 70))]
    assert usual_size([*week, listing(date(2026, 11, 16), 300)], 0) == Usual(90, "recent days")
    # A small category's quiet day is chance, not a fault.
    assert not is_short(0, Usual(6, "Tuesdays")) and not is_short(1, None)


# -- in the daemon -------------------------------------------------------------------------


def api_response(entries: int) -> bytes:
    """The real API response, cut to its first `entries` entries (and its total to match)."""
    body = API_RESPONSE.read_bytes()
    head, *parts = body.split(b"<entry>")
    kept = b"".join(b"<entry>" + part for part in parts[:entries])
    if not kept.rstrip().endswith(b"</feed>"):
        kept = kept[: kept.rindex(b"</entry>") + len(b"</entry>")] + b"\n</feed>\n"
    head = re.sub(rb"(totalResults[^>]*>)\d+", rb"\g<1>" + str(entries).encode(), head)
    return head + kept


def serve_api(w: World, *, entries: int = 12, status: int = 200) -> list[str]:
    """The arXiv API on the world's server: every query gets the real response (or
    `status`); the queries asked are returned, as they come."""
    asked: list[str] = []

    def answer(path: str, headers: dict[str, str]) -> Route | None:
        parts = urlsplit(path)
        if parts.path != "/api/query":
            return None
        asked.append(parse_qs(parts.query)["search_query"][0])
        if status != 200:
            return Route(b"busy", status=status, content_type="text/plain")
        return Route(api_response(entries), content_type="application/atom+xml")

    w.feed.answer = answer
    return asked


def api_titles(entries: int) -> list[str]:
    return [e.paper.title for e in parse_api(api_response(entries)).entries]


def body_of(message: Any) -> str:
    return " ".join(message.get_body(("plain",)).get_content().split())


def test_a_listing_that_stops_moving_is_stale_and_filled_in_from_the_api(world: Any) -> None:
    """Tuesday's feed stays on Monday's listing all day (the real incident). Past the
    deadline the source is stale; the arXiv API is asked once for Tuesday's papers (the
    window arXiv's schedule gives: Friday 14:00 to Monday 14:00 US Eastern), and the digest
    that waited for the listing brings them instead of a "late" note; the stale day then
    reads as handled. On Wednesday the feed is stuck again and the API answers 503: the
    source is stale, and /healthz says so (503 when asked to be strict)."""

    async def go() -> tuple[World, list[str], list[Any]]:
        w = await world(at("2026-11-23T00:00"), subscribers=[BERLIN_DAILY])
        asked = serve_api(w)
        w.days.rebuild[date(2026, 11, 24)] = time(23, 59)  # Tuesday's never comes that day
        w.days.rebuild[date(2026, 11, 25)] = time(23, 59)  # nor Wednesday's
        await w.run_until(at("2026-11-24T10:00"))  # 05:00 US Eastern: not yet the deadline
        answers = [await healthz(w)]
        await w.run_until(at("2026-11-24T12:00"))  # past 06:00 US Eastern
        answers.append(await healthz(w))
        serve_api(w, status=503)
        await w.run_until(at("2026-11-25T11:30"))  # Wednesday, past the deadline
        answers += [await healthz(w), await healthz(w, strict=True)]
        return w, asked, answers

    w, asked, (before, handled, stuck, strict) = asyncio.run(go())
    assert before["sources"]["arxiv"]["stale"] is False and before["sources_status"] == "ok"
    source = handled["sources"]["arxiv"]
    assert source["stale"] is False and handled["sources_status"] == "ok"
    assert source["notes"] == [
        "stale: no listing for Tue 24 Nov by 06:00 US Eastern",
        "filled in Tue 24 Nov from the arXiv API: 12 papers, 12 of them new to paperbell",
    ]
    # Asked once for Tuesday, for exactly Tuesday's window (UTC), whatever the later ticks.
    assert asked == ["(cat:cs.*) AND submittedDate:[202611201900 TO 202611231900]"]
    # The digest waited for the listing until the deadline, then came with the API's papers.
    (monday, tuesday, wednesday) = w.mail("berlin")
    assert monday[0] == at("2026-11-23T07:00") and tuesday[0] == at("2026-11-24T11:00")
    assert "new paper" in tuesday[1]["Subject"]
    assert any(title in body_of(tuesday[1]) for title in api_titles(12))

    source = stuck["sources"]["arxiv"]
    assert source["stale"] is True and stuck["sources_status"] == "degraded"
    assert source["problems"] == ["stale: no listing for Wed 25 Nov by 06:00 US Eastern"]
    assert stuck["unhealthy_sources"] == ["arxiv"]
    assert stuck["code"] == 200 and strict["code"] == 503  # a container stays up
    # Wednesday's feed moved on to Tuesday's listing (new papers: sent), not Wednesday's.
    assert "new paper" in wednesday[1]["Subject"]
    assert any("202611241900" in path for _, path in w.api)  # Wednesday's window was asked


async def healthz(w: World, *, strict: bool = False) -> dict[str, Any]:
    w.daemon.counters.started = w.daemon.counters.started or w.clock.now
    # The world ticks every 15 minutes, a daemon every 30 seconds: it has just ticked.
    w.daemon.counters.last_tick = w.clock.now
    transport = httpx.ASGITransport(app=create_app(w.daemon))
    async with httpx.AsyncClient(transport=transport, base_url="http://paperbell") as client:
        answer = await client.get("/healthz" + ("?strict=1" if strict else ""))
    return {**answer.json(), "code": answer.status_code}


def seed_history(w: World, day: date, sizes: list[int]) -> None:
    """Earlier listings of `day`'s weekday, a week apart (the store remembers sizes), and
    of the other days since the last of them but the day before `day`, which the world's
    first poll brings: the daemon missed no day (else the arXiv API is asked for it)."""
    for weeks, size in enumerate(sizes, start=1):
        earlier = day - timedelta(weeks=weeks)
        w.store.sources.record_listing("arxiv", earlier, items=size, now=at("2026-11-01T00:00"))
    since = CALENDAR.last_feed_day(day - timedelta(days=1))
    for days in range(1, 7):
        between = day - timedelta(weeks=1) + timedelta(days=days)
        if between < since and CALENDAR.day(between).announces:
            w.store.sources.record_listing("arxiv", between, items=50, now=at("2026-11-01T00:00"))


def test_a_short_listing_is_filled_in_and_status_says_what_came(world: Any, tmp_path: Any) -> None:
    """Tuesday's listing serves 4 of its papers; Tuesdays usually bring 75. The poll that
    brings it asks the arXiv API for Tuesday's papers, once, and the 08:00 digest has them;
    `paperbell status` says what was filled in, and /metrics counts it."""

    async def go() -> tuple[World, list[str], str]:
        w = await world(at("2026-11-24T04:00"), subscribers=[BERLIN_DAILY])
        asked = serve_api(w, entries=60)
        seed_history(w, date(2026, 11, 24), [75, 76, 74])
        w.days.short[date(2026, 11, 24)] = 4
        await w.run_until(at("2026-11-24T08:00"))
        w.daemon.counters.started = w.clock.now
        transport = httpx.ASGITransport(app=create_app(w.daemon))
        async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
            metrics = (await client.get("/metrics")).text
        return w, asked, metrics

    w, asked, metrics = asyncio.run(go())
    assert len(asked) == 1 and "submittedDate:[202611201900 TO 202611231900]" in asked[0]
    (digest,) = w.mail("berlin")
    assert any(title in body_of(digest[1]) for title in api_titles(60))
    assert 'paperbell_source_listing_papers{source="arxiv"} 4.0' in metrics
    assert 'paperbell_source_usual_papers{source="arxiv"} 75.0' in metrics
    assert 'paperbell_source_repaired_papers{source="arxiv"} 60.0' in metrics
    assert 'paperbell_source_short{source="arxiv"} 0.0' in metrics  # repaired

    status = status_of(w, tmp_path)
    assert "2026-11-24: 4 (usual 75), API 60" in status
    assert "arxiv: short: 4 papers on Tue 24 Nov, usually 75 (Tuesdays)" in status
    assert (
        "arxiv: filled in Tue 24 Nov from the arXiv API: 60 papers, 60 of them new to "
        "paperbell" in status
    )


def test_a_failed_repair_is_a_problem_and_is_tried_again_later(world: Any) -> None:
    """The arXiv API answers 503: the poll stands (the 4 papers are stored and sent), the
    source reads as short with why, and the repair is tried again an hour later, not at
    every tick."""

    async def go() -> tuple[World, list[str], dict[str, Any]]:
        w = await world(at("2026-11-24T04:00"), subscribers=[BERLIN_DAILY])
        asked = serve_api(w, status=503)
        seed_history(w, date(2026, 11, 24), [75, 76, 74])
        w.days.short[date(2026, 11, 24)] = 4
        await w.run_until(at("2026-11-24T07:00"))
        return w, asked, await healthz(w)

    w, asked, health = asyncio.run(go())
    source = health["sources"]["arxiv"]
    assert source["short"] is True and health["sources_status"] == "degraded"
    (problem,) = source["problems"]
    assert problem.startswith(
        "short: 4 papers on Tue 24 Nov, usually 75 (Tuesdays); the repair from the arXiv "
        "API failed: "
    )
    assert "503" in problem
    # 05:15 UTC (the listing's poll), then an hour later: not every quarter of an hour.
    assert [when for when, _ in w.api] == [at("2026-11-24T05:15"), at("2026-11-24T06:15")]
    assert len(asked) == 2


def test_status_says_why_a_digest_day_sent_nothing(world: Any, tmp_path: Any) -> None:
    """Thanksgiving: nobody gets papers. `status` says why for each subscriber, those who
    asked for no note too; a source failing since the morning is named in the note."""
    quiet = {**BERLIN_DAILY, "name": "quiet", "email": "q@example.org", "notify_empty": False}

    async def go() -> World:
        w = await world(at("2026-11-26T06:00"), subscribers=[BERLIN_DAILY, quiet])
        await w.run_until(at("2026-11-26T08:00"))
        return w

    w = asyncio.run(go())
    status = status_of(w, tmp_path)
    for name in ("berlin", "quiet"):
        assert (
            f"{name}: nothing on daily:2026-11-26: No arXiv announcement for Thursday 26 "
            "November 2026 (Thanksgiving, an arXiv holiday)." in status
        )
    assert [m["Subject"] for _, m in w.mail("berlin")] == [
        "No arXiv announcement for Thursday 26 November 2026 (Thanksgiving, an arXiv holiday)"
    ]


def test_a_failing_source_is_named_in_the_empty_note(world: Any) -> None:
    """The listing fails all Tuesday (HTTP 500): by the deadline the note says the listing
    is late and that the source fails since its first failed poll."""

    async def go() -> World:
        w = await world(at("2026-11-24T05:00"), subscribers=[BERLIN_DAILY])
        original = w.days.body
        w.days.body = lambda now: b"<html>500</html>"  # type: ignore[method-assign]
        w.feed.answer = lambda path, headers: None
        await w.run_until(at("2026-11-24T11:15"))
        w.days.body = original  # type: ignore[method-assign]
        return w

    w = asyncio.run(go())
    ((_, note),) = w.mail("berlin")
    text = body_of(note)
    assert "arXiv's listing for Tuesday 24 November 2026 is late" in note["Subject"]
    assert "paperbell could not read the source arxiv since Tue 24 Nov 05:00 UTC" in text


def status_of(w: World, tmp_path: Any) -> str:
    """`paperbell status` on the world's database."""
    config = tmp_path / "status.toml"
    url = str(w.store.database.engine.url)
    sources = "\n".join(
        f'[[sources]]\nkind = "arxiv"\nname = "{s.name}"\ncategories = ["cs"]\nurl = "{s.url}"\n'
        for s in w.daemon.sources
    )
    people = "\n".join(
        f'[[subscribers]]\nname = "{s.name}"\nemail = "{s.email}"\nrules = {list(s.rules)!r}\n'
        for s in w.daemon.parts.declared()
    ).replace("'", '"')
    email = toml_table("email", sink_email(25, sender="paperbell <papers@example.org>"))
    config.write_text(f'version = 1\n[database]\nurl = "{url}"\n{sources}\n{people}\n{email}')
    result = invoke("status", config=config)
    assert result.exit_code == 0, result.output
    return result.output


def test_healthz_answers_any_query_with_json(world: Any) -> None:
    """/healthz and /metrics take whatever query a stranger sends (huge, NUL, odd Unicode,
    `strict` repeated or empty): JSON with 200 or 503, or the metrics, never an error."""
    from hypothesis import settings

    w = asyncio.run(world(at("2026-11-24T07:00"), subscribers=[BERLIN_DAILY]))
    w.feed.routes["/rss/all"] = Route(w.days.body(w.clock.now))
    asyncio.run(w.daemon.tick())
    app = create_app(w.daemon)

    async def ask(query: list[tuple[str, str]]) -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
            return await client.get("/healthz", params=query), await client.get(
                "/metrics", params=query
            )

    @settings(max_examples=60)
    @given(
        st.lists(
            st.tuples(
                st.sampled_from(["strict", "Strict", "", "x" * 5000, "strict\x00"]),
                st.text(max_size=200),
            ),
            max_size=5,
        )
    )
    def check(query: list[tuple[str, str]]) -> None:
        answer, metrics = asyncio.run(ask(query))
        assert answer.status_code in (200, 503)
        assert answer.json()["sources"]["arxiv"]["last_result"] == "ok"
        assert metrics.status_code == 200

    w.daemon.counters.last_tick = w.clock.now
    check()


def test_a_feed_redated_around_yesterdays_papers_is_stale_not_todays_listing(
    world: Any,
) -> None:
    """arXiv's feed rebuilt with Tuesday's date around Monday's papers (the trap of trusting
    a feed's date): no listing of Tuesday is recorded (Tuesday's usual size stays clean), the
    day reads as stale past the deadline, and the arXiv API fills it in."""

    async def go() -> World:
        w = await world(at("2026-11-23T04:00"), subscribers=[BERLIN_DAILY])
        serve_api(w)
        await w.run_until(at("2026-11-24T05:00"))  # Monday's listing, then the evening
        monday = w.days.body(at("2026-11-23T12:00"))
        w.days.body = lambda now: monday.replace(  # type: ignore[method-assign]
            b"Mon, 23 Nov 2026", b"Tue, 24 Nov 2026"
        )
        await w.run_until(at("2026-11-24T11:30"))
        return w

    w = asyncio.run(go())
    tuesday = w.store.sources.listing("arxiv", date(2026, 11, 24))
    assert tuesday is not None and tuesday.items == 0 and tuesday.repaired == 12
    assert tuesday.repair_reason == "stale"
    monday = w.store.sources.listing("arxiv", date(2026, 11, 23))
    assert monday is not None and monday.items == len(w.days.papers_of(date(2026, 11, 23)))


def test_a_feed_day_missed_while_the_daemon_was_down_is_filled_in_from_the_api(
    world: Any,
) -> None:
    """The daemon runs through Friday 27 Nov, is down all of Monday 30 Nov (US Eastern),
    and is back on Tuesday, when arXiv's feed serves only Tuesday's listing: the arXiv API
    is asked once for Monday's papers (Monday's window: Thursday 14:00 to Friday 14:00 US
    Eastern), they are stored dated Monday, and Tuesday's digest brings them."""

    async def go() -> tuple[World, list[str]]:
        w = await world(at("2026-11-27T04:00"), subscribers=[BERLIN_DAILY])
        asked = serve_api(w)
        await w.run_until(at("2026-11-28T04:00"))  # Friday's listing, then the evening
        w.clock.now = at("2026-12-01T06:00")  # down from Friday night to Tuesday 01:00 Eastern
        await w.run_until(at("2026-12-01T12:00"))
        return w, asked

    w, asked = asyncio.run(go())
    monday = w.store.sources.listing("arxiv", date(2026, 11, 30))
    assert monday is not None, "Monday's listing was lost: the arXiv API was not asked"
    assert monday.repaired == 12 and monday.repair_reason == "missed"
    assert asked == ["(cat:cs.*) AND submittedDate:[202611261900 TO 202611271900]"]
    tuesday = w.store.sources.listing("arxiv", date(2026, 12, 1))
    assert tuesday is not None and tuesday.items == len(w.days.papers_of(date(2026, 12, 1)))
    after = [message for when, message in w.mail("berlin") if when >= at("2026-12-01T06:00")]
    assert any(title in body_of(m) for m in after for title in api_titles(12))


def test_a_missed_day_whose_repair_failed_is_told_in_status_and_healthz(world: Any) -> None:
    """Down all of Monday 30 Nov, back on Tuesday, and the arXiv API answers 503: Tuesday's
    listing comes, Monday's papers do not, and /healthz (so `paperbell status`) says so with
    the way to fetch them, though Monday is no longer the newest listing."""

    async def go() -> dict[str, Any]:
        w = await world(at("2026-11-27T04:00"), subscribers=[BERLIN_DAILY])
        serve_api(w, status=503)
        await w.run_until(at("2026-11-28T04:00"))
        w.clock.now = at("2026-12-01T06:00")
        await w.run_until(at("2026-12-01T12:00"))
        return await healthz(w)

    health = asyncio.run(go())
    source = health["sources"]["arxiv"]
    assert source["listing"]["day"] == "2026-12-01"
    (note,) = source["notes"]
    assert note.startswith("missed Mon 30 Nov while down; its repair from the arXiv API failed: ")
    assert "503" in note and note.endswith("`paperbell backfill --since 2026-11-30`)")


def test_a_daemon_down_for_a_month_asks_the_api_for_the_last_week_only(world: Any) -> None:
    """Down from Monday 2 Nov to Tuesday 1 Dec: the arXiv API is asked for the feed days of
    the week before Tuesday (Wednesday 25, Friday 27 and Monday 30 Nov; Thanksgiving has no
    listing), not for the month's: older papers are past the digest window."""

    async def go() -> list[str]:
        w = await world(at("2026-11-02T04:00"), subscribers=[BERLIN_DAILY])
        asked = serve_api(w)
        await w.run_until(at("2026-11-03T04:00"))  # Monday's listing, then the evening
        w.clock.now = at("2026-12-01T06:00")
        await w.run_until(at("2026-12-01T07:00"))
        return asked

    asked = asyncio.run(go())
    assert asked == [
        f"(cat:cs.*) AND submittedDate:[{start} TO {end}]"
        for start, end in [
            ("202611231900", "202611241900"),  # Wednesday 25 Nov
            ("202611241900", "202611261900"),  # Friday 27 Nov (Thanksgiving's too)
            ("202611261900", "202611271900"),  # Monday 30 Nov
        ]
    ]


def test_missed_days_share_one_repair_deadline(world: Any) -> None:
    """Three missed days, a 1.5 s repair deadline, and an arXiv API that answers the first
    day at once, then takes 3 s: the first day is filled in, the second runs out of time
    (tried again later), and the third is not asked before the next check."""

    async def go() -> tuple[World, list[str], list[Any]]:
        w = await world(at("2026-11-02T04:00"), subscribers=[BERLIN_DAILY])
        serve_api(w)
        await w.run_until(at("2026-11-03T04:00"))
        answer = w.feed.answer
        arrived: list[str] = []  # the API's requests, as they come (before the answer)

        def slow(path: str, headers: dict[str, str]) -> Route | None:
            if path.startswith("/api/"):
                arrived.append(path)
                if len(arrived) > 1:
                    sleep(3)
            return answer(path, headers)

        w.feed.answer = slow
        checks = replace(w.daemon.checks, deadline=1.5)
        # The first poll after the restart brought Tuesday's listing: the feed is live.
        tuesday = len(w.days.papers_of(date(2026, 12, 1)))
        w.store.sources.record_listing(
            "arxiv", date(2026, 12, 1), items=tuesday, now=at("2026-12-01T06:00")
        )
        (source,) = w.daemon.sources
        repairs = await check_listing(
            source, w.store, w.daemon.fetcher, checks, now=at("2026-12-01T06:00")
        )
        return w, arrived, repairs

    w, asked, repairs = asyncio.run(go())
    assert [(r.day, r.papers, r.error is None) for r in repairs] == [
        (date(2026, 11, 25), 12, True),
        (date(2026, 11, 27), 0, False),
    ]
    assert len(asked) == 2
    friday = w.store.sources.listing("arxiv", date(2026, 11, 27))
    assert friday is not None and friday.repair_error is not None
    assert "repair deadline" in friday.repair_error
    assert w.store.sources.listing("arxiv", date(2026, 11, 30)) is None
