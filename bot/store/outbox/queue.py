"""Digests entering the outbox: a built digest's record, its message and its papers'
deliveries (status "queued"), written in one transaction, so that a re-run can never send a
paper twice. Two runs queuing for one subscriber at once (a schedule slot and a "send now")
take turns on the subscriber's lock: each sees what the other queued, and queues only the
papers not queued or delivered to that subscriber on that channel yet; the unique keys
refuse a period's digest queued first by another run.

Writes only new records; leasing and recording how each went is bot.store.outbox.leases.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from bot.core.models import Paper, version_key
from bot.store.database import Repository, failing_as
from bot.store.tables import DeliveryRow, OutboxMessageRow, OutboxRow, SubscriberRow

# The tables themselves, for Core statements where a run writes many rows.
OUTBOX = OutboxRow.__table__  # type: ignore[attr-defined]
DELIVERIES = DeliveryRow.__table__  # type: ignore[attr-defined]
MESSAGES = OutboxMessageRow.__table__  # type: ignore[attr-defined]
SUBSCRIBERS = SubscriberRow.__table__  # type: ignore[attr-defined]

CHUNK = 500  # ids a statement: SQLite limits a statement's parameters


@dataclass(frozen=True, slots=True)
class Queued:
    """A built digest to queue (`Outbox.enqueue_many`): for whom, where, for which slot,
    its finished payload or its `job` (the digest, rendered by the worker that claims it;
    the payload empty until then), and the papers it sends and leaves out. `updates`: a
    newer version of a paper the subscriber received is news to them (false: their
    `include` lacks "replace", and any version received counts as this one)."""

    subscriber_id: int
    channel: str
    period: str
    digest_id: str
    recipient: str
    payload: bytes
    sent: Sequence[Paper]
    omitted: Sequence[Paper] = ()
    job: bytes | None = None
    updates: bool = True


# What makes an entry without some of its papers ("id@version"), because another run
# queued or delivered them first: the entry holding the others (its job made again), or
# None when nothing is left to send.
Trim = Callable[[Queued, frozenset[str]], Queued | None]


class OutboxQueue(Repository):
    """Queueing built digests (`store.outbox.enqueue`, `enqueue_many`)."""

    def enqueue(
        self,
        subscriber_id: int,
        *,
        channel: str,
        period: str,
        digest_id: str,
        recipient: str,
        payload: bytes,
        sent: Sequence[Paper],
        omitted: Sequence[Paper] = (),
        now: datetime,
    ) -> int | None:
        """Queue a built digest and claim its papers for it, in one transaction.

        None when another run queued this period's digest, or one of these papers, first:
        nothing is written then."""
        entry = Queued(subscriber_id, channel, period, digest_id, recipient, payload, sent, omitted)
        return self.enqueue_many([entry], now=now)[0]

    def enqueue_many(
        self, entries: Sequence[Queued], *, now: datetime, trim: Trim | None = None
    ) -> list[int | None]:
        """Queue many built digests (each as `enqueue` does), in one transaction when none
        clashes with what another run queued first; else each in its own, so that only the
        ones that clash are left out. Each entry's outbox id, or None: its period was
        queued elsewhere, or another run queued or delivered some of its papers to the
        same subscriber on the same channel first and `trim` left nothing (without
        `trim`, such an entry is not queued)."""
        if not entries:
            return []
        with failing_as("queue the digests"):
            try:
                with self.database.session() as session:
                    ids = self._add(session, entries, now, trim)
                    session.commit()
                    return ids
            except IntegrityError:
                if len(entries) == 1:
                    return [None]
            return [self.enqueue_many([entry], now=now, trim=trim)[0] for entry in entries]

    @staticmethod
    def _add(
        session: Any, entries: Sequence[Queued], now: datetime, trim: Trim | None
    ) -> list[int | None]:
        # Core statements on the session's connection: no ORM object, no flush.
        connection = session.connection()
        _lock(connection, {entry.subscriber_id for entry in entries})
        kept: list[tuple[int, Queued]] = []
        for n, entry in enumerate(entries):
            if _period_taken(connection, entry):
                continue  # the INSERT would clash: another run queued this period
            left: Queued | None = entry
            taken = _taken(connection, entry)
            if taken:  # another run queued some of its papers first
                left = trim(entry, taken) if trim is not None else None
            if left is not None:
                kept.append((n, left))
        found: list[int | None] = [None] * len(entries)
        if not kept:
            return found
        ids = _insert(connection, [entry for _, entry in kept], now)
        for (n, _), outbox_id in zip(kept, ids, strict=True):
            found[n] = outbox_id
        return found


def _lock(connection: Connection, subscriber_ids: Collection[int]) -> None:
    """Take the subscribers' turn to queue, held until the transaction ends: a run queuing
    for them at the same moment waits here, then sees what this one queued. PostgreSQL
    locks their rows, in order (no two runs each wait for the other); SQLite's first write
    takes its one write lock (a write that changes nothing)."""
    ids = sorted(subscriber_ids)
    if connection.dialect.name == "postgresql":
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            connection.execute(
                select(SUBSCRIBERS.c.id)
                .where(SUBSCRIBERS.c.id.in_(chunk))
                .order_by(SUBSCRIBERS.c.id)
                .with_for_update()
            )
        return
    connection.execute(
        update(SUBSCRIBERS).where(SUBSCRIBERS.c.id == ids[0]).values(active=SUBSCRIBERS.c.active)
    )


def _period_taken(connection: Connection, entry: Queued) -> bool:
    """Whether another run queued this subscriber's digest on this channel for this period."""
    found = connection.execute(
        select(OUTBOX.c.id).where(
            OUTBOX.c.subscriber_id == entry.subscriber_id,
            OUTBOX.c.channel == entry.channel,
            OUTBOX.c.period == entry.period,
        )
    ).first()
    return found is not None


