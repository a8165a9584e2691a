"""Polling: every source read once, its papers stored, and what happened said per source.

Owns the sources -> store step: a source's harvest tagged with its name, dated when its
feed gave no date, stored, and the poll recorded for `status` and the scheduler. It
decides neither when to poll (`bot.core.calendar`, the scheduler) nor how a feed is read
(the source); a source's failure is reported, never raised, so the others go on.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import TYPE_CHECKING

from bot.config import Config
from bot.core.calendar import eastern_date
from bot.core.errors import SourceError, unexpected
from bot.core.models import Paper
from bot.core.plurals import plural
from bot.core.redact import redact_shapes
from bot.pipeline.health import ListingChecks
from bot.pipeline.repair import (
    Repair,
    missed_days,
    remember_listing,
    repair_listing,
    repair_wanted,
)
from bot.pipeline.wiring import build_sources, listing_checks
from bot.sources import Source
from bot.store import Store

if TYPE_CHECKING:
    from bot.sources.http import PoliteFetcher

log = logging.getLogger("bot.pipeline")  # the pipeline's log lines, under one name


@dataclass(frozen=True, slots=True)
class PollReport:
    """One source's poll: what was read and stored, or why not."""

    source: str
    url: str
    result: str  # "ok", "not_modified", "empty", "error"
    items: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    merged: int = 0  # stored papers this poll added facts to (upvotes, DOIs)
    announced: date | None = None
    error: str | None = None
    note: str | None = None
    problems: int = 0  # entries left out (each logged with why)
    # What the arXiv API gave: the listing short or stale, feed days missed while down.
    repairs: tuple[Repair, ...] = ()
    new_batch: bool = False  # the papers differ from the last poll's (a new listing)


async def poll(
    config: Config,
    store: Store,
    fetcher: PoliteFetcher,
    *,
    now: datetime,
    only: str | None = None,
) -> list[PollReport]:
    """Fetch every source once, store new papers, and say per source what happened. A
    source that fails (whatever the exception) is reported as an error; the others go on.
    A listing that came short or not at all is repaired from the arXiv API."""
    checks = listing_checks(config)
    reports = []
    for source in build_sources(config):
        if only is not None and source.name != only:
            continue
        reports.append(await poll_source(source, store, fetcher, now=now, checks=checks))
    return reports


async def poll_source(
    source: Source,
    store: Store,
    fetcher: PoliteFetcher,
    *,
    now: datetime,
    checks: ListingChecks | None = None,
) -> PollReport:
    """Poll one source (one request or several), store its papers, say what happened.
    Never raises for the source's own failure (a SourceError, or any bug reading it: that
    one is logged with its traceback): it is recorded for `status` and reported as an error,
    so the other sources and the digests of papers already stored go on. With `checks`, a
    calendar source's listing is measured and, short or stale, repaired, and the feed days
    missed while the daemon was down filled in (`bot.pipeline.repair`)."""
    report = await _poll_guarded(source, store, fetcher, now=now)
    if checks is None or not source.follows_arxiv_calendar:
        return report
    repairs = await check_listing(source, store, fetcher, checks, now=now, report=report)
    return replace(report, repairs=tuple(repairs))


