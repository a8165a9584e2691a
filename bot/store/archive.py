"""What each subscriber was sent, read back for the pages that show it: the papers delivered
to them by any channel (their Atom feed) and the digests sent to them (their archive).

Read only: the outbox (bot.store.outbox) writes what is read here. Every query is of one
subscriber's rows (`subscriber_id`), so no page can show another's papers or digests.
Mail the pages and Slack asked for (confirmations, fresh links: the `notice` channel) is
no digest and never shown: the caller names the channels to leave out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, LargeBinary, func
from sqlalchemy import select as select_columns
from sqlmodel import col, select

from bot.core.models import Paper
from bot.store.database import Repository, aware
from bot.store.papers import Papers
from bot.store.tables import DeliveryRow, OutboxMessageRow, OutboxRow

# The start of a sent message kept beside each digest of a list: an email's header block
# (its subject) fits in it many times over.
HEAD_BYTES = 4096


@dataclass(frozen=True, slots=True)
class DeliveredPaper:
    """A paper sent to a subscriber: when it first came (by any channel), and when last
    (a new version of it, or the same one on another channel)."""

    paper: Paper
    first: datetime
    last: datetime


@dataclass(frozen=True, slots=True)
class SentDigest:
    """A digest as sent (an outbox record): `head` is the start of what was sent (an
    email's headers); `message` the whole of it, when asked for one digest."""

    id: int
    digest_id: str
    channel: str
    sent: datetime
    papers: int
    head: bytes = b""
    message: bytes | None = None


class Archive(Repository):
    """The papers and digests sent to each subscriber (`store.archive`)."""

    def delivered(self, subscriber_id: int, *, limit: int = 200) -> list[DeliveredPaper]:
        """The `limit` papers most recently sent to the subscriber, newest first: one per
        paper, however many versions or channels brought it. A paper the store no longer
        holds is left out."""
        # When the channel accepted it; a paper recorded as sent from a digest that failed
        # half-way (a Slack thread cut off) has no sent time of its own: when it was queued.
        when = func.coalesce(OutboxRow.sent_at, DeliveryRow.created_at)
        query = (
            select(DeliveryRow.paper_id, func.min(when), func.max(when))
            .select_from(DeliveryRow)
            .outerjoin(OutboxRow, col(OutboxRow.id) == col(DeliveryRow.outbox_id))
            .where(DeliveryRow.subscriber_id == subscriber_id, DeliveryRow.status == "sent")
            .group_by(col(DeliveryRow.paper_id))
            .order_by(func.max(when).desc(), col(DeliveryRow.paper_id))
            .limit(limit)
        )
        with self.database.session() as session:
            rows = session.exec(query).all()
        papers = Papers(self.database).by_id([paper_id for paper_id, _, _ in rows])
        return [
            DeliveredPaper(papers[paper_id], _moment(first), _moment(last))
            for paper_id, first, last in rows
            if paper_id in papers
        ]

    def digests(
        self,
        subscriber_id: int,
        *,
        leave_out: Sequence[str] = (),
        limit: int = 100,
        offset: int = 0,
    ) -> list[SentDigest]:
        """The digests sent to the subscriber (not on the channels `leave_out`), newest
        first, each with the start of its message (`head`)."""
        head = func.substr(OutboxMessageRow.payload, 1, HEAD_BYTES, type_=LargeBinary)
        query = (
            select_columns(  # sqlmodel's select takes at most four columns
                col(OutboxRow.id),
                col(OutboxRow.digest_id),
                col(OutboxRow.channel),
                col(OutboxRow.sent_at),
                col(OutboxRow.papers),
                head,
            )
            .join(
                OutboxMessageRow,
                col(OutboxMessageRow.outbox_id) == col(OutboxRow.id),
                isouter=True,
            )
            .where(*self._sent(subscriber_id, leave_out))
            .order_by(col(OutboxRow.sent_at).desc(), col(OutboxRow.id).desc())
            .offset(max(offset, 0))
            .limit(limit)
        )
        with self.database.session() as session:
            rows = session.execute(query).all()
        return [
            SentDigest(row_id, digest_id, channel, _moment(sent), papers, bytes(start or b""))
            for row_id, digest_id, channel, sent, papers, start in rows
            if row_id is not None
        ]

    def digest(
        self, subscriber_id: int, digest_id: str, *, leave_out: Sequence[str] = ()
    ) -> tuple[SentDigest, list[Paper]] | None:
        """One digest sent to the subscriber, whole, and the papers it carried (as the store
        holds them now, in the order they were recorded); None if no such digest was sent
        to them. A digest sent again (the same papers after a failure) is its latest send."""
        with self.database.session() as session:
            row = session.exec(
                select(OutboxRow)
                .where(*self._sent(subscriber_id, leave_out), OutboxRow.digest_id == digest_id)
                .order_by(col(OutboxRow.sent_at).desc(), col(OutboxRow.id).desc())
                .limit(1)
            ).first()
            if row is None or row.id is None or row.sent_at is None:
                return None
            payload = session.exec(
                select(OutboxMessageRow.payload).where(OutboxMessageRow.outbox_id == row.id)
            ).first()
            payload = bytes(payload or b"")
            ids = session.exec(
                select(DeliveryRow.paper_id)
                .where(DeliveryRow.outbox_id == row.id, DeliveryRow.status == "sent")
                .order_by(col(DeliveryRow.id))
            ).all()
        found = SentDigest(
            row.id,
            row.digest_id,
            row.channel,
            _moment(row.sent_at),
            row.papers,
            payload[:HEAD_BYTES],
            payload,
        )
        papers = Papers(self.database).by_id(list(ids))
        return found, [papers[i] for i in ids if i in papers]

    @staticmethod
    def _sent(subscriber_id: int, leave_out: Sequence[str]) -> tuple[ColumnElement[bool], ...]:
        """The conditions of a digest sent to the subscriber, not on `leave_out`."""
        return (
            col(OutboxRow.subscriber_id) == subscriber_id,
            col(OutboxRow.status) == "sent",
            col(OutboxRow.sent_at).is_not(None),
            col(OutboxRow.channel).not_in(list(leave_out)),
        )


def _moment(value: datetime | str) -> datetime:
    """A time read back from an aggregate: SQLite may hand it back naive, or as text."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return aware(value)
