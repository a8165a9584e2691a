"""The signatures of recent Slack requests: a replay is refused across restarts, and by
every process sharing the database. Only bot.slack's request check asks it.

Every signed request writes here, so the write is kept short: one INSERT in its own
transaction (the stale signatures are purged apart, once a minute), and on SQLite one
writer of this process at a time (waiting on a lock, not in SQLite's busy handler, whose
sleeps grow to 100 ms).
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta

from sqlalchemy import delete, insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from bot.store.database import Database, Repository
from bot.store.tables import SlackRequestRow

PURGE_EVERY = timedelta(minutes=1)
# Made once: building an INSERT on the entity costs more than running it.
_INSERT = insert(SlackRequestRow.__table__)  # type: ignore[attr-defined]


class SlackRequests(Repository):
    """The signed Slack requests already accepted (`store.slack_requests`)."""

    def __init__(self, database: Database) -> None:
        super().__init__(database)
        sqlite = database.engine.dialect.name == "sqlite"
        self._writing: AbstractContextManager[object] = (
            threading.Lock() if sqlite else nullcontext()
        )
        self._purged: datetime | None = None  # when this process last purged

    def first(
        self, signature: str, *, now: datetime, window: timedelta, stamp: datetime | None = None
    ) -> bool:
        """Record a signed Slack request as seen: True the first time, False for a replay
        (also one seen by another process). It is kept while it could still be accepted:
        until `window` after the later of `now` and its timestamp `stamp`."""
        purge = self._purged is None or not timedelta(0) <= now - self._purged < PURGE_EVERY
        with self._writing, self.database.session() as session:
            if purge:
                self._purged = now
                stale = col(SlackRequestRow.seen) < now - window
                session.execute(delete(SlackRequestRow).where(stale))
                session.commit()
            row = {"signature": signature, "seen": max(now, stamp or now)}
            try:
                session.execute(_INSERT, row)
                session.commit()
            except IntegrityError:  # the primary key: seen before, here or elsewhere
                session.rollback()
                return False
        return True
