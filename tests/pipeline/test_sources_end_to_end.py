"""All four source kinds in one config, polled in one run from a real HTTP server on
loopback serving real payloads, into a real database; digests over SMTP to aiosmtpd.

The acceptance of "more sources": a paper Hugging Face lists is merged with its arXiv
listing entry (upvotes from Hugging Face, categories from arXiv) and delivered once, even
after Hugging Face's upvotes change. The real payloads share no paper (tests/store/test_merge.py
checks it), so the Hugging Face day served here is the real 2026-08-21 day with its top
item given the id of a real paper of the listing of 28 Nov 2024; nothing else is changed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from email.message import EmailMessage
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from support.config import sink_email, toml_table
from support.paths import FIXTURES
from support.servers import FeedServer, Route, SinkHandler, feed_server, smtp_sink

from bot import pipeline
from bot.config import load_config
from bot.core.models import Paper
from bot.sources.http import PoliteFetcher
from bot.store import Store

pytestmark = pytest.mark.database

NOW = datetime(2026, 6, 30, 12, 0, tzinfo=UTC)  # a Tuesday
API_PAGE = FIXTURES / "arxiv_api" / "api2026_search_cat-math.NT-OR-math.AG_max5_2026-06-29.xml"
API_EMPTY = FIXTURES / "arxiv_api" / "edge_api2026_empty-result_idlist_0000.0000.xml"
HF_DAY = FIXTURES / "hf_daily_papers" / "hf_daily_papers_2026-08-21.json"
HF_OTHER_DAY = FIXTURES / "hf_daily_papers" / "hf_daily_papers_2026-06-03.json"
JOURNAL = FIXTURES / "feeds" / "tandf_zoology-middle-east_tzme20_2021-12-21.xml"

CONFIG = """\
version = 1

[database]
url = "{database_url}"

[[sources]]
kind = "arxiv"
name = "arxiv-all"
categories = ["cs", "math", "physics"]
url = "{base}/rss/all"

[[sources]]
kind = "huggingface"
name = "hf"
url = "{base}"
days = 2

[[sources]]
kind = "arxiv_query"
name = "number-theory"
query = "cat:math.NT OR cat:math.AG"
url = "{base}/api/query"
page_size = 5
days = 7

[[sources]]
kind = "feed"
name = "zoology"
url = "{base}/journal/tzme20.rss"

