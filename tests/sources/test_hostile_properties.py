"""Property tests (Hypothesis) over feed text and Hugging Face JSON built from hostile pieces:
huge, NUL, control characters, odd Unicode, lone surrogates, character and entity
references, wrong types, deep nesting. Every parser either returns papers that any database
stores (no NUL, no lone surrogate, versions and counts in range, http(s) links only), with the
good item beside the hostile one still there, or refuses the whole body with a SourceError.
Never anything else.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.core.errors import SourceError
from bot.core.models import MAX_VERSION, Paper
from bot.sources.arxiv import parse_listing
from bot.sources.arxiv_api import parse_api
from bot.sources.feed import parse_feed
from bot.sources.huggingface import parse_daily_papers

REFERENCES = (
    "&#0;",
    "&#x0;",
    "&#99999999999;",
    "&#x110000;",
    "&#xD800;",
    "&#xdfff;",
    "&#65;",
    "&amp;",
    "&lt;",
    "&bogus;",
    "&#;",
    "&#x;",
    "&#" + "9" * 50 + ";",
)
PIECES = st.one_of(
    st.text(st.characters(codec=None, exclude_categories=()), max_size=20),  # surrogates too
    st.sampled_from(REFERENCES),
    st.sampled_from(("\x00", "\x0b", "\x1f", "\ufffe", "\U0010ffff", "\u202e", "\u0301")),
    st.sampled_from(("a" * 5000, "1" * 500, "v" + "9" * 400, "javascript:alert(1)")),
    st.sampled_from(("2411.00001v", "quant-ph/", "https://arxiv.org/abs/", "@", ".")),
)
HOSTILE = st.lists(PIECES, max_size=6).map("".join)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def xml_text(text: str) -> str:
    """Text as it could appear between tags: `<` and `>` escaped, `&` left as it is so that
    character and entity references reach the parser."""
    return text.replace("<", "&lt;").replace(">", "&gt;")


def encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate as (invalid) bytes


GOOD_ITEM = (
    "<item><title>A good paper</title><link>https://arxiv.org/abs/2411.00002</link>"
    "<description>arXiv:2411.00002v1 Announce Type: new \nAbstract: Good.</description>"
    '<guid isPermaLink="false">oai:arXiv.org:2411.00002v1</guid>'
    "<category>cs.LG</category><dc:creator>Ada Good</dc:creator>"
    "<arxiv:announce_type>new</arxiv:announce_type></item>"
)


def rss(fields: dict[str, str]) -> bytes:
    hostile = "".join(f"<{tag}>{xml_text(value)}</{tag}>" for tag, value in fields.items())
    return encoded(
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" '
        'xmlns:arxiv="http://arxiv.org/schemas/atom"><channel><title>cs updates on arXiv.org'
        "</title><pubDate>Thu, 28 Nov 2024 00:00:00 -0500</pubDate>"
        f"<item>{hostile}</item>{GOOD_ITEM}</channel></rss>"
    )


def storable(papers: tuple[Paper, ...]) -> None:
    for paper in papers:
        texts = [paper.id, paper.title, paper.abstract, *paper.authors, *paper.categories]
        texts += [paper.announce_type, *paper.dois, paper.journal_ref or "", paper.link or ""]
        texts += [paper.ai_summary or "", paper.github or "", *paper.keywords]
        for text in texts:
            assert "\x00" not in text
            text.encode("utf-8")  # no lone surrogate
        assert 1 <= paper.version <= MAX_VERSION
        for count in (paper.upvotes, paper.comments, paper.github_stars, paper.hf_rank):
            assert count is None or 0 <= count <= MAX_VERSION
        for link in (paper.link, paper.github):
            assert link is None or link.lower().startswith(("http://", "https://"))


FIELDS = st.fixed_dictionaries(
    {},
    optional={
        tag: HOSTILE
        for tag in (
            "title",
            "link",
            "description",
            "guid",
            "category",
            "pubDate",
            "dc:creator",
            "author",
            "arxiv:announce_type",
            "arxiv:DOI",
            "dc:rights",
        )
    },
)


@SETTINGS
@given(fields=FIELDS)
@example(fields={"title": "&#99999999999;", "guid": "oai:arXiv.org:2411.00001v1"})
@example(fields={"pubDate": "Mon, 01 Jan 0001 00:00:00 +0000", "guid": "2411.00001v1"})
@example(fields={"guid": "oai:arXiv.org:2411.00001v" + "9" * 400, "title": "x"})
@example(fields={"guid": "2411.00001", "title": "\x00", "dc:creator": "a" * 100_000})
@example(fields={"guid": "2411.00001", "arxiv:DOI": "10.1234/" + "a" * 300})
def test_any_rss_item_is_read_or_left_out_never_a_crash(fields: dict[str, str]) -> None:
    body = rss(fields)
    for parse in (parse_listing, parse_feed):
        try:
            parsed = parse(body)
        except SourceError as exc:
            assert str(exc)
            continue
        storable(parsed.papers)
        assert "2411.00002" in {paper.id for paper in parsed.papers}


@SETTINGS
@given(title=HOSTILE, entry_id=HOSTILE, published=HOSTILE, author=HOSTILE)
@example(title="x", entry_id="http://arxiv.org/abs/2411.00001v1", published="0001-01-01", author="")
def test_any_arxiv_api_entry_is_read_or_left_out(
    title: str, entry_id: str, published: str, author: str
) -> None:
    entry = (
        f"<entry><id>{xml_text(entry_id)}</id><title>{xml_text(title)}</title>"
        f"<published>{xml_text(published)}</published><updated>{xml_text(published)}</updated>"
        f"<author><name>{xml_text(author)}</name></author></entry>"
    )
    good = (
        "<entry><id>http://arxiv.org/abs/2411.00002v1</id><title>Good</title>"
        "<published>2024-11-27T10:00:00Z</published><updated>2024-11-27T10:00:00Z</updated>"
        "</entry>"
    )
    body = encoded(
        '<?xml version="1.0" encoding="UTF-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
        f"<title>query</title>{entry}{good}</feed>"
    )
    try:
        page = parse_api(body)
    except SourceError as exc:
        assert str(exc)
        return
    storable(page.papers)
    assert "2411.00002" in {paper.id for paper in page.papers}


@SETTINGS
@given(st.binary(max_size=300))
@example(b"\x00" * 10)
@example(b"<rss version='2.0'><channel><item><title>&#99999999999;</title></item></channel></rss>")
def test_any_bytes_are_papers_or_a_source_error(body: bytes) -> None:
    for parse in (parse_listing, parse_feed, parse_api, parse_daily_papers):
        try:
            result: Any = parse(body)
        except SourceError as exc:
            assert str(exc)
            continue
        storable(result.papers)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**20, max_value=10**30)
    | st.floats()
    | HOSTILE,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(HOSTILE, children, max_size=3)
    ),
    max_leaves=8,
)
PAPER_KEYS = (
    "id",
    "title",
    "summary",
    "authors",
    "upvotes",
    "publishedAt",
    "submittedOnDailyAt",
    "githubRepo",
    "githubStars",
    "ai_keywords",
    "ai_summary",
    "organization",
)
HF_ITEM = st.one_of(
    JSON,
    st.fixed_dictionaries(
        {"paper": st.fixed_dictionaries({}, optional=dict.fromkeys(PAPER_KEYS, JSON))},
        optional={"numComments": JSON, "title": JSON, "organization": JSON, "githubRepo": JSON},
    ),
)
GOOD_HF = {"paper": {"id": "2411.00002", "title": "Good", "upvotes": 1}}


@SETTINGS
@given(items=st.lists(HF_ITEM, max_size=4))
@example(items=[{"paper": {"id": "2411.00001v" + "9" * 400, "title": "x"}}])
@example(items=[{"paper": {"id": "2411.00001", "title": "\x00\ud800", "upvotes": 10**25}}])
@example(items=[{"paper": {"id": "2411.00001", "publishedAt": "0001-01-01T00:00:00+01:00"}}])
@example(items=[{"paper": {"id": "2411.00001", "title": "x", "githubRepo": "javascript:x"}}])
def test_any_hugging_face_items_are_read_or_left_out(items: list[Any]) -> None:
    body = json.dumps([*items, GOOD_HF]).encode()
    parsed = parse_daily_papers(body)  # a list of items is never refused as a whole
    storable(parsed.papers)
    assert "2411.00002" in {paper.id for paper in parsed.papers}


@SETTINGS
@given(data=JSON)
@example(data={"error": {"message": "\x00" * 3}})
def test_any_hugging_face_json_is_papers_or_a_source_error(data: Any) -> None:
    try:
        parsed = parse_daily_papers(json.dumps(data).encode())
    except SourceError as exc:
        assert str(exc)
        return
    storable(parsed.papers)


def test_hugging_face_json_nested_deep_is_a_source_error() -> None:
    for body in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000):
        try:
            parse_daily_papers(body)
        except SourceError as exc:
            assert "nested too deeply" in str(exc)
        else:
            raise AssertionError("a body nested 100,000 deep was read")


@SETTINGS
@given(items=st.lists(JSON, max_size=5), indent=st.sampled_from([None, 0, 2]))
def test_reading_items_one_by_one_reads_what_json_reads(items: list[Any], indent: Any) -> None:
    """The reader used when one item is nested too deep agrees with json.loads elsewhere."""
    from bot.sources.jsonitems import items_one_by_one, json_int

    text = json.dumps(items, indent=indent)
    assert repr(items_one_by_one(text)) == repr(json.loads(text, parse_int=json_int))
