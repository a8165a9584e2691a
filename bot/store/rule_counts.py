"""What each subscriber's rules matched among the papers of some recent days (the manage
page's "recent matches"): counted when digests are built, at most once a day each, so that
the page only reads. Handed out as `RuleCount` records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import bindparam, delete, func, insert
from sqlmodel import col, select

from bot.store.database import Repository, aware, failing_as
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
        self.save_many({subscriber_id: counts})

    def save_many(self, counts: Mapping[int, Sequence[RuleCount]]) -> None:
        """Replace each subscriber's stored rule counts (subscriber id -> counts), all in one
        transaction: a statement by id for the removal, one executemany for the rows."""
        if not counts:
            return
        table = RuleCountRow.__table__  # type: ignore[attr-defined]
        rows = [
            {
                "subscriber_id": subscriber_id,
                "rule": count.rule,
                "matched": count.matched,
                "papers": count.papers,
                "first": count.first,
                "last": count.last,
                "examples": dump_list(count.examples),
                "counted_at": count.counted_at,
            }
            for subscriber_id, theirs in counts.items()
            for count in theirs
        ]
        with failing_as("save the rule counts"), self.database.session() as session:
            connection = session.connection()
            removal = delete(table).where(table.c.subscriber_id == bindparam("_id"))
            connection.execute(removal, [{"_id": subscriber_id} for subscriber_id in counts])
            if rows:
                connection.execute(insert(table), rows)
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
