"""The Hugging Face Daily Papers parser, tested on the real API days in
tests/fixtures/hf_daily_papers/ (see tests/fixtures/SOURCES.md).

Every body here is what the API returned for a day (re-serialised by the repository that
saved it). Where a test needs a broken item, it loads a real item and deletes or changes
keys in code; where it needs a broken body, it cuts a real one. The only bodies written
here from scratch are the API's error object and an HTML page, which no fixture holds.
"""

from __future__ import annotations

import copy
import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from support.paths import FIXTURES

from bot.core.errors import FeedErrorResponse, FeedFormatError, SourceError
from bot.core.models import Paper
from bot.sources import ParsedFeed
from bot.sources.huggingface import EMPTY_REASON, daily_papers_url, parse_daily_papers

HF = FIXTURES / "hf_daily_papers"
ALL_DAYS = sorted(HF.glob("hf_daily_papers_*.json"))


def fixture(day: str) -> Path:
    return HF / f"hf_daily_papers_{day}.json"


def day_of(path: Path) -> date:
    return date.fromisoformat(path.stem.removeprefix("hf_daily_papers_"))


def parse_day(day: str, **kwargs: Any) -> ParsedFeed:
    path = fixture(day)
    return parse_daily_papers(path.read_bytes(), day=day_of(path), **kwargs)


def items(day: str) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(fixture(day).read_bytes())
    return loaded


def body_of(data: Any) -> bytes:
    return json.dumps(data).encode()


def collapse(text: str | None) -> str | None:
    return None if text is None else " ".join(text.split())


def by_id(feed: ParsedFeed) -> dict[str, Paper]:
    return {paper.id: paper for paper in feed.papers}


# -- every fixture day ------------------------------------------------------------------

# day, papers, first id, last id, max upvotes, with keywords, with githubStars,
# with organization, with ai_summary, with github repo, sum of numComments
DAYS = [
    ("2024-05-27", 13, "2405.15738", "2405.15125", 32, 0, 0, 0, 0, 0, 10),
    ("2024-08-02", 16, "2408.00714", "2407.21794", 35, 0, 0, 0, 0, 0, 25),
    ("2025-01-21", 1, "2501.08325", "2501.08325", 28, 0, 0, 0, 0, 0, 2),
    ("2025-03-21", 25, "2503.16419", "2503.10625", 26, 24, 0, 0, 0, 8, 27),
    ("2025-07-22", 16, "2507.14683", "2507.10935", 63, 7, 8, 0, 7, 8, 21),
    ("2025-10-03", 39, "2510.02283", "2509.26330", 43, 39, 19, 16, 39, 19, 44),
    ("2026-06-03", 23, "2606.01249", "2605.27958", 28, 23, 11, 16, 23, 12, 25),
    ("2026-08-21", 17, "2608.19880", "2608.13210", 163, 16, 12, 17, 16, 12, 20),
]


def test_the_table_covers_every_fixture() -> None:
    assert {day for day, *_ in DAYS} == {day_of(path).isoformat() for path in ALL_DAYS}


@pytest.mark.parametrize(
    (
        "day",
        "count",
        "first",
        "last",
        "most",
        "keywords",
        "stars",
        "organizations",
        "summaries",
        "repos",
        "comments",
    ),
    DAYS,
)
def test_every_day_parses(
    day: str,
    count: int,
    first: str,
    last: str,
    most: int,
    keywords: int,
    stars: int,
    organizations: int,
    summaries: int,
    repos: int,
    comments: int,
) -> None:
    feed = parse_day(day, source="hf-daily")
    papers = feed.papers
    assert len(papers) == count
    assert feed.problems == ()
    assert feed.empty_reason is None
    assert feed.announced == date.fromisoformat(day)
    assert dict(feed.counts) == {"new": count}
    assert (papers[0].id, papers[-1].id) == (first, last)
    assert len({p.id for p in papers}) == count

    # Hugging Face's order is by upvotes: rank 1 is the first and the most upvoted.
    assert max(p.upvotes or 0 for p in papers) == most
    assert sorted(p.hf_rank or 0 for p in papers) == list(range(1, count + 1))
    top = next(p for p in papers if p.hf_rank == 1)
    assert top.upvotes == most and top.id == first

    assert sum(bool(p.keywords) for p in papers) == keywords
    assert sum(p.github_stars is not None for p in papers) == stars
    assert sum(p.organization is not None for p in papers) == organizations
    assert sum(p.ai_summary is not None for p in papers) == summaries
    assert sum(p.github is not None for p in papers) == repos
    assert sum(p.comments or 0 for p in papers) == comments

    for paper in papers:
        assert paper.version == 1
        assert paper.categories == ()
        assert paper.announce_type == "new"
        assert paper.announced == paper.hf_day == date.fromisoformat(day)
        assert paper.source == "hf-daily"
        assert paper.sources == ("hf-daily", "huggingface")
        assert paper.title and paper.title == " ".join(paper.title.split())
        assert paper.abstract and "\n" not in paper.abstract
        assert paper.authors and all(paper.authors)
        assert paper.upvotes is not None and paper.comments is not None
        assert paper.github is None or paper.github.startswith("https://")


