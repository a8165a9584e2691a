"""Listings repaired, not only reported: after each poll of an arXiv listing, its size is
remembered, and a listing that came short (under a quarter of the same weekday's usual) or
not at all by the deadline (stale) is filled in from the arXiv API.

arXiv's RSS has served 16 of a category's 239 new papers on one morning; a tool that trusts
it loses 200 papers without a word. The repair asks the API for that announcement day's new
papers of the source's categories (`Source.repair_day`), through the polite fetcher and
within `ListingChecks.deadline`, and stores them as any poll does (no duplicates: the store
merges by id). A repair that worked is not repeated; one that failed is tried again after
the late retry. `paperbell status` and /healthz say what was filled in (`bot.pipeline.health`).

arXiv's feed serves only the current day, so a feed day the daemon was down for all of is
asked of the API too ("missed", `missed_days`), a few days back at most.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from bot.core.errors import SourceError, unexpected
from bot.core.merge import ARXIV_API
from bot.core.plurals import plural
from bot.core.redact import redact_shapes
from bot.pipeline.health import (
    CATCH_UP_DAYS,
    ListingChecks,
    is_short,
    listing_size,
    plan_of,
    retry_due,
    usual_size,
)
from bot.sources import Source
from bot.store import Store

log = logging.getLogger("bot.pipeline")

LIVE_DAYS = 7  # a stale listing is repaired when the source had a listing this recently


@dataclass(frozen=True, slots=True)
class Repair:
    """A repair of one source's listing of one day: what the API gave, or why not."""

    source: str
    day: date
    reason: str  # "short", "stale" or "missed"
    papers: int = 0
    new: int = 0  # papers not stored before
    error: str | None = None


def remember_listing(
    source: Source,
    store: Store,
    checks: ListingChecks,
    *,
    day: date | None,
    items: int,
    now: datetime,
) -> None:
    """Remember the size of a calendar source's listing of `day` (a feed day by arXiv's
    calendar; a weekend's or holiday's empty feed is no listing)."""
    if source.follows_arxiv_calendar and day is not None and checks.calendar.day(day).announces:
        store.sources.record_listing(source.name, day, items=items, now=now)


def repair_wanted(
    source: Source, store: Store, checks: ListingChecks, *, now: datetime, fresh: bool = False
) -> tuple[date, str] | None:
    """The day to repair and why ("short", "stale"), or None. Short: the source's newest
    listing is under a quarter of the usual (judged when a poll just brought it, `fresh`,
    and again while a repair of it is due another try); stale: the feed day awaited is
    past its deadline (or over) without a listing. Each day is repaired once (a failed
    repair again after the late retry)."""
    if not (checks.repair and source.follows_arxiv_calendar and source.can_repair):
        return None
    plan = plan_of(
        source, store.sources.state(source.name), checks.calendar, checks.policy, now=now
    )
    day = plan.feed_day
    if (
        day is not None
        and plan.expected
        and (plan.late or plan.missed)
        and _live(store, source, day)
    ):
        listing = store.sources.listing(source.name, day)
        if (listing is None or listing.items == 0) and retry_due(listing, checks, now):
            return day, "stale"
        if listing is not None and listing.items == 0:
            return None  # repaired, or tried lately
    newest = store.sources.newest_listing(source.name)
    if newest is None or newest.items == 0 or not retry_due(newest, checks, now):
        return None
    if not fresh and newest.repair_tried is None:
        return None  # judged when its poll brought it: its size has not changed since
    usual = usual_size(store.sources.listings(source.name, before=newest.day), newest.day.weekday())
    if is_short(listing_size(newest), usual):
        return newest.day, "short"
    return None


def missed_days(
    source: Source, store: Store, checks: ListingChecks, *, now: datetime
) -> list[date]:
    """The feed days before the one awaited that no poll or repair saw (the daemon was
    down), since the source's newest listing and at most `CATCH_UP_DAYS` back, oldest
    first; with those whose repair failed and is due another try. Nothing for a source
    with no listing yet (a new install's past is `paperbell backfill`'s), nor for one
    whose feed is not live (`_live`: a saved copy's old day is no downtime)."""
    if not (checks.repair and source.follows_arxiv_calendar and source.can_repair):
        return []
    awaited = plan_of(
        source, store.sources.state(source.name), checks.calendar, checks.policy, now=now
    ).feed_day
    if awaited is None or not _live(store, source, awaited + timedelta(days=1)):
        return []
    earlier = store.sources.listings(source.name, before=awaited)
    held = next((listing.day for listing in earlier if listing_size(listing) > 0), None)
    if held is None:
        return []
    seen = {listing.day: listing for listing in earlier}
    day = max(held, awaited - timedelta(days=CATCH_UP_DAYS))
    missed = []
    while (day := day + timedelta(days=1)) < awaited:
        if not checks.calendar.day(day).announces:
            continue
        listing = seen.get(day)
        if listing is None or (
            listing.repair_reason == "missed"
            and listing_size(listing) == 0
            and retry_due(listing, checks, now)
        ):
            missed.append(day)
    return missed


def _live(store: Store, source: Source, day: date) -> bool:
    """Whether the source had a listing in the week before `day`: a feed stuck on an old
    day is repaired; one that never had a recent listing (a saved copy, a wrong address)
    is only reported, since the arXiv API's papers would not be what its feed gives."""
    earlier = store.sources.listings(source.name, before=day, limit=5)
    return any(listing_size(e) > 0 and (day - e.day).days <= LIVE_DAYS for e in earlier)


async def repair_listing(
    source: Source,
    store: Store,
    fetcher: Any,
    checks: ListingChecks,
    *,
    day: date,
    reason: str,
    now: datetime,
    until: float | None = None,
) -> Repair:
    """Fill in `source`'s listing of `day` from the arXiv API and record what came (or why
    nothing did), by `until` (the event loop's time; default: `checks.deadline` from now).
    Never raises for the API's failure: the poll it follows stands."""
    error: str | None = None
    papers: list[Any] = []
    # Tried, before asking: whatever fails after the fetch, the next try waits its turn.
    store.sources.record_repair(source.name, day, reason=reason, now=now, error="interrupted")
    try:
        if until is None:
            until = asyncio.get_running_loop().time() + checks.deadline
        async with asyncio.timeout_at(until):
            papers = list(await source.repair_day(fetcher, day, checks.calendar) or ())
    except TimeoutError:
        error = f"the arXiv API did not answer within the repair deadline ({checks.deadline:g}s)"
    except SourceError as exc:
        error = str(exc)
    except Exception as exc:  # a bug reading the API must not fail the poll
        log.exception("source %s: repair of %s failed unexpectedly", source.name, day)
        error = unexpected(exc)
    if error is None and not papers:
        error = "the arXiv API had no papers for the day yet"
    if error is not None:
        error = redact_shapes(error)
        log.error("source %s: could not repair the listing of %s: %s", source.name, day, error)
        store.sources.record_repair(source.name, day, reason=reason, now=now, error=error)
        return Repair(source.name, day, reason, error=error)
    stored = source.tagged(papers)
    counts = store.papers.upsert(stored, now=now, authority=ARXIV_API)
    store.sources.record_repair(
        source.name, day, reason=reason, now=now, papers=len(stored), new=counts.new
    )
    log.warning(
        "source %s: the listing of %s was %s; the arXiv API filled in %s (%d new)",
        source.name,
        day,
        reason,
        plural(len(stored), "paper"),
        counts.new,
    )
    return Repair(source.name, day, reason, papers=len(stored), new=counts.new)
