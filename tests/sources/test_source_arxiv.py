"""The arXiv listing source, tested on the real feeds in tests/fixtures/ (see SOURCES.md).

Every body here is a payload arXiv published. Where a test needs a variant (the Atom feed
closed after its last complete entry, a feed cut in half, an item stripped of its ids), the
test derives it from a real file in code and says how.
"""

from __future__ import annotations

import asyncio
import logging
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import date
from pathlib import Path

import pytest
from support.paths import FIXTURES, FULL_FEED

from bot.core.errors import (
    ConfigError,
    FeedErrorResponse,
    FeedFormatError,
    ObsoleteFeedFormat,
    SourceError,
)
from bot.core.models import Paper
from bot.sources import SOURCE_KINDS, FetchResult, FetchState, ParsedFeed, load_builtin_sources
from bot.sources.arxiv import EMPTY_REASON, ArxivListingSource, parse_listing
from bot.sources.feedtext import split_authors

RSS = FIXTURES / "arxiv_rss"
ATOM = FIXTURES / "arxiv_rss_atom"
ERROR_FEED = RSS / "edge_error-feed_bad-archive-astroph_2024-11-28.xml"
EMPTY_RSS = RSS / "edge_empty-feed_test-archive_2024-11-28.xml"
EMPTY_ATOM = ATOM / "edge_empty-feed_cs_2025-11-23-sunday.xml"
TRUNCATED_ATOM = ATOM / "atom_cs.AI_2025-08-20_TRUNCATED-by-repo.xml"
OLD_RDF = FIXTURES / "arxiv_rss_old_rdf" / "rdf_cs_2021-11-02.xml"

DC = "{http://purl.org/dc/elements/1.1/}"


def closed_atom_sample() -> bytes:
    """The real truncated Atom feed, cut after its last complete entry and closed.

    The fixture's maintainer cut it mid-entry; everything kept here is arXiv's own bytes,
    plus the `</feed>` the cut removed.
    """
    body = TRUNCATED_ATOM.read_bytes()
    end = body.rindex(b"</entry>") + len(b"</entry>")
    return body[:end] + b"\n</feed>\n"


@pytest.fixture(scope="module")
def full() -> ParsedFeed:
    return parse_listing(FULL_FEED.read_bytes(), source="all", url="file://" + str(FULL_FEED))


@pytest.fixture(scope="module")
def by_id(full: ParsedFeed) -> dict[str, Paper]:
    return {paper.id: paper for paper in full.papers}


@pytest.fixture(scope="module")
def atom() -> ParsedFeed:
    return parse_listing(closed_atom_sample(), source="ai")


# -- the full RSS 2.0 feed ---------------------------------------------------------------


def test_full_feed_counts_match_the_file(full: ParsedFeed) -> None:
    assert len(full.papers) == 1504
    assert dict(full.counts) == {"new": 926, "replace": 569, "cross": 9}
    assert Counter(p.announce_type for p in full.papers) == Counter(full.counts)
    assert len({p.id for p in full.papers}) == 1504


def test_full_feed_metadata(full: ParsedFeed) -> None:
    assert full.announced == date(2024, 11, 28)
    assert full.title.startswith("astro-ph, cond-mat, physics, quant-ph")
    assert full.empty_reason is None
    assert {p.announced for p in full.papers} == {date(2024, 11, 28)}
    assert {p.source for p in full.papers} == {"all"}
    assert sum(1 for p in full.papers if p.dois) == 111
    assert sum(1 for p in full.papers if p.journal_ref) == 97
    assert all(p.license for p in full.papers)
    assert all(p.categories and p.authors and p.title and p.abstract for p in full.papers)