{email}
[[subscribers]]
name = "ada"
email = "ada@lab.example"
rules = ['id:{target} cat:{category}', 'Meriones']
"""


@dataclass
class World:
    config_path: Path
    feed: FeedServer
    sink: SinkHandler
    target: Paper
    upvotes: list[int]


def hf_body(target: Paper, upvotes: int) -> bytes:
    items = json.loads(HF_DAY.read_bytes())
    items[0]["paper"]["id"] = target.id
    items[0]["paper"]["upvotes"] = upvotes
    return json.dumps(items).encode()


@pytest.fixture
def world(
    tmp_path: Path, database_url: str, full_feed_bytes: bytes, full_feed_papers: tuple[Paper, ...]
) -> Iterator[World]:
    target = next(
        p
        for p in full_feed_papers
        if p.version == 1 and p.announce_type == "new" and "." in (p.primary_category or "")
    )
    upvotes = [163]

    def answer(path: str, headers: dict[str, str]) -> Route | None:
        parts = urlsplit(path)
        query = parse_qs(parts.query)
        if parts.path == "/api/daily_papers":
            day = query["date"][0]
            if day == "2026-06-30":
                return Route(hf_body(target, upvotes[0]), content_type="application/json")
            return Route(HF_OTHER_DAY.read_bytes(), content_type="application/json")
        if parts.path == "/api/query":
            body = API_PAGE if query["start"] == ["0"] else API_EMPTY
            return Route(body.read_bytes(), content_type="application/atom+xml")
        return None

    with feed_server() as feed, smtp_sink() as (sink, port):
        feed.routes["/rss/all"] = Route(full_feed_bytes)
        feed.routes["/journal/tzme20.rss"] = Route(JOURNAL.read_bytes())
        feed.answer = answer
        config = tmp_path / "config.toml"
        config.write_text(
            CONFIG.format(
                database_url=database_url,
                base=feed.url("").rstrip("/"),
                email=toml_table("email", sink_email(port, timeout=5)),
                target=target.id,
                category=target.primary_category,
            )
        )
        yield World(config, feed, sink, target, upvotes)


async def _poll(world: World, store: Store) -> list[pipeline.PollReport]:
    config = load_config(world.config_path)
    async with httpx.AsyncClient() as client:
        fetcher = PoliteFetcher(client, min_interval=0)  # a loopback server: no need to wait
        return await pipeline.poll(config, store, fetcher, now=NOW)


async def _deliver(world: World, store: Store) -> list[pipeline.DeliveryReport]:
    config = load_config(world.config_path)
    channels = pipeline.build_channels(config)
    request = pipeline.DeliveryRequest(since=date(2021, 1, 1))
    return await pipeline.deliver(pipeline.wire(config, store, channels), request, now=NOW)


def test_four_kinds_poll_in_one_run_and_a_hugging_face_paper_is_merged_and_sent_once(
    world: World,
) -> None:
    config = load_config(world.config_path)
    with Store.open(config.database.url) as store:
        reports = {r.source: r for r in asyncio.run(_poll(world, store))}
        assert {name: r.result for name, r in reports.items()} == {
            "arxiv-all": "ok",
            "hf": "ok",
            "number-theory": "ok",
            "zoology": "ok",
        }
        assert reports["arxiv-all"].new == 1504
        assert reports["hf"].items == 17 + 23 and reports["hf"].merged == 1
        assert reports["number-theory"].items == 5
        assert reports["zoology"].items == 13

        paths = [urlsplit(path) for path, _ in world.feed.requests]
        assert [p.query for p in paths if p.path == "/api/daily_papers"] == [
            "date=2026-06-29",
            "date=2026-06-30",
        ]
        queries = [parse_qs(p.query) for p in paths if p.path == "/api/query"]
        assert [q["start"] for q in queries] == [["0"], ["5"]]
        assert queries[0]["search_query"] == ["cat:math.NT OR cat:math.AG"]
        assert queries[0]["sortBy"] == ["lastUpdatedDate"] and queries[0]["max_results"] == ["5"]

        stored = {p.id: p for p in store.papers.announced_since(date(2000, 1, 1))}
        merged = stored[world.target.id]
        assert merged.upvotes == 163 and merged.hf_rank == 1
        assert merged.categories == world.target.categories  # from arXiv's listing
        assert merged.title == world.target.title
        assert set(merged.sources) == {"arxiv-all", "arxiv", "hf", "huggingface"}
        assert any(p.id.startswith("doi:10.1080/") for p in stored.values())  # the journal

        sent = asyncio.run(_deliver(world, store))
        assert [(r.subscriber, r.status) for r in sent] == [("ada", "sent")]
        (message,) = world.sink.messages
        html = _part(message, "text/html")
        text = _part(message, "text/plain")
        assert html.count(f'https://arxiv.org/abs/{world.target.id}"') >= 1
        assert "Hugging Face (163 upvotes, #1 of the day)</a>" in html
        assert f'href="https://huggingface.co/papers/{world.target.id}"' in html
        flat = " ".join(text.split()).replace(" (primary)", "")
        assert ", ".join(world.target.categories) in flat  # the categories came from arXiv
        assert "Meriones" in text  # the journal paper, with its DOI link
        assert 'href="https://doi.org/10.1080/09397140.2021.1992835"' in html
        assert text.count(world.target.title.split()[0]) >= 1

        # Later that day Hugging Face has more upvotes: stored, but nothing is sent again.
        world.upvotes[0] = 240
        again = {r.source: r for r in asyncio.run(_poll(world, store))}
        assert again["hf"].new == 0 and again["hf"].merged >= 1
        updated = {p.id: p for p in store.papers.announced_since(date(2000, 1, 1))}
        assert updated[world.target.id].upvotes == 240
        rerun = asyncio.run(_deliver(world, store))
        assert [(r.subscriber, r.status) for r in rerun] == [("ada", "nothing")]
        assert len(world.sink.messages) == 1


def _part(message: EmailMessage, kind: str) -> str:
    for part in message.walk():
        if part.get_content_type() == kind:
            return str(part.get_content())
    raise AssertionError(f"no {kind} part")
