"""The generic RSS/Atom source (`kind = "feed"`) on every real feed we have: two journal
tables of contents (Taylor & Francis RSS 1.0 with DOIs, ScienceDirect RSS 2.0 with
authors only in the description) and arXiv's own feeds read as plain feeds."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from support.paths import FIXTURES, FULL_FEED

from bot.core.errors import FeedFormatError
from bot.sources.feed import parse_feed

TANDF = FIXTURES / "feeds" / "tandf_zoology-middle-east_tzme20_2021-12-21.xml"
SCIENCEDIRECT = FIXTURES / "feeds" / "sciencedirect_mol-phylogenetics-evolution_2021-12-21.xml"
ARXIV_RDF = FIXTURES / "arxiv_rss_old_rdf" / "rdf_cs_2021-11-02.xml"


@pytest.mark.parametrize(
    ("path", "count", "first_id", "first_authors"),
    [
        (
            TANDF,
            13,
            "doi:10.1080/09397140.2021.1992835",
            ("Şafak Bulut", "Gül Olgun Karacan"),
        ),
        (
            SCIENCEDIRECT,
            51,
            "url:https://www.sciencedirect.com/science/article/pii/S1055790321002906",
            ("David R. Bickel",),
        ),
        (FULL_FEED, 1504, "2411.17700", ("Jun Cui",)),
        (ARXIV_RDF, 444, "2111.01127", ("Zheng Chen", "Lantao Liu")),
    ],
    ids=["tandf", "sciencedirect", "arxiv-rss", "arxiv-rdf"],
)
def test_every_entry_becomes_a_paper_named_by_its_best_identifier(
    path: Path, count: int, first_id: str, first_authors: tuple[str, ...]
) -> None:
    parsed = parse_feed(path.read_bytes(), source="journal", url=path.name)
    assert len(parsed.papers) == count
    assert parsed.problems == ()
    first = parsed.papers[0]
    assert first.id == first_id
    assert first.authors[: len(first_authors)] == first_authors
    assert first.source == "journal"
    assert len({p.id for p in parsed.papers}) == count  # no two entries share a name


def test_a_journal_entry_carries_its_doi_link_date_and_journal() -> None:
    parsed = parse_feed(TANDF.read_bytes(), source="tzme")
    paper = parsed.papers[0]
    assert paper.dois == ("10.1080/09397140.2021.1992835",)
    assert paper.link == "https://www.tandfonline.com/doi/full/10.1080/09397140.2021.1992835?af=R"
    assert paper.abs_url == paper.link
    assert paper.pdf_url is None and paper.html_url is None
    assert not paper.on_arxiv
    assert paper.journal_ref == "Zoology in the Middle East"
    assert paper.announced == date(2021, 10, 20)
    assert paper.title.startswith("Taxonomic status of Dahl’s Jird, Meriones dahli")
    assert all(p.dois for p in parsed.papers)  # every T&F entry has its DOI


def test_authors_written_only_in_the_description_are_found_and_html_becomes_text() -> None:
    parsed = parse_feed(SCIENCEDIRECT.read_bytes(), source="mpe")
    by_title = {p.title: p for p in parsed.papers}
    salamandra = next(t for t in by_title if "Salamandra" in t)
    assert "<em>" not in salamandra and salamandra.endswith("viviparous genus Salamandra")
    assert by_title[salamandra].authors[:2] == ("Kevin P. Mulder", "Lucía Alarcón-Ríos")
    assert all("<" not in p.abstract for p in parsed.papers)
    # ScienceDirect gives no date per entry: the poll's day is used (bot.pipeline.poll._dated).
    assert all(p.announced is None for p in parsed.papers)


def test_an_arxiv_listing_read_as_a_plain_feed_keeps_arxiv_ids_and_abstracts() -> None:
    parsed = parse_feed(FULL_FEED.read_bytes(), source="any")
    paper = parsed.papers[0]
    assert paper.on_arxiv and paper.version == 1
    assert paper.abstract.startswith("This study investigates")
    assert paper.categories[0] == "cs.CY"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty body"),
        (b"<!DOCTYPE html><html><head><title>Service Unavailable</title></head></html>", "HTML"),
        (b'{"error": "nope"}', "JSON"),
    ],
)
def test_bodies_that_are_not_feeds_are_clear_errors(body: bytes, message: str) -> None:
    with pytest.raises(FeedFormatError, match=message):
        parse_feed(body, source="journal", url="https://journal.example/rss")


def test_a_truncated_download_is_an_error_not_half_a_feed() -> None:
    body = TANDF.read_bytes()
    with pytest.raises(FeedFormatError, match="not well-formed"):
        parse_feed(body[: len(body) // 2], source="journal")
    atom = FIXTURES / "arxiv_rss_atom" / "atom_cs.AI_2025-08-20_TRUNCATED-by-repo.xml"
    with pytest.raises(FeedFormatError, match="truncated"):
        parse_feed(atom.read_bytes(), source="journal")


def test_an_http_error_is_an_error_even_with_a_feed_body() -> None:
    error = FIXTURES / "arxiv_rss" / "edge_error-feed_bad-archive-astroph_2024-11-28.xml"
    with pytest.raises(FeedFormatError, match="HTTP 400"):
        parse_feed(error.read_bytes(), source="journal", status=400)


def test_entries_without_title_or_identifier_are_left_out_and_said() -> None:
    body = TANDF.read_bytes()
    # The first item's title (in <title> and <dc:title>) emptied; the real feed otherwise.
    item = body.index(b"<item ")
    start = body.index(b"<title>", item) + len(b"<title>")
    title = body[start : body.index(b"</title>", start)]
    body = body[:item] + body[item:].replace(title, b"", 2)
    parsed = parse_feed(body, source="journal")
    assert len(parsed.papers) == 12
    link = "https://www.tandfonline.com/doi/full/10.1080/09397140.2021.1992835?af=R"
    assert parsed.problems == (f"entry 1 ({link}): no title",)


def test_empty_feeds_are_a_normal_outcome() -> None:
    empty = FIXTURES / "arxiv_rss_atom" / "edge_empty-feed_cs_2025-11-23-sunday.xml"
    parsed = parse_feed(empty.read_bytes(), source="journal")
    assert parsed.papers == () and parsed.empty_reason == "the feed has no entries"
