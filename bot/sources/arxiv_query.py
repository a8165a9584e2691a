"""Asking the arXiv API (`export.arxiv.org/api/query`): requests, paging, and the
`arxiv_query` source kind.

Owns the request side of the API: `api_query_url` and `submitted_range` build requests
(pure); `search` pages through a query's results through the shared polite fetcher (one
request every 3 seconds to arXiv), `page_size` (at most 2000) a request, until the results
end or pass a date; `dated` gives the results the listing days arXiv's schedule gives them;
`backfill_from_api` reads one past day of a query, for this source and for the daily
listing's (`bot.sources.arxiv`), and `listed_from_api` one feed day's new papers (what
repairs a listing that came short).  `ArxivQuerySource` (`kind = "arxiv_query"`) polls a query.

Reading a response is `bot.sources.arxiv_api` (pure). Nothing here opens a connection:
the fetcher is injected, and the clock's `now` is passed in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote, urlencode

from pydantic import BaseModel, ConfigDict, Field

from bot.core.calendar import ArxivCalendar, announcement_day, submission_window
from bot.core.errors import FeedFormatError, IncompleteResults
from bot.core.merge import ARXIV_API
from bot.core.models import Paper
from bot.core.plurals import plural
from bot.sources.arxiv_api import API_BASE, KIND, ApiEntry, parse_api
from bot.sources.base import (
    FetchState,
    Harvest,
    Source,
    SourceOptions,
    WebURL,
    each_day,
    interval,
    source_options,
)
from bot.sources.registry import register

if TYPE_CHECKING:
    from bot.sources.http import PoliteFetcher

MAX_RESULTS = 2000  # arXiv's limit per request
SORT_BY: tuple[str, ...] = ("relevance", "lastUpdatedDate", "submittedDate")
SORT_ORDER: tuple[str, ...] = ("ascending", "descending")


def api_query_url(
    base_url: str,
    *,
    search_query: str,
    start: int,
    max_results: int,
    sort_by: str = "submittedDate",
    sort_order: str = "descending",
) -> str:
    """The URL of one API request (an empty `base_url` means export.arxiv.org).

    Raises ValueError for an empty query, a negative `start`, `max_results` outside
    1..2000, or a sort arXiv does not know.
    """
    if not search_query.strip():
        raise ValueError("search_query is empty")
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"start must be a whole number >= 0, not {start!r}")
    if (
        isinstance(max_results, bool)
        or not isinstance(max_results, int)
        or not 1 <= max_results <= MAX_RESULTS
    ):
        raise ValueError(f"max_results must be 1..{MAX_RESULTS}, not {max_results!r}")
    if sort_by not in SORT_BY:
        raise ValueError(f"sort_by must be one of {', '.join(SORT_BY)}, not {sort_by!r}")
    if sort_order not in SORT_ORDER:
        raise ValueError(f"sort_order must be one of {', '.join(SORT_ORDER)}, not {sort_order!r}")
    query = urlencode(
        {
            "search_query": search_query.strip(),
            "start": start,
            "max_results": max_results,
            "sortBy": sort_by,
            "sortOrder": sort_order,
        },
        quote_via=quote,
        safe=":",
    )
    base = (base_url or API_BASE).strip()
    if "?" in base:
        return f"{base.rstrip('&')}&{query}"
    return f"{base.rstrip('/')}?{query}"


MAX_ID_LIST = 100  # ids asked for in one request by `papers_by_id`


def api_ids_url(base_url: str, ids: Sequence[str]) -> str:
    """The URL of one API request for these papers by id (`id_list`), at most MAX_ID_LIST."""
    if not ids or len(ids) > MAX_ID_LIST:
        raise ValueError(f"ask for 1..{MAX_ID_LIST} ids, not {len(ids)}")
    query = urlencode(
        {"id_list": ",".join(ids), "start": 0, "max_results": len(ids)},
        quote_via=quote,
        safe=",/",
    )
    base = (base_url or API_BASE).strip()
    if "?" in base:
        return f"{base.rstrip('&')}&{query}"
    return f"{base.rstrip('/')}?{query}"


async def papers_by_id(
    http: PoliteFetcher, *, base_url: str, ids: Sequence[str], source: str = KIND
) -> list[Paper]:
    """The papers with these (version-less) ids, from the arXiv API: one request per
    MAX_ID_LIST ids, the fetcher spacing them (3 seconds apart to arXiv). An id arXiv
    does not know is left out. Raises SourceError when a request fails."""
    found: list[Paper] = []
    for start in range(0, len(ids), MAX_ID_LIST):
        url = api_ids_url(base_url, ids[start : start + MAX_ID_LIST])
        fetched = await http.get(url, FetchState(), source=source)
        page = await asyncio.to_thread(
            parse_api, fetched.body or b"", status=fetched.status, source=source, url=url
        )
        found.extend(page.papers)
    return found


def submitted_range(query: str, start: date, end: date) -> str:
    """`(<query>) AND submittedDate:[YYYYMMDD0000 TO YYYYMMDD2359]`: papers submitted from
    `start` to `end`, both included (arXiv reads the times as UTC). A blank query gives the
    range alone. Raises ValueError if `end` is before `start`."""
    if end < start:
        raise ValueError(f"the range ends ({end}) before it starts ({start})")
    dates = f"submittedDate:[{start:%Y%m%d}0000 TO {end:%Y%m%d}2359]"
    query = query.strip()
    return f"({query}) AND {dates}" if query else dates


def submitted_between(query: str, start: datetime, end: datetime) -> str:
    """`(<query>) AND submittedDate:[YYYYMMDDHHMM TO YYYYMMDDHHMM]`: papers submitted from
    `start` to `end`, to the minute, in UTC as arXiv reads them. Both minutes are included:
    a submission in the deadline's last seconds is not lost, and one just after it is
    merged by id and re-dated by the next listing, which knows better."""
    if end <= start:
        raise ValueError(f"the range ends ({end}) before it starts ({start})")
    first, last = start.astimezone(UTC), end.astimezone(UTC)
    dates = f"submittedDate:[{first:%Y%m%d%H%M} TO {last:%Y%m%d%H%M}]"
    query = query.strip()
    return f"({query}) AND {dates}" if query else dates


class ArxivQueryOptions(SourceOptions):
    """The options of an `arxiv_query` source."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    query: str = Field(min_length=1, max_length=1000)  # arXiv's search_query syntax
    url: WebURL = API_BASE  # the API endpoint: https://, or http:// for a local stand-in
    page_size: int = Field(500, ge=1, le=MAX_RESULTS)
    days: int = Field(3, ge=1, le=60)  # a poll looks back this many days of updates
    max_papers: int = Field(2000, ge=1, le=50000)  # a poll stops after this many results
    interval_minutes: float | None = Field(None, gt=0, le=1440)