@pytest.mark.parametrize(
    ("paper_id", "expected"),
    [
        (
            "2411.17700",
            {
                "version": 1,
                "title": "Exploring the Impact of Generative AI on Cross-Border E-Commerce Brand "
                "Building in Chinese Tianjin's Manufacturing Sector",
                "authors": ("Jun Cui",),
                "categories": ("cs.CY",),
                "announce_type": "new",
                "license": "http://creativecommons.org/licenses/by/4.0/",
                "dois": (),
                "journal_ref": None,
            },
        ),
        (
            # arXiv:DOI holds the same DOI twice, separated by a space: split, kept once.
            "2411.17857",
            {
                "version": 1,
                "title": "Scintillation Bandwidth Measurements from 23 Pulsars from the AO327 "
                "Survey",
                "categories": ("astro-ph.HE",),
                "dois": ("10.3847/1538-4357/ad8659",),
                "journal_ref": "The Astrophysical Journal, 976(2), 225 (2024)",
            },
        ),
        (
            "2411.17758",
            {
                "categories": ("cs.GT", "cs.CR"),
                "authors": ("Kamil Erdayandi", "Mustafa Asan Mustafa"),
                "dois": ("10.1016/j.segan.2024.101477",),
                "journal_ref": "Sustainable Energy, Grids and Networks, Volume 39, 2024, "
                "101477, ISSN 2352-4677",
                "license": "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
            },
        ),
        (
            # Affiliations in parentheses, one holding a comma.
            "2411.17753",
            {
                "authors": (
                    "Aleteia Araujo (University of Brasilia Brazil, The University of "
                    "Melbourne Australia)",
                    "Breno Costa (University of Brasilia Brazil)",
                    "Joao Bachiega Jr (University of Brasilia Brazil)",
                    "Leonardo R. Carvalho (University of Brasilia Brazil)",
                    "Rajkumar Buyya (The University of Melbourne Australia)",
                ),
            },
        ),
        (
            # dc:creator starts with a space (and the first author has one name only).
            "2411.18501",
            {"authors": ("Boulite", "Abdellatif Elgrou", "Lahcen Maniar", "Omar Oukdach")},
        ),
        (
            # A replacement: version > 1; `&amp;` in the title decodes once to `&`.
            "2307.10544",
            {
                "version": 2,
                "announce_type": "replace",
                "title": "Design & Optimization of the HV divider for JUNO 20-inch PMT",
                "categories": ("physics.ins-det", "hep-ex"),
            },
        ),
        ("2103.07442", {"version": 3, "announce_type": "replace", "categories": ("hep-lat",)}),
        (
            # TeX kept as published: `\&amp;` is the TeX escape `\&`.
            "2411.18380",
            {
                "title": "SoK: Privacy Personalised -- Mapping Personal Attributes \\& "
                "Preferences of Privacy Mechanisms for Shoulder Surfing"
            },
        ),
        (
            "2411.16552",
            {
                "announce_type": "cross",
                "version": 1,
                "categories": ("stat.AP", "cs.LG", "econ.EM", "stat.ME", "stat.ML"),
            },
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_selected_items(by_id: dict[str, Paper], paper_id: str, expected: dict) -> None:
    paper = by_id[paper_id]
    for field, value in expected.items():
        assert getattr(paper, field) == value, field


def test_abstract_of_first_item(by_id: dict[str, Paper]) -> None:
    abstract = by_id["2411.17700"].abstract
    assert abstract.startswith("This study investigates the influence of generative")
    assert abstract.endswith("regression and structural equations (PLS-SEM).")
    assert "Abstract:" not in abstract and "Announce Type" not in abstract


@pytest.mark.parametrize(
    ("paper_id", "fragment"),
    [
        # `&lt;` decodes to `<` and survives: an HTML sanitizer would make `<s><1` of it.
        ("2411.17730", r"where $\frac{1}{3}<s<1$ and $V(x)"),
        ("2411.18458", r"solvable for $$1<p<2+\varepsilon.$$"),
        ("2406.13637", "(Fe1-xS, 0<x<0.125)"),
        ("2103.07442", "$T<T_{RW}$, we find"),
        ("2411.17942", "Explore and Exploit (E&E)"),
        ("2411.18550", r"\begin{cases}1,&x<0\\ \beta,&x\geq 0\end{cases}"),
    ],
)
def test_entities_decode_once_and_tex_survives(
    by_id: dict[str, Paper], paper_id: str, fragment: str
) -> None:
    abstract = by_id[paper_id].abstract
    assert fragment in abstract
    assert "&amp;" not in abstract and "&lt;" not in abstract


def test_many_authors_and_a_collaboration(by_id: dict[str, Paper]) -> None:
    authors = by_id["2403.07266"].authors
    assert len(authors) == 207
    assert authors[:2] == ("NOvA Collaboration", "M. A. Acero")
    assert authors[-1] == "R. Zwaska"


def test_every_item_matches_an_independent_reading_of_the_xml(full: ParsedFeed) -> None:
    """ElementTree reads the same file: titles, abstracts, ids, categories, authors agree."""
    items = ET.parse(FULL_FEED).getroot().findall("./channel/item")
    assert len(items) == len(full.papers)
    for item, paper in zip(items, full.papers, strict=True):
        guid = item.findtext("guid") or ""
        assert guid == f"oai:arXiv.org:{paper.versioned_id}"
        assert paper.title == " ".join((item.findtext("title") or "").split())
        description = item.findtext("description") or ""
        assert paper.abstract == " ".join(description.split("Abstract:", 1)[1].split())
        assert paper.categories == tuple(c.text for c in item.findall("category"))
        creators = item.findtext(f"{DC}creator") or ""
        assert ", ".join(paper.authors) == ", ".join(
            part.strip() for part in creators.split(",") if part.strip()
        )


# -- the Atom shape ----------------------------------------------------------------------


def test_atom_sample_counts(atom: ParsedFeed) -> None:
    assert len(atom.papers) == 86
    assert dict(atom.counts) == {"new": 41, "cross": 45}
    assert atom.announced == date(2025, 8, 20)
    assert atom.title == "cs.AI updates on arXiv.org"
    assert atom.empty_reason is None


def test_atom_first_entry(atom: ParsedFeed) -> None:
    paper = atom.papers[0]
    assert paper.versioned_id == "2508.13167v1"
    assert paper.title.startswith("Chain-of-Agents: End-to-End Agent Foundation Models")
    assert paper.categories == ("cs.AI", "cs.CL")
    assert paper.announce_type == "new"
    assert paper.license == "http://creativecommons.org/licenses/by-nc-sa/4.0/"
    assert len(paper.authors) == 30
    assert paper.authors[0] == "Weizhen Li" and paper.authors[-1] == "Wangchunshu Zhou"
    assert paper.abstract.startswith("Recent advances in large language models (LLMs)")
    assert paper.announced == date(2025, 8, 20)
    assert paper.source == "ai"


# -- the outcomes a poll can have ---------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "announced", "title"),
    [
        (EMPTY_RSS, date(2024, 11, 28), "test updates on arXiv.org"),
        (EMPTY_ATOM, date(2025, 11, 23), "cs updates on arXiv.org"),
    ],
    ids=["rss", "atom-sunday"],
)
def test_empty_feed_is_not_an_error(path: Path, announced: date, title: str) -> None:
    parsed = parse_listing(path.read_bytes())
    assert parsed.papers == ()
    assert parsed.empty_reason == EMPTY_REASON
    assert "weekend or arXiv holiday" in parsed.empty_reason
    assert parsed.announced == announced
    assert parsed.title == title
    assert dict(parsed.counts) == {}


@pytest.mark.parametrize("status", [400, 200])
def test_error_feed_names_the_bad_category(status: int) -> None:
    with pytest.raises(FeedErrorResponse) as caught:
        parse_listing(ERROR_FEED.read_bytes(), source="astro", status=status)
    error = caught.value
    assert "'astroph'" in error.message
    assert "Bad archive 'astroph'. Valid archive names are: astro-ph, cond-mat" in error.message
    assert error.hint is not None and "`categories`" in error.hint and "'astro'" in error.hint
    assert error.source == "astro"
    assert error.url == "http://rss.arxiv.org/rss/astroph"
    assert isinstance(error, SourceError)


def test_old_rdf_format_is_obsolete() -> None:
    with pytest.raises(ObsoleteFeedFormat) as caught:
        parse_listing(OLD_RDF.read_bytes(), source="cs")
    text = str(caught.value)
    assert "RSS 1.0" in text and "no longer publishes" in text
    assert "rss.arxiv.org" in text


def _full_feed_cut_in_half() -> bytes:
    body = FULL_FEED.read_bytes()
    return body[: len(body) // 2]


@pytest.mark.parametrize(
    "make_body",
    [TRUNCATED_ATOM.read_bytes, _full_feed_cut_in_half],
    ids=["atom-truncated-fixture", "rss-cut-in-half"],
)
def test_truncated_feed_is_a_format_error_not_a_partial_listing(make_body) -> None:
    with pytest.raises(FeedFormatError) as caught:
        parse_listing(make_body())
    message = caught.value.message
    assert "not well-formed XML" in message and "truncated" in message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"<html><body>Service unavailable</body></html>", "received HTML, not a feed"),
        (
            b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body><p>nginx"
            b"</body></html>",
            "received HTML, not a feed: '502 Bad Gateway'",
        ),
        (b"\x00\x01garbage", "received binary data, not a feed"),
        (b"", "received an empty body"),
        (b"  \n", "received an empty body"),
        (b'{"error": "rate limited"}', "received JSON, not a feed"),
        (b"Service Unavailable", "received text, not a feed: 'Service Unavailable'"),
        (b"<?xml version='1.0'?><error>nope</error>", "not an RSS or Atom feed (root element"),
        # A body naming a file must not make the parser open it (feedparser would).
        (str(FULL_FEED).encode(), "received text, not a feed"),
    ],
    ids=["html", "html-title", "garbage", "empty", "blank", "json", "text", "xml", "path"],
)
def test_not_a_feed(body: bytes, expected: str) -> None:
    with pytest.raises(FeedFormatError) as caught:
        parse_listing(body, url="https://rss.arxiv.org/rss/cs")
    assert expected in caught.value.message
    assert caught.value.url == "https://rss.arxiv.org/rss/cs"


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"<html><body>Service unavailable</body></html>", 503),
        (EMPTY_RSS.read_bytes(), 500),
        (b"", 404),
    ],
    ids=["html-503", "feed-500", "empty-404"],
)
def test_error_status_without_the_error_feed(body: bytes, status: int) -> None:
    with pytest.raises(FeedFormatError) as caught:
        parse_listing(body, status=status)
    assert f"HTTP {status}" in caught.value.message