@pytest.mark.parametrize("path", ALL_DAYS, ids=lambda path: path.stem)
def test_every_item_becomes_its_paper(path: Path) -> None:
    """Field by field against the JSON itself, item by item, for every day."""
    feed = parse_daily_papers(path.read_bytes(), day=day_of(path))
    raw = json.loads(path.read_bytes())
    assert len(feed.papers) == len(raw)
    for paper, item in zip(feed.papers, raw, strict=True):
        inner = item["paper"]
        assert paper.id == inner["id"]
        assert paper.title == " ".join(inner["title"].split())
        assert paper.abstract == " ".join(inner["summary"].split())
        assert paper.authors == tuple(a["name"] for a in inner["authors"])
        assert paper.upvotes == inner["upvotes"]
        assert paper.comments == item["numComments"]
        assert paper.keywords == tuple(collapse(k) for k in inner.get("ai_keywords", ()))
        assert paper.ai_summary == collapse(inner.get("ai_summary"))
        assert paper.github == inner.get("githubRepo")
        assert paper.github_stars == inner.get("githubStars")
        organization = item.get("organization") or {}
        assert paper.organization == collapse(organization.get("fullname"))


# -- fields of particular days ------------------------------------------------------------


def test_hard_line_breaks_in_titles_are_collapsed() -> None:
    raw = items("2024-05-27")[0]
    assert raw["paper"]["title"] == (
        "ConvLLaVA: Hierarchical Backbones as Visual Encoder for Large Multimodal\n  Models"
    )
    paper = parse_day("2024-05-27").papers[0]
    assert paper.title == (
        "ConvLLaVA: Hierarchical Backbones as Visual Encoder for Large Multimodal Models"
    )
    stock = by_id(parse_day("2025-10-03"))
    titles = [p.title for p in stock.values() if p.title.startswith("StockBench")]
    assert titles == ["StockBench: Can LLM Agents Trade Stocks Profitably In Real-world Markets?"]


def test_latest_day_top_paper() -> None:
    feed = parse_day("2026-08-21")
    top = feed.papers[0]
    assert (top.id, top.hf_rank, top.upvotes) == ("2608.19880", 1, 163)
    assert top.title == "EnvHarness: Awakening Static Worlds for Agent Learning"
    assert top.organization == "Google"
    assert top.github == "https://github.com/google-research/envharness"
    assert top.github_stars == 8
    assert top.comments == 1
    assert top.keywords[:3] == ("LLM agents", "Environment Harness", "EnvHarness")
    assert top.ai_summary is not None and top.ai_summary.startswith("EnvHarness and EnvRigger")
    assert top.authors[0] == "Chengsong Huang" and top.authors[-1] == "Chen-Yu Lee"
    assert len(top.authors) == 17
    second = feed.papers[1]
    assert (second.hf_rank, second.upvotes) == (2, 54)
    assert top.hf_url == "https://huggingface.co/papers/2608.19880"


@pytest.mark.parametrize(
    ("day", "has_keywords", "has_stars", "has_organization"),
    [
        ("2024-05-27", False, False, False),
        ("2024-08-02", False, False, False),
        ("2025-01-21", False, False, False),
        ("2025-03-21", True, False, False),
        ("2025-07-22", True, True, False),
        ("2025-10-03", True, True, True),
        ("2026-06-03", True, True, True),
        ("2026-08-21", True, True, True),
    ],
)
def test_fields_appear_with_their_schema_era(
    day: str, has_keywords: bool, has_stars: bool, has_organization: bool
) -> None:
    papers = parse_day(day).papers
    assert any(p.keywords for p in papers) is has_keywords  # ai_keywords from 2025-03-21
    assert any(p.github_stars is not None for p in papers) is has_stars  # from 2025-07-22
    assert any(p.organization for p in papers) is has_organization  # from 2025-10-03


