"""One paper from several sources, on a real database: the arXiv listing, Hugging Face, the
arXiv API and a journal feed each bring what they know, and the store keeps one paper.

The real payloads we have share no paper (the Hugging Face days, the listing of 28 Nov 2024
and the journal feeds are from different dates; checked in
`test_the_real_fixtures_share_no_paper`). So where a test needs the same paper in two
sources, it takes a real Hugging Face item, or a real journal entry, and gives it the id or
the DOI of a real listing paper: every other byte stays as published.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, date, datetime

import pytest
from support.paths import FIXTURES

from bot.core.merge import ARXIV_API, ARXIV_LISTING, FEED, HUGGINGFACE, merge_paper
from bot.core.models import Paper
from bot.sources.feed import parse_feed
from bot.sources.huggingface import parse_daily_papers
from bot.store import Store

pytestmark = pytest.mark.database
NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
HF_DAY = FIXTURES / "hf_daily_papers" / "hf_daily_papers_2026-08-21.json"
TANDF = FIXTURES / "feeds" / "tandf_zoology-middle-east_tzme20_2021-12-21.xml"


def hf_papers_as(listing: Paper, *, upvotes: int | None = None) -> tuple[Paper, ...]:
    """The real Hugging Face day of 2026-08-21, its top item given the listing paper's id."""
    items = json.loads(HF_DAY.read_bytes())
    items[0]["paper"]["id"] = listing.id
    if upvotes is not None:
        items[0]["paper"]["upvotes"] = upvotes
    body = json.dumps(items).encode()
    parsed = parse_daily_papers(body, day=date(2024, 11, 29), source="hf")
    return tuple(replace(p, sources=("hf", "huggingface")) for p in parsed.papers)


def test_the_real_fixtures_share_no_paper(full_feed_papers: tuple[Paper, ...]) -> None:
    listing = {p.id for p in full_feed_papers}
    for path in sorted((FIXTURES / "hf_daily_papers").glob("*.json")):
        ids = {p.id for p in parse_daily_papers(path.read_bytes(), source="hf").papers}
        assert not ids & listing, path.name


