"""A worker's side of the outbox: leasing pending records (`claim`, `renew`, `release`)
and recording how each went (`mark_sent`, `mark_progress`, `mark_retry`, `defer`,
`mark_failed`), with its deliveries.

A record is marked "sent" only after the channel accepted the message (`mark_sent`, called
by bot.channels.outbox). A lease held by another worker is never written over: every write
after a claim says which `owner` it comes from. Queueing is bot.store.outbox.queue.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    Integer,
    Select,
    all_,
    bindparam,
    func,
    insert,
    tuple_,
    update,
)
from sqlalchemy import select as select_columns  # more columns than sqlmodel's types
from sqlmodel import col, select

from bot.core.models import version_key
from bot.store.database import Repository, failing_as
from bot.store.tables import (
    DeliveryRow,
    OutboxMessageRow,
    OutboxRow,
    SubscriberRow,
    failed_period,
)

# The tables themselves, for Core statements made once (a run claims and records thousands).
OUTBOX = OutboxRow.__table__  # type: ignore[attr-defined]
DELIVERIES = DeliveryRow.__table__  # type: ignore[attr-defined]
MESSAGES = OutboxMessageRow.__table__  # type: ignore[attr-defined]
SUBSCRIBERS = SubscriberRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """A claimed outbox record: what a worker needs to send it and report on it."""

    id: int
    subscriber_id: int
    subscriber: str
    channel: str
    recipient: str
    digest_id: str
    payload: bytes
    papers: int
    omitted: int
    attempts: int  # failed attempts before this one
    progress: str | None = None  # how far a multi-message digest got (the channel's JSON)
    lease_until: datetime | None = None  # the worker holds it until then, unless it renews
    job: bytes | None = None  # the digest, not yet rendered into `payload` (bot.pipeline.jobs)


@dataclass(frozen=True, slots=True)
class RenderedJob:
    """A claimed job rendered into its message (`Outbox.mark_rendered`): the message, how
    many papers it holds and leaves out, and the job's papers it does not hold
    ((id, version): the renderer cut them)."""

    outbox_id: int
    payload: bytes
    papers: int
    omitted: int
    left_out: Sequence[tuple[str, int]] = ()
    # A digest rendered as numbered messages: the parts after the first, each queued as a
    # record of its own with its papers (and sent and recorded alone).
    more: Sequence[RenderedPart] = ()


@dataclass(frozen=True, slots=True)
class RenderedPart:
    """A part after the first of a job rendered as numbered messages: its digest id, its
    message, and its papers ((id, version)), which move from the job's record to its own."""

    digest_id: str
    payload: bytes
    papers: Sequence[tuple[str, int]]


# Recording a send (`Outbox.mark_sent`): the record, leased by `owner` or (its lease lost)
# still pending, and its papers queued for it.
_SENT_VALUES: dict[str, Any] = {
    "status": "sent",
    "sent_at": bindparam("now"),
    "lease_owner": None,
    "lease_until": None,
}
_SENT_ANYWAY = (
    update(OUTBOX)
    .where(OUTBOX.c.id == bindparam("row"), OUTBOX.c.status == "pending")
    .values(_SENT_VALUES)
)
_SENT_MINE = _SENT_ANYWAY.where(OUTBOX.c.lease_owner == bindparam("owner"))
_DELIVERIES_SENT = (
    update(DELIVERIES)
    .where(DELIVERIES.c.outbox_id == bindparam("row"), DELIVERIES.c.status == "queued")
    .values(status="sent")
)


