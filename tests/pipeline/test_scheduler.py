"""The daemon on a controlled clock: polls that follow arXiv's calendar, digests at each
subscriber's local time across DST changes, weekends, a holiday and a late listing.

Real parts: an HTTP server on loopback plays rss.arxiv.org (the real listing, one slice per
feed day), an SMTP server on loopback receives the digests, the store is a SQLite file.
Only the clock is ours: `Daemon.tick` runs every 15 simulated minutes, no test waits.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support.paths import FIXTURES
from support.servers import Route
from support.world import FRIDAY_WEEKLY, World

from bot.config import parse_config
from bot.core.calendar import ArxivCalendar, PollPolicy, eastern_date, plan_poll
from bot.core.schedule import Schedule, latest_slot, next_slot, parse_time
from bot.sources import FetchState, Harvest, Source
from bot.store import Store

CALENDAR = ArxivCalendar.default()
UTC_ = UTC
BERLIN, NEW_YORK, TOKYO = (ZoneInfo(z) for z in ("Europe/Berlin", "America/New_York", "Asia/Tokyo"))


def at(text: str, zone: Any = UTC) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=zone)


# -- the calendar -------------------------------------------------------------------------


def feed_days(start: date, end: date) -> list[date]:
    """The days from `start` to `end` that have a listing by the calendar."""
    days = [start + timedelta(days=n) for n in range((end - start).days + 1)]
    return [day for day in days if CALENDAR.day(day).announces]


def test_feed_days_are_weekdays_without_holidays() -> None:
    week = feed_days(date(2026, 11, 23), date(2026, 11, 29))
    assert week == [date(2026, 11, 23), date(2026, 11, 24), date(2026, 11, 25), date(2026, 11, 27)]
    assert CALENDAR.day(date(2026, 11, 26)).describe() == (
        "Thursday 26 November 2026 (Thanksgiving, an arXiv holiday)"
    )
    assert CALENDAR.day(date(2026, 11, 28)).reason == "weekend"
    assert feed_days(date(2026, 12, 25), date(2026, 12, 31))[:2] == [
        date(2026, 12, 28),  # 25th: holiday
        date(2026, 12, 30),  # 29th: winter break
    ]
    assert CALENDAR.last_feed_day(date(2026, 12, 31)) == date(2026, 12, 30)
    assert CALENDAR.knows(2026) and not CALENDAR.knows(2027)
    extended = ArxivCalendar.default({date(2027, 1, 1): "New Year's Day"})
    assert not extended.day(date(2027, 1, 1)).announces and extended.knows(2027)


POLICY = PollPolicy()


@pytest.mark.parametrize(
    ("now", "last_poll", "last_new", "expected_at", "has_it", "late"),
    [
        # Never polled: now.
        ("2026-11-24T12:00", None, None, "2026-11-24T12:00", False, False),
        # Tuesday's listing is in (new ids at 00:06 ET): next poll Wednesday 00:05 ET.
        (
            "2026-11-24T12:00",
            "2026-11-24T05:06",
            "2026-11-24T05:06",
            "2026-11-25T05:05",
            True,
            False,
        ),
        # Before Tuesday's start, Monday's batch counts: wait for 00:05 ET.
        (
            "2026-11-24T05:00",
            "2026-11-23T05:06",
            "2026-11-23T05:06",
            "2026-11-24T05:05",
            True,
            False,
        ),
        # Polled at 00:06 ET, the feed still held Monday's batch: retry 10 minutes later.
        (
            "2026-11-24T05:10",
            "2026-11-24T05:06",
            "2026-11-23T05:06",
            "2026-11-24T05:16",
            False,
            False,
        ),
        # Past the 06:00 ET deadline: late, hourly.
        (
            "2026-11-24T11:30",
            "2026-11-24T11:10",
            "2026-11-23T05:06",
            "2026-11-24T12:10",
            False,
            True,
        ),
        # Late into the evening: the next feed day's start comes first.
        (
            "2026-11-25T04:30",
            "2026-11-25T04:20",
            "2026-11-23T05:06",
            "2026-11-25T05:05",
            False,
            True,
        ),
        # Wednesday's listing in: Thanksgiving (a holiday) is polled too, to confirm it ...
        (
            "2026-11-25T12:00",
            "2026-11-25T05:06",
            "2026-11-25T05:06",
            "2026-11-26T05:05",
            True,
            False,
        ),
        # ... hourly, never "late" ...
        (
            "2026-11-26T05:10",
            "2026-11-26T05:06",
            "2026-11-25T05:06",
            "2026-11-26T06:06",
            False,
            False,
        ),
        # ... and not after the deadline: Friday 00:05 ET.
        (
            "2026-11-26T10:30",
            "2026-11-26T10:06",
            "2026-11-25T05:06",
            "2026-11-27T05:05",
            False,
            False,
        ),
        # A first install on a Saturday got the weekend's empty feed: Friday's listing is
        # gone, not late; Monday 00:05 ET.
        ("2026-11-28T12:00", "2026-11-28T11:00", None, "2026-11-30T05:05", False, False),
        # Friday's listing in: nothing to poll over the weekend, Monday 00:05 ET.
        (
            "2026-11-28T12:00",
            "2026-11-27T05:06",
            "2026-11-27T05:06",
            "2026-11-30T05:05",
            True,
            False,
        ),
        # Across the US DST change (1 November): 00:05 EST is 05:05 UTC, 00:05 EDT 04:05.
        (
            "2026-10-30T12:00",
            "2026-10-30T04:06",
            "2026-10-30T04:06",
            "2026-11-02T05:05",
            True,
            False,
        ),
    ],
)
def test_poll_plan(
    now: str,
    last_poll: str | None,
    last_new: str | None,
    expected_at: str,
    has_it: bool,
    late: bool,
) -> None:
    plan = plan_poll(
        CALENDAR,
        POLICY,
        now=at(now),
        last_poll=at(last_poll) if last_poll else None,
        last_new=at(last_new) if last_new else None,
        follows_calendar=True,
    )
    assert (plan.at, plan.has_it, plan.late) == (at(expected_at), has_it, late)


def test_an_older_listing_is_not_the_awaited_one() -> None:
    """A new install polled first on Monday 23:30 ET and got Monday's listing (all new ids to
    it): that is not Tuesday's, whatever the time; Tuesday's is polled for from 00:05 ET."""
    first = at("2026-11-24T04:30")
    args = dict(now=at("2026-11-24T05:10"), last_poll=first, last_new=first, follows_calendar=True)
    monday = plan_poll(CALENDAR, POLICY, **args, last_new_day=date(2026, 11, 23))  # type: ignore[arg-type]
    assert (monday.feed_day, monday.has_it, monday.at) == (
        date(2026, 11, 24),
        False,
        at("2026-11-24T05:10"),
    )
    tuesday = plan_poll(CALENDAR, POLICY, **args, last_new_day=date(2026, 11, 24))  # type: ignore[arg-type]
    assert (tuesday.has_it, tuesday.at) == (True, at("2026-11-25T05:05"))


def test_other_sources_poll_at_their_interval() -> None:
    plan = plan_poll(
        CALENDAR,
        POLICY,
        now=at("2026-11-28T12:00"),  # a Saturday: the interval ignores arXiv's calendar
        last_poll=at("2026-11-28T11:30"),
        last_new=None,
        follows_calendar=False,
    )
    assert plan.at == at("2026-11-28T12:30") and plan.feed_day is None


def test_a_source_with_its_own_interval_is_polled_at_it(tmp_path: Path) -> None:
    from bot.pipeline.scheduler import source_plans
    from bot.sources.feed import FeedSource
    from bot.sources.huggingface import HuggingFaceSource

    hf = HuggingFaceSource("hf", interval_minutes=20)
    journal = FeedSource("journal", url="https://journal.example/rss")  # the [polling] one
    with Store.open(f"sqlite:///{tmp_path / 'plans.sqlite'}") as store:
        for name in ("hf", "journal"):
            store.sources.record_poll(name, url="", now=at("2026-11-27T11:00"), result="ok")
        plans = source_plans([hf, journal], store, CALENDAR, POLICY, now=at("2026-11-27T11:05"))
    assert plans["hf"].at == at("2026-11-27T11:20")
    assert plans["journal"].at == at("2026-11-27T11:00") + POLICY.interval


# -- schedules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "now", "key", "utc"),
    [
        # Berlin 08:00 in summer time (UTC+2), then winter time (UTC+1) after 25 October.
        (
            Schedule(at=time(8), timezone="Europe/Berlin"),
            "2026-10-24T09:00",
            "daily:2026-10-25",
            "2026-10-25T07:00",
        ),
        (
            Schedule(at=time(8), timezone="Europe/Berlin"),
            "2026-10-23T09:00",
            "daily:2026-10-24",
            "2026-10-24T06:00",
        ),
        # New York 02:30 does not exist on 8 March: it comes at 03:30 EDT (07:30 UTC).
        (
            Schedule(at=time(2, 30), timezone="America/New_York"),
            "2026-03-08T00:00",
            "daily:2026-03-08",
            "2026-03-08T07:30",
        ),
        # New York 01:30 happens twice on 1 November: the first (EDT, 05:30 UTC).
        (
            Schedule(at=time(1, 30), timezone="America/New_York"),
            "2026-10-31T12:00",
            "daily:2026-11-01",
            "2026-11-01T05:30",
        ),
        # Weekly on Monday 09:00 in Tokyo (no DST): Monday 00:00 UTC.
        (
            Schedule("weekly", time(9), "Asia/Tokyo", 0),
            "2026-11-22T12:00",
            "weekly:2026-11-23",
            "2026-11-23T00:00",
        ),
        # Weekly on Friday, asked on that Friday after the time: a week later.
        (
            Schedule("weekly", time(8), "UTC", 4),
            "2026-11-27T08:01",
            "weekly:2026-12-04",
            "2026-12-04T08:00",
        ),
    ],
)
def test_next_slot(schedule: Schedule, now: str, key: str, utc: str) -> None:
    slot = next_slot(schedule, at(now))
    assert (slot.key, slot.at) == (key, at(utc))
    assert slot.local.time() == (schedule.at if schedule.at != time(2, 30) else time(3, 30))
    assert latest_slot(schedule, slot.at) == slot  # at its own time, it is the latest
    assert latest_slot(schedule, slot.at - timedelta(seconds=1)).key != key


def test_time_and_zone_errors() -> None:
    with pytest.raises(ValueError, match="HH:MM"):
        parse_time("8am")
    problems = parse_errors({"digest": {"timezone": "europe/berlin", "time": "25:00"}})
    assert (
        "digest.timezone: unknown time zone 'europe/berlin'; did you mean 'Europe/Berlin'?"
        in problems
    )
    assert any(p.startswith("digest.time: '25:00' is not a time of day") for p in problems)
    problems = parse_errors({"polling": {"start": "07:00", "deadline": "06:00"}})
    assert problems == ["polling: deadline 06:00 must come after start 07:00"]


def parse_errors(data: dict[str, Any]) -> list[str]:
    from bot.core.errors import ConfigError

    try:
        parse_config({"version": 1, **data}, environ={})
    except ConfigError as exc:
        return list(exc.problems)
    return []


# -- the daemon, simulated ----------------------------------------------------------------


def local_times(mail: list[tuple[datetime, Any]], zone: ZoneInfo) -> list[str]:
    return [f"{when.astimezone(zone):%a %d %H:%M}" for when, _ in mail]


def test_a_fortnight_across_both_dst_changes(world: Any) -> None:
    async def go() -> World:
        w = await world(at("2026-10-22T12:00"))  # Thursday noon UTC
        # Every half hour: each subscriber's time is on the hour or the half hour.
        await w.run_until(at("2026-11-03T12:00"), step=timedelta(minutes=30))
        return w

    w = asyncio.run(go())

    # Berlin: every day at 08:00 local, through the change to winter time on 25 October;
    # digests on arXiv's feed days, a note on weekend days.
    berlin = w.mail("berlin")
    assert local_times(berlin, BERLIN) == [
        "Fri 23 08:00",
        "Sat 24 08:00",
        "Sun 25 08:00",
        "Mon 26 08:00",
        "Tue 27 08:00",
        "Wed 28 08:00",
        "Thu 29 08:00",
        "Fri 30 08:00",
        "Sat 31 08:00",
        "Sun 01 08:00",
        "Mon 02 08:00",
        "Tue 03 08:00",
    ]
    assert [when for when, _ in berlin][1:3] == [at("2026-10-24T06:00"), at("2026-10-25T07:00")]
    subjects = [m["Subject"] for _, m in berlin]
    assert (
        subjects[1]
        == "No arXiv announcement for Saturday 24 October 2026 (weekend: arXiv announces nothing)"
    )
    assert all("new paper" in s for i, s in enumerate(subjects) if i not in (1, 2, 8, 9))

    # New York: 01:30 local, the first of the two 01:30s on 1 November (05:30 UTC), then
    # 01:30 EST (06:30 UTC); the weekend notes say why.
    newyork = w.mail("newyork")
    assert local_times(newyork, NEW_YORK)[-3:] == ["Sun 01 01:30", "Mon 02 01:30", "Tue 03 01:30"]
    assert [when for when, _ in newyork][-3:-1] == [at("2026-11-01T05:30"), at("2026-11-02T06:30")]
    assert "weekend" in newyork[-3][1]["Subject"]

    # Tokyo: weekly, Monday 09:00 local; the second digest holds the five feed days of the week.
    tokyo = w.mail("tokyo")
    assert local_times(tokyo, TOKYO) == ["Mon 26 09:00", "Mon 02 09:00"]
    week = tokyo[1][1].get_body(("plain",)).get_content()
    for day in ("Monday 26 October", "Friday 30 October"):
        assert day in week

    # The defaults (08:00 UTC), no notes: nothing on weekends.
    quiet = w.mail("quiet")
    assert [f"{when:%a %d %H:%M}" for when, _ in quiet][:3] == [
        "Fri 23 08:00",
        "Mon 26 08:00",
        "Tue 27 08:00",
    ]

    # arXiv was polled once per feed day (new ids at the first poll), never on weekends.
    per_day = Counter(eastern_date(when) for when in w.polls)
    assert set(per_day.values()) == {1}
    assert all(CALENDAR.day(day).announces for day in per_day)
    assert len(per_day) == len(feed_days(date(2026, 10, 22), date(2026, 11, 3)))

    # No paper reached anyone twice.
    for name in ("berlin", "newyork", "tokyo", "quiet"):
        ids = [link for _, m in w.mail(name) for link in abs_links(m)]
        assert len(ids) == len(set(ids)), name


def abs_links(message: Any) -> list[str]:
    import re

    text = message.get_body(("plain",)).get_content()
    return sorted(set(re.findall(r"https://arxiv\.org/abs/(\S+)", text)))


def test_thanksgiving_and_late_listings(world: Any) -> None:
    async def go() -> World:
        w = await world(at("2026-11-23T00:00"))  # Sunday night in New York
        w.days.rebuild[date(2026, 11, 24)] = time(2, 40)  # Tuesday's listing comes late
        w.days.rebuild[date(2026, 11, 27)] = time(7, 0)  # Friday's after the 06:00 deadline
        await w.run_until(at("2026-11-28T12:00"))
        return w

    w = asyncio.run(go())
    berlin = w.mail("berlin")
    times = local_times(berlin, BERLIN)
    subjects = [m["Subject"] for _, m in berlin]
    # Monday on time. Tuesday waits for the late listing (02:40 ET is 08:40 in Berlin; the
    # next poll, 08:45, brings it) instead of sending Monday's news or nothing.
    assert times[:3] == ["Mon 23 08:00", "Tue 24 08:45", "Wed 25 08:00"]
    assert all("new paper" in s for s in subjects[:3])
    tuesday = b"".join(w.days.papers_of(date(2026, 11, 24)))
    assert abs_links(berlin[1][1]) and all(i.encode() in tuesday for i in abs_links(berlin[1][1]))
    # Thursday is Thanksgiving: the note names the holiday.
    assert times[3] == "Thu 26 08:00"
    assert subjects[3] == (
        "No arXiv announcement for Thursday 26 November 2026 (Thanksgiving, an arXiv holiday)"
    )
    # Friday: past the 06:00 ET deadline (12:00 Berlin) without a listing: the note says so,
    # and Friday's papers (fetched at 07:00 ET) come in Saturday's digest, as it promised.
    assert times[4] == "Fri 27 12:00"
    assert subjects[4] == "arXiv's listing for Friday 27 November 2026 is late"
    body = " ".join(berlin[4][1].get_body(("plain",)).get_content().split())
    assert (
        "it had not come by 06:00 US Eastern, and its papers will come in your next digest" in body
    )
    assert times[5:] == ["Sat 28 08:00"] and "new paper" in subjects[5]
    friday = b"".join(w.days.papers_of(date(2026, 11, 27)))
    assert all(i.encode() in friday for i in abs_links(berlin[5][1]))

    # New York (01:30): the holiday note on Thursday; on Friday it waits for the listing
    # until the deadline (06:00 ET) and then sends the late note.
    newyork = {
        f"{when.astimezone(NEW_YORK):%a %H:%M}": m["Subject"] for when, m in w.mail("newyork")
    }
    assert newyork["Thu 01:30"].startswith("No arXiv announcement for Thursday 26 November 2026")
    assert newyork["Fri 06:00"] == "arXiv's listing for Friday 27 November 2026 is late"
    # Quiet (no notes) gets nothing on Thanksgiving.
    quiet = [f"{when:%a %H:%M}" for when, _ in w.mail("quiet")]
    assert quiet == ["Mon 08:00", "Tue 08:00", "Wed 08:00", "Sat 08:00"]

    # Polls: Tuesday every tick from 00:15 ET until the listing (02:45 ET); Friday every tick
    # until the deadline, then hourly until it came; Thanksgiving hourly until the deadline.
    per_day = Counter(eastern_date(when) for when in w.polls)
    assert per_day[date(2026, 11, 24)] == 11  # 00:15, 00:30 ... 02:45
    assert per_day[date(2026, 11, 26)] == 6  # the holiday, confirmed hourly to the deadline
    assert per_day[date(2026, 11, 27)] == 24 + 1  # 00:15 ... 06:00, then 07:00
    state = {s.name: s for s in w.store.sources.states()}["arxiv"]
    assert state.last_new is not None and eastern_date(state.last_new) == date(2026, 11, 27)


def test_health_and_metrics(world: Any) -> None:
    import httpx

    from bot.web.app import create_app

    async def go() -> None:
        w = await world(at("2026-11-24T07:00"))  # 08:00 in Berlin: polls and sends
        w.feed.routes["/rss/all"] = Route(w.days.body(w.clock.now))
        w.daemon.counters.started = w.clock.now
        transport = httpx.ASGITransport(app=create_app(w.daemon))
        async with httpx.AsyncClient(transport=transport, base_url="http://paperbell") as client:
            starting = await client.get("/healthz")
            assert starting.status_code == 200 and starting.json()["status"] == "starting"
            await w.daemon.tick()
            health = await client.get("/healthz")
            assert health.status_code == 200 and health.json()["status"] == "ok"
            assert health.json()["outbox"]["sent"] == 1  # berlin (newyork's 01:30 ET came before)
            metrics = await client.get("/metrics")
            assert metrics.headers["content-type"].startswith("text/plain")
            assert 'paperbell_outbox_digests{state="sent"} 1.0' in metrics.text
            assert 'paperbell_polls_total{outcome="ok"} 1.0' in metrics.text
            assert 'paperbell_subscribers{state="active"} 4.0' in metrics.text

            w.clock.now += timedelta(minutes=10)  # no tick for 10 minutes
            stalled = await client.get("/healthz")
            assert stalled.status_code == 503 and stalled.json()["status"] == "stalled"

    asyncio.run(go())


class _ExplodingSource(Source):
    """A source with a bug: its harvest raises something no parser would call a SourceError."""

    kind = "exploding"

    async def harvest(self, http: Any, state: FetchState, *, now: datetime) -> Harvest:
        raise OverflowError("Python int too large to convert to C int")


def test_a_failing_source_and_hostile_items_stop_no_digest(world: Any) -> None:
    """A tick beside a source that raises (not a SourceError) and a listing with hostile
    items: the listing's good papers are stored and the digest goes out; the failure and the
    items left out are counted in /metrics."""
    import httpx

    from bot.web.app import create_app

    hostile = (FIXTURES / "hostile" / "arxiv_items.xml").read_bytes()

    async def go() -> None:
        w = await world(at("2026-11-24T07:00"))  # 08:00 in Berlin: polls and sends
        body = w.days.body(w.clock.now)
        end = body.rindex(b"</channel>")
        w.feed.routes["/rss/all"] = Route(body[:end] + hostile + body[end:])
        w.daemon.sources.insert(0, _ExplodingSource("exploding"))
        w.daemon.counters.started = w.clock.now
        report = await w.daemon.tick()
        assert [(p.source, p.result, p.problems) for p in report.polls] == [
            ("exploding", "error", 0),
            ("arxiv", "ok", 2),  # the 400-digit version and the long announce type
        ]
        assert [(d.subscriber, d.status) for d in report.digests if d.status == "sent"] == [
            ("berlin", "sent")
        ]
        transport = httpx.ASGITransport(app=create_app(w.daemon))
        async with httpx.AsyncClient(transport=transport, base_url="http://paperbell") as client:
            metrics = (await client.get("/metrics")).text
        assert 'paperbell_source_failing{source="exploding"} 1.0' in metrics
        assert 'paperbell_source_left_out{source="arxiv"} 2.0' in metrics
        assert 'paperbell_source_left_out_items_total{source="arxiv"} 2.0' in metrics
        assert 'paperbell_polls_total{outcome="error"} 1.0' in metrics
        (state,) = [s for s in w.store.sources.states() if s.name == "exploding"]
        assert state.last_error == "OverflowError: Python int too large to convert to C int"

    asyncio.run(go())


def test_a_late_listing_reaches_the_next_weekly_digest(world: Any) -> None:
    """Friday's listing comes at 09:00 ET, after a weekly Friday 07:00 digest went out: its
    papers come in the next Friday's digest. Two sources give the same papers: each knows
    the new listing by its own batch, so neither waits for the other or reads as late."""

    async def go() -> World:
        w = await world(at("2026-12-03T12:00"), subscribers=[FRIDAY_WEEKLY], copies=2)
        w.days.rebuild[date(2026, 12, 4)] = time(9, 0)
        await w.run_until(at("2026-12-11T13:00"))
        return w

    w = asyncio.run(go())
    mail = w.mail("weekly")
    assert local_times(mail, NEW_YORK) == ["Fri 04 07:00", "Fri 11 07:00"]
    late_friday = [i.decode() for i in w.days.papers_of(date(2026, 12, 4))]
    second = set(abs_links(mail[1][1]))
    matched = [item for item in late_friday if "learning" in item.lower()]
    assert matched and all(any(link in item for link in second) for item in matched[:5])
    per_day = Counter(eastern_date(when) for when in w.polls)
    assert per_day[date(2026, 12, 7)] == 2  # Monday: one poll per source, both have it


def test_the_timer_ticks_on_time_skips_beats_while_a_tick_runs_and_stops(tmp_path: Path) -> None:
    """`serve`'s timer: a tick at once, then one per interval; a tick still running when the
    next beat comes makes that beat a no-op (never two at once, never a queue of them); the
    stop event ends it, with the running tick allowed to finish."""
    from support.clock import Clock

    from bot.pipeline import wire, wire_daemon
    from bot.pipeline.scheduler import Daemon

    config = parse_config(
        {
            "version": 1,
            "database": {"url": f"sqlite:///{tmp_path / 'paperbell.sqlite'}"},
            "daemon": {"shutdown_grace_seconds": 5},
            "sources": [{"name": "cs", "kind": "arxiv", "categories": ["cs.AI"]}],
        },
        environ={},
    )

    async def main() -> tuple[int, int]:
        store = Store.open(config.database_url())
        clock = Clock(at("2026-11-24T12:00"))
        parts = wire(config, store, {})
        daemon = Daemon(parts, wire_daemon(config, parts, clock=clock), fetcher=None, clock=clock)
        running = 0
        most = 0
        started = 0

        async def slow_tick() -> Any:
            nonlocal running, most, started
            started += 1
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.25)  # longer than two beats
            running -= 1
            return None

        daemon.tick = slow_tick  # type: ignore[method-assign]
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(1.0, stop.set)
        await asyncio.wait_for(daemon.serve(stop, interval=0.1), timeout=10)
        store.close()
        assert running == 0  # the last tick finished before serve returned
        return started, most

    started, most = asyncio.run(main())
    assert most == 1
    assert 2 <= started <= 5  # ~1 s of 0.25 s ticks on a 0.1 s timer


def daemon_holding_a_claim(tmp_path: Path, *, grace: float) -> tuple[Store, Any, Any]:
    """A daemon (no sources, no channels) on its own SQLite store, stopping within `grace`
    seconds, that holds the claim on ada's one queued digest: the store, the daemon and the
    claimed item."""
    from support.clock import Clock
    from support.workers import message

    from bot.core.models import Subscriber
    from bot.demo.data import bundled_papers
    from bot.pipeline import wire, wire_daemon
    from bot.pipeline.scheduler import Daemon

    config = parse_config(
        {
            "version": 1,
            "database": {"url": f"sqlite:///{tmp_path / 'paperbell.sqlite'}"},
            "daemon": {"shutdown_grace_seconds": grace},
        },
        environ={},
    )
    now = at("2026-11-24T12:00")
    store = Store.open(config.database_url())
    store.subscribers.sync_config([Subscriber("ada", "ada@lab.example", ("x",))], now=now)
    ada = store.subscribers.get("ada")
    assert ada is not None and ada.id is not None
    store.outbox.enqueue(
        ada.id,
        channel="email",
        period="now:1",
        digest_id="d-ada",
        recipient="ada@lab.example",
        payload=message("ada"),
        sent=tuple(bundled_papers())[:3],
        now=now,
    )
    clock = Clock(now)
    parts = wire(config, store, {})
    daemon = Daemon(parts, wire_daemon(config, parts, clock=clock), fetcher=None, clock=clock)
    [claimed] = store.outbox.claim(daemon.owner, now=now, lease=timedelta(minutes=5))
    return store, daemon, claimed


def test_claims_are_handed_back_only_after_the_slash_commands_work_is_done(
    tmp_path: Path,
) -> None:
    """At shutdown, a /papers digest still being sent holds its claim under the daemon's
    name: the daemon waits for it (`replies`) before handing its claims back, so that no
    other process takes that digest over and sends it again."""
    store, daemon, claimed = daemon_holding_a_claim(tmp_path, grace=5)
    clock, now = daemon.clock, at("2026-11-24T12:00")
    recorded: list[bool] = []

    async def digest_being_sent() -> None:  # the relay answers once the daemon is stopping
        await asyncio.sleep(0.3)
        recorded.append(store.outbox.mark_sent(claimed.id, owner=daemon.owner, now=clock()))

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.1, stop.set)
        await asyncio.wait_for(daemon.serve(stop, interval=60, replies=digest_being_sent), 10)

    asyncio.run(main())
    totals = store.outbox.totals(now=now)
    store.close()
    assert recorded == [True]  # still its claim when the relay took it: recorded as sent
    assert totals.get("sent") == 1 and not totals.get("pending")


def test_a_request_cut_off_at_the_deadline_ends_before_its_claims_go_back(
    tmp_path: Path,
) -> None:
    """A page's request sends its notice mail under the daemon's name. At the stop's
    deadline the web app is closed; a request still running must end then, before the
    daemon hands its claims back: one that went on would send what another process may
    claim and send again."""
    from sqlmodel import col, select
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route as WebRoute

    from bot.demo import free_port
    from bot.store.tables import OutboxRow
    from bot.web.app import make_server

    store, daemon, claimed = daemon_holding_a_claim(tmp_path, grace=0.5)
    arrived = asyncio.Event()
    held_when_cut: list[bool] = []

    def lease_owner(record: int) -> str | None:
        with store.database.engine.connect() as connection:
            found = select(OutboxRow.lease_owner).where(col(OutboxRow.id) == record)
            return connection.execute(found).scalar_one()

    async def sending(request: object) -> PlainTextResponse:  # a relay that takes its time
        arrived.set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            held_when_cut.append(lease_owner(claimed.id) == daemon.owner)
            raise
        return PlainTextResponse("sent")

    port = free_port()
    server = make_server(
        Starlette(routes=[WebRoute("/send", sending)]), host="127.0.0.1", port=port, grace=0.5
    )

    async def main() -> None:
        stop = asyncio.Event()
        serving = asyncio.create_task(daemon.serve(stop, web=server, interval=60))
        while not server.started:
            await asyncio.sleep(0.01)
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /send HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await asyncio.wait_for(arrived.wait(), 5)
        stop.set()
        await asyncio.wait_for(serving, 10)
        writer.close()

    asyncio.run(main())
    store.close()
    assert held_when_cut == [True]  # cut off while the claim was still its own
