"""What the database stops keeping after a while (`store.retention`): the whole message of a
digest sent (or failed) long ago, and old bounces.

A sent digest's record stays for good, cut to its headers: the web archive still lists it
(its subject, when, how many papers) and shows the papers it carried, and the outbox's
unique (subscriber, channel, period) still keeps that slot from being queued again. The
deliveries (which paper versions went to whom: what keeps a paper from being sent twice)
are never touched, nor is a pending record. Bounces older than their days are deleted: a
soft bounce's streak looks at recent ones only, a pause keeps its own reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, LargeBinary, bindparam, delete, func, update
from sqlalchemy import select as select_columns
from sqlmodel import col

from bot.store.archive import HEAD_BYTES
from bot.store.database import Repository, failing_as
from bot.store.tables import BounceRow, OutboxMessageRow, OutboxRow

MESSAGES = OutboxMessageRow.__table__  # type: ignore[attr-defined]
BATCH = 500  # records cut in one transaction


@dataclass(frozen=True, slots=True)
class Pruned:
    """What a prune did (or, dry, would do): messages cut to their headers, the bytes
    that freed, bounces deleted, sign-ups never confirmed deleted."""

    messages: int = 0
    freed: int = 0
    bounces: int = 0
    more: bool = False  # messages left to cut (stopped, or past `batches`)
    signups: int = 0


def head_of(payload: bytes) -> bytes:
    """A message's header block (through the blank line that ends it), at most
    HEAD_BYTES: what the archive reads of an old digest (its subject)."""
    start = payload[:HEAD_BYTES]
    end = start.find(b"\r\n\r\n")
    if end >= 0:
        return start[: end + 4]
    end = start[: HEAD_BYTES - 2].rfind(b"\r\n")  # headers past HEAD_BYTES: whole lines
    return start[: end + 2] + b"\r\n" if end >= 0 else b""


class Retention(Repository):
    """Cutting old messages and deleting old bounces (`store.retention`)."""

    # Where a prune cut short (`batches`) goes on from: the records before it are done. A
    # prune that ends starts the next from the first record again (a digest sent late).
    _after = 0

    def prune(
        self,
        *,
        sent_before: datetime | None,
        bounces_before: datetime | None,
        dry_run: bool = False,
        batches: int | None = None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Pruned:
        """Cut the messages of digests sent (or failed) before `sent_before` to their
        headers, delete the bounces received before `bounces_before` (None: keep them),
        `BATCH` records a transaction; `dry_run`: count only. `batches` (at most that many)
        and `should_stop` (between two) end it early: what is left goes next time."""
        messages = freed = 0
        more = False
        if sent_before is not None:
            if dry_run:
                messages, freed = self._old_messages(sent_before)
            else:
                messages, freed, more = self._cut(sent_before, batches, should_stop)
        bounces = 0
        if bounces_before is not None:
            old = col(BounceRow.received_at) < bounces_before
            with failing_as("delete the old bounces"), self.database.session() as session:
                if dry_run:
                    count = select_columns(func.count()).select_from(BounceRow).where(old)
                    bounces = int(session.execute(count).scalar_one())
                else:
                    result = session.execute(delete(BounceRow).where(old))
                    session.commit()
                    bounces = int(result.rowcount)  # type: ignore[attr-defined]
        return Pruned(messages, freed, bounces, more)

    @staticmethod
    def _old(before: datetime) -> tuple[ColumnElement[bool], ...]:
        when = func.coalesce(OutboxRow.sent_at, OutboxRow.created_at)
        return (
            col(OutboxRow.status).in_(("sent", "failed")),
            when < before,
            func.length(OutboxMessageRow.payload) > HEAD_BYTES,
            col(OutboxMessageRow.outbox_id) == col(OutboxRow.id),
        )

    def _old_messages(self, before: datetime) -> tuple[int, int]:
        """How many messages would be cut, and about how many bytes that frees."""
        size = func.length(OutboxMessageRow.payload)
        query = select_columns(func.count(), func.sum(size)).where(*self._old(before))
        with self.database.session() as session:
            count, total = session.execute(query).one()
        return int(count), max(int(total or 0) - int(count) * HEAD_BYTES // 2, 0)

    def _cut(
        self, before: datetime, batches: int | None, should_stop: Callable[[], bool]
    ) -> tuple[int, int, bool]:
        start = func.substr(OutboxMessageRow.payload, 1, HEAD_BYTES, type_=LargeBinary)
        query = (
            select_columns(col(OutboxRow.id), start, func.length(OutboxMessageRow.payload))
            .where(*self._old(before), col(OutboxRow.id) > bindparam("after"))
            .order_by(col(OutboxRow.id))
            .limit(BATCH)
        )
        cut = (
            update(MESSAGES)
            .where(MESSAGES.c.outbox_id == bindparam("row"))
            .values(payload=bindparam("head"))
        )
        messages = freed = done = 0
        while True:
            if should_stop() or (batches is not None and done >= batches):
                return messages, freed, True
            done += 1
            with failing_as("cut the old messages"), self.database.session() as session:
                rows = session.execute(query, {"after": self._after}).all()
                if not rows:
                    self._after = 0
                    return messages, freed, False
                heads = [{"row": row, "head": head_of(bytes(s or b""))} for row, s, _ in rows]
                session.execute(cut, heads)
                session.commit()
            self._after = max(row for row, _, _ in rows)
            messages += len(rows)
            freed += sum(int(size) for _, _, size in rows) - sum(len(h["head"]) for h in heads)
            if len(rows) < BATCH:
                self._after = 0
                return messages, freed, False