def _feed_with_items(*items: bytes) -> bytes:
    """The real empty `test` feed with real items (from the full feed) put into its channel."""
    body = EMPTY_RSS.read_bytes()
    return body.replace(b"  </channel>", b"".join(items) + b"  </channel>")


def _item(body: bytes, number: int) -> bytes:
    start = -1
    for _ in range(number):
        start = body.index(b"    <item>", start + 1)
    end = body.index(b"</item>", start) + len(b"</item>\n")
    return body[start:end]


def test_item_without_an_arxiv_id_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    full = FULL_FEED.read_bytes()
    kept = _item(full, 1)  # 2411.17700v1
    stripped = (
        _item(full, 2)  # 2411.17701v1 without its guid, link and description id
        .replace(b"oai:arXiv.org:2411.17701v1", b"")
        .replace(b"https://arxiv.org/abs/2411.17701", b"")
        .replace(b"arXiv:2411.17701v1 ", b"")
    )
    with caplog.at_level(logging.WARNING, logger="bot.sources.arxiv"):
        parsed = parse_listing(_feed_with_items(kept, stripped))
    assert [p.versioned_id for p in parsed.papers] == ["2411.17700v1"]
    assert dict(parsed.counts) == {"new": 1}
    assert any("skipped item 2" in r.getMessage() for r in caplog.records)


