"""Hugging Face Daily Papers (`huggingface.co/api/daily_papers?date=YYYY-MM-DD`).

Owns turning the JSON array the API returns for one day into `Paper`s enriched with what
Hugging Face adds (upvotes, the paper's rank by upvotes that day, comments, AI keywords and
summary, code repository and stars, submitting organisation), and telling apart the
outcomes a request can have: a day's papers, a day with none (an empty array), the API's
own error answer (`{"error": "..."}`: a bad date, a rate limit), and bodies that are not
JSON at all (an HTML error page, a truncated download).

The item schema changed over the years (see tests/fixtures/SOURCES.md): fields were
added (`ai_keywords` 2025-03, `githubStars` 2025-07, `organization` 2025-10), the title
lives in `paper.title` and at the top level, and the day's date moved from the top-level
`publishedAt` to `paper.submittedOnDailyAt`. The parser reads every era, ignores fields it
does not know, and treats a field of the wrong type as missing. An item that cannot become
a paper (no id, an id that is not arXiv's, no title) is left out and described in
`ParsedFeed.problems`; the others are still papers, and so is an item whose reading
raises (a date or version out of range: see bot.sources.feedtext). An item nested deeper
than Python's JSON decoder goes is left out too: the array is then read item by item (the
end of the deep one found by counting brackets, without recursion); a body that is not a
well-formed array that way is a FeedFormatError.

Pure: `parse_daily_papers` and `daily_papers_url` do no I/O, read no clock, open no
network. Text is kept as published (whitespace collapsed: titles carry hard line breaks);
escaping for HTML is the renderers' job.

`HuggingFaceSource` (`kind = "huggingface"`) does the I/O: one request per day through the
shared polite fetcher, the last `days` weekdays on each poll (the day's list grows and its
upvotes change), any past day for `paperbell backfill`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from bot.core.errors import FeedErrorResponse, FeedFormatError, SourceError
from bot.core.merge import HUGGINGFACE
from bot.core.models import MAX_VERSION, ArxivVersionError, Paper, split_arxiv_id
from bot.core.plurals import plural
from bot.sources.base import (
    FetchState,
    FetchURL,
    Harvest,
    ParsedFeed,
    Source,
    SourceOptions,
    each_day,
    interval,
    source_options,
)
from bot.sources.diagnosis import HTML_RE, html_gist, status_prefix
from bot.sources.feedtext import checked, clean_text, collapse, left_out, plausible_year, web_url
from bot.sources.jsonitems import TooDeep, items_one_by_one, json_int
from bot.sources.registry import register

if TYPE_CHECKING:
    from bot.sources.http import PoliteFetcher

log = logging.getLogger(__name__)

KIND = "huggingface"
HF_BASE = "https://huggingface.co"
EMPTY_REASON = "no Hugging Face daily papers for that day"
_RATE_LIMIT_WORDS = ("rate limit", "rate-limit", "too many requests", "429")


def daily_papers_url(base_url: str, day: date) -> str:
    """`{base}/api/daily_papers?date=YYYY-MM-DD`; an empty base means huggingface.co."""
    base = (base_url or HF_BASE).strip().rstrip("/")
    return f"{base}/api/daily_papers?date={day.isoformat()}"


def parse_daily_papers(
    body: bytes,
    *,
    day: date | None = None,
    source: str = KIND,
    url: str = "",
    status: int = 200,
) -> ParsedFeed:
    """Parse one day of `/api/daily_papers` into papers. Pure.

    `day` is the day that was asked for: every paper is `announced` on it (and `hf_day`).
    Without it, each paper gets the UTC date of its `submittedOnDailyAt` (else
    `publishedAt`), and the feed the most common of those. `hf_rank` is the paper's rank by
    upvotes among the papers read from this body (1 = most; ties keep the API's order).
    Raises FeedErrorResponse for the API's `{"error": ...}` answer and FeedFormatError for a
    body that is not a JSON array of items (or whose items are all unreadable).
    """
    where = url or source or "Hugging Face daily papers"
    http = status_prefix(status)
    data = _load_json(body, where=where, http=http, source=source, url=url)

    if isinstance(data, Mapping):
        message = _error_message(data)
        if message is not None:
            raise _error_answer(message, where=where, http=http, source=source, url=url)
        keys = ", ".join(sorted(str(key) for key in data)[:8]) or "none"
        raise FeedFormatError(
            f"{where}: {http}received a JSON object (keys: {keys}), not the list of daily papers",
            source=source,
            url=url,
            hint="check the source's `url`: it should be .../api/daily_papers?date=YYYY-MM-DD",
        )
    if not isinstance(data, list):
        raise FeedFormatError(
            f"{where}: {http}received JSON {type(data).__name__}, not the list of daily papers",
            source=source,
            url=url,
            hint="check the source's `url`: it should be .../api/daily_papers?date=YYYY-MM-DD",
        )
    if http:
        # A list is what a successful answer holds; a non-2xx status with one is odd enough
        # that it should not pass for the day's papers.
        raise FeedFormatError(
            f"{where}: {http}the body is a list of papers, but the status is an error",
            source=source,
            url=url,
            hint="the service answered with an error; the next poll will try again",
        )

    papers: list[Paper] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(data, start=1):
        try:  # one bad item never stops the others
            paper, problem = _paper(item, day=day, source=source)
            if paper is not None:
                paper = checked(paper, where=where)
        except Exception as exc:  # any failure of one item: it is left out
            paper, problem = None, left_out(exc)
            label = _item_label(item)
            problem = f"{label}: {problem}" if label else problem
        if paper is None:
            problems.append(f"item {index}: {problem}")
            continue
        if paper.id in seen:
            problems.append(f"item {index}: {paper.id} again (first as item {seen[paper.id]})")
            continue
        seen[paper.id] = index
        papers.append(paper)

    if data and not papers:
        shown = "; ".join(problems[:3])
        raise FeedFormatError(
            f"{where}: none of the {plural(len(data), 'item')} could be read as a paper ({shown})",
            source=source,
            url=url,
            hint="the Hugging Face API may have changed its format; check the source's `url`",
        )
    for problem in problems:
        log.warning("%s: skipped %s", where, problem)

    papers = _ranked(papers)
    announced = day or _most_common_day(papers)
    title = "Hugging Face Daily Papers" + (f" for {announced.isoformat()}" if announced else "")
    return ParsedFeed(
        papers=tuple(papers),
        announced=announced,
        title=title,
        empty_reason=None if data else EMPTY_REASON,
        counts={"new": len(papers)} if papers else {},
        problems=tuple(problems),
    )


def _load_json(body: bytes, *, where: str, http: str, source: str, url: str) -> Any:
    if not body.strip():
        raise FeedFormatError(
            f"{where}: {http}received an empty body, not the daily papers JSON",
            source=source,
            url=url,
            hint=(
                "the download may have been cut off; the next poll will try again"
                if not http
                else "check the source's `url`: the server answered with an error"
            ),
        )
    try:
        return json.loads(body, parse_int=json_int)
    except RecursionError:
        pass  # an item nested too deep: the others are read one by one below
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        head = body[:8192].lstrip(b"\xef\xbb\xbf \t\r\n")
        if HTML_RE.search(head):
            what = f"received HTML, not JSON{html_gist(body)}"
        else:
            what = f"the body is not JSON ({exc}); the download may be truncated"
        raise FeedFormatError(
            f"{where}: {http}{what}",
            source=source,
            url=url,
            hint="the service may be down or the `url` wrong; the next poll will try again",
        ) from None
    try:
        return items_one_by_one(body.decode(json.detect_encoding(body), "surrogatepass"))
    except (ValueError, RecursionError):
        raise FeedFormatError(
            f"{where}: {http}the JSON is nested too deeply to read, and is not an array of "
            "items that could be read one by one",
            source=source,
            url=url,
            hint="this is not what Hugging Face sends; check the source's `url`",
        ) from None


def _error_message(data: Mapping[str, Any]) -> str | None:
    """The message of the API's error answer (`{"error": "..."}`), or None."""
    error = data.get("error")
    if error is None:
        return None
    if isinstance(error, Mapping):
        error = error.get("message") or json.dumps(error)
    return collapse(str(error)) or "no message given"


def _error_answer(
    message: str, *, where: str, http: str, source: str, url: str
) -> FeedErrorResponse:
    lowered = f"{http}{message}".lower()
    if any(word in lowered for word in _RATE_LIMIT_WORDS):
        hint = (
            "Hugging Face rate-limits anonymous calls per IP address: poll less often; "
            "the next poll will try again"
        )
    else:
        hint = "check the day asked for (YYYY-MM-DD) and the source's `url`"
    return FeedErrorResponse(
        f"{where}: {http}Hugging Face answered with an error: {message}",
        source=source,
        url=url,
        hint=hint,
    )


def _paper(item: Any, *, day: date | None, source: str) -> tuple[Paper | None, str]:
    """One item as a `Paper`, or None and why it cannot be one."""
    if isinstance(item, TooDeep):
        return None, "nested too deeply to read"
    if not isinstance(item, Mapping):
        return None, f"not an object but {type(item).__name__}"
    inner = item.get("paper")
    paper: Mapping[str, Any] = inner if isinstance(inner, Mapping) else {}

    raw_id = paper.get("id")
    if not isinstance(raw_id, str) or not raw_id.strip():
        return None, "no paper id"
    arxiv_id = _arxiv_id(raw_id)
    if arxiv_id is None:
        return None, f"paper id {raw_id.strip()[:60]!r} is not an arXiv identifier"

    title = _text(paper.get("title"))
    if not title:
        title = _text(item.get("title"))
    if not title:
        return None, f"{arxiv_id}: no title"

    when = _utc_date(paper.get("submittedOnDailyAt"))
    when = when or _utc_date(item.get("submittedOnDailyAt"))
    when = when or _utc_date(item.get("publishedAt")) or _utc_date(paper.get("publishedAt"))
    announced = day or when

    github = _url(paper.get("githubRepo")) or _url(item.get("githubRepo"))
    return (
        Paper(
            id=arxiv_id,
            version=1,  # the API gives none
            title=title,
            abstract=_text(paper.get("summary")) or _text(item.get("summary")),
            authors=_authors(paper.get("authors")),
            categories=(),
            announce_type="new",
            announced=announced,
            source=source,
            sources=_sources(source, KIND),
            upvotes=_count(paper.get("upvotes")) or 0,
            hf_day=announced,
            comments=_count(item.get("numComments")),
            keywords=_keywords(paper.get("ai_keywords")),
            ai_summary=_text(paper.get("ai_summary")) or None,
            github=github,
            github_stars=_count(paper.get("githubStars")),
            organization=_organization(item.get("organization"))
            or _organization(paper.get("organization")),
        ),
        "",
    )


def _item_label(item: Any) -> str:
    """The item's paper id, for a problem's description ("" when it has none)."""
    try:
        inner = item.get("paper") if isinstance(item, Mapping) else None
        raw = inner.get("id") if isinstance(inner, Mapping) else None
    except Exception:  # an item odd enough to fail here is described without its id
        return ""
    return clean_text(collapse(raw))[:60] if isinstance(raw, str) else ""


def _arxiv_id(text: str) -> str | None:
    """The version-less arXiv id if `text` is exactly one (with or without a version)."""
    text = text.strip()
    try:
        found, version = split_arxiv_id(text)
    except ArxivVersionError:
        raise  # the item is left out: its version is absurd
    except ValueError:
        return None
    exact = found if version is None else f"{found}v{version}"
    return found if text == exact else None


def _text(value: Any) -> str:
    """A string field, whitespace collapsed; a number is its text (a title can be `0`);
    anything else is missing."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, int | float):
        return str(value)
    return collapse(value) if isinstance(value, str) else ""


def _count(value: Any) -> int | None:
    """A non-negative count (an int, or a string of digits); anything else is missing."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= MAX_VERSION else None
    if isinstance(value, float) and value.is_integer() and 0 <= value <= MAX_VERSION:
        return int(value)
    text = value.strip() if isinstance(value, str) else ""
    if text.isascii() and text.isdigit() and len(text) <= 10 and int(text) <= MAX_VERSION:
        return int(text)
    return None


def _url(value: Any) -> str | None:
    url = web_url(value)
    if value and url is None:
        log.warning("dropped the link %r: not an http(s) URL", str(value)[:80])
    return url


def _authors(value: Any) -> tuple[str, ...]:
    """Names from `[{name, hidden, ...}]`; entries without a name are skipped. `hidden`
    authors are kept: the flag is about their Hugging Face profile, not the paper."""
    if not isinstance(value, Sequence) or isinstance(value, str):
        return ()
    names: list[str] = []
    for author in value:
        if isinstance(author, Mapping):
            name = _text(author.get("name"))
        else:
            name = _text(author) if isinstance(author, str) else ""
        if name:
            names.append(name)
    return tuple(names)


def _keywords(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, Sequence):
        return ()
    found: list[str] = []
    for keyword in value:
        text = _text(keyword) if isinstance(keyword, str) else ""
        if text and text not in found:
            found.append(text)
    return tuple(found)


def _organization(value: Any) -> str | None:
    if isinstance(value, Mapping):
        return _text(value.get("fullname")) or _text(value.get("name")) or None
    if isinstance(value, str):
        return _text(value) or None
    return None


def _utc_date(value: Any) -> date | None:
    """The UTC calendar date of an ISO 8601 time (`2024-05-27T02:34:15.000Z`)."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if not plausible_year(moment.year):  # year 1 overflows the conversion to UTC
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).date()


def _sources(*names: str) -> tuple[str, ...]:
    found: list[str] = []
    for name in names:
        lowered = name.strip().lower()
        if lowered and lowered not in found:
            found.append(lowered)
    return tuple(found)


def _ranked(papers: Sequence[Paper]) -> list[Paper]:
    """The papers in the API's order, each with its rank by upvotes (1 = most; ties keep
    the API's order)."""
    order = sorted(range(len(papers)), key=lambda i: -(papers[i].upvotes or 0))
    rank = {index: position for position, index in enumerate(order, start=1)}
    return [replace(paper, hf_rank=rank[index]) for index, paper in enumerate(papers)]


def _most_common_day(papers: Sequence[Paper]) -> date | None:
    days = Counter(paper.hf_day for paper in papers if paper.hf_day)
    return days.most_common(1)[0][0] if days else None


# ---------------------------------------------------------------------------------------------
# The source: `kind = "huggingface"`


class HuggingFaceOptions(SourceOptions):
    """The options of a `huggingface` source."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    url: FetchURL = HF_BASE  # https://, http:// (a local stand-in), file:// (a saved day)
    days: int = Field(2, ge=1, le=14)  # each poll reads the last `days` weekdays
    interval_minutes: float | None = Field(60, gt=0, le=1440)


@register(KIND)
class HuggingFaceSource(Source):
    """Hugging Face Daily Papers: each poll reads the last `days` weekdays again, because
    papers are added through the day and upvotes keep growing; a paper already stored only
    gets its new upvotes (bot.core.merge), and is never delivered twice."""

    authority = HUGGINGFACE
    Options: ClassVar[type[BaseModel]] = HuggingFaceOptions

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        checked = source_options(
            HuggingFaceOptions, name, options, hint="see the huggingface source"
        )
        self.url: str = checked.url
        self.days: int = checked.days
        self.interval = interval(checked.interval_minutes)

    def day_url(self, day: date) -> str:
        """Where one day is read: the API, or a folder of saved days (`file://…/` +
        `YYYY-MM-DD.json`)."""
        if self.url.startswith("file://"):
            return f"{self.url.rstrip('/')}/{day}.json"
        return daily_papers_url(self.url, day)

    @property
    def saved_day(self) -> bool:
        """Whether `url` is one saved day (a `file://….json`): read as the day it says."""
        return self.url.startswith("file://") and self.url.endswith(".json")

    async def fetch_day(self, http: PoliteFetcher, day: date | None) -> ParsedFeed:
        url = self.url if day is None else self.day_url(day)
        fetched = await http.get(url, FetchState(), source=self.name)
        # In a thread: a large body parses for a while, and the web app keeps answering.
        return await asyncio.to_thread(
            parse_daily_papers,
            fetched.body or b"",
            day=day,
            source=self.name,
            url=url,
            status=fetched.status,
        )

    async def harvest(self, http: Any, state: FetchState, *, now: datetime) -> Harvest:
        """The last `days` weekdays (UTC), oldest first; Hugging Face has no weekend issue.
        A saved day is read once, dated by its papers. A day that fails is a problem (named
        first, so `status` shows it) and the other days are kept; if every day fails, the
        first failure is raised."""
        today = now.astimezone(UTC).date()
        wanted: list[date | None] = [None]
        if not self.saved_day:
            wanted = list(_last_weekdays(today, self.days))
        papers: list[Paper] = []
        failed: list[SourceError] = []
        problems: list[str] = []
        latest = None
        for day in wanted:
            try:
                parsed = await self.fetch_day(http, day)
            except SourceError as exc:
                failed.append(exc)
                problems.insert(len(failed) - 1, f"{day or self.url}: {exc.message}")
                continue
            papers += parsed.papers
            problems += [f"{day or self.url}: {problem}" for problem in parsed.problems]
            if parsed.papers:
                latest = day or parsed.announced
        if len(failed) == len(wanted):
            raise failed[0]
        return Harvest(
            tuple(papers),
            announced=latest,
            empty_reason=None if papers else EMPTY_REASON,
            problems=tuple(problems),
        )

    def backfill_days(self, since: date, until: date) -> list[date] | None:
        return _weekdays(since, until)

    async def backfill_day(self, http: Any, day: date) -> list[Paper]:
        return list((await self.fetch_day(http, day)).papers)


def _last_weekdays(today: date, count: int) -> list[date]:
    """The last `count` days up to `today` that have a Hugging Face issue, oldest first: on
    a Saturday or Sunday the last one is Friday (whose list still grows)."""
    # `count` weekdays lie within `count` + 2 days per started week before today.
    first = today - timedelta(days=count - 1 + 2 * ((count + 6) // 5))
    return _weekdays(first, today)[-count:]


def _weekdays(first: date, last: date) -> list[date]:
    """The days from `first` to `last` that have a Hugging Face issue (not weekends)."""
    return [day for day in each_day(first, last) if day.weekday() < 5]
