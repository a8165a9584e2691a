"""Read only: what the outbox and the deliveries say: each subscriber's and target's
records, the totals and why records wait (`paperbell status`, /healthz, /metrics), and
which paper versions went to whom (what a digest leaves out as delivered; whether a
feedback link's paper was sent).

Writes nothing: queueing is bot.store.outbox.queue; leasing and recording how each
record went, bot.store.outbox.leases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func
from sqlalchemy import select as select_columns  # more columns than sqlmodel's types
from sqlmodel import col, select

from bot.store.database import Repository, aware
from bot.store.tables import DeliveryRow, OutboxRow


@dataclass(frozen=True, slots=True)
class OutboxStatus:
    """One subscriber's outbox (or one target's), for `paperbell status`."""

    pending: int
    failed: int
    last_sent: datetime | None
    last_error: str | None
    next_attempt: datetime | None
    attempts: int = 0  # failed attempts of the latest record, while it is pending
    last_status: str | None = None  # the latest record's: pending, sent, failed


@dataclass(frozen=True, slots=True)
class RecordState:
    """Where one outbox record stands (`Outbox.records`)."""

    status: str  # pending, sent, failed
    attempts: int
    papers: int
    omitted: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class Waiting:
    """A channel's pending records by why they wait, and when the next of each goes."""

    held: int  # by the relay's limits or a "slow down" (no attempt counted yet)
    next_held: datetime | None
    retries: int  # after a failure (an attempt counted): the retry policy's wait
    next_retry: datetime | None
    due: int  # queued, due now


def _status_of(items: Sequence[OutboxRow]) -> OutboxStatus:
    """What some outbox records (in the order queued) say, for `status`."""
    pending = [r for r in items if r.status == "pending"]
    sent = [r.sent_at for r in items if r.sent_at is not None]
    errors = [r for r in items if r.last_error]
    latest = items[-1] if items else None
    return OutboxStatus(
        pending=len(pending),
        failed=sum(1 for r in items if r.status == "failed"),
        last_sent=max(sent) if sent else None,
        last_error=errors[-1].last_error if errors else None,
        next_attempt=min((r.next_attempt for r in pending), default=None),
        attempts=latest.attempts if latest is not None and latest.status == "pending" else 0,
        last_status=latest.status if latest is not None else None,
    )


def _unfailed(row: OutboxRow) -> str:
    """A record's period as queued, before it was given up (`failed_period`)."""
    return row.period.removesuffix(f"#failed-{row.id}")


