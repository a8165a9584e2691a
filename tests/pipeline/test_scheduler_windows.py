"""The days a scheduled digest takes: no paper is lost between two digests, whatever came
between them (a digest given up, a schedule change).

The daemon in the simulated world (`support.world`): a feed server plays rss.arxiv.org, an
SMTP server on loopback receives (or refuses) the digests, the store is a SQLite file, and
the clock is ours.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from support.world import FRIDAY_WEEKLY, World

from bot.core.models import Subscriber
from bot.match.digest import is_pending, match_rules
from bot.rules import parse_rule

NEW_YORK = ZoneInfo("America/New_York")
HOUR = timedelta(hours=1)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def owed(w: World, sub: Subscriber, first: date, last: date) -> set[str]:
    """The ids of the stored papers announced from `first` to `last` that the subscriber's
    rules match and that are theirs to get (their categories, the kinds they take)."""
    papers = [p for p in w.store.papers.announced_since(first) if p.announced <= last]
    rules = [parse_rule(text) for text in sub.rules]
    matches = match_rules(rules, papers)
    return {
        p.id
        for p in papers
        if any(p.id in matches.get(r.node, {}) for r in rules) and is_pending(sub, p, {})
    }


def test_the_papers_of_a_weekly_digest_given_up_come_in_the_next(world: Any) -> None:
    """A weekly digest refused for good (a 5xx): its papers, of the whole week, come in the
    next week's digest, as the outbox promises when it gives a digest up."""

    async def go() -> World:
        w = await world(at("2026-11-29T12:00"), subscribers=[FRIDAY_WEEKLY])  # Sunday
        w.sink.refuse["weekly@example.org"] = "550 5.2.2 mailbox full"
        await w.run_until(at("2026-12-04T13:00"), step=HOUR)  # Friday 07:00 ET has passed
        del w.sink.refuse["weekly@example.org"]
        await w.run_until(at("2026-12-11T13:00"), step=HOUR)
        return w

    w = asyncio.run(go())
    assert w.store.outbox.totals(now=w.clock.now) == {
        "pending": 0,
        "sent": 1,
        "failed": 1,  # the first week's, given up
        "in flight": 0,
    }
    mail = w.mail("weekly")
    assert [f"{when.astimezone(NEW_YORK):%a %d %H:%M}" for when, _ in mail] == ["Fri 11 07:00"]
    (sub,) = w.daemon.subscribers()
    first_week = owed(w, sub, date(2026, 11, 30), date(2026, 12, 4))
    received = w.store.outbox.delivered_versions(sub.id, "email")
    missing = sorted(first_week - set(received))
    assert first_week and not missing, f"{len(missing)} papers lost: {missing[:3]}"


def test_a_change_from_weekly_to_daily_skips_no_paper(world: Any) -> None:
    """A weekly subscriber who turns daily on Friday, with a window of one day: the first
    daily digest holds what came since the last weekly one (Monday's), not only the last
    two days' papers."""

    async def go() -> tuple[World, Subscriber]:
        start = at("2026-11-29T12:00")  # Sunday
        w = await world(start, subscribers=[])
        w.daemon.parts = replace(w.daemon.parts, window_days=1)
        w.store.subscribers.add(
            "lin", email="lin@example.org", rules=["learning"], now=start, max_papers=1000
        )
        w.store.subscribers.set_schedule("lin", schedule="weekly", day="monday", time="08:00")
        await w.run_until(at("2026-12-04T12:00"), step=HOUR)  # Friday noon UTC
        w.store.subscribers.set_schedule("lin", schedule="daily")
        await w.run_until(at("2026-12-05T09:00"), step=HOUR)
        (sub,) = w.daemon.subscribers()
        return w, sub

    w, sub = asyncio.run(go())
    sent = [f"{when:%a %d %H:%M}" for when, _ in w.mail("lin")]
    assert sent == ["Mon 30 08:00", "Fri 04 12:00"]
    week = owed(w, sub, date(2026, 11, 30), date(2026, 12, 4))
    missing = sorted(week - set(w.store.outbox.delivered_versions(sub.id, "email")))
    assert week and not missing, f"{len(missing)} papers lost: {missing[:3]}"
