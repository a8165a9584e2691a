"""Bounces: what came back to the bounce address, each message recorded with what it said
and what was done (`store.bounces`), and what a bounce needs to know of the message it
answers (the outbox record, found by its id or its digest id).

Decides nothing: which bounce pauses whom is bot.pipeline.bounces's; this module records,
counts and reads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import ColumnElement, and_, func
from sqlmodel import col, select

from bot.store.database import Repository, aware, failing_as
from bot.store.tables import MAX_DIAGNOSTIC, BounceRow, OutboxRow, SubscriberRow, as_record

KINDS = ("hard", "soft", "complaint", "auto-reply", "unknown")
ACTIONS = (
    "paused",
    "counted",
    "unsubscribed",
    "ignored",
    "unknown",
    "tokenless",
    "forged",
    "unreadable",
)
# What the streak of a subscriber's bounced digests looks back over (their latest records).
STREAK_WINDOW = 200


@dataclass(frozen=True, slots=True)
class SentMessage:
    """The outbox record a bounce answers: whose, on which channel, to which address."""

    id: int
    subscriber_id: int
    subscriber: str
    channel: str
    recipient: str
    digest_id: str
    status: str  # pending, sent, failed
    sent_at: datetime | None


@dataclass(frozen=True, slots=True)
class Bounce:
    """One message received at the bounce address, as recorded."""

    received_at: datetime
    kind: str  # one of KINDS
    action: str  # one of ACTIONS
    outbox_id: int | None = None
    subscriber_id: int | None = None
    status: str | None = None  # "5.1.1"
    diagnostic: str | None = None
    recipient: str | None = None
    source: str | None = None  # where it was read, when that names it ("imap:...")


@dataclass(frozen=True, slots=True)
class BounceDay:
    """One day's (UTC) bounces, for `paperbell status`: how many of each kind came back,
    how many named nothing paperbell sent (unknown, forged, unreadable), how many carried
    no token (`tokenless`: changed nothing, whatever they said), and how many emails were
    sent that day (what the rates are of)."""

    day: date
    hard: int = 0
    soft: int = 0
    complaints: int = 0
    auto_replies: int = 0
    unmatched: int = 0
    sent: int = 0
    tokenless: int = 0

    @property
    def bounces(self) -> int:
        return self.hard + self.soft

    def rate(self, count: int) -> float | None:
        """`count` as a share of the day's emails sent (None: none was)."""
        return count / self.sent if self.sent else None


