"""The arXiv daily listing feed (rss.arxiv.org): one feed is one announcement day.

Owns turning the bytes arXiv publishes (RSS 2.0 or Atom, see the domain notes) into
`Paper`s, and telling apart the outcomes a poll can have: a day's listing, an empty day
(weekend, holiday), arXiv's error feed for a bad category, the dead pre-2024 RSS 1.0
format, and bodies that are not a feed at all (HTML, garbage, a truncated download).

`parse_listing` is pure: bytes in, `ParsedFeed` out, no network, no clock, no files.
`ArxivListingSource.fetch` only hands the URL to the injected `PoliteFetcher`; nothing
here opens a connection. Text is kept as published (TeX and all, entities decoded once);
escaping for HTML is the renderers' job, never this module's.
"""

from __future__ import annotations

import logging
import re
import xml.sax
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from bot.core.calendar import ArxivCalendar, eastern_date
from bot.core.checks import canonical_category
from bot.core.errors import (
    FeedErrorResponse,
    FeedFormatError,
    ObsoleteFeedFormat,
)
from bot.core.merge import ARXIV_LISTING
from bot.core.models import ANNOUNCE_TYPES, ArxivVersionError, Paper, split_arxiv_id
from bot.core.plurals import plural
from bot.sources.arxiv_query import backfill_from_api, category_query, listed_from_api
from bot.sources.base import (
    FetchResult,
    FetchState,
    FetchURL,
    ParsedFeed,
    Source,
    SourceOptions,
    WebURL,
    each_day,
    source_options,
)
from bot.sources.diagnosis import describe_body, status_prefix
from bot.sources.feedtext import (
    ARXIV_DESCRIPTION_RE,
    arxiv_abstract,
    checked,
    clean_text,
    collapse,
    left_out,
    plausible_year,
    read_feed,
    split_authors,
)
from bot.sources.registry import register

if TYPE_CHECKING:
    from bot.sources.http import PoliteFetcher

log = logging.getLogger(__name__)

FEED_BASE = "https://rss.arxiv.org"
EMPTY_REASON = "no announcement in this feed (weekend or arXiv holiday)"
ERROR_TITLE = "Feed error for query"

_RDF_ROOT_RE = re.compile(rb"<rdf:RDF\b")


class ArxivOptions(SourceOptions):
    """The options of an `arxiv` source in the config (`[[sources]]` with `kind = "arxiv"`)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    categories: list[Annotated[str, AfterValidator(canonical_category)]] = Field(min_length=1)
    url: FetchURL | None = None  # override: https://, http:// or file:// (a saved feed)
    format: Literal["rss", "atom"] = "rss"
    # `paperbell backfill` reads past days of these categories from the arXiv API.
    api_url: WebURL = "https://export.arxiv.org/api/query"


@register("arxiv")
class ArxivListingSource(Source):
    """New papers of the day in some arXiv archives or categories, from rss.arxiv.org."""

    follows_arxiv_calendar = True
    authority = ARXIV_LISTING

    Options: ClassVar[type[BaseModel]] = ArxivOptions  # bot.config validates with it

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        checked = source_options(ArxivOptions, name, options, hint="see the arXiv source")
        self.categories: tuple[str, ...] = tuple(checked.categories)
        self.format: str = checked.format
        self._url: str | None = checked.url
        self.api_url: str = checked.api_url
        # A listing read from the web can be filled in from the arXiv API; a saved copy
        # (file://) is what it is.
        self.can_repair = not self.url.startswith("file:")

    @property
    def url(self) -> str:
        """Where the feed is read: the `url` option, else rss.arxiv.org for the categories."""
        if self._url:
            return self._url
        return f"{FEED_BASE}/{self.format}/{'+'.join(self.categories)}"

    async def fetch(self, http: PoliteFetcher, state: FetchState) -> FetchResult:
        """Download the feed through the shared polite fetcher (conditional GET)."""
        return await http.get(self.url, state, source=self.name)

    def backfill_days(self, since: date, until: date) -> list[date] | None:
        """A listing only holds today: a backfill asks the arXiv API, day by day."""
        return each_day(since, until)

    async def backfill_day(self, http: PoliteFetcher, day: date) -> list[Paper]:
        """The papers of the source's categories submitted on `day`, from the arXiv API."""
        return await backfill_from_api(http, day=day, **self._api())

    async def repair_day(
        self, http: PoliteFetcher, day: date, calendar: ArxivCalendar
    ) -> list[Paper]:
        """The new papers of the source's categories that arXiv lists on `day`, from the
        arXiv API: what fills in a listing that came short or not at all."""
        return await listed_from_api(
            http, day=day, calendar=calendar, categories=self.categories, **self._api()
        )

    def _api(self) -> dict[str, Any]:
        """How the arXiv API is asked for this source's categories."""
        return {
            "base_url": self.api_url,
            "query": category_query(self.categories),
            "page_size": 500,
            "source": self.name,
        }

    def parse(self, body: bytes, *, status: int = 200) -> ParsedFeed:
        """Parse a downloaded feed body; see `parse_listing`."""
        return parse_listing(body, source=self.name, url=self.url, status=status)