def test_hugging_face_after_the_listing_adds_upvotes_and_keeps_arxivs_facts(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    listing = next(p for p in full_feed_papers if p.announce_type == "cross")
    store.papers.upsert([listing], now=NOW, authority=ARXIV_LISTING)
    hf = hf_papers_as(listing)
    counts = store.papers.upsert(hf, now=NOW, authority=HUGGINGFACE)
    assert (counts.new, counts.merged, counts.updated) == (len(hf) - 1, 1, 0)

    stored = {p.id: p for p in store.papers.announced_since(date(2024, 1, 1))}
    paper = stored[listing.id]
    assert paper.title == listing.title  # arXiv's, not Hugging Face's copy
    assert paper.categories == listing.categories  # only arXiv has them
    assert paper.announce_type == "cross" and paper.announced == listing.announced
    assert paper.upvotes == hf[0].upvotes == 163 and paper.hf_rank == 1
    assert paper.hf_day == date(2024, 11, 29)
    assert paper.sources == ("hf", "huggingface")
    assert paper.github == hf[0].github


def test_the_listing_after_hugging_face_takes_over_the_bibliographic_fields(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    listing = next(p for p in full_feed_papers if p.announce_type == "cross" and p.version == 1)
    hf = hf_papers_as(listing)
    store.papers.upsert(hf, now=NOW, authority=HUGGINGFACE)
    first = {p.id: p for p in store.papers.announced_since(date(2024, 1, 1))}[listing.id]
    assert first.categories == () and first.first_type == "new"

    counts = store.papers.upsert(
        [replace(listing, sources=("arxiv-all", "arxiv"))], now=NOW, authority=ARXIV_LISTING
    )
    assert (counts.new, counts.merged, counts.updated) == (0, 1, 0)  # not an update
    paper = {p.id: p for p in store.papers.announced_since(date(2024, 1, 1))}[listing.id]
    assert paper.title == listing.title and paper.categories == listing.categories
    assert paper.announced == listing.announced  # 28 Nov, the listing's day
    assert paper.first_announced == listing.announced  # the earlier of the two days
    assert paper.first_type == "cross"  # only the listing knows it is a cross-list
    assert paper.upvotes == 163  # Hugging Face's facts stay
    assert paper.sources == ("hf", "huggingface", "arxiv-all", "arxiv")


def test_a_later_hugging_face_poll_updates_the_upvotes_only(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    listing = full_feed_papers[0]
    store.papers.upsert([listing], now=NOW)
    store.papers.upsert(hf_papers_as(listing, upvotes=20), now=NOW, authority=HUGGINGFACE)
    counts = store.papers.upsert(hf_papers_as(listing, upvotes=210), now=NOW, authority=HUGGINGFACE)
    # The paper, and the papers whose rank its new upvotes moved, got new facts.
    assert counts.new == 0 and counts.merged >= 1 and counts.updated == 0
    paper = {p.id: p for p in store.papers.announced_since(date(2024, 1, 1))}[listing.id]
    assert (paper.upvotes, paper.version, paper.title) == (210, listing.version, listing.title)
    assert paper.hf_rank == 1


def test_a_journal_entry_with_an_arxiv_papers_doi_is_that_paper(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    arxiv = next(p for p in full_feed_papers if p.dois)
    store.papers.upsert([arxiv], now=NOW)
    entries = parse_feed(TANDF.read_bytes(), source="tzme").papers
    entry = replace(entries[0], id=f"doi:{arxiv.dois[0]}", dois=arxiv.dois)
    counts = store.papers.upsert([entry], now=NOW, authority=FEED)
    assert (counts.new, counts.merged) == (0, 1)
    (paper,) = store.papers.announced_since(date(2000, 1, 1))
    assert paper.id == arxiv.id and paper.title == arxiv.title  # arXiv's fields kept
    assert paper.link == entry.link  # the journal's page added
    assert store.papers.count() == 1


def test_an_arxiv_paper_takes_over_a_journal_paper_with_its_doi_and_its_deliveries(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    from bot.core.models import Subscriber

    arxiv = next(p for p in full_feed_papers if p.dois and p.version == 1)
    entry = replace(
        parse_feed(TANDF.read_bytes(), source="tzme").papers[0],
        id=f"doi:{arxiv.dois[0]}",
        dois=arxiv.dois,
    )
    store.papers.upsert([entry], now=NOW, authority=FEED)
    ada = Subscriber(name="ada", email="ada@lab.example", rules=("x",))
    store.subscribers.sync_config([ada], now=NOW)
    (stored_ada,) = store.subscribers.all([ada])
    assert stored_ada.id is not None
    store.outbox.enqueue(
        stored_ada.id,
        channel="email",
        period="p1",
        digest_id="d1",
        recipient="ada@lab.example",
        payload=b"x",
        sent=[entry],
        now=NOW,
    )
    assert store.outbox.delivered_versions(stored_ada.id, "email") == {entry.id: 1}

    store.papers.upsert([arxiv], now=NOW)  # the arXiv listing names the same DOI
    (paper,) = store.papers.announced_since(date(2000, 1, 1))
    assert paper.id == arxiv.id and paper.title == arxiv.title
    assert paper.link == entry.link
    # Ada got it from the journal: under its arXiv id it counts as delivered.
    assert store.outbox.delivered_versions(stored_ada.id, "email") == {arxiv.id: 1}


def test_the_api_does_not_override_the_listing_but_a_newer_version_does(
    full_feed_papers: tuple[Paper, ...],
) -> None:
    listing = next(p for p in full_feed_papers if p.announce_type == "new")
    listing = replace(listing, first_announced=listing.announced, first_type="new")
    same = replace(listing, title="as the API gives it", announce_type="new")
    kept, authority, outcome = merge_paper(listing, ARXIV_LISTING, same, ARXIV_API)
    assert (kept.title, authority, outcome) == (listing.title, ARXIV_LISTING, "unchanged")
    newer = replace(same, version=listing.version + 1, announce_type="replace")
    kept, authority, outcome = merge_paper(listing, ARXIV_LISTING, newer, ARXIV_API)
    assert (kept.title, kept.version, outcome) == ("as the API gives it", newer.version, "updated")
    assert kept.first_announced == listing.announced


def test_two_arxiv_papers_naming_one_doi_stay_two_papers(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    first = next(p for p in full_feed_papers if p.dois)
    second = replace(next(p for p in full_feed_papers if not p.dois), dois=first.dois)
    store.papers.upsert([first], now=NOW)
    counts = store.papers.upsert([second], now=NOW)
    assert counts.new == 1 and store.papers.count() == 2
    store.papers.upsert([replace(first, title="again")], now=NOW)  # no second key row
    assert store.papers.count() == 2