def test_organization_prefers_the_full_name() -> None:
    paper = parse_day("2025-10-03").papers[0]
    assert paper.id == "2510.02283"
    assert paper.organization == "ByteDance Seed"  # name is "ByteDance-Seed"


def test_day_from_the_items_when_not_given() -> None:
    # 2025+: paper.submittedOnDailyAt is the day; top-level publishedAt is earlier.
    feed = parse_daily_papers(fixture("2026-08-21").read_bytes())
    assert feed.announced == date(2026, 8, 21)
    assert {p.announced for p in feed.papers} == {date(2026, 8, 21)}
    # 2024: no submittedOnDailyAt; the top-level publishedAt is the day's submission.
    feed = parse_daily_papers(fixture("2024-05-27").read_bytes())
    assert feed.announced == date(2024, 5, 27)
    # The one paper of 2025-01-21 was put on the list at 22:04 UTC the evening before:
    # the caller passes the day it asked for, which wins.
    assert parse_daily_papers(fixture("2025-01-21").read_bytes()).announced == date(2025, 1, 20)
    assert parse_day("2025-01-21").papers[0].hf_day == date(2025, 1, 21)


def test_default_source_name() -> None:
    paper = parse_daily_papers(fixture("2025-01-21").read_bytes()).papers[0]
    assert paper.source == "huggingface"
    assert paper.sources == ("huggingface",)
    paper = parse_day("2025-01-21", source="HF-Daily").papers[0]
    assert paper.sources == ("hf-daily", "huggingface")


# -- items with missing or odd fields (real items, edited) -------------------------------


def edited(day: str, index: int, edit: Any) -> list[dict[str, Any]]:
    data = items(day)
    item = copy.deepcopy(data[index])
    edit(item)
    data[index] = item
    return data


def test_item_without_paper_id_is_skipped_and_described() -> None:
    data = edited("2026-08-21", 2, lambda item: item["paper"].pop("id"))
    feed = parse_daily_papers(body_of(data), day=date(2026, 8, 21))
    assert len(feed.papers) == 16
    assert feed.problems == ("item 3: no paper id",)
    assert "2608.19880" in by_id(feed)


@pytest.mark.parametrize(
    ("bad_id", "problem"),
    [
        ("not-an-arxiv-id", "item 1: paper id 'not-an-arxiv-id' is not an arXiv identifier"),
        ("see 2405.15738", "item 1: paper id 'see 2405.15738' is not an arXiv identifier"),
        ("", "item 1: no paper id"),
        (2405, "item 1: no paper id"),
    ],
)
def test_item_with_a_bad_id_is_skipped(bad_id: Any, problem: str) -> None:
    data = edited("2024-05-27", 0, lambda item: item["paper"].__setitem__("id", bad_id))
    feed = parse_daily_papers(body_of(data), day=date(2024, 5, 27))
    assert len(feed.papers) == 12
    assert feed.problems == (problem,)
    # Ranks are among the papers read: the second item is now rank 1.
    assert feed.papers[0].id == "2405.15574" and feed.papers[0].hf_rank == 1


def test_versioned_id_keeps_the_version_less_id() -> None:
    data = edited("2024-05-27", 0, lambda item: item["paper"].__setitem__("id", "2405.15738v2"))
    paper = parse_daily_papers(body_of(data)).papers[0]
    assert (paper.id, paper.version) == ("2405.15738", 1)


def test_title_falls_back_to_the_top_level_title() -> None:
    data = edited("2024-05-27", 0, lambda item: item["paper"].pop("title"))
    paper = parse_daily_papers(body_of(data)).papers[0]
    assert paper.title == (
        "ConvLLaVA: Hierarchical Backbones as Visual Encoder for Large Multimodal Models"
    )


def test_item_without_any_title_is_skipped() -> None:
    def drop(item: dict[str, Any]) -> None:
        item["paper"]["title"] = "  \n "
        del item["title"]

    feed = parse_daily_papers(body_of(edited("2025-07-22", 15, drop)))
    assert len(feed.papers) == 15
    assert feed.problems == ("item 16: 2507.10935: no title",)


def test_a_title_zero_is_a_title() -> None:
    data = edited("2025-07-22", 0, lambda item: item["paper"].__setitem__("title", "0"))
    assert parse_daily_papers(body_of(data)).papers[0].title == "0"


def test_item_without_paper_object_is_skipped() -> None:
    data = edited("2025-03-21", 4, lambda item: item.pop("paper"))
    feed = parse_daily_papers(body_of(data))
    assert len(feed.papers) == 24
    assert feed.problems == ("item 5: no paper id",)


