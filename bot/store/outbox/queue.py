"""Digests entering the outbox: a built digest's record, its message and its papers'
deliveries (status "queued"), written in one transaction, so that a re-run can never send a
paper twice: the unique keys refuse a period's digest, or a paper, queued first by another
run (no lock is needed).

Writes only new records; leasing and recording how each went is bot.store.outbox.leases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from bot.core.models import Paper
from bot.store.database import Repository, failing_as
from bot.store.tables import DeliveryRow, OutboxMessageRow, OutboxRow

# The tables themselves, for Core statements where a run writes many rows.
OUTBOX = OutboxRow.__table__  # type: ignore[attr-defined]
DELIVERIES = DeliveryRow.__table__  # type: ignore[attr-defined]
MESSAGES = OutboxMessageRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Queued:
    """A built digest to queue (`Outbox.enqueue_many`): for whom, where, for which slot,
    its finished payload or its `job` (the digest, rendered by the worker that claims it;
    the payload empty until then), and the papers it sends and leaves out."""

    subscriber_id: int
    channel: str
    period: str
    digest_id: str
    recipient: str
    payload: bytes
    sent: Sequence[Paper]
    omitted: Sequence[Paper] = ()
    job: bytes | None = None


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
        nothing is written then (the unique keys decide; no lock is needed)."""
        entry = Queued(subscriber_id, channel, period, digest_id, recipient, payload, sent, omitted)
        return self.enqueue_many([entry], now=now)[0]

    def enqueue_many(self, entries: Sequence[Queued], *, now: datetime) -> list[int | None]:
        """Queue many built digests (each as `enqueue` does), in one transaction when none
        clashes with what another run queued first; else each in its own, so that only the
        ones that clash are left out. Each entry's outbox id, or None (queued elsewhere)."""
        if not entries:
            return []
        with failing_as("queue the digests"):
            try:
                with self.database.session() as session:
                    ids: list[int | None] = list(self._add(session, entries, now))
                    session.commit()
                    return ids
            except IntegrityError:
                if len(entries) == 1:
                    return [None]
            return [self.enqueue_many([entry], now=now)[0] for entry in entries]

    @staticmethod
    def _add(session: Any, entries: Sequence[Queued], now: datetime) -> list[int]:
        # Core statements on the session's connection: no ORM object, no flush; the
        # records in one INSERT (their ids returned in order), then their messages and
        # their deliveries in one INSERT each.
        connection = session.connection()
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
