"""What each subscriber's rules matched among the papers of some recent days (the manage
page's "recent matches"): counted when digests are built, at most once a day each, so that
the page only reads. Handed out as `RuleCount` records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import func
from sqlmodel import col, select

from bot.store.database import Repository, aware
from bot.store.tables import RuleCountRow, dump_list, load_list


@dataclass(frozen=True, slots=True)
class RuleCount:
    """A stored count of one rule (`RuleCountRow`), with its example papers' ids."""

    rule: str
    matched: int
    papers: int
    first: date | None
    last: date | None
    examples: tuple[str, ...]
    counted_at: datetime


class RuleCounts(Repository):
    """The stored rule counts (`store.rule_counts`)."""

    def save(self, subscriber_id: int, counts: Sequence[RuleCount]) -> None:
        """Replace the subscriber's stored rule counts with `counts`."""
        with self.database.session() as session:
            query = select(RuleCountRow).where(RuleCountRow.subscriber_id == subscriber_id)
            for row in session.exec(query):
                session.delete(row)
            for count in counts:
                session.add(
                    RuleCountRow(
                        subscriber_id=subscriber_id,
                        rule=count.rule,
                        matched=count.matched,
                        papers=count.papers,
                        first=count.first,
                        last=count.last,
                        examples=dump_list(count.examples),
                        counted_at=count.counted_at,
                    )
                )
            session.commit()

    def get(self, subscriber_id: int) -> dict[str, RuleCount]:
        """The subscriber's stored rule counts, by rule text."""
        with self.database.session() as session:
            query = select(RuleCountRow).where(RuleCountRow.subscriber_id == subscriber_id)
            return {row.rule: _count_from_row(row) for row in session.exec(query)}

    def times(self) -> dict[int, datetime]:
        """subscriber id -> when their rules were last counted."""
        with self.database.session() as session:
            rows = session.exec(
                select(RuleCountRow.subscriber_id, func.max(RuleCountRow.counted_at)).group_by(
                    col(RuleCountRow.subscriber_id)
                )
            ).all()
            return {sid: aware(at) for sid, at in rows if at is not None}


def _count_from_row(row: RuleCountRow) -> RuleCount:
    return RuleCount(
        rule=row.rule,
        matched=row.matched,
        papers=row.papers,
        first=row.first,
        last=row.last,
        examples=load_list(row.examples),
        counted_at=aware(row.counted_at),
    )
