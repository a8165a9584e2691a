"""The arXiv API parser, tested on the real responses in tests/fixtures/arxiv_api/ (see
tests/fixtures/SOURCES.md).

Every body here is one the API returned. Where a test needs a variant (an entry without a
title, a body cut off), it edits or cuts a real file's bytes in code and says how. The
only bodies written here from scratch are an HTML page and garbage, which no fixture holds.
Each fixture is also read with the standard library's ElementTree, independently of the
parser, and compared entry by entry.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from support.paths import FIXTURES

from bot.core.errors import FeedErrorResponse, FeedFormatError, SourceError
from bot.core.models import Paper
from bot.sources.arxiv_api import API_BASE, ApiEntry, ApiPage, parse_api
from bot.sources.arxiv_query import api_query_url, submitted_range

API = FIXTURES / "arxiv_api"
ALL_FILES = sorted(API.glob("*.xml"))
ERROR_FILE = API / "edge_api2026_http400-error-entry_idlist_abc.xml"
RESULT_FILES = [path for path in ALL_FILES if path != ERROR_FILE]
ATOM = "{http://www.w3.org/2005/Atom}"
ARXIV = "{http://arxiv.org/schemas/atom}"


def body(name: str) -> bytes:
    return (API / f"{name}.xml").read_bytes()


def page(name: str, *, source: str = "") -> ApiPage:
    return parse_api(body(name), source=source)


def only(name: str) -> Paper:
    (paper,) = page(name).papers
    return paper


def collapse(text: str | None) -> str:
    return " ".join((text or "").split())


def repaired(text: str) -> str:
    """Text with double-encoded UTF-8 undone, as feedparser does (see
    test_double_encoded_utf8_is_repaired)."""
    try:
        return text.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return text


# -- every fixture ------------------------------------------------------------------------

# file, entries, totalResults, startIndex, itemsPerPage, first and last versioned ids,
# entries with a DOI, with a journal_ref, of version 2 or later ("replace")
FILES = [
    ("api2013_single-entry_2013-02-02", 1, 1, 0, 1, "1301.7746v1", "1301.7746v1", 0, 0, 0),
    ("api2016_idlist_1111.2011v2", 1, 1, 0, 10, "1111.2011v2", "1111.2011v2", 1, 1, 1),
    (
        "api2016_search_au-del_maestro-AND-ti-quantum-criticality",
        2,
        2,
        0,
        10,
        "1111.2011v2",
        "cond-mat/0607501v2",
        2,
        2,
        2,
    ),
    (
        "api2016_search_au-del_maestro_max10",
        10,
        31,
        0,
        10,
        "1201.4869v1",
        "0807.2873v1",
        10,
        10,
        4,
    ),
    (
        "api2018_search_max10_2018-02-05",
        10,
        28637,
        0,
        10,
        "1801.05533v1",
        "math/0507289v1",
        0,
        0,
        1,
    ),
    (
        "api2024_single-entry_2024-12-28",
        1,
        218712,
        0,
        1,
        "cond-mat/0102536v1",
        "cond-mat/0102536v1",
        1,
        1,
        0,
    ),
    (
        "api2026_idlist_0808.05394+1707.08567_one-id-unknown",
        1,
        1,
        0,
        100,
        "1707.08567v1",
        "1707.08567v1",
        0,
        0,
        0,
    ),
    (
        "api2026_idlist_2104.12255v1_title-is-0",
        1,
        1,
        0,
        100,
        "2104.12255v1",
        "2104.12255v1",
        0,
        0,
        0,
    ),
    (
        "api2026_idlist_astro-ph-0601001_old-style-id",
        1,
        1,
        0,
        100,
        "astro-ph/0601001v1",
        "astro-ph/0601001v1",
        0,
        1,
        0,
    ),
    (
        "api2026_idlist_quant-ph-0201082v1_old-style-id",
        1,
        1,
        0,
        100,
        "quant-ph/0201082v1",
        "quant-ph/0201082v1",
        0,
        0,
        0,
    ),
    (
        "api2026_search_all-testing_start0_max100",
        100,
        214881,
        0,
        100,
        "2202.12139v1",
        "gr-qc/0103067v1",
        32,
        18,
        36,
    ),
    (
        "api2026_search_all-testing_start10_max10",
        10,
        214881,
        10,
        10,
        "2403.16981v2",
        "2202.06271v1",
        1,
        0,
        2,
    ),
    (
        "api2026_search_cat-math.NT-OR-math.AG_max3_2026-06-24",
        3,
        101447,
        0,
        3,
        "2606.24872v1",
        "2606.24717v1",
        0,
        0,
        0,
    ),
    (
        "api2026_search_cat-math.NT-OR-math.AG_max5_2026-06-29",
        5,
        101536,
        0,
        5,
        "2606.28256v1",
        "2606.28085v1",
        1,
        1,
        0,
    ),
    ("edge_api2026_empty-result_idlist_0000.0000", 0, 0, 0, 100, None, None, 0, 0, 0),
    ("edge_api2026_empty-result_idlist_0808.05394", 0, 0, 0, 100, None, None, 0, 0, 0),
]


def test_the_table_covers_every_fixture() -> None:
    named = {row[0] for row in FILES} | {ERROR_FILE.stem}
    assert named == {path.stem for path in ALL_FILES}


@pytest.mark.parametrize(
    ("name", "count", "total", "start", "per_page", "first", "last", "dois", "refs", "replaced"),
    FILES,
)
def test_every_response_parses(
    name: str,
    count: int,
    total: int,
    start: int,
    per_page: int,
    first: str | None,
    last: str | None,
    dois: int,
    refs: int,
    replaced: int,
) -> None:
    result = page(name, source="My-Query")
    papers = result.papers
    assert len(result.entries) == len(papers) == count
    assert (result.total, result.start, result.per_page) == (total, start, per_page)
    assert result.problems == ()
    assert not result.unexpectedly_empty
    if count:
        assert (papers[0].versioned_id, papers[-1].versioned_id) == (first, last)
    assert sum(bool(p.dois) for p in papers) == dois
    assert sum(p.journal_ref is not None for p in papers) == refs
    assert sum(p.announce_type == "replace" for p in papers) == replaced
    assert len({p.id for p in papers}) == count
    for entry in result.entries:
        paper = entry.paper
        assert paper.announce_type == ("new" if paper.version == 1 else "replace")
        assert paper.announced is None
        assert paper.source == "My-Query"
        assert paper.sources == ("my-query", "arxiv_query")
        assert paper.link is None
        assert paper.title and paper.title == collapse(paper.title)
        assert paper.abstract and paper.abstract == collapse(paper.abstract)
        assert paper.authors and all(paper.authors)
        assert paper.categories and all(" " not in c for c in paper.categories)
        assert entry.published.tzinfo is UTC and entry.updated.tzinfo is UTC
        assert entry.published <= entry.updated
        if paper.version == 1:
            assert entry.published == entry.updated


def reference(path: Path) -> list[dict[str, object]]:
    """The entries of a response as ElementTree reads them: the test's own reading."""
    found: list[dict[str, object]] = []
    for entry in ET.fromstring(path.read_bytes()).iter(f"{ATOM}entry"):
        text = entry.findtext(f"{ATOM}id") or ""
        versioned = text.split("/abs/", 1)[1]
        primary = entry.find(f"{ARXIV}primary_category")
        found.append(
            {
                "versioned_id": versioned,
                "title": repaired(collapse(entry.findtext(f"{ATOM}title"))),
                "abstract": repaired(collapse(entry.findtext(f"{ATOM}summary"))),
                "authors": tuple(
                    collapse(a.findtext(f"{ATOM}name")) for a in entry.iter(f"{ATOM}author")
                ),
                "primary": primary.get("term") if primary is not None else None,
                "published": datetime.fromisoformat(entry.findtext(f"{ATOM}published") or ""),
                "updated": datetime.fromisoformat(entry.findtext(f"{ATOM}updated") or ""),
                "journal_ref": collapse(entry.findtext(f"{ARXIV}journal_ref")) or None,
            }
        )
    return found


