"""The signatures of recent Slack requests: a replay is refused across restarts, and by
every process sharing the database. Only bot.slack's request check asks it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from bot.store.database import Repository
from bot.store.tables import SlackRequestRow


class SlackRequests(Repository):
    """The signed Slack requests already accepted (`store.slack_requests`)."""

    def first(
        self, signature: str, *, now: datetime, window: timedelta, stamp: datetime | None = None
    ) -> bool:
        """Record a signed Slack request as seen: True the first time, False for a replay
        (also one seen by another process). It is kept while it could still be accepted:
        until `window` after the later of `now` and its timestamp `stamp`."""
        with self.database.session() as session:
            session.execute(delete(SlackRequestRow).where(col(SlackRequestRow.seen) < now - window))
            session.commit()
            session.add(SlackRequestRow(signature=signature, seen=max(now, stamp or now)))
            try:
                session.commit()
            except IntegrityError:  # the primary key: seen before, here or elsewhere
                session.rollback()
                return False
        return True