async def search(
    http: PoliteFetcher,
    *,
    base_url: str,
    query: str,
    page_size: int,
    source: str,
    sort_by: str,
    sort_order: str,
    stop: Callable[[ApiEntry], bool] = lambda entry: False,
    limit: int | None = None,
    max_pages: int | None = None,
    problems: list[str] | None = None,
) -> list[ApiEntry]:
    """Every result of `query`, page by page (`page_size` a request, the fetcher spacing
    the requests), until the results end, `stop(entry)` says an entry is past the range
    wanted (results are sorted), or `limit` results were read or left out. The entries
    left out as unreadable are described in `problems`, when given; a page starts after
    every entry the one before held, read or not.

    Never loops: a page that brings no result not seen already (arXiv's API sometimes
    answers the first page again, whatever `start` asks for), or a page past `max_pages`,
    stops it with IncompleteResults, holding what was read."""
    found: list[ApiEntry] = []
    seen: set[str] = set()
    start = pages = 0
    url = base_url
    while True:
        if max_pages is not None and pages >= max_pages:
            raise IncompleteResults(
                f"more than {plural(max_pages, 'page')} of {page_size} results: stopped "
                f"after {plural(len(found), 'result')}",
                found=tuple(found),
                source=source,
                url=url,
                hint="that is more than one request may take (for a backfill, more than "
                "a day can hold): check the query; the next run asks again",
            )
        pages += 1
        url = api_query_url(
            base_url,
            search_query=query,
            start=start,
            max_results=page_size,
            sort_by=sort_by,
            sort_order=sort_order,
        )
        fetched = await http.get(url, FetchState(), source=source)
        # In a thread: a large page parses for seconds, and the web app keeps answering.
        page = await asyncio.to_thread(
            parse_api, fetched.body or b"", status=fetched.status, source=source, url=url
        )
        if page.unexpectedly_empty:
            raise FeedFormatError(
                f"{url}: the arXiv API returned an empty page although it announced "
                f"{plural(page.total or 0, 'result')}",
                source=source,
                url=url,
                hint="arXiv's API does this now and then under load; the next run asks again",
            )
        if problems is not None:
            problems.extend(page.problems)
        ids = {entry.paper.versioned_id for entry in page.entries}
        if ids and ids <= seen:
            raise IncompleteResults(
                f"{url}: the arXiv API answered with a page it gave already (start={start}): "
                f"stopped after {plural(len(found), 'result')} of the "
                f"{page.total or 0:,} it announced",
                found=tuple(found),
                source=source,
                url=url,
                hint="arXiv's API does this now and then; the next run asks again",
            )
        seen |= ids
        for entry in page.entries:
            if stop(entry):
                return found
            found.append(entry)
            if limit is not None and len(found) >= limit:
                return found
        start += page.sent
        # Entries left out count towards `limit`: a server sending only unreadable ones
        # for ever is still asked a bounded number of times.
        if limit is not None and start >= limit:
            return found
        if not page.sent or (page.total is not None and start >= page.total):
            return found