@pytest.mark.parametrize("path", RESULT_FILES, ids=lambda path: path.stem)
def test_every_entry_matches_an_independent_reading(path: Path) -> None:
    entries = parse_api(path.read_bytes()).entries
    expected = reference(path)
    assert len(entries) == len(expected)
    for entry, want in zip(entries, expected, strict=True):
        paper = entry.paper
        assert paper.versioned_id == want["versioned_id"]
        assert paper.title == want["title"]
        assert paper.abstract == want["abstract"]
        assert paper.authors == want["authors"]
        assert paper.primary_category == want["primary"]
        assert entry.published == want["published"]
        assert entry.updated == want["updated"]
        assert paper.journal_ref == want["journal_ref"]


# -- particular entries ------------------------------------------------------------------


def test_title_zero_survives() -> None:
    result = page("api2026_idlist_2104.12255v1_title-is-0")
    (entry,) = result.entries
    paper = entry.paper
    assert paper.title == "0"
    assert (paper.id, paper.version, paper.announce_type) == ("2104.12255", 1, "new")
    assert paper.categories == ("cs.CR",)
    assert paper.authors == ("Quan Thoi Minh Nguyen",)
    assert paper.abstract.startswith("What is the funniest number in cryptography? 0.")
    assert entry.published == datetime(2021, 4, 20, 16, 7, 14, tzinfo=UTC)


