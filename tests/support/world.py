"""The daemon in a simulated world (`world` fixture): an HTTP server on loopback plays
rss.arxiv.org (the real listing of 2024-11-28, a slice per feed day: `ArxivDays`), an SMTP
server on loopback receives the digests, the store is a SQLite file, and a `Clock` drives
`Daemon.tick` every 15 simulated minutes (`World.run_until`; a test of many days may step
further): no test waits.

Shared by the scheduler's tests and the sources' health tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.channels.email import EmailChannel
from bot.config import parse_config
from bot.core.calendar import ArxivCalendar
from bot.pipeline import smtp_settings, wire, wire_daemon
from bot.pipeline.scheduler import Daemon
from bot.sources.http import PoliteFetcher, make_client
from bot.store import Store
from support.clock import Clock
from support.config import sink_email
from support.servers import ArxivDays, FeedServer, Route, SinkHandler, feed_server, smtp_sink

CALENDAR = ArxivCalendar.default()

STEP = timedelta(minutes=15)


@dataclass
class World:
    """A daemon with its servers, its store and the clock that drives it."""

    daemon: Daemon
    clock: Clock
    feed: FeedServer
    days: ArxivDays
    sink: SinkHandler
    store: Store
    received: list[tuple[datetime, Any]]
    polls: list[datetime]  # when the listing was fetched
    api: list[tuple[datetime, str]] = field(default_factory=list)  # arXiv API requests

    async def run_until(self, end: datetime, *, step: timedelta = STEP) -> None:
        """Tick every `step` of the clock until `end`."""
        while self.clock.now < end:
            self.feed.routes["/rss/all"] = Route(self.days.body(self.clock.now))
            before_polls, before_mail = len(self.feed.requests), len(self.sink.messages)
            await self.daemon.tick()
            listing = [p for p, _ in self.feed.requests[before_polls:] if p.startswith("/rss/")]
            self.polls += [self.clock.now] * len(listing)
            self.api += [
                (self.clock.now, p)
                for p, _ in self.feed.requests[before_polls:]
                if p.startswith("/api/")
            ]
            self.received += [(self.clock.now, m) for m in self.sink.messages[before_mail:]]
            self.clock.now += step

    def mail(self, name: str) -> list[tuple[datetime, Any]]:
        return [(when, m) for when, m in self.received if m["To"].startswith(name)]


# New York, weekly on Friday at 07:00, every paper that matches (no cap).
FRIDAY_WEEKLY = {
    "name": "weekly",
    "email": "weekly@example.org",
    "rules": ["learning"],
    "schedule": "weekly",
    "day": "friday",
    "time": "07:00",
    "timezone": "America/New_York",
    "max_papers": 1000,
}

SUBSCRIBERS = [
    # Berlin, daily at 08:00, wants a note when there is nothing.
    {
        "name": "berlin",
        "email": "berlin@example.org",
        "rules": ["learning"],
        "timezone": "Europe/Berlin",
        "time": "08:00",
        "notify_empty": True,
    },
    # New York, daily at 01:30 (the hour that happens twice on 1 November), with notes.
    {
        "name": "newyork",
        "email": "newyork@example.org",
        "rules": ["learning"],
        "timezone": "America/New_York",
        "time": "01:30",
        "notify_empty": True,
    },
    # Tokyo, weekly on Monday at 09:00, no notes.
    {
        "name": "tokyo",
        "email": "tokyo@example.org",
        "rules": ["learning"],
        "schedule": "weekly",
        "day": "monday",
        "time": "09:00",
        "timezone": "Asia/Tokyo",
    },
    # The config's defaults (UTC 08:00 daily), no notes.
    {"name": "quiet", "email": "quiet@example.org", "rules": ["learning"]},
]


@pytest.fixture
def world(tmp_path: Path, full_feed_bytes: bytes, fixtures_dir: Path) -> Iterator[Any]:
    """`await world(start, subscribers=..., copies=..., source=...)` makes a `World`:
    `copies` arXiv sources reading the served listing (each with the options `source`
    adds), the subscribers, an SMTP sink, the store a SQLite file."""
    empty = (
        fixtures_dir / "arxiv_rss" / "edge_empty-feed_test-archive_2024-11-28.xml"
    ).read_bytes()
    with feed_server() as feed, smtp_sink() as (sink, port):

        async def make(
            start: datetime,
            subscribers: list[dict[str, Any]] = SUBSCRIBERS,
            copies: int = 1,
            source: dict[str, Any] | None = None,
        ) -> World:
            config = parse_config(
                {
                    "version": 1,
                    "database": {"url": f"sqlite:///{tmp_path / 'paperbell.sqlite'}"},
                    "sources": [  # copies: sources that overlap (the same papers)
                        {
                            "kind": "arxiv",
                            "name": "arxiv" if n == 0 else f"arxiv-{n}",
                            "categories": ["cs"],
                            "url": feed.url("/rss/all"),
                            # A late listing is repaired from the arXiv API: this server.
                            "api_url": feed.url("/api/query"),
                            **(source or {}),
                        }
                        for n in range(copies)
                    ],
                    "email": sink_email(port, sender="paperbell <papers@example.org>"),
                    "subscribers": subscribers,
                },
                environ={},
            )
            store = Store.open(config.database_url())
            store.subscribers.sync_config(config.declared_subscribers(), now=start)
            clock = Clock(start)
            parts = wire(config, store, {"email": EmailChannel(smtp_settings(config))})
            daemon = Daemon(
                parts,
                wire_daemon(config, parts, clock=clock),
                fetcher=PoliteFetcher(make_client(), min_interval=0, retries=0),
                clock=clock,
                owner="test",
            )
            days = ArxivDays(full_feed_bytes, empty, CALENDAR)
            return World(daemon, clock, feed, days, sink, store, [], [])

        yield make