def dated(entries: Sequence[ApiEntry], calendar: ArxivCalendar) -> list[Paper]:
    """The entries' papers with the listing days arXiv's schedule gives them: this
    version's from when it was submitted, the first announcement from v1's submission."""
    return [
        replace(
            entry.paper,
            announced=announcement_day(calendar, entry.updated),
            first_announced=announcement_day(calendar, entry.published),
            first_type="new",
        )
        for entry in entries
    ]


def category_query(categories: Sequence[str]) -> str:
    """`cat:cs.RO OR cat:cs.LG`; an archive (`cs`) as `cat:cs.*`."""
    return " OR ".join(f"cat:{c}" if "." in c else f"cat:{c}.*" for c in categories)


async def oldest_first(
    http: PoliteFetcher,
    *,
    base_url: str,
    query: str,
    page_size: int,
    source: str,
    limit: int | None = None,
    max_pages: int | None = None,
) -> list[ApiEntry]:
    """Every result of a query over a submission range, oldest first (`search`'s pages)."""
    return await search(
        http,
        base_url=base_url,
        query=query,
        page_size=page_size,
        source=source,
        sort_by="submittedDate",
        sort_order="ascending",
        limit=limit,
        max_pages=max_pages,
    )


# A backfill reads at most this many results for one day (arXiv's largest day is ~2,000
# submissions): a query that finds more is broader than a day, or the API is looping.
BACKFILL_DAY_LIMIT = 10_000


