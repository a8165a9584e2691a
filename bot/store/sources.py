"""What the store remembers of each source's polls: the validators for a conditional GET,
each poll's outcome (the scheduler plans the next one from it; `paperbell status` and
/metrics show it), and what a poll left out (items it could not read).

Handed out as plain frozen records (`SourceState`, `LeftOut`), never as table rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from sqlmodel import func, select

from bot.sources import FetchState
from bot.sources.feedtext import clean_text
from bot.store.database import Repository
from bot.store.tables import SourceLeftOutRow, SourceListingRow, SourceStateRow, as_record


@dataclass(frozen=True, slots=True)
class SourceState:
    """A source's last poll (a `source_state` row)."""

    name: str
    url: str
    etag: str | None
    last_modified: str | None
    last_poll: datetime | None
    last_result: str  # ok, not_modified, empty, error
    last_error: str | None
    items: int
    new: int
    updated: int
    announced: date | None
    batch: str | None  # the ids the source last gave (a digest of them)
    last_new: datetime | None  # when a poll last brought a different batch (a new listing)
    last_new_day: date | None  # and the date that poll's feed gave
    last_success: datetime | None  # the last poll that did not fail
    failing_since: datetime | None  # the first failure of the current run (None: it works)


@dataclass(frozen=True, slots=True)
class Listing:
    """One announcement day's listing of a calendar source (a `source_listing` row)."""

    source: str
    day: date
    items: int  # papers the listing held
    seen: datetime
    repair_reason: str | None  # "short", "stale" or "missed": why the API was asked
    repair_tried: datetime | None
    repaired: int | None  # papers the API gave for the day (None: not repaired)
    repaired_new: int  # of them, papers the listing lacked
    repair_error: str | None


@dataclass(frozen=True, slots=True)
class LeftOut:
    """What a source's last poll left out (a `source_left_out` row)."""

    name: str
    count: int  # the items it could not read
    first: str | None  # the first of them, with why
    at: datetime | None  # the poll