@pytest.mark.parametrize(
    ("name", "paper_id", "version", "categories"),
    [
        (
            "api2026_idlist_quant-ph-0201082v1_old-style-id",
            "quant-ph/0201082",
            1,
            ("quant-ph", "cs.PL"),
        ),
        ("api2026_idlist_astro-ph-0601001_old-style-id", "astro-ph/0601001", 1, ("astro-ph",)),
        ("api2024_single-entry_2024-12-28", "cond-mat/0102536", 1, ("cond-mat.str-el",)),
    ],
)
def test_old_style_ids(name: str, paper_id: str, version: int, categories: tuple[str, ...]) -> None:
    paper = only(name)
    assert (paper.id, paper.version, paper.categories) == (paper_id, version, categories)
    assert paper.abs_url == f"https://arxiv.org/abs/{paper_id}"


def test_old_style_ids_in_a_search() -> None:
    ids = [p.versioned_id for p in page("api2016_search_au-del_maestro_max10").papers]
    assert "cond-mat/0412498v1" in ids and "cond-mat/0607501v2" in ids
    assert page("api2018_search_max10_2018-02-05").papers[-1].id == "math/0507289"


def test_doi_and_journal_ref_2016() -> None:
    result = page("api2016_search_au-del_maestro-AND-ti-quantum-criticality")
    first, second = result.entries
    paper = first.paper
    assert (paper.id, paper.version, paper.announce_type) == ("1111.2011", 2, "replace")
    assert paper.dois == ("10.1103/physrevb.85.115117",)
    assert paper.journal_ref == "Phys. Rev. B 85, 115117 (2012)"
    assert paper.title == (
        "Quantum Criticality for Extended Nodes on a Bethe Lattice in the Large Connectivity Limit"
    )
    assert paper.abstract.startswith("Theoretical description of anisotropic systems, such as")
    assert paper.authors == ("James M. Murray", "Adrian Del Maestro", "Zlatko Tesanovic")
    assert paper.categories == ("cond-mat.str-el", "cond-mat.stat-mech")
    assert first.published == datetime(2011, 11, 8, 18, 48, 36, tzinfo=UTC)
    assert first.updated == datetime(2012, 4, 2, 12, 38, 54, tzinfo=UTC)
    assert second.paper.versioned_id == "cond-mat/0607501v2"
    assert second.paper.dois == ("10.1103/physrevb.74.214517",)
    assert second.paper.journal_ref == "Phys. Rev. B 74, 214517 (2006)"


def test_msc_codes_are_not_categories() -> None:
    papers = {p.id: p for p in page("api2018_search_max10_2018-02-05").papers}
    assert papers["1801.05533"].categories == ("math.DG",)  # "53D10, 53D15" left out
    assert papers["0808.2097"].categories == ("math.DG", "math-ph", "math.MP")
    assert papers["math/0507289"].categories == ("math.DG", "math.AG")
    every = [c for p in papers.values() for c in p.categories]
    assert not [c for c in every if any(ch.isdigit() for ch in c)]


def test_primary_category_comes_first() -> None:
    papers = page("api2026_search_cat-math.NT-OR-math.AG_max5_2026-06-29").papers
    assert papers[0].categories == ("math.SG", "math.AG")
    assert papers[-1].categories == ("math.RT", "math.CO", "math.NT")


def test_tex_is_kept_as_published() -> None:
    paper = page("api2026_search_cat-math.NT-OR-math.AG_max5_2026-06-29").papers[-1]
    assert paper.title.startswith(r"Average divisibility in character tables of $\mathrm{GL}_2(")