def test_fallback_to_the_description_for_id_and_type() -> None:
    full = FULL_FEED.read_bytes()
    item = (
        _item(full, 1)
        .replace(b'<guid isPermaLink="false">oai:arXiv.org:2411.17700v1</guid>', b"")
        .replace(b"<arxiv:announce_type>new</arxiv:announce_type>", b"")
    )
    (paper,) = parse_listing(_feed_with_items(item)).papers
    assert paper.versioned_id == "2411.17700v1"
    assert paper.announce_type == "new"


def test_feed_whose_items_all_lack_ids_is_an_error() -> None:
    item = _item(FULL_FEED.read_bytes(), 1)
    for old in (b"oai:arXiv.org:2411.17700v1", b"https://arxiv.org/abs/2411.17700"):
        item = item.replace(old, b"")
    item = item.replace(b"arXiv:2411.17700v1 ", b"")
    with pytest.raises(FeedFormatError, match="none of the 1 item could"):
        parse_listing(_feed_with_items(item))


# -- authors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "authors"),
    [
        ("Jun Cui", ("Jun Cui",)),
        ("A. One, B. Two", ("A. One", "B. Two")),
        (" Boulite, Abdellatif Elgrou", ("Boulite", "Abdellatif Elgrou")),
        ("A (X, Y), B (Z)", ("A (X, Y)", "B (Z)")),
        ("A, B and C", ("A", "B", "C")),
        ("A, B, and C", ("A", "B", "C")),
        ("A and B", ("A", "B")),
        (
            "A (Andrew and Peggy Cherng Dept, Caltech)",
            ("A (Andrew and Peggy Cherng Dept, Caltech)",),
        ),
        ("A,, B ,", ("A", "B")),
        ("A (MIT, B, C", ("A (MIT", "B", "C")),  # unbalanced: plain comma split
        ("", ()),
    ],
)
def test_split_authors(text: str, authors: tuple[str, ...]) -> None:
    assert split_authors(text) == authors


