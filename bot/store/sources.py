"""What the store remembers of each source's polls: the validators for a conditional GET,
each poll's outcome (the scheduler plans the next one from it; `paperbell status` and
/metrics show it), and what a poll left out (items it could not read).

Handed out as plain frozen records (`SourceState`, `LeftOut`), never as table rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from sqlmodel import select

from bot.sources import FetchState
from bot.sources.feedtext import clean_text
from bot.store.database import Repository
from bot.store.tables import SourceLeftOutRow, SourceStateRow, as_record


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

    def states(self) -> list[SourceState]:
        """Every polled source's last poll, by name."""
        with self.database.session() as session:
            rows = session.exec(select(SourceStateRow).order_by(SourceStateRow.name)).all()
            return [as_record(SourceState, row) for row in rows]