# Recording a rendered job (`Outbox.mark_rendered`): the record `owner` holds, its message
# in place of the job, its papers the message does not hold left out.
_RENDERED = (
    update(OUTBOX)
    .where(
        OUTBOX.c.id == bindparam("row"),
        OUTBOX.c.lease_owner == bindparam("owner"),
        OUTBOX.c.status == "pending",
    )
    .values(papers=bindparam("paper_count"), omitted=bindparam("omitted_count"))
)
_MESSAGE_RENDERED = (
    update(MESSAGES)
    .where(MESSAGES.c.outbox_id == bindparam("row"))
    .values(payload=bindparam("message"), job=None)
)
_LEFT_OUT = (
    update(DELIVERIES)
    .where(
        DELIVERIES.c.outbox_id == bindparam("row"),
        DELIVERIES.c.paper_id == bindparam("paper"),
        DELIVERIES.c.paper_version == bindparam("version"),
        DELIVERIES.c.status == "queued",
    )
    .values(status="omitted")
)


_PENDING = OUTBOX.c.status == "pending"
# Free to claim at `now`: never leased, or the lease ran out (a worker that died).
_CLAIMABLE = OUTBOX.c.lease_until.is_(None) | (OUTBOX.c.lease_until < bindparam("now"))
# The records `claim` leases (`ids`) to `owner` until `until`, those still free; what
# each claimed record needs to be sent.
_LEASE = (
    update(OUTBOX)
    .where(OUTBOX.c.id.in_(bindparam("ids", expanding=True)), _PENDING, _CLAIMABLE)
    .values(lease_owner=bindparam("owner"), lease_until=bindparam("until"))
    .returning(
        OUTBOX.c.id,
        OUTBOX.c.subscriber_id,
        OUTBOX.c.channel,
        OUTBOX.c.recipient,
        OUTBOX.c.digest_id,
        OUTBOX.c.papers,
        OUTBOX.c.omitted,
        OUTBOX.c.attempts,
        OUTBOX.c.progress,
    )
)
_MESSAGES_OF = select_columns(MESSAGES.c.outbox_id, MESSAGES.c.payload, MESSAGES.c.job).where(
    MESSAGES.c.outbox_id.in_(bindparam("ids", expanding=True))
)


@functools.cache
def _pick(
    *, due_only: bool, excluding: bool, only: bool, theirs: bool, postgres: bool
) -> Select[Any]:
    """The statement that picks up to `limit` records `claim` may lease at `now`, with their
    subscribers' names, oldest first (made once for each shape: a run claims hundreds of
    times); `excluding`: none of the ids `skip`; `only`: only records of the `channels`;
    `theirs`: only records of the `subscribers`."""
    pick = (
        select_columns(OUTBOX.c.id, SUBSCRIBERS.c.name)
        .join(SUBSCRIBERS, SUBSCRIBERS.c.id == OUTBOX.c.subscriber_id, isouter=True)
        .where(_PENDING, _CLAIMABLE)
    )
    if due_only:
        pick = pick.where(OUTBOX.c.next_attempt <= bindparam("now"))
    if only:
        pick = pick.where(OUTBOX.c.channel.in_(bindparam("channels", expanding=True)))
    if theirs:
        pick = pick.where(OUTBOX.c.subscriber_id.in_(bindparam("subscribers", expanding=True)))
    if excluding:
        pick = pick.where(_not_one_of(postgres=postgres))
    pick = pick.order_by(OUTBOX.c.id).limit(bindparam("limit", type_=Integer))
    if postgres:
        pick = pick.with_for_update(of=OUTBOX, skip_locked=True)
    return pick


def _not_one_of(*, postgres: bool) -> ColumnElement[bool]:
    """`outbox.id` is none of the ids `skip`, however many (a drain excludes every record it
    tried and did not send): one array parameter on PostgreSQL, the numbers written into
    the statement on SQLite (which limits a statement's parameters)."""
    if postgres:
        return OUTBOX.c.id != all_(bindparam("skip", type_=ARRAY(Integer)))
    return OUTBOX.c.id.not_in(bindparam("skip", expanding=True, literal_execute=True))