def day_pages(page_size: int) -> int:
    """The most pages a backfill asks for one day: BACKFILL_DAY_LIMIT results, and one more
    page to see the end."""
    return -(-BACKFILL_DAY_LIMIT // page_size) + 1


async def backfill_from_api(
    http: PoliteFetcher, *, base_url: str, query: str, page_size: int, source: str, day: date
) -> list[Paper]:
    """The papers matching `query` that were submitted on `day` (UTC), oldest first, in at
    most `day_pages(page_size)` pages. Stopped (a page repeated, too many pages), it raises
    IncompleteResults with the papers read so far, dated, to keep."""
    calendar = ArxivCalendar.default()
    try:
        entries = await oldest_first(
            http,
            base_url=base_url,
            query=submitted_range(query, day, day),
            page_size=page_size,
            source=source,
            max_pages=day_pages(page_size),
        )
    except IncompleteResults as exc:
        exc.found = tuple(dated(exc.found, calendar))
        raise
    return dated(entries, calendar)


REPAIR_LIMIT = 10_000  # papers one repair reads at most (arXiv's largest day is ~2,000)


async def listed_from_api(
    http: PoliteFetcher,
    *,
    base_url: str,
    query: str,
    page_size: int,
    source: str,
    day: date,
    calendar: ArxivCalendar,
    categories: Sequence[str] = (),
) -> list[Paper]:
    """The new papers matching `query` that arXiv lists on feed day `day`: those submitted
    in that listing's window (`submission_window`), dated `day`: "new" where the primary
    category is one of `categories` (an archive names all of its own), else "cross" as
    the listing would say. What repairs a listing that came short or not at all (the arXiv
    API holds the day when the feed does not)."""
    start, end = submission_window(calendar, day)
    entries = await oldest_first(
        http,
        base_url=base_url,
        query=submitted_between(query, start, end),
        page_size=page_size,
        source=source,
        limit=REPAIR_LIMIT,
    )
    return [
        replace(
            entry.paper,
            announced=day,
            first_announced=day,
            first_type="new" if _within(entry.paper.primary_category, categories) else "cross",
        )
        for entry in entries
    ]


@register(KIND)
class ArxivQuerySource(Source):
    """The papers an arXiv API query finds: updated in the last `days` on each poll, any
    past period with `paperbell backfill`."""

    authority = ARXIV_API
    Options: ClassVar[type[BaseModel]] = ArxivQueryOptions

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        checked = source_options(
            ArxivQueryOptions, name, options, hint="see the arxiv_query source"
        )
        self.query: str = checked.query
        self.url: str = checked.url
        self.page_size: int = checked.page_size
        self.days: int = checked.days
        self.max_papers: int = checked.max_papers
        self.interval = interval(checked.interval_minutes)
        self.calendar = ArxivCalendar.default()

    async def harvest(self, http: Any, state: FetchState, *, now: datetime) -> Harvest:
        """The results updated since `days` ago, newest first, page by page."""
        oldest = now.astimezone(UTC) - timedelta(days=self.days)
        problems: list[str] = []
        entries = await search(
            http,
            base_url=self.url,
            query=self.query,
            page_size=self.page_size,
            source=self.name,
            sort_by="lastUpdatedDate",
            sort_order="descending",
            stop=lambda entry: entry.updated < oldest,
            limit=self.max_papers,
            problems=problems,
        )
        papers = dated(entries, self.calendar)
        return Harvest(
            tuple(papers),
            announced=max((p.announced for p in papers if p.announced), default=None),
            empty_reason=None
            if papers
            else f"{plural(len(problems), 'result')} left out as unreadable"
            if problems
            else f"nothing updated in the last {plural(self.days, 'day')}",
            problems=tuple(problems),
        )

    def backfill_days(self, since: date, until: date) -> list[date] | None:
        return each_day(since, until)

    async def backfill_day(self, http: Any, day: date) -> list[Paper]:
        return await backfill_from_api(
            http,
            base_url=self.url,
            query=self.query,
            page_size=self.page_size,
            source=self.name,
            day=day,
        )


def _within(category: str | None, categories: Sequence[str]) -> bool:
    """Whether `category` is one of `categories` (none given: any), an archive (`cs`)
    naming its own (`cs.LG`)."""
    if not categories:
        return True
    if category is None:
        return False
    return any(category == c or category.startswith(f"{c}.") for c in categories)
