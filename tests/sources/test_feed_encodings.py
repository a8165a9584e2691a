"""Feeds whose bytes are not in the encoding they declare (in the XML declaration and in
the HTTP Content-Type charset), polled over HTTP from a server on loopback: a latin-1 feed
declared UTF-8 (é as the byte 0xE9), and a UTF-8 feed declared latin-1. Every paper is
stored, with its text as the real feed has it: no mojibake ("Ã©"), no U+FFFD.

The bodies are built from real payloads (tests/fixtures/SOURCES.md): a Taylor & Francis
table of contents (Turkish and Czech names, a curly apostrophe) and arXiv's listing."""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import UTC, date, datetime

import httpx
import pytest
from support.paths import FIXTURES, FULL_FEED
from support.servers import Route, feed_server

from bot import pipeline
from bot.core.models import Paper
from bot.sources import Source
from bot.sources.arxiv import ArxivListingSource, parse_listing
from bot.sources.feed import FeedSource, parse_feed
from bot.sources.http import PoliteFetcher
from bot.store import Store

TANDF = FIXTURES / "feeds" / "tandf_zoology-middle-east_tzme20_2021-12-21.xml"
NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)


def declared(body: bytes, encoding: str) -> bytes:
    """`body` with its XML declaration naming `encoding` instead of UTF-8."""
    return re.sub(rb"encoding=([\"'])UTF-8\1", f'encoding="{encoding}"'.encode(), body, count=1)


def latin_1(body: bytes) -> bytes:
    """A UTF-8 `body` written in latin-1, as an old server writes it: a character latin-1
    has is one byte (é is 0xE9), any other a character reference. Its declaration is kept."""
    return body.decode("utf-8").encode("latin-1", "xmlcharrefreplace")


def texts(papers: list[Paper] | tuple[Paper, ...]) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    return {p.id: (p.title, p.abstract, p.authors) for p in papers}


async def _poll_one(source: Source, store: Store) -> pipeline.PollReport:
    async with httpx.AsyncClient() as client:
        fetcher = PoliteFetcher(client, min_interval=0)
        return await pipeline.poll_source(source, store, fetcher, now=NOW)


@pytest.mark.database
@pytest.mark.parametrize(
    ("body", "charset"),
    [
        (latin_1(TANDF.read_bytes()), "utf-8"),
        (declared(TANDF.read_bytes(), "ISO-8859-1"), "ISO-8859-1"),
        (declared(TANDF.read_bytes(), "windows-1252"), "windows-1252"),
        # A name with one letter written as a reference, the others raw (UTF-8).
        (
            declared(TANDF.read_bytes(), "ISO-8859-1").replace(
                "Barış".encode(), "Bar&#305;ş".encode()
            ),
            "ISO-8859-1",
        ),
    ],
    ids=[
        "latin-1 declared UTF-8",
        "UTF-8 declared ISO-8859-1",
        "UTF-8 declared windows-1252",
        "UTF-8 declared ISO-8859-1 with a reference",
    ],
)
def test_a_journal_feed_in_another_encoding_than_declared_keeps_every_paper_and_name(
    store: Store, body: bytes, charset: str
) -> None:
    good = parse_feed(TANDF.read_bytes(), source="journal").papers
    with feed_server() as server:
        server.routes["/toc.xml"] = Route(
            body, content_type=f"application/rss+xml; charset={charset}"
        )
        report = asyncio.run(_poll_one(FeedSource("journal", url=server.url("/toc.xml")), store))
    assert (report.result, report.items, report.problems) == ("ok", 13, 0)
    stored = store.papers.announced_since(date(2000, 1, 1))
    assert texts(stored) == texts(good)
    assert ("Şafak Bulut", "Gül Olgun Karacan") in [p.authors[:2] for p in stored]


@pytest.mark.database
def test_an_arxiv_listing_with_a_latin_1_byte_keeps_every_paper_and_the_letter(
    store: Store,
) -> None:
    """arXiv's listing is ASCII: one title with é written as the byte 0xE9 makes the whole
    body latin-1, which feedparser reads as windows-1252, é right."""
    real = FULL_FEED.read_bytes()
    body = real.replace(b"<title>Exploring", b"<title>Caf\xe9 Exploring", 1)
    assert body != real
    with feed_server() as server:
        server.routes["/rss/cs"] = Route(body)  # served as UTF-8, as arXiv serves it
        source = ArxivListingSource("arxiv", categories=["cs"], url=server.url("/rss/cs"))
        report = asyncio.run(_poll_one(source, store))
    assert (report.result, report.items, report.problems) == ("ok", 1504, 0)
    good = texts(parse_listing(real, source="arxiv").papers)
    stored = texts(store.papers.announced_since(date(2000, 1, 1)))
    title, abstract, authors = good["2411.17700"]
    good["2411.17700"] = (f"Café {title}", abstract, authors)
    assert stored == good


def test_a_feed_read_in_another_encoding_than_declared_says_so_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """feedparser's warning (the encoding it read the body in) reaches the log, as the
    arXiv listing's does: the poll stores the papers, and nothing else would say it."""
    url = "https://journal.example/toc.xml"
    with caplog.at_level(logging.WARNING, logger="bot.sources.feed"):
        parsed = parse_feed(latin_1(TANDF.read_bytes()), source="journal", url=url)
    assert len(parsed.papers) == 13
    assert [r.getMessage() for r in caplog.records] == [
        f"{url}: feed parsed with a warning: document declared as utf-8, but parsed as windows-1252"
    ]