class Bounces(Repository):
    """Bounces received, and the messages they answer (`store.bounces`)."""

    def message(self, outbox_id: int) -> SentMessage | None:
        """The outbox record `outbox_id` (None: there is none)."""
        return self._message(col(OutboxRow.id) == outbox_id)

    def message_by_digest(self, digest_id: str) -> SentMessage | None:
        """The latest email outbox record of the digest (or notice) `digest_id`."""
        if not digest_id or len(digest_id) > 128:
            return None
        return self._message(col(OutboxRow.digest_id) == digest_id)

    def latest_to(self, recipient: str, *, since: datetime) -> SentMessage | None:
        """The latest email sent (not only queued) to `recipient` (any case) since `since`."""
        if not recipient or len(recipient) > 320:
            return None
        return self._message(
            and_(
                col(OutboxRow.channel) == "email",
                col(OutboxRow.status) == "sent",
                func.lower(col(OutboxRow.recipient)) == recipient.lower(),
                col(OutboxRow.sent_at) >= since,
            )
        )

    def _message(self, where: ColumnElement[bool]) -> SentMessage | None:
        query = (
            select(OutboxRow, SubscriberRow.name)
            .join(SubscriberRow, col(SubscriberRow.id) == col(OutboxRow.subscriber_id))
            .where(where)
            .order_by(col(OutboxRow.id).desc())
            .limit(1)
        )
        with failing_as("read the outbox"), self.database.session() as session:
            found = session.exec(query).first()  # type: ignore[call-overload]
        if found is None:
            return None
        row, name = found
        assert row.id is not None
        return SentMessage(
            id=row.id,
            subscriber_id=row.subscriber_id,
            subscriber=name,
            channel=row.channel,
            recipient=row.recipient,
            digest_id=row.digest_id,
            status=row.status,
            sent_at=aware(row.sent_at) if row.sent_at is not None else None,
        )

    def record(self, bounce: Bounce) -> int:
        """Keep one bounce (its diagnostic cut to MAX_DIAGNOSTIC characters)."""
        if bounce.kind not in KINDS or bounce.action not in ACTIONS:
            raise ValueError(f"not a bounce kind and action: {bounce.kind!r}, {bounce.action!r}")
        row = BounceRow(
            received_at=bounce.received_at,
            outbox_id=bounce.outbox_id,
            subscriber_id=bounce.subscriber_id,
            kind=bounce.kind,
            status=(bounce.status or None) and bounce.status[:16],
            diagnostic=(bounce.diagnostic or None) and bounce.diagnostic[:MAX_DIAGNOSTIC],
            recipient=(bounce.recipient or None) and bounce.recipient[:320],
            action=bounce.action,
            source=(bounce.source or None) and bounce.source[:256],
        )
        with failing_as("record the bounce"), self.database.session() as session:
            session.add(row)
            session.commit()
            assert row.id is not None
            return row.id

    def read_before(self, source: str) -> Bounce | None:
        """The bounce recorded from `source` ("imap:..."), if it was read before."""
        query = select(BounceRow).where(BounceRow.source == source[:256])
        with failing_as("read the bounces"), self.database.session() as session:
            row = session.exec(query).first()
            return _bounce(row) if row is not None else None

    def streak(self, message: SentMessage) -> int:
        """How many of the subscriber's messages on `message`'s channel to its address in
        a row bounced (hard or soft), the run that holds `message` (counted as bounced):
        one that went through in between breaks it; those to an address they had before
        count for nothing. A message whose bounce paused them ends a run: once resumed,
        the count starts again."""
        records = (
            select(OutboxRow.id)
            .where(
                OutboxRow.subscriber_id == message.subscriber_id,
                OutboxRow.channel == message.channel,
                OutboxRow.status == "sent",
                func.lower(col(OutboxRow.recipient)) == message.recipient.lower(),
            )
            .order_by(col(OutboxRow.id).desc())
            .limit(STREAK_WINDOW)
        )
        bounced = select(BounceRow.outbox_id, BounceRow.action).where(
            BounceRow.subscriber_id == message.subscriber_id,
            col(BounceRow.kind).in_(("hard", "soft")),
        )
        with failing_as("count the bounces"), self.database.session() as session:
            ids = sorted({*session.exec(records).all(), message.id})
            found = [(i, action) for i, action in session.exec(bounced).all() if i is not None]
        paused = {i for i, action in found if action == "paused"} - {message.id}
        hit = ({i for i, _ in found} | {message.id}) - paused
        at = ids.index(message.id)
        before = after = 0
        while at - before - 1 >= 0 and ids[at - before - 1] in hit:
            before += 1
        while at + after + 1 < len(ids) and ids[at + after + 1] in hit:
            after += 1
        return before + 1 + after

    def last_paused(self, subscriber_id: int) -> datetime | None:
        """When a bounce last paused or stopped the subscriber's email (None: none did)."""
        query = select(func.max(BounceRow.received_at)).where(
            BounceRow.subscriber_id == subscriber_id,
            col(BounceRow.action).in_(("paused", "unsubscribed")),
        )
        with failing_as("read the bounces"), self.database.session() as session:
            found = session.exec(query).one()
        return aware(found) if found is not None else None

    def day(self, day: date) -> BounceDay:
        """The bounces received on `day` (UTC), by kind, and the emails sent that day."""
        start = datetime.combine(day, time(), tzinfo=UTC)
        end = start + timedelta(days=1)
        query = (
            select(BounceRow.kind, BounceRow.action, func.count())
            .where(col(BounceRow.received_at) >= start, col(BounceRow.received_at) < end)
            .group_by(col(BounceRow.kind), col(BounceRow.action))
        )
        sent = select(func.count()).where(
            OutboxRow.channel == "email",
            col(OutboxRow.sent_at) >= start,
            col(OutboxRow.sent_at) < end,
        )
        counts = dict.fromkeys(("hard", "soft", "complaint", "auto-reply", "unmatched"), 0)
        counts["tokenless"] = 0
        with failing_as("count the bounces"), self.database.session() as session:
            for kind, action, count in session.exec(query).all():
                key = "unmatched" if action in ("unknown", "forged", "unreadable") else kind
                key = "tokenless" if action == "tokenless" else key
                if key in counts:
                    counts[key] += count
            emails = session.exec(sent).one()
        return BounceDay(
            day,
            hard=counts["hard"],
            soft=counts["soft"],
            complaints=counts["complaint"],
            auto_replies=counts["auto-reply"],
            unmatched=counts["unmatched"],
            sent=int(emails),
            tokenless=counts["tokenless"],
        )

    def of(self, subscriber_id: int, *, limit: int = 20) -> list[Bounce]:
        """A subscriber's latest bounces, newest first."""
        query = (
            select(BounceRow)
            .where(BounceRow.subscriber_id == subscriber_id)
            .order_by(col(BounceRow.id).desc())
            .limit(limit)
        )
        with failing_as("read the bounces"), self.database.session() as session:
            return [_bounce(row) for row in session.exec(query).all()]


def _bounce(row: BounceRow) -> Bounce:
    return replace(as_record(Bounce, row), received_at=aware(row.received_at))