class OutboxLeases(Repository):
    """A worker's leases on outbox records, and what became of each (`store.outbox.claim`,
    `mark_sent`, ...)."""

    def claim(
        self,
        owner: str,
        *,
        now: datetime,
        lease: timedelta,
        limit: int = 20,
        due_only: bool = True,
        exclude: Iterable[int] = (),
        channels: Collection[str] | None = None,
        subscribers: Collection[int] | None = None,
    ) -> list[OutboxItem]:
        """Lease up to `limit` pending records to `owner` until now + lease, oldest first:
        records due (`due_only`: their retry time has come), not leased, or whose lease
        expired (a worker that died), but for those in `exclude`; `channels`: only records
        for these channels, `subscribers`: only these subscribers' (ids; None: any).

        One transaction for the batch, whatever its size: the records are picked with their
        subscribers' names, then leased by one conditional UPDATE. On PostgreSQL the pick
        locks them `FOR UPDATE SKIP LOCKED`, so workers claiming at the same moment take
        different records and never wait for one another; on SQLite (one writer at a time)
        the UPDATE's own condition leaves out a record another worker leased in between.
        Either way two workers never hold one record."""
        postgres = self.database.engine.dialect.name == "postgresql"
        skip = sorted(set(exclude))
        only, theirs = channels is not None, subscribers is not None
        pick = _pick(
            due_only=due_only, excluding=bool(skip), only=only, theirs=theirs, postgres=postgres
        )
        until = now + lease
        with self.database.transaction() as connection:
            values: dict[str, Any] = {"now": now, "limit": limit}
            if only:
                values["channels"] = list(channels or ())
            if theirs:
                values["subscribers"] = list(subscribers or ())
            found = connection.execute(pick, {**values, "skip": skip} if skip else values)
            names: dict[int, str | None] = {i: n for i, n in found}
            if not names:
                return []
            leased = connection.execute(
                _LEASE, {"ids": list(names), "now": now, "owner": owner, "until": until}
            ).all()
            ids = [row.id for row in leased]
            messages = (
                {
                    int(i): (bytes(payload), None if job is None else bytes(job))
                    for i, payload, job in connection.execute(_MESSAGES_OF, {"ids": ids})
                }
                if ids
                else {}
            )
        return sorted(
            (
                OutboxItem(
                    id=row.id,
                    subscriber_id=row.subscriber_id,
                    subscriber=names.get(row.id) or str(row.subscriber_id),
                    channel=row.channel,
                    recipient=row.recipient,
                    digest_id=row.digest_id,
                    payload=messages.get(row.id, (b"", None))[0],
                    papers=row.papers,
                    omitted=row.omitted,
                    attempts=row.attempts,
                    progress=row.progress,
                    lease_until=until,
                    job=messages.get(row.id, (b"", None))[1],
                )
                for row in leased
            ),
            key=lambda item: item.id,
        )

    def release(self, owner: str, ids: Iterable[int] | None = None) -> int:
        """Give up `owner`'s leases on records it has not sent (a worker stopping; with
        `ids`, only those: a batch cut short), so the next worker takes them at once instead
        of when the leases expire."""
        query = update(OutboxRow).where(
            col(OutboxRow.lease_owner) == owner, col(OutboxRow.status) == "pending"
        )
        if ids is not None:
            query = query.where(col(OutboxRow.id).in_(list(ids)))
        with failing_as("release the claimed digests"), self.database.session() as session:
            result = session.execute(query.values(lease_owner=None, lease_until=None))
            session.commit()
            return int(result.rowcount)  # type: ignore[attr-defined]

    def renew(self, ids: Iterable[int], *, owner: str, lease_until: datetime) -> set[int]:
        """Extend `owner`'s lease on these pending records to `lease_until` (a worker about
        to send the next message of its batch), in one statement; the ids it still holds. A
        record missing from the answer was taken over by another worker (its lease ran out)
        or is no longer pending: the worker must not send it."""
        wanted = list(ids)
        if not wanted:
            return set()
        with failing_as("renew the lease"), self.database.session() as session:
            held = session.execute(
                update(OutboxRow)
                .where(
                    col(OutboxRow.id).in_(wanted),
                    col(OutboxRow.lease_owner) == owner,
                    col(OutboxRow.status) == "pending",
                )
                .values(lease_until=lease_until)
                .returning(col(OutboxRow.id))
                .execution_options(synchronize_session=False)
            ).scalars()
            found = set(held)
            session.commit()
            return found

    def mark_sent(self, outbox_id: int, *, owner: str, now: datetime) -> bool:
        """The channel accepted the message: record it, at once, in one transaction.

        False if `owner` no longer held the lease (it ran out and another worker took the
        record, which may be sending it too): the send is recorded all the same while the
        record is still pending, since the message did go out, so that the other worker
        does not send it again; a record already sent or given up is left as it is.
        Core statements made once (a run records thousands), in one transaction."""
        values = {"row": outbox_id, "owner": owner, "now": now}
        with failing_as("record the delivery"), self.database.transaction() as connection:
            held = connection.execute(_SENT_MINE, values).rowcount
            anyway = {"row": outbox_id, "now": now}
            written = held or connection.execute(_SENT_ANYWAY, anyway).rowcount
            if written:
                connection.execute(_DELIVERIES_SENT, {"row": outbox_id})
            return bool(held)

    def mark_rendered(
        self, rendered: Sequence[RenderedJob], *, owner: str, now: datetime
    ) -> set[int]:
        """Jobs `owner` rendered: each message kept in place of its job, the papers the
        message left out (an email holds what mail apps show whole) recorded as omitted,
        and each further part queued as a record of its own, its papers with it; in one
        transaction. The ids `owner` still held: one missing was taken over by another
        worker (its lease ran out), which renders it itself."""
        held: set[int] = set()
        with failing_as("record the rendered digests"), self.database.transaction() as connection:
            for job in rendered:
                counts = {"paper_count": job.papers, "omitted_count": job.omitted}
                mine = {"row": job.outbox_id, "owner": owner, **counts}
                if not connection.execute(_RENDERED, mine).rowcount:
                    continue
                held.add(job.outbox_id)
                for number, part in enumerate(job.more, 2):
                    _queue_part(connection, job.outbox_id, number, part, now)
                connection.execute(
                    _MESSAGE_RENDERED, {"row": job.outbox_id, "message": job.payload}
                )
                if job.left_out:
                    connection.execute(
                        _LEFT_OUT,
                        [
                            {"row": job.outbox_id, "paper": paper, "version": version}
                            for paper, version in job.left_out
                        ],
                    )
        return held

    def mark_progress(
        self, outbox_id: int, progress: str, *, owner: str, lease_until: datetime
    ) -> bool:
        """Part of a digest was accepted (a Slack summary and some of its thread): remember
        how far, at once, so a retry does not post those messages again, and extend the
        lease of `owner`. False if the lease was lost (another worker took the record)."""
        return self._update_held(
            outbox_id, owner, "delivery", progress=progress, lease_until=lease_until
        )

    def mark_retry(self, outbox_id: int, *, owner: str, error: str, next_attempt: datetime) -> bool:
        """A transient failure: count it, release the lease, try again at `next_attempt`.
        False (nothing written) if `owner` lost the lease: the record is another worker's."""
        return self._update_held(
            outbox_id,
            owner,
            "failure",
            attempts=OutboxRow.attempts + 1,
            last_error=error,
            next_attempt=next_attempt,
            lease_owner=None,
            lease_until=None,
        )

    def defer(self, outbox_id: int, *, owner: str, next_attempt: datetime) -> bool:
        """Not sent, not failed: the relay's limits (or its "slow down") leave it for
        `next_attempt`. No attempt counted, no error recorded; the lease released. False
        (nothing written) if `owner` lost the lease."""
        return self._update_held(
            outbox_id,
            owner,
            "wait",
            next_attempt=next_attempt,
            lease_owner=None,
            lease_until=None,
        )

    def _update_held(self, outbox_id: int, owner: str, what: str, **values: Any) -> bool:
        """Write `values` to a pending record `owner` holds; False if it holds it no more."""
        with failing_as(f"record the {what}"), self.database.session() as session:
            result = session.execute(
                update(OutboxRow)
                .where(
                    col(OutboxRow.id) == outbox_id,
                    col(OutboxRow.lease_owner) == owner,
                    col(OutboxRow.status) == "pending",
                )
                .values(**values)
            )
            session.commit()
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def mark_failed(
        self,
        outbox_id: int,
        *,
        owner: str,
        error: str,
        sent: Iterable[str] = (),
        refused: bool = False,
    ) -> int | None:
        """Give up on a record (`refused` by its recipient, or too many attempts) and
        release its papers, so the subscriber's next digest holds them: nothing is lost. The
        papers in `sent` ("id@version") reached the far end before it failed (a Slack thread
        cut off half-way): they are recorded as delivered, never sent again. Returns how
        many of the subscriber's latest records on this channel to this recipient were
        refused in a row (those given up in between count for nothing), or None (nothing
        written) if `owner` lost the lease: the record is another worker's."""
        with self.database.session() as session:
            row = session.exec(
                select(OutboxRow)
                .where(
                    OutboxRow.id == outbox_id,
                    OutboxRow.lease_owner == owner,
                    OutboxRow.status == "pending",
                )
                .with_for_update()
            ).first()
            if row is None:
                return None
            row.status, row.last_error, row.refused = "failed", error, refused
            # Free the period: the papers go back to the subscriber, whose next digest
            # (maybe the very same papers, the same digest id) must be able to queue.
            row.period = failed_period(row.period, outbox_id)
            row.attempts += 1
            row.lease_owner = row.lease_until = None
            session.add(row)
            reached = set(sent)
            for delivery in session.exec(
                select(DeliveryRow).where(DeliveryRow.outbox_id == outbox_id)
            ):
                if version_key(delivery.paper_id, delivery.paper_version) in reached:
                    delivery.status = "sent"
                    session.add(delivery)
                else:
                    session.delete(delivery)
            session.commit()
            outcomes = session.exec(
                select(OutboxRow.status, OutboxRow.refused)
                .where(
                    OutboxRow.subscriber_id == row.subscriber_id,
                    OutboxRow.channel == row.channel,
                    # A new address starts the count again.
                    func.lower(col(OutboxRow.recipient)) == row.recipient.lower(),
                    OutboxRow.status != "pending",
                )
                .order_by(col(OutboxRow.id).desc())
                .limit(20)
            ).all()
        refusals = 0
        for status, was_refused in outcomes:
            if status != "failed":
                break
            refusals += was_refused
        return refusals


def _queue_part(
    connection: Any, job_id: int, number: int, part: RenderedPart, now: datetime
) -> None:
    """Queue part `number` of the job `job_id` as a record of its own (pending, for the
    next claim), its message, and move its papers' deliveries from the job's record."""
    record = connection.execute(select_columns(OUTBOX).where(OUTBOX.c.id == job_id)).one()
    part_id = connection.execute(
        insert(OUTBOX)
        .values(
            subscriber_id=record.subscriber_id,
            channel=record.channel,
            period=f"{record.period}#{number}"[:128],
            digest_id=part.digest_id,
            recipient=record.recipient,
            papers=len(part.papers),
            omitted=0,
            status="pending",
            attempts=0,
            next_attempt=now,
            created_at=now,
        )
        .returning(OUTBOX.c.id)
    ).scalar_one()
    connection.execute(insert(MESSAGES).values(outbox_id=part_id, payload=part.payload))
    connection.execute(
        update(DELIVERIES)
        .where(
            DELIVERIES.c.outbox_id == job_id,
            tuple_(DELIVERIES.c.paper_id, DELIVERIES.c.paper_version).in_(list(part.papers)),
        )
        .values(outbox_id=part_id, digest_id=part.digest_id)
    )