class Sources(Repository):
    """The sources' polls (`store.sources`)."""

    def fetch_state(self, name: str, url: str | None = None) -> FetchState:
        """The validators of the last successful poll, unless the source's URL changed since
        (the old ETag says nothing about a new feed)."""
        with self.database.session() as session:
            row = session.get(SourceStateRow, name)
            if row is None or (url is not None and row.url != url):
                return FetchState()
            return FetchState(etag=row.etag, last_modified=row.last_modified)

    def record_poll(
        self,
        name: str,
        *,
        url: str,
        now: datetime,
        result: str,
        error: str | None = None,
        state: FetchState | None = None,
        items: int = 0,
        new: int = 0,
        updated: int = 0,
        announced: date | None = None,
        batch: str | None = None,
        left_out: Sequence[str] = (),
    ) -> None:
        """Remember a poll's outcome; the validators only when the body was stored.
        `batch` names the ids the feed held: a different one than last time is a new listing
        (counted per source: another source may already have stored the same papers).
        `left_out` describes the items the poll could not read (kept unless it failed)."""

        with self.database.session() as session:
            row = session.get(SourceStateRow, name) or SourceStateRow(name=name)
            row.url = url
            row.last_poll = now
            row.last_result = result
            row.last_error = clean_text(error) if error is not None else None  # a feed's words
            if result != "error":
                row.items, row.new, row.updated = items, new, updated
                row.last_success, row.failing_since = now, None
            elif row.failing_since is None:
                row.failing_since = now
            if batch is not None and batch != row.batch:
                row.batch, row.last_new, row.last_new_day = batch, now, announced
            if announced is not None:
                row.announced = announced
            if state is not None:
                row.etag, row.last_modified = state.etag, state.last_modified
            session.add(row)
            if result != "error":
                skipped = session.get(SourceLeftOutRow, name) or SourceLeftOutRow(name=name)
                skipped.count, skipped.at = len(left_out), now
                skipped.first = clean_text(left_out[0][:500]) if left_out else None
                session.add(skipped)
            session.commit()

    def left_out(self) -> dict[str, LeftOut]:
        """Per source, what its last poll left out (sources never polled are absent)."""
        with self.database.session() as session:
            rows = session.exec(select(SourceLeftOutRow)).all()
            return {row.name: as_record(LeftOut, row) for row in rows}

    def state(self, name: str) -> SourceState | None:
        """A source's last poll (None: never polled)."""
        with self.database.session() as session:
            row = session.get(SourceStateRow, name)
            return as_record(SourceState, row) if row is not None else None

    def states(self) -> list[SourceState]:
        """Every polled source's last poll, by name."""
        with self.database.session() as session:
            rows = session.exec(select(SourceStateRow).order_by(SourceStateRow.name)).all()
            return [as_record(SourceState, row) for row in rows]

    # -- listings: each announcement day's size, and repairs ------------------------------

    def record_listing(self, name: str, day: date, *, items: int, now: datetime) -> Listing:
        """Remember the size of `name`'s listing of `day` (the largest any poll saw)."""
        with self.database.session() as session:
            row = session.get(SourceListingRow, (name, day))
            if row is None:
                row = SourceListingRow(source=name, day=day, items=items, seen=now)
            row.items = max(row.items, items)
            session.add(row)
            session.commit()
            session.refresh(row)
            return as_record(Listing, row)

    def listing(self, name: str, day: date) -> Listing | None:
        """`name`'s listing of `day`, if a poll brought it (or a repair filled it in)."""
        with self.database.session() as session:
            row = session.get(SourceListingRow, (name, day))
            return as_record(Listing, row) if row is not None else None

    def listings(self, name: str, *, before: date, limit: int = 60) -> list[Listing]:
        """`name`'s latest listings before `day`, newest first."""
        with self.database.session() as session:
            rows = session.exec(
                select(SourceListingRow)
                .where(SourceListingRow.source == name, SourceListingRow.day < before)
                .order_by(SourceListingRow.day.desc())  # type: ignore[attr-defined]
                .limit(limit)
            ).all()
            return [as_record(Listing, row) for row in rows]

    def newest_listing(self, name: str) -> Listing | None:
        """`name`'s newest listing (None: none yet)."""
        with self.database.session() as session:
            row = session.exec(
                select(SourceListingRow)
                .where(SourceListingRow.source == name)
                .order_by(SourceListingRow.day.desc())  # type: ignore[attr-defined]
                .limit(1)
            ).first()
            return as_record(Listing, row) if row is not None else None

    def latest_listings(self) -> dict[str, Listing]:
        """Per source, its newest listing (one row each, however long the history)."""
        newest = (
            select(SourceListingRow.source, func.max(SourceListingRow.day).label("day"))
            .group_by(SourceListingRow.source)  # type: ignore[arg-type]
            .subquery()
        )
        with self.database.session() as session:
            rows = session.exec(
                select(SourceListingRow).join(
                    newest,
                    (SourceListingRow.source == newest.c.source)  # type: ignore[arg-type]
                    & (SourceListingRow.day == newest.c.day),
                )
            ).all()
            return {row.source: as_record(Listing, row) for row in rows}

    def record_repair(
        self,
        name: str,
        day: date,
        *,
        reason: str,
        now: datetime,
        papers: int | None = None,
        new: int = 0,
        error: str | None = None,
    ) -> Listing:
        """Remember a repair of `name`'s listing of `day` from the arXiv API: the papers it
        gave and how many the listing lacked, or why it failed (a stale listing has no row
        yet: it is made with no items)."""
        with self.database.session() as session:
            row = session.get(SourceListingRow, (name, day))
            if row is None:
                row = SourceListingRow(source=name, day=day, items=0, seen=now)
            row.repair_reason, row.repair_tried = reason, now
            row.repair_error = clean_text(error)[:500] if error is not None else None
            if papers is not None:
                row.repaired = papers
                row.repaired_new = new
            session.add(row)
            session.commit()
            session.refresh(row)
            return as_record(Listing, row)
