"""Fill the store with a past period's papers: `paperbell backfill --since DATE`.

Wiring, like `bot.pipeline`: each source that can look back (`Source.backfill_days`: the
arXiv listing and query sources through the arXiv API, Hugging Face by date) names the
parts of the period it fetches, one day each; every part is fetched through the shared
polite fetcher (so arXiv gets one request every 3 seconds), stored, and then recorded as
done. An interrupted backfill run again skips the parts already done and goes on; a part
that failed is not recorded, so the next run fetches it again (one that stopped half-way,
IncompleteResults, keeps the papers it read).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from bot.core.errors import IncompleteResults, SourceError, unexpected
from bot.core.models import Paper
from bot.sources import Source
from bot.store import Store

log = logging.getLogger(__name__)


@dataclass
class BackfillReport:
    """One source's backfill: its parts (days), how many were already done, what came."""

    source: str
    parts: int = 0
    done_before: int = 0
    done: int = 0
    papers: int = 0
    new: int = 0
    errors: list[str] = field(default_factory=list)


def plan(sources: Sequence[Source], since: date, until: date) -> list[tuple[Source, list[str]]]:
    """The sources that can look back, each with the parts of the period it would fetch."""
    planned = []
    for source in sources:
        parts = source.backfill_days(since, until)
        if parts is not None:
            planned.append((source, [day.isoformat() for day in parts]))
    return planned


def days_done(planned: Sequence[tuple[Source, list[str]]], store: Store) -> int:
    """How many of the planned parts earlier runs have done."""
    return sum(len(store.papers.backfilled(source.name) & set(parts)) for source, parts in planned)


async def backfill(
    planned: Sequence[tuple[Source, list[str]]],
    store: Store,
    fetcher: Any,
    *,
    now: Callable[[], datetime],
    advance: Callable[[BackfillReport, str, int], None] = lambda report, part, count: None,
) -> list[BackfillReport]:
    """Fetch and store every part not done yet; `advance(report, part, papers)` after each
    (a progress bar). A failing part is reported and left for the next run."""
    reports = []
    for source, parts in planned:
        done = store.papers.backfilled(source.name)
        report = BackfillReport(source.name, parts=len(parts))
        report.done_before = sum(1 for part in parts if part in done)
        reports.append(report)
        for part in parts:
            if part in done:
                continue
            try:
                papers = await source.backfill_day(fetcher, date.fromisoformat(part))
            except IncompleteResults as exc:  # keep what came; the day is not done
                log.error("backfill %s %s: %s", source.name, part, exc)
                report.errors.append(f"{part}: {exc}")
                kept = source.tagged([p for p in exc.found if isinstance(p, Paper)])
                counts = store.papers.upsert(kept, now=now(), authority=source.authority)
                report.papers += len(kept)
                report.new += counts.new
                advance(report, part, len(kept))
                continue
            except SourceError as exc:
                log.error("backfill %s %s: %s", source.name, part, exc)
                report.errors.append(f"{part}: {exc}")
                advance(report, part, 0)
                continue
            except Exception as exc:  # a bug reading that day must not stop the others
                log.exception("backfill %s %s failed unexpectedly", source.name, part)
                report.errors.append(f"{part}: {unexpected(exc)}")
                advance(report, part, 0)
                continue
            stored = source.tagged(papers)
            counts = store.papers.upsert(stored, now=now(), authority=source.authority)
            store.papers.mark_backfilled(source.name, part, papers=len(stored), now=now())
            report.done += 1
            report.papers += len(stored)
            report.new += counts.new
            advance(report, part, len(stored))
    return reports