def _taken(connection: Connection, entry: Queued) -> frozenset[str]:
    """The entry's papers ("id@version") already queued, delivered or left out for its
    subscriber on its channel, as the digest's builder would have found them: this version
    or a newer one, or any one when the subscriber takes no updates."""
    papers = {paper.id: paper.version for paper in (*entry.sent, *entry.omitted)}
    ids = sorted(papers)
    taken = set()
    for start in range(0, len(ids), CHUNK):
        rows = connection.execute(
            select(DELIVERIES.c.paper_id, func.max(DELIVERIES.c.paper_version))
            .where(
                DELIVERIES.c.subscriber_id == entry.subscriber_id,
                DELIVERIES.c.channel == entry.channel,
                DELIVERIES.c.paper_id.in_(ids[start : start + CHUNK]),
            )
            .group_by(DELIVERIES.c.paper_id)
        )
        for paper_id, version in rows:
            if not entry.updates or version >= papers[paper_id]:
                taken.add(paper_id)
    return frozenset(
        version_key(paper.id, paper.version)
        for paper in (*entry.sent, *entry.omitted)
        if paper.id in taken
    )


def _insert(connection: Connection, entries: Sequence[Queued], now: datetime) -> list[int]:
    """Write the entries' records (in one INSERT, their ids returned in order), then their
    messages and their deliveries (in one INSERT each); the records' ids."""
    rows = [
        {
            "subscriber_id": entry.subscriber_id,
            "channel": entry.channel,
            "period": entry.period,
            "digest_id": entry.digest_id,
            "recipient": entry.recipient,
            "papers": len(entry.sent),
            "omitted": len(entry.omitted),
            "status": "pending",
            "attempts": 0,
            "next_attempt": now,
            "created_at": now,
        }
        for entry in entries
    ]
    returning = insert(OUTBOX).returning(OUTBOX.c.id, sort_by_parameter_order=True)
    ids = [int(i) for i in connection.execute(returning, rows).scalars()]
    connection.execute(
        insert(MESSAGES),
        [
            {"outbox_id": i, "payload": e.payload, "job": e.job}
            for i, e in zip(ids, entries, strict=True)
        ],
    )
    deliveries = []
    for outbox_id, entry in zip(ids, entries, strict=True):
        seen: set[tuple[str, int]] = set()
        for papers, status in ((entry.sent, "queued"), (entry.omitted, "omitted")):
            for paper in papers:
                if (paper.id, paper.version) in seen:
                    continue
                seen.add((paper.id, paper.version))
                deliveries.append(
                    {
                        "subscriber_id": entry.subscriber_id,
                        "paper_id": paper.id,
                        "paper_version": paper.version,
                        "channel": entry.channel,
                        "status": status,
                        "digest_id": entry.digest_id,
                        "outbox_id": outbox_id,
                        "created_at": now,
                    }
                )
    if deliveries:  # one INSERT of many rows, not an object each
        connection.execute(insert(DELIVERIES), deliveries)
    return ids