def parse_listing(body: bytes, *, source: str = "", url: str = "", status: int = 200) -> ParsedFeed:
    """Parse an rss.arxiv.org body (RSS 2.0 or Atom) into the day's papers. Pure."""
    where = url or source or "the arXiv feed"
    if not body.strip():
        raise FeedFormatError(
            f"{where}: {status_prefix(status)}received an empty body, not a feed",
            source=source,
            url=url,
            hint="the download may have been cut off; the next poll will try again",
        )

    doc = read_feed(body, where=where, source=source, url=url)
    version = doc.get("version") or ""
    channel = doc.get("feed") or {}
    title = collapse(channel.get("title", ""))

    if title.startswith(ERROR_TITLE):
        raise _error_feed(title, collapse(channel.get("subtitle", "")), source=source, url=url)
    if not 200 <= status < 300:
        detail = (
            f"the body is a feed ({version}) but not arXiv's error feed"
            if version
            else describe_body(body, doc)
        )
        raise FeedFormatError(
            f"{where}: HTTP {status}: {detail}",
            source=source,
            url=url,
            hint="the service answered with an error; the next poll will try again "
            "(check the source's `url` if this persists)",
        )
    if version in ("rss090", "rss10") or _RDF_ROOT_RE.search(body[:4096]):
        raise ObsoleteFeedFormat(
            f"{where}: this is arXiv's pre-2024 RSS 1.0/RDF feed format, which arXiv no "
            "longer publishes",
            source=source,
            url=url,
            hint="read the feed from https://rss.arxiv.org/rss/<categories> "
            "(remove the source's `url` to use the default)",
        )
    if not version:
        raise FeedFormatError(
            f"{where}: {describe_body(body, doc)}",
            source=source,
            url=url,
            hint="check the source's `url`; the service may be down (the next poll will try again)",
        )
    if doc.get("bozo"):
        problem = doc.get("bozo_exception")
        if isinstance(problem, xml.sax.SAXException):
            # feedparser's loose fallback still yields the items it got: never take a
            # partial listing for the day's announcement.
            raise FeedFormatError(
                f"{where}: the feed is not well-formed XML: {problem}; the download may be "
                "truncated",
                source=source,
                url=url,
                hint="the next poll will download it again",
            )
        log.warning("%s: feed parsed with a warning: %s", where, problem)

    announced = _feed_date(channel, doc.get("entries") or ())
    entries = doc.get("entries") or []
    papers: list[Paper] = []
    problems: list[str] = []
    for index, entry in enumerate(entries, start=1):
        try:  # one bad item never stops the others
            paper = _paper(entry, announced=announced, source=source)
            why = "no arXiv identifier in its guid, description or link"
            if paper is not None:
                papers.append(checked(paper, where=where))
                continue
        except Exception as exc:  # any failure of one item: it is left out
            why = left_out(exc)
        label = clean_text(collapse(str(entry.get("id") or entry.get("title") or "")))[:80]
        problem = f"item {index}{f' ({label})' if label else ''}: {why}"
        log.warning("%s: skipped %s", where, problem)
        problems.append(problem)

    if entries and not papers:
        raise FeedFormatError(
            f"{where}: none of the {plural(len(entries), 'item')} could be read as a paper "
            f"({'; '.join(problems[:3])})",
            source=source,
            url=url,
            hint="this does not look like an rss.arxiv.org feed; check the source's `url`",
        )
    return ParsedFeed(
        papers=tuple(papers),
        announced=announced,
        title=title,
        empty_reason=None if entries else EMPTY_REASON,
        counts=_counts(papers),
        problems=tuple(problems),
    )


