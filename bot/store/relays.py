"""Relays: the places taken in each SMTP relay's sending limits, shared by every process
that sends through it (`store.relays`).

A message takes its place (`reserve`) in one transaction that first writes the relay's row:
on PostgreSQL that UPDATE holds the row's lock until the commit, so two workers reserving
at once go one after the other; on SQLite the write takes the file's one writer lock, the
same. Each window counts the messages handed to the relay within it (`relay_sends`, kept a
day); a message fits when every window has room, and when a slow-down the relay asked for
(`slow_down`: a 421/451/454 answer) leaves one message every `slow_seconds` (each further
slow-down while one holds doubles it, up to a floor the caller gives). A relay that cannot
be reached is skipped by every process until `failing_until` (`fail`).

Decides nothing about what is sent: bot.channels.limits asks, the sender waits or defers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from bot.store.database import Database, Repository, aware, failing_as
from bot.store.tables import RelayRow, RelaySendRow

RELAYS = RelayRow.__table__  # type: ignore[attr-defined]
SENDS = RelaySendRow.__table__  # type: ignore[attr-defined]
KEPT = timedelta(days=1)  # the longest window: older sends count for nothing


@dataclass(frozen=True, slots=True)
class RelayState:
    """What `paperbell status` and a limiter read of one relay."""

    relay: str
    slow_until: datetime | None
    slow_seconds: float | None
    last_second: int  # messages handed to it within the last second, hour and day
    last_hour: int
    last_day: int
    failing_until: datetime | None = None  # skipped as failing until then, and why
    failure: str | None = None


class Relays(Repository):
    """The relays' windows and slow-downs."""

    def __init__(self, database: Database) -> None:
        super().__init__(database)
        self._known: set[str] = set()  # relays whose row exists

    def _ensure(self, relay: str) -> None:
        """The relay's row, made once (whoever makes it first; the others find it)."""
        if relay in self._known:
            return
        make = postgres_insert if self.database.engine.dialect.name == "postgresql" else None
        statement = (make or sqlite_insert)(RELAYS).values(relay=relay).on_conflict_do_nothing()
        with failing_as("record the relay"), self.database.session() as session:
            session.execute(statement)
            session.commit()
        self._known.add(relay)

    def reserve(
        self, relay: str, *, now: datetime, windows: Sequence[tuple[timedelta, int]]
    ) -> datetime | None:
        """Take a place for one message to `relay` at `now`, if every window (length, most
        messages within it) has room and no slow-down holds it back: None, the place is
        taken. Otherwise nothing is taken, and the answer is when one frees at the earliest
        (ask again then: another process may take it first)."""
        self._ensure(relay)
        with failing_as("take a place in the relay's limits"), self.database.session() as session:
            connection = session.connection()
            # The lock: every process reserving for this relay waits here for the others.
            connection.execute(update(RELAYS).where(RELAYS.c.relay == relay).values(checked_at=now))
            row = connection.execute(
                select(RELAYS.c.slow_until, RELAYS.c.slow_seconds).where(RELAYS.c.relay == relay)
            ).one()
            ours = SENDS.c.relay == relay
            free: list[datetime] = []
            for length, most in windows:
                # The most-th latest message in the window: once it leaves, there is room.
                oldest = connection.execute(
                    select(SENDS.c.sent_at)
                    .where(ours, SENDS.c.sent_at > now - length)
                    .order_by(SENDS.c.sent_at.desc())
                    .offset(max(most, 1) - 1)
                    .limit(1)
                ).scalar()
                if oldest is not None:
                    free.append(aware(oldest) + length)
            if row.slow_until is not None and aware(row.slow_until) > now and row.slow_seconds:
                last = connection.execute(select(func.max(SENDS.c.sent_at)).where(ours)).scalar()
                if last is not None and aware(last) + timedelta(seconds=row.slow_seconds) > now:
                    free.append(aware(last) + timedelta(seconds=row.slow_seconds))
            if free:
                session.commit()
                return max(free)
            connection.execute(insert(SENDS).values(relay=relay, sent_at=now))
            connection.execute(delete(SENDS).where(ours, SENDS.c.sent_at < now - KEPT))
            session.commit()
            return None

    def slow_down(
        self, relay: str, *, now: datetime, until: datetime, seconds: float, slowest: float
    ) -> float:
        """The relay asked to slow down: one message every `seconds` until `until`; if a
        slow-down still holds, twice its spacing (half its rate) instead, never slower than
        one every `slowest`. Read and written under the row's lock, so two processes told at
        once both halve it. The spacing now in force."""
        self._ensure(relay)
        with failing_as("record the relay's slow-down"), self.database.session() as session:
            connection = session.connection()
            connection.execute(update(RELAYS).where(RELAYS.c.relay == relay).values(checked_at=now))
            row = connection.execute(
                select(RELAYS.c.slow_until, RELAYS.c.slow_seconds).where(RELAYS.c.relay == relay)
            ).one()
            holds = row.slow_until is not None and aware(row.slow_until) > now
            if holds and row.slow_seconds:
                seconds = max(seconds, row.slow_seconds * 2)
            seconds = min(seconds, slowest)
            connection.execute(
                update(RELAYS)
                .where(RELAYS.c.relay == relay)
                .values(slow_until=until, slow_seconds=seconds)
            )
            session.commit()
        return seconds

    def fail(self, relay: str, *, until: datetime | None, why: str | None = None) -> None:
        """The relay could not be reached: every process skips it until `until` (None: it
        answered again, skipped no more)."""
        self._ensure(relay)
        with failing_as("record the relay's failure"), self.database.session() as session:
            session.execute(
                update(RELAYS)
                .where(RELAYS.c.relay == relay)
                .values(failing_until=until, failure=(why or "")[:500] if until else None)
            )
            session.commit()

    def state(self, relay: str, *, now: datetime) -> RelayState:
        """The relay's slow-down and the messages handed to it lately."""
        with failing_as("read the relay's limits"), self.database.session() as session:
            row = session.execute(
                select(
                    RELAYS.c.slow_until,
                    RELAYS.c.slow_seconds,
                    RELAYS.c.failing_until,
                    RELAYS.c.failure,
                ).where(RELAYS.c.relay == relay)
            ).first()
            counts = [
                int(
                    session.execute(
                        select(func.count())
                        .select_from(SENDS)
                        .where(SENDS.c.relay == relay, SENDS.c.sent_at > now - length)
                    ).scalar_one()
                )
                for length in (timedelta(seconds=1), timedelta(hours=1), KEPT)
            ]
        slow_until = aware(row.slow_until) if row is not None and row.slow_until else None
        slow_seconds = row.slow_seconds if row is not None else None
        failing = aware(row.failing_until) if row is not None and row.failing_until else None
        failure = row.failure if row is not None and failing is not None else None
        second, hour, day = counts
        return RelayState(relay, slow_until, slow_seconds, second, hour, day, failing, failure)