def test_item_that_is_not_an_object_is_skipped() -> None:
    data: list[Any] = items("2025-03-21")
    data[1] = data[1]["paper"]["id"]  # a bare id string where an object belongs
    feed = parse_daily_papers(body_of(data))
    assert len(feed.papers) == 24
    assert feed.problems == ("item 2: not an object but str",)


def test_missing_optional_fields_leave_the_paper() -> None:
    def strip(item: dict[str, Any]) -> None:
        for key in ("upvotes", "summary", "authors", "ai_keywords", "ai_summary"):
            item["paper"].pop(key)
        for key in ("githubRepo", "githubStars", "organization", "submittedOnDailyAt"):
            item["paper"].pop(key)
        for key in ("summary", "numComments", "organization"):
            item.pop(key)

    data = edited("2026-08-21", 0, strip)
    feed = parse_daily_papers(body_of(data))
    assert feed.problems == ()
    paper = feed.papers[0]
    assert paper.id == "2608.19880"
    assert paper.title == "EnvHarness: Awakening Static Worlds for Agent Learning"
    assert paper.upvotes == 0  # missing upvotes of an item that is there: 0
    assert paper.abstract == ""
    assert paper.authors == ()
    assert paper.keywords == ()
    assert paper.ai_summary is None
    assert paper.github is None and paper.github_stars is None
    assert paper.organization is None
    assert paper.comments is None
    # No submittedOnDailyAt: the top-level publishedAt (2026-08-19T20:00Z) gives the day.
    assert paper.announced == paper.hf_day == date(2026, 8, 19)
    # With 0 upvotes it drops to the end of the ranking.
    assert paper.hf_rank == 17
    assert feed.papers[1].hf_rank == 1


def test_abstract_falls_back_to_the_top_level_summary() -> None:
    data = edited("2025-10-03", 0, lambda item: item["paper"].pop("summary"))
    paper = parse_daily_papers(body_of(data)).papers[0]
    assert paper.abstract == " ".join(items("2025-10-03")[0]["summary"].split())
    assert paper.abstract.startswith("Diffusion models")


def test_organization_only_in_paper() -> None:
    data = edited("2025-10-03", 0, lambda item: item.pop("organization"))
    assert parse_daily_papers(body_of(data)).papers[0].organization == "ByteDance Seed"
    data = edited("2025-10-03", 0, lambda item: item["paper"]["organization"].pop("fullname"))
    data[0].pop("organization")
    assert parse_daily_papers(body_of(data)).papers[0].organization == "ByteDance-Seed"


def test_wrong_types_count_as_missing() -> None:
    def garble(item: dict[str, Any]) -> None:
        paper = item["paper"]
        paper["upvotes"] = "lots"
        paper["ai_keywords"] = {"a": 1}
        paper["githubRepo"] = "google-research/envharness"  # not a URL
        paper["githubStars"] = -3
        paper["ai_summary"] = ["not", "text"]
        item["numComments"] = None
        item["organization"] = 42
        paper["organization"] = []

    paper = parse_daily_papers(body_of(edited("2026-08-21", 0, garble))).papers[0]
    assert paper.upvotes == 0
    assert paper.keywords == ()
    assert paper.github is None and paper.github_stars is None
    assert paper.ai_summary is None
    assert paper.comments is None
    assert paper.organization is None


def test_authors_without_a_name_are_skipped() -> None:
    def edit(item: dict[str, Any]) -> None:
        authors = item["paper"]["authors"]
        authors[0].pop("name")
        authors[1]["name"] = "  "
        authors[2]["hidden"] = True

    paper = parse_daily_papers(body_of(edited("2024-05-27", 0, edit))).papers[0]
    assert paper.authors[:2] == ("Ziming Wang", "Jiale Yuan")  # hidden: still an author
    assert len(paper.authors) == 7


def test_ties_keep_the_list_order() -> None:
    data = items("2024-05-27")
    data[4]["paper"]["upvotes"] = 50  # item 5 becomes the most upvoted
    data[2]["paper"]["upvotes"] = 28  # ties with item 2 (28)
    feed = parse_daily_papers(body_of(data))
    ranks = {p.id: p.hf_rank for p in feed.papers}
    ids = [item["paper"]["id"] for item in data]
    assert ranks[ids[4]] == 1
    assert ranks[ids[0]] == 2
    assert (ranks[ids[1]], ranks[ids[2]]) == (3, 4)
    assert [p.id for p in feed.papers] == ids  # the list's order is kept