def test_double_encoded_utf8_is_repaired() -> None:
    # The recorded body holds UTF-8 that was decoded as Latin-1 and encoded again
    # ("$\u00ce\u00b2$" for "$\u03b2$"); feedparser undoes that, and so the parser.
    text = body("api2026_search_all-testing_start10_max10")
    assert "$\u00ce\u00b2$".encode() in text
    paper = page("api2026_search_all-testing_start10_max10").papers[0]
    assert paper.versioned_id == "2403.16981v2"
    assert "type-II error at most $\u03b2$;" in paper.abstract
    assert "\u00ce" not in paper.abstract


def test_paging_numbers_and_overlap() -> None:
    first = page("api2026_search_all-testing_start0_max100")
    second = page("api2026_search_all-testing_start10_max10")
    assert (first.total, first.start, first.per_page) == (214881, 0, 100)
    assert (second.total, second.start, second.per_page) == (214881, 10, 10)
    assert [p.versioned_id for p in first.papers[10:20]] == [p.versioned_id for p in second.papers]


def test_one_unknown_id_in_the_list_is_silently_dropped_by_arxiv() -> None:
    result = page("api2026_idlist_0808.05394+1707.08567_one-id-unknown")
    assert [p.versioned_id for p in result.papers] == ["1707.08567v1"]
    assert result.total == 1 and result.problems == ()


@pytest.mark.parametrize(
    "name",
    ["edge_api2026_empty-result_idlist_0000.0000", "edge_api2026_empty-result_idlist_0808.05394"],
)
def test_empty_result_is_a_valid_empty_page(name: str) -> None:
    result = page(name)
    assert result.entries == () and result.papers == ()
    assert (result.total, result.start) == (0, 0)
    assert result.problems == ()
    assert not result.unexpectedly_empty


def test_an_empty_page_before_the_end_is_flagged() -> None:
    # The real start=10 page with its entries removed: arXiv's known empty-page hiccup.
    text = body("api2026_search_all-testing_start10_max10")
    emptied = re.sub(rb"\s*<entry>.*?</entry>", b"", text, flags=re.DOTALL)
    result = parse_api(emptied)
    assert result.entries == ()
    assert result.unexpectedly_empty
    assert result.problems == (
        "no entries at start 10 although totalResults is 214881: arXiv's API sometimes "
        "returns empty pages; ask again",
    )


# -- the error answer -----------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 200])
def test_error_entry_raises_with_arxivs_message(status: int) -> None:
    url = "https://export.arxiv.org/api/query?id_list=abc"
    with pytest.raises(FeedErrorResponse) as caught:
        parse_api(ERROR_FILE.read_bytes(), status=status, source="lookup", url=url)
    error = caught.value
    assert "incorrect id format for abc" in error.message
    assert error.message.startswith(url)
    assert (error.source, error.url) == ("lookup", url)
    assert error.hint and "id" in error.hint
    assert ("HTTP 400" in error.message) is (status == 400)


def test_error_entry_without_summary_uses_its_id() -> None:
    text = re.sub(rb"<summary>.*?</summary>", b"", ERROR_FILE.read_bytes())
    with pytest.raises(FeedErrorResponse, match="incorrect id format for abc"):
        parse_api(text, status=400)


def test_a_paper_titled_error_is_still_a_paper() -> None:
    text = body("api2026_idlist_2104.12255v1_title-is-0").replace(
        b"<title>0</title>", b"<title>Error</title>"
    )
    assert parse_api(text).papers[0].title == "Error"


# -- entries with missing fields (real entries, edited) ----------------------------------

TWO = "api2016_search_au-del_maestro-AND-ti-quantum-criticality"


def first_entry_edited(name: str, pattern: bytes, replacement: bytes = b"") -> bytes:
    """The response with `pattern` replaced in its first entry only."""
    text = body(name)
    start = text.index(b"<entry>")
    end = text.index(b"</entry>", start)
    edited = re.sub(pattern, replacement, text[start:end], count=1, flags=re.DOTALL)
    assert edited != text[start:end], "the edit did not apply"
    return text[:start] + edited + text[end:]


def test_entry_without_title_is_skipped_and_described() -> None:
    result = parse_api(first_entry_edited(TWO, rb"<title>.*?</title>"))
    assert [p.versioned_id for p in result.papers] == ["cond-mat/0607501v2"]
    assert result.problems == ("entry 1: 1111.2011v2: no title",)


def test_entry_without_arxiv_id_falls_back_to_its_link() -> None:
    text = first_entry_edited(
        TWO, rb"<id>http://arxiv.org/abs/1111.2011v2</id>", b"<id>urn:x:1</id>"
    )
    assert parse_api(text).papers[0].versioned_id == "1111.2011v2"