# -- the source class ---------------------------------------------------------------------


def test_registered_as_arxiv() -> None:
    load_builtin_sources()
    assert SOURCE_KINDS["arxiv"] is ArxivListingSource
    assert ArxivListingSource.kind == "arxiv"


@pytest.mark.parametrize(
    ("options", "url"),
    [
        ({"categories": ["cs.LG", "stat.ML"]}, "https://rss.arxiv.org/rss/cs.LG+stat.ML"),
        ({"categories": ["cs"], "format": "atom"}, "https://rss.arxiv.org/atom/cs"),
        ({"categories": ["cs"], "url": "file:///tmp/feed.xml"}, "file:///tmp/feed.xml"),
    ],
)
def test_source_url(options: dict, url: str) -> None:
    assert ArxivListingSource("ml", **options).url == url


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({}, "sources.ml.categories: Field required"),
        ({"categories": []}, "sources.ml.categories: List should have at least 1 item"),
        ({"categories": "cs.LG"}, "sources.ml.categories: Input should be a valid list"),
        ({"categories": ["cs LG"]}, "'cs LG' is not an arXiv category"),
        (
            {"categories": ["cs", "astroph"]},
            "categories.1: 'astroph' is not an arXiv archive (did you mean astro-ph?)",
        ),
        ({"categories": ["cs"], "format": "json"}, "sources.ml.format: Input should be"),
        ({"categories": ["cs"], "url": "ftp://x/feed"}, "sources.ml.url: must be an https://"),
        ({"categories": ["cs"], "categores": ["cs"]}, "sources.ml.categores: Extra inputs"),
    ],
)
def test_source_options_are_checked(options: dict, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ArxivListingSource("ml", **options)
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_options_model_is_exposed_for_config_validation() -> None:
    assert ArxivListingSource.Options.model_validate({"categories": [" cs.LG "]}).model_dump() == {
        "categories": ["cs.LG"],
        "url": None,
        "format": "rss",
        "api_url": "https://export.arxiv.org/api/query",
        "max_body_mb": None,  # every kind's fetch limits (None: [polling]'s)
        "request_deadline_seconds": None,
    }


def test_source_fetch_delegates_and_parse_names_the_source() -> None:
    calls: list[tuple[str, FetchState, str]] = []

    class FakeFetcher:
        async def get(self, url: str, state: FetchState, *, source: str = "") -> FetchResult:
            calls.append((url, state, source))
            return FetchResult(url=url, status=200, body=EMPTY_RSS.read_bytes())

    source = ArxivListingSource("ml", categories=["cs.LG"])
    state = FetchState(etag='"abc"')
    result = asyncio.run(source.fetch(FakeFetcher(), state))  # type: ignore[arg-type]
    assert calls == [("https://rss.arxiv.org/rss/cs.LG", state, "ml")]
    assert result.body is not None
    assert source.parse(result.body).empty_reason == EMPTY_REASON

    with pytest.raises(FeedErrorResponse) as caught:
        source.parse(ERROR_FEED.read_bytes(), status=400)
    assert caught.value.source == "ml"
    assert caught.value.url == "https://rss.arxiv.org/rss/cs.LG"
