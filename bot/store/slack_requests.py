"""The signatures of recent Slack requests: a replay is refused across restarts, and by
every process sharing the database. Only bot.slack's request check asks it.

Every signed request writes here. The requests that come together are written together:
one transaction for all the signatures waiting when the last one is done (the stale ones
purged in it, once a minute), so that a burst of requests waits for the database's write
lock once, not once each. On SQLite that lock is shared with the planner and the senders,
and a writer waiting for it sleeps in SQLite's busy handler, in sleeps that grow to 100 ms.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from bot.store.database import Database, Repository
from bot.store.tables import SlackRequestRow

PURGE_EVERY = timedelta(minutes=1)
# Made once: building an INSERT on the entity costs more than running it.
_INSERT = insert(SlackRequestRow.__table__)  # type: ignore[attr-defined]


@dataclass(slots=True)
class _Waiting:
    """One request's signature waiting to be written, and then whether it was new."""

    signature: str
    seen: datetime
    first: bool | None = None
    error: BaseException | None = None


class SlackRequests(Repository):
    """The signed Slack requests already accepted (`store.slack_requests`)."""

    def __init__(self, database: Database) -> None:
        super().__init__(database)
        self._writing = threading.Lock()  # one batch written at a time by this process
        self._queue_lock = threading.Lock()
        self._queue: list[_Waiting] = []  # signatures not yet taken by a batch
        self._purged: datetime | None = None  # when this process last purged

    def first(
        self, signature: str, *, now: datetime, window: timedelta, stamp: datetime | None = None
    ) -> bool:
        """Record a signed Slack request as seen: True the first time, False for a replay
        (also one seen by another process). It is kept while it could still be accepted:
        until `window` after the later of `now` and its timestamp `stamp`."""
        mine = _Waiting(signature, max(now, stamp or now))
        with self._queue_lock:
            self._queue.append(mine)
        with self._writing:
            if mine.first is None and mine.error is None:  # no batch took it while we waited
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._write(batch, now=now, window=window)
        if mine.error is not None:
            raise mine.error
        return bool(mine.first)

    def _write(self, batch: list[_Waiting], *, now: datetime, window: timedelta) -> None:
        """The waiting signatures in one transaction, each in a savepoint: one that is
        there already (here or from another process) is a replay, and so is the second of
        two that came together."""
        purge = self._purged is None or not timedelta(0) <= now - self._purged < PURGE_EVERY
        firsts: list[bool] = []
        try:
            with self.database.session() as session:
                if purge:
                    self._purged = now
                    session.execute(
                        delete(SlackRequestRow).where(col(SlackRequestRow.seen) < now - window)
                    )
                for waiting in batch:
                    try:
                        with session.begin_nested():
                            session.execute(
                                _INSERT, {"signature": waiting.signature, "seen": waiting.seen}
                            )
                        firsts.append(True)
                    except IntegrityError:  # the primary key: seen before, here or elsewhere
                        firsts.append(False)
                session.commit()
        except BaseException as exc:  # each waiting request hears it, as its own write would
            for waiting in batch:
                waiting.error = exc
            raise
        for waiting, first in zip(batch, firsts, strict=True):
            waiting.first = first