def test_entry_without_any_arxiv_id_is_skipped() -> None:
    text = first_entry_edited(
        TWO, rb"<id>http://arxiv.org/abs/1111.2011v2</id>", b"<id>urn:x:1</id>"
    )
    start = text.index(b"<entry>")
    end = text.index(b"</entry>")
    entry = re.sub(rb'<link href="http://arxiv.org/abs/[^"]*"[^>]*/>', b"", text[start:end])
    result = parse_api(text[:start] + entry + text[end:])
    assert len(result.papers) == 1
    assert result.problems == ("entry 1: no arXiv identifier in its id 'urn:x:1'",)


def test_entry_without_published_uses_updated() -> None:
    result = parse_api(first_entry_edited(TWO, rb"<published>.*?</published>"))
    entry = result.entries[0]
    assert entry.published == entry.updated == datetime(2012, 4, 2, 12, 38, 54, tzinfo=UTC)


def test_entry_without_any_date_is_skipped() -> None:
    text = first_entry_edited(TWO, rb"<published>.*?</published>")
    start = text.index(b"<entry>")
    end = text.index(b"</entry>")
    entry = re.sub(rb"<updated>.*?</updated>", b"", text[start:end])
    result = parse_api(text[:start] + entry + text[end:])
    assert result.problems == ("entry 1: 1111.2011v2: no published or updated date",)


def test_entry_without_primary_category_keeps_the_others() -> None:
    text = first_entry_edited(TWO, rb"<arxiv:primary_category[^>]*/>")
    assert parse_api(text).papers[0].categories == ("cond-mat.str-el", "cond-mat.stat-mech")


def test_entry_without_authors_summary_doi() -> None:
    text = first_entry_edited(TWO, rb"<author>.*</author>")  # greedy: every author
    text = text.replace(b"<arxiv:doi", b"<arxiv:nodoi").replace(b"</arxiv:doi>", b"</arxiv:nodoi>")
    start = text.index(b"<entry>")
    end = text.index(b"</entry>")
    entry = re.sub(rb"<summary>.*?</summary>", b"", text[start:end], flags=re.DOTALL)
    paper = parse_api(text[:start] + entry + text[end:]).papers[0]
    assert paper.versioned_id == "1111.2011v2"
    assert paper.authors == ()
    assert paper.abstract == ""
    assert paper.dois == ()


def every_title_removed(name: str) -> bytes:
    """The response with no title in any entry: no entry can be read as a paper."""
    head, paging, entries = body(name).partition(b"</opensearch:itemsPerPage>")
    return head + paging + re.sub(rb"<title>[^<]*</title>", b"", entries)


def test_a_page_of_unreadable_entries_is_empty_with_every_problem() -> None:
    """One such page is skipped by the search, not the end of it (its entries count)."""
    page = parse_api(every_title_removed(TWO))
    assert page.entries == () and page.sent == 2 and page.total == 2
    assert [problem.split(": ")[-1] for problem in page.problems] == ["no title"] * 2
    assert not page.unexpectedly_empty


def test_every_entry_unreadable_without_the_paging_numbers_is_a_format_error() -> None:
    text = re.sub(rb"<opensearch:.*?</opensearch:\w+>", b"", every_title_removed(TWO))
    with pytest.raises(FeedFormatError, match="none of the 2 entries"):
        parse_api(text)


