"""A feed that fails and recovers: 503, then an HTML error page, then the real listing.

Each poll reports its problem and stores nothing wrong; the poll after recovery stores every
paper, so nothing is lost. Real parts: an HTTP server on loopback and the database.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from support.servers import Route, feed_server

from bot.config import parse_config
from bot.pipeline import poll
from bot.sources.http import PoliteFetcher, make_client
from bot.store import Store

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 28, 6, 0, tzinfo=UTC)


def test_503_then_html_then_the_feed(database_url: str, full_feed_bytes: bytes) -> None:
    with feed_server() as feed:
        config = parse_config(
            {
                "version": 1,
                "database": {"url": database_url},
                "sources": [{"kind": "arxiv", "categories": ["cs"], "url": feed.url("/rss/cs")}],
            },
            environ={},
        )
        answers = [
            Route(b"Service Unavailable", status=503, content_type="text/plain"),
            Route(b"<html><body>arXiv is down for maintenance</body></html>", 200, "text/html"),
            Route(full_feed_bytes),
        ]

        async def poll_with(route: Route) -> list:  # type: ignore[type-arg]
            feed.routes["/rss/cs"] = route
            async with make_client() as client:
                fetcher = PoliteFetcher(client, min_interval=0, retries=0)
                return await poll(config, store, fetcher, now=NOW)

        with Store.open(database_url) as store:
            reports = [asyncio.run(poll_with(route))[0] for route in answers]
            assert [r.result for r in reports] == ["error", "error", "ok"]
            assert "503" in (reports[0].error or "")
            assert "HTML" in (reports[1].error or "") or "not a feed" in (reports[1].error or "")
            assert reports[2].new == 1504 and store.papers.count() == 1504
            state = {s.name: s for s in store.sources.states()}["arxiv"]
            assert state.last_result == "ok" and state.items == 1504