def test_a_paper_listed_twice_is_kept_once() -> None:
    data = items("2025-07-22")
    data.append(copy.deepcopy(data[0]))
    feed = parse_daily_papers(body_of(data))
    assert len(feed.papers) == 16
    assert feed.problems == ("item 17: 2507.14683 again (first as item 1)",)


def test_all_items_unreadable_is_a_format_error() -> None:
    data = items("2025-07-22")
    for item in data:
        del item["paper"]["id"]
    with pytest.raises(FeedFormatError, match="none of the 16 items") as caught:
        parse_daily_papers(body_of(data), url="https://hf.example/api/daily_papers")
    assert caught.value.hint and "format" in caught.value.hint
    assert "item 1: no paper id" in str(caught.value)


# -- empty days and bodies that are not a day -------------------------------------------


def test_an_empty_list_is_a_valid_empty_day() -> None:
    feed = parse_daily_papers(b"[]", day=date(2025, 1, 25))
    assert feed.papers == ()
    assert feed.empty_reason == EMPTY_REASON == "no Hugging Face daily papers for that day"
    assert feed.announced == date(2025, 1, 25)
    assert feed.problems == ()
    assert parse_daily_papers(b"[]\n").announced is None


URL = "https://huggingface.co/api/daily_papers?date=2026-13-01"


@pytest.mark.parametrize(
    ("body", "error", "words"),
    [
        # The API's own error answer (written here: no fixture holds one).
        (b'{"error": "Invalid date"}', FeedErrorResponse, "Invalid date"),
        (
            b'{"error": "Too Many Requests: rate limit reached"}',
            FeedErrorResponse,
            "rate limit",
        ),
        (b'{"papers": []}', FeedFormatError, "JSON object"),
        (b'"2024-05-27"', FeedFormatError, "JSON str"),
        (b"", FeedFormatError, "empty body"),
        (b"   \n", FeedFormatError, "empty body"),
        (
            b"<!DOCTYPE html><html><head><title>503 Service Unavailable</title></head>"
            b"<body>down</body></html>",
            FeedFormatError,
            "HTML",
        ),
        (b"garbage \x00\xff", FeedFormatError, "not JSON"),
    ],
)
def test_bodies_that_are_not_a_day(body: bytes, error: type[SourceError], words: str) -> None:
    with pytest.raises(error) as caught:
        parse_daily_papers(body, source="hf", url=URL)
    assert type(caught.value) is error
    assert words in str(caught.value)
    assert caught.value.message.startswith(URL)
    assert caught.value.source == "hf" and caught.value.url == URL
    assert caught.value.hint


def test_rate_limit_hint() -> None:
    with pytest.raises(FeedErrorResponse) as caught:
        parse_daily_papers(b'{"error": "Slow down"}', status=429, source="hf")
    assert "HTTP 429" in str(caught.value)
    assert caught.value.hint and "rate-limits" in caught.value.hint
    assert caught.value.message.startswith("hf: ")


def test_error_message_names_the_source_without_url() -> None:
    with pytest.raises(FeedErrorResponse, match=r"^hf-daily: .*Invalid date"):
        parse_daily_papers(b'{"error": "Invalid date"}', source="hf-daily")


def test_a_list_with_an_error_status_is_not_a_day() -> None:
    with pytest.raises(FeedFormatError, match="HTTP 500"):
        parse_daily_papers(fixture("2025-01-21").read_bytes(), status=500)


@pytest.mark.parametrize("path", ALL_DAYS, ids=lambda path: path.stem)
def test_a_truncated_download_is_a_format_error(path: Path) -> None:
    body = path.read_bytes()
    with pytest.raises(FeedFormatError, match="not JSON") as caught:
        parse_daily_papers(body[: len(body) // 2], source="hf")
    assert caught.value.hint


# -- URL helper ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("https://huggingface.co", "https://huggingface.co/api/daily_papers?date=2026-08-21"),
        ("https://huggingface.co/", "https://huggingface.co/api/daily_papers?date=2026-08-21"),
        ("", "https://huggingface.co/api/daily_papers?date=2026-08-21"),
        ("http://127.0.0.1:8080//", "http://127.0.0.1:8080/api/daily_papers?date=2026-08-21"),
    ],
)
def test_daily_papers_url(base: str, expected: str) -> None:
    assert daily_papers_url(base, date(2026, 8, 21)) == expected


def test_daily_papers_url_pads_the_date() -> None:
    assert daily_papers_url("https://huggingface.co", date(2025, 1, 5)).endswith("?date=2025-01-05")