# -- bodies that are not an API response --------------------------------------------------


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda path: path.stem)
def test_a_response_cut_in_half_is_a_format_error(path: Path) -> None:
    text = path.read_bytes()
    with pytest.raises(FeedFormatError, match="not well-formed XML") as caught:
        parse_api(text[: len(text) // 2], source="q")
    assert caught.value.hint


def test_a_response_cut_after_a_complete_entry_gives_no_half_page() -> None:
    text = body("api2026_search_all-testing_start0_max100")
    cut = text[: text.index(b"</entry>", len(text) // 2) + len(b"</entry>")]
    with pytest.raises(FeedFormatError, match="truncated"):
        parse_api(cut)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (
            b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
            b"<body><h1>502 Bad Gateway</h1></body></html>",
            "HTML",
        ),
        (b"garbage \x00\x01\xff", "binary"),
        (b"Rate exceeded.", "text"),
        (b'{"error": "x"}', "JSON"),
        (b"", "empty body"),
    ],
)
def test_bodies_that_are_not_atom(raw: bytes, words: str) -> None:
    url = "https://export.arxiv.org/api/query?search_query=all:x"
    with pytest.raises(FeedFormatError) as caught:
        parse_api(raw, source="q", url=url)
    assert words in caught.value.message
    assert caught.value.message.startswith(url)
    assert caught.value.hint


def test_an_rss_feed_is_not_an_api_response() -> None:
    rss = FIXTURES / "arxiv_rss" / "edge_empty-feed_test-archive_2024-11-28.xml"
    with pytest.raises(FeedFormatError, match="rss20 feed"):
        parse_api(rss.read_bytes())


def test_an_error_status_with_a_result_feed_is_not_a_result() -> None:
    with pytest.raises(FeedFormatError, match="HTTP 503"):
        parse_api(body("api2013_single-entry_2013-02-02"), status=503)


def test_an_error_status_with_html() -> None:
    with pytest.raises(FeedFormatError, match=r"HTTP 503: received HTML") as caught:
        parse_api(b"<html><head><title>Down</title></head></html>", status=503)
    assert not isinstance(caught.value, FeedErrorResponse)


def test_all_errors_are_source_errors() -> None:
    for raw in (ERROR_FILE.read_bytes(), b"<html></html>"):
        with pytest.raises(SourceError):
            parse_api(raw)


# -- URL helpers ----------------------------------------------------------------------------


def test_api_query_url() -> None:
    url = api_query_url(
        API_BASE, search_query='cat:cs.LG AND ti:"large language"', start=0, max_results=100
    )
    assert url == (
        "https://export.arxiv.org/api/query?search_query=cat:cs.LG%20AND%20ti:%22large%20"
        "language%22&start=0&max_results=100&sortBy=submittedDate&sortOrder=descending"
    )


def test_api_query_url_with_a_range_and_other_bases() -> None:
    query = submitted_range("cat:math.NT OR cat:math.AG", date(2026, 6, 1), date(2026, 6, 2))
    url = api_query_url(
        "",
        search_query=query,
        start=200,
        max_results=2000,
        sort_by="lastUpdatedDate",
        sort_order="ascending",
    )
    assert url == (
        "https://export.arxiv.org/api/query?search_query=%28cat:math.NT%20OR%20cat:math.AG%29"
        "%20AND%20submittedDate:%5B202606010000%20TO%20202606022359%5D&start=200"
        "&max_results=2000&sortBy=lastUpdatedDate&sortOrder=ascending"
    )
    assert api_query_url(
        "http://127.0.0.1:9000/api/query/", search_query="all:x", start=0, max_results=1
    ).startswith("http://127.0.0.1:9000/api/query?search_query=all:x&start=0&max_results=1&")
    assert api_query_url(
        "http://mirror.example/q?key=1", search_query="all:x", start=0, max_results=1
    ).startswith("http://mirror.example/q?key=1&search_query=all:x&")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_results": 0},
        {"max_results": 2001},
        {"max_results": -5},
        {"max_results": True},
        {"start": -1},
        {"search_query": "  "},
        {"sort_by": "date"},
        {"sort_order": "down"},
    ],
)
def test_api_query_url_refuses(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"search_query": "all:x", "start": 0, "max_results": 10}
    args.update(kwargs)
    with pytest.raises(ValueError):
        api_query_url(API_BASE, **args)  # type: ignore[arg-type]


def test_submitted_range() -> None:
    assert submitted_range("cat:cs.LG", date(2026, 6, 1), date(2026, 6, 1)) == (
        "(cat:cs.LG) AND submittedDate:[202606010000 TO 202606012359]"
    )
    assert (
        submitted_range("cat:cs.LG OR cat:stat.ML", date(2025, 12, 31), date(2026, 1, 2))
        == "(cat:cs.LG OR cat:stat.ML) AND submittedDate:[202512310000 TO 202601022359]"
    )
    assert submitted_range(" ", date(2026, 6, 1), date(2026, 6, 2)) == (
        "submittedDate:[202606010000 TO 202606022359]"
    )
    with pytest.raises(ValueError):
        submitted_range("cat:cs.LG", date(2026, 6, 2), date(2026, 6, 1))


def test_entry_and_page_are_frozen() -> None:
    result = page("api2013_single-entry_2013-02-02")
    with pytest.raises(AttributeError):
        result.total = 5  # type: ignore[misc]
    entry: ApiEntry = result.entries[0]
    with pytest.raises(AttributeError):
        entry.paper = entry.paper  # type: ignore[misc]