class OutboxQueries(Repository):
    """Counts and states of the outbox and the deliveries (`store.outbox.status`, ...)."""

    def records(self, ids: Sequence[int]) -> dict[int, RecordState]:
        """Where each of these records stands, by id (a run's digests that other processes
        sent)."""
        found: dict[int, RecordState] = {}
        with self.database.session() as session:
            for start in range(0, len(ids), 500):  # SQLite limits a statement's parameters
                query = select(OutboxRow).where(col(OutboxRow.id).in_(ids[start : start + 500]))
                for row in session.exec(query):
                    assert row.id is not None
                    found[row.id] = RecordState(
                        row.status, row.attempts, row.papers, row.omitted, row.last_error
                    )
        return found

    def parts_of(self, ids: Sequence[int]) -> dict[int, list[tuple[int, RecordState]]]:
        """The further parts of each of these records that its worker rendered as numbered
        messages (`Outbox.mark_rendered`: each queued as a record of its own, of the same
        subscriber and channel, its period the record's and "#<number>"), by the record's
        id: each part's id and where it stands, in order."""
        if not ids:
            return {}
        parts: dict[int, list[tuple[int, RecordState]]] = {}
        with self.database.session() as session:
            for start in range(0, len(ids), 500):  # SQLite limits a statement's parameters
                chunk = ids[start : start + 500]
                jobs = session.exec(select(OutboxRow).where(col(OutboxRow.id).in_(chunk))).all()
                # A record given up is renamed ("#failed-<id>"); its parts kept its name.
                first = {(r.subscriber_id, r.channel, _unfailed(r)): r.id for r in jobs if r.id}
                if not first:
                    continue
                # Parts are queued after their record: later ids, with a "#" in the period.
                query = (
                    select(OutboxRow)
                    .where(
                        col(OutboxRow.id) > min(chunk),
                        col(OutboxRow.subscriber_id).in_({k[0] for k in first}),
                        col(OutboxRow.period).contains("#"),
                    )
                    .order_by(col(OutboxRow.id))
                )
                for row in session.exec(query):
                    base, _, rest = _unfailed(row).rpartition("#")
                    job = first.get((row.subscriber_id, row.channel, base))
                    if job is None or not rest.isdigit() or row.id is None:
                        continue
                    state = RecordState(
                        row.status, row.attempts, row.papers, row.omitted, row.last_error
                    )
                    parts.setdefault(job, []).append((row.id, state))
        return parts

    def status(self) -> dict[int, OutboxStatus]:
        """subscriber id -> its outbox: pending and failed records, last sent, last error."""
        found: dict[int, OutboxStatus] = {}
        with self.database.session() as session:
            rows = session.exec(select(OutboxRow).order_by(col(OutboxRow.id))).all()
        by_sub: dict[int, list[OutboxRow]] = {}
        for row in rows:
            by_sub.setdefault(row.subscriber_id, []).append(row)
        for sid, items in by_sub.items():
            found[sid] = _status_of(items)
        return found

    def target_status(self) -> dict[tuple[int, str], OutboxStatus]:
        """(subscriber id, channel) -> that target's outbox: pending and failed records,
        last sent, last error, next attempt (`paperbell status`, a line per target)."""
        with self.database.session() as session:
            rows = session.exec(select(OutboxRow).order_by(col(OutboxRow.id))).all()
        by_target: dict[tuple[int, str], list[OutboxRow]] = {}
        for row in rows:
            by_target.setdefault((row.subscriber_id, row.channel), []).append(row)
        return {key: _status_of(items) for key, items in by_target.items()}

    def pending(self, subscriber_id: int, channel: str) -> int:
        """How many of a subscriber's records for `channel` are still to be sent: queued,
        in a sender's hands, or waiting for a retry."""
        with self.database.session() as session:
            return int(
                session.exec(
                    select(func.count())
                    .select_from(OutboxRow)
                    .where(
                        OutboxRow.subscriber_id == subscriber_id,
                        OutboxRow.channel == channel,
                        OutboxRow.status == "pending",
                    )
                ).one()
            )

    def attempts_pending(self) -> dict[int, int]:
        """The failed attempts of each pending record that failed before, by id: what a
        one-off run's senders compare a record's attempts with, to tell one that failed
        during the run."""
        with self.database.session() as session:
            rows = session.exec(
                select(OutboxRow.id, OutboxRow.attempts).where(
                    OutboxRow.status == "pending", col(OutboxRow.attempts) > 0
                )
            ).all()
        return {int(i): attempts for i, attempts in rows if i is not None}

    def totals(self, *, now: datetime) -> dict[str, int]:
        """How many outbox records are pending, in flight (leased now), sent and failed."""
        with self.database.session() as session:
            counts = dict(
                session.exec(
                    select(OutboxRow.status, func.count()).group_by(col(OutboxRow.status))
                ).all()
            )
            leased = session.exec(
                select(func.count())
                .select_from(OutboxRow)
                .where(OutboxRow.status == "pending", col(OutboxRow.lease_until) > now)
            ).one()
        totals = {status: int(counts.get(status, 0)) for status in ("pending", "sent", "failed")}
        totals["in flight"] = int(leased)
        return totals

    def waiting(self, channel: str, *, now: datetime) -> Waiting:
        """`channel`'s pending records by why they wait (`paperbell status`): held back by
        the relay's limits or its "slow down" (`defer`: no attempt counted), to retry
        after a failure (`mark_retry`), or due now."""
        first = col(OutboxRow.attempts) == 0
        held = first & (col(OutboxRow.next_attempt) > now)
        with self.database.session() as session:
            row = session.execute(
                select_columns(
                    func.count(),
                    func.sum(case((held, 1), else_=0)),
                    func.min(case((held, OutboxRow.next_attempt))),
                    func.sum(case((first, 0), else_=1)),
                    func.min(case((~first, OutboxRow.next_attempt))),
                ).where(col(OutboxRow.status) == "pending", col(OutboxRow.channel) == channel)
            ).one()
        count, held_count, next_held, retries, next_retry = row
        return Waiting(
            held=int(held_count or 0),
            next_held=aware(next_held) if next_held is not None else None,
            retries=int(retries or 0),
            next_retry=aware(next_retry) if next_retry is not None else None,
            due=int(count) - int(held_count or 0) - int(retries or 0),
        )

    # -- deliveries -------------------------------------------------------------------------

    def delivered_versions(self, subscriber_id: int | None, channel: str | None) -> dict[str, int]:
        """paper id -> highest version already delivered (or omitted) to this subscriber on
        `channel` (a target's: "email", "apprise:<key>"), or anywhere (None)."""
        if subscriber_id is None:
            return {}
        query = select(DeliveryRow.paper_id, func.max(DeliveryRow.paper_version)).where(
            DeliveryRow.subscriber_id == subscriber_id
        )
        if channel is not None:
            query = query.where(DeliveryRow.channel == channel)
        with self.database.session() as session:
            rows = session.exec(query.group_by(col(DeliveryRow.paper_id))).all()
            return {paper_id: int(version) for paper_id, version in rows}

    def delivered_versions_of(
        self, subscriber_ids: Sequence[int], *, size: int = 500
    ) -> dict[tuple[int, str], dict[str, int]]:
        """`delivered_versions` of many subscribers at once, per channel: (subscriber id,
        channel) -> paper id -> highest version; `size` subscribers a query."""
        found: dict[tuple[int, str], dict[str, int]] = {}
        with self.database.session() as session:
            for start in range(0, len(subscriber_ids), size):
                chunk = subscriber_ids[start : start + size]
                query = (
                    select(
                        DeliveryRow.subscriber_id,
                        DeliveryRow.channel,
                        DeliveryRow.paper_id,
                        func.max(DeliveryRow.paper_version),
                    )
                    .where(col(DeliveryRow.subscriber_id).in_(chunk))
                    .group_by(
                        col(DeliveryRow.subscriber_id),
                        col(DeliveryRow.channel),
                        col(DeliveryRow.paper_id),
                    )
                )
                for sub_id, channel, paper_id, version in session.exec(query):
                    found.setdefault((sub_id, channel), {})[paper_id] = int(version)
        return found

    def delivery_counts(self) -> dict[int, tuple[int, datetime | None]]:
        """subscriber id -> (papers delivered, last delivery time). A paper that went to
        several places (email, Slack, a chat service) counts once."""
        with self.database.session() as session:
            rows = session.exec(
                select(
                    DeliveryRow.subscriber_id,
                    func.count(func.distinct(DeliveryRow.paper_id)),
                    func.max(DeliveryRow.created_at),
                )
                .where(DeliveryRow.status == "sent")
                .group_by(col(DeliveryRow.subscriber_id))
            ).all()
            return {sid: (int(count), last) for sid, count, last in rows}