def _paper(entry: Mapping[str, Any], *, announced: date | None, source: str) -> Paper | None:
    """One feed item as a `Paper`, or None when it carries no arXiv id."""
    description = entry.get("summary") or ""
    described = ARXIV_DESCRIPTION_RE.match(description)
    candidates = [entry.get("id") or "", described.group("id") if described else "", _link(entry)]
    paper_id: str | None = None
    version: int | None = None
    for text in candidates:
        if not text:
            continue
        try:
            found_id, found_version = split_arxiv_id(text)
        except ArxivVersionError:
            raise  # the item is left out: its version is absurd
        except ValueError:
            continue
        if paper_id is None:
            paper_id = found_id
        if found_id == paper_id and found_version is not None:
            version = found_version
            break
    if paper_id is None:
        return None
    if version is None:
        log.warning("%s: no version for %s; assuming v1", source or "arxiv", paper_id)
        version = 1

    announce_type = collapse(entry.get("arxiv_announce_type", ""))
    if not announce_type and described:
        announce_type = described.group("type")

    categories: list[str] = []
    for tag in entry.get("tags") or ():
        term = (tag.get("term") or "").strip()
        if term and term not in categories:
            categories.append(term)

    dois: list[str] = []
    for doi in (entry.get("arxiv_doi") or "").split():
        if doi not in dois:  # arXiv sometimes repeats the same DOI
            dois.append(doi)

    return Paper(
        id=paper_id,
        version=version,
        title=collapse(entry.get("title", "")),
        abstract=arxiv_abstract(description),
        authors=split_authors(entry.get("author") or ""),
        categories=tuple(categories),
        announce_type=announce_type or "new",
        announced=announced,
        dois=tuple(dois),
        journal_ref=collapse(entry.get("arxiv_journal_reference", "")) or None,
        license=collapse(entry.get("rights", "")) or None,
        source=source,
    )


def _link(entry: Mapping[str, Any]) -> str:
    return entry.get("link") or ""


def _eastern_date(parsed: Any) -> date | None:
    """A feedparser UTC time tuple as the US Eastern calendar date (arXiv's day)."""
    if not parsed:
        return None
    try:
        year, month, day, hour, minute, second = (int(part) for part in parsed[:6])
        if not plausible_year(year):  # year 1 overflows the conversion to US Eastern
            return None
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except (TypeError, ValueError, OverflowError):
        return None
    return eastern_date(moment)


def _feed_date(channel: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]) -> date | None:
    """The announcement day: channel pubDate, else the items' date, else Atom `updated`."""
    found = _eastern_date(channel.get("published_parsed"))
    if found:
        return found
    days = Counter(
        day for entry in entries if (day := _eastern_date(entry.get("published_parsed")))
    )
    if days:
        return days.most_common(1)[0][0]
    # As stored (feedparser's own lookup maps a missing one to `published_parsed`, warning).
    updated = dict.get(channel, "updated_parsed") if isinstance(channel, dict) else None
    return _eastern_date(updated)


def _counts(papers: Sequence[Paper]) -> dict[str, int]:
    counted = Counter(paper.announce_type for paper in papers)
    ordered = {kind: counted[kind] for kind in ANNOUNCE_TYPES if counted[kind]}
    ordered.update({kind: n for kind, n in counted.items() if kind not in ordered})
    return ordered


def _error_feed(title: str, explanation: str, *, source: str, url: str) -> FeedErrorResponse:
    """arXiv's `Feed error for query: <url>` channel as an actionable error."""
    query_url = title[len(ERROR_TITLE) :].lstrip(": ").strip()
    query = query_url.rstrip("/").rsplit("/", 1)[-1] if query_url else ""
    named = f" {query!r}" if query else ""
    why = explanation or "no explanation given"
    return FeedErrorResponse(
        f"arXiv rejected the feed query{named}: {why}",
        source=source,
        url=url or query_url,
        hint=f"check the `categories` of the source{f' {source!r}' if source else ''} "
        "(archive or category names such as 'astro-ph' or 'cs.LG'; see "
        "https://arxiv.org/category_taxonomy)",
    )