async def check_listing(
    source: Source,
    store: Store,
    fetcher: PoliteFetcher,
    checks: ListingChecks,
    *,
    now: datetime,
    report: PollReport | None = None,
) -> list[Repair]:
    """After a poll (`report`), remember its listing's size; with or without one, repair a
    listing that is short or stale and due a repair (a failed one is tried again later,
    even when no poll is due), then the feed days missed while the daemon was down
    (`missed_days`), all within one `checks.deadline`: the days not reached wait for the
    next check. Never raises: the poll stands, the check waits."""
    repairs: list[Repair] = []
    try:
        # A listing is its day's when its papers are new: a feed rebuilt with today's date
        # around yesterday's papers is no listing of today (it is stale).
        fresh = False
        if report is not None and report.result == "ok" and report.new_batch:
            remember_listing(
                source, store, checks, day=report.announced, items=report.items, now=now
            )
            fresh = True
        loop = asyncio.get_running_loop()
        until = loop.time() + checks.deadline
        wanted = repair_wanted(source, store, checks, now=now, fresh=fresh)
        if wanted is not None:
            day, reason = wanted
            repairs.append(
                await repair_listing(
                    source, store, fetcher, checks, day=day, reason=reason, now=now, until=until
                )
            )
        for day in missed_days(source, store, checks, now=now):
            if loop.time() >= until:
                break
            repairs.append(
                await repair_listing(
                    source, store, fetcher, checks, day=day, reason="missed", now=now, until=until
                )
            )
    except Exception as exc:  # the database is down
        log.error("source %s: could not check the listing: %s", source.name, unexpected(exc))
    return repairs


async def _poll_guarded(
    source: Source, store: Store, fetcher: PoliteFetcher, *, now: datetime
) -> PollReport:
    url = str(getattr(source, "url", ""))
    try:
        return await _poll_source(source, store, fetcher, url=url, now=now)
    except SourceError as exc:
        message = str(exc)
        log.error("source %s: %s", source.name, message)
    except Exception as exc:  # a bug reading this source must not stop the others
        message = unexpected(exc)
        log.exception("source %s: failed unexpectedly: %s", source.name, message)
    message = redact_shapes(message)  # `status` shows it: no password from a source's url
    try:
        store.sources.record_poll(source.name, url=url, now=now, result="error", error=message)
    except Exception as exc:  # the database is down: the poll's outcome is only logged
        log.error("source %s: could not record the failed poll: %s", source.name, exc)
    return PollReport(source.name, url, "error", error=message)


async def _poll_source(
    source: Source, store: Store, fetcher: PoliteFetcher, *, url: str, now: datetime
) -> PollReport:
    state = store.sources.fetch_state(source.name, url)
    harvest = await source.harvest(fetcher, state, now=now)
    if harvest.not_modified:
        store.sources.record_poll(source.name, url=url, now=now, result="not_modified", state=state)
        return PollReport(source.name, url, "not_modified")
    for problem in harvest.problems:
        log.warning("source %s: left out %s", source.name, problem)
    papers = source.tagged(_dated(harvest.papers, now))
    before = store.sources.state(source.name)
    batch = batch_id(papers)
    counts = store.papers.upsert(papers, now=now, authority=source.authority)
    result = "ok" if papers else "empty"
    store.sources.record_poll(
        source.name,
        url=url,
        now=now,
        result=result,
        state=harvest.state,
        items=len(papers),
        new=counts.new,
        updated=counts.updated,
        announced=harvest.announced,
        batch=batch,
        left_out=harvest.problems,
    )
    return PollReport(
        source.name,
        url,
        result,
        items=len(papers),
        new=counts.new,
        updated=counts.updated,
        unchanged=counts.unchanged,
        merged=counts.merged,
        announced=harvest.announced,
        note=harvest.empty_reason,
        problems=len(harvest.problems),
        new_batch=batch is not None and (before is None or before.batch != batch),
    )


def batch_id(papers: Sequence[Paper]) -> str | None:
    """A name for the set of (versioned) ids a feed held; None for an empty feed."""
    if not papers:
        return None
    ids = "\n".join(sorted(p.versioned_id for p in papers))
    return hashlib.sha256(ids.encode()).hexdigest()[:32]


def _dated(papers: Sequence[Paper], now: datetime) -> list[Paper]:
    """Papers whose feed gave no date belong to the day they were polled (US Eastern, arXiv's
    calendar), so they reach the digest window instead of being stored and never sent."""
    today = eastern_date(now)
    undated = sum(1 for p in papers if p.announced is None)
    if undated:
        log.warning("%s without an announcement date; taking %s", plural(undated, "paper"), today)
    return [p if p.announced is not None else replace(p, announced=today) for p in papers]
