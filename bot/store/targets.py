"""Targets: the places a database subscriber's digests go that they gave on the manage page
or the command line (`destinations`: an Apprise URL each, under its target's channel key),
and the targets paused after refusing too many digests in a row (`target_pauses`).

A destination's URL may hold a secret (a webhook's token): this module keeps it and hands
it to whoever asks (the sender, at send time), and nothing here logs or shows it. Which
URL is a good one, and its key, is the channel kind's business (`bot.channels.apprise`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from bot.store.database import Repository, aware, failing_as
from bot.store.tables import DestinationRow, TargetPauseRow, refusals_forgotten, withdraw_queued

MAX_DESTINATIONS = 20  # per subscriber: more is a mistake (or an abuse of the page)


@dataclass(frozen=True, slots=True)
class TargetPause:
    """A paused target: whose, which, why and since when."""

    subscriber_id: int
    channel: str
    reason: str
    paused_at: datetime


class Targets(Repository):
    """Destinations given by subscribers, and paused targets (`store.targets`)."""

    # -- destinations --------------------------------------------------------------------

    def destinations(self, subscriber_ids: Iterable[int] | None = None) -> dict[int, list[str]]:
        """subscriber id -> the URLs they gave, in the order given (of `subscriber_ids`
        only, when given)."""
        query = select(DestinationRow).order_by(col(DestinationRow.id))
        if subscriber_ids is not None:
            query = query.where(col(DestinationRow.subscriber_id).in_(list(subscriber_ids)))
        found: dict[int, list[str]] = {}
        with self.database.session() as session:
            for row in session.exec(query).all():
                found.setdefault(row.subscriber_id, []).append(row.url)
        return found

    def add_destination(
        self,
        subscriber_id: int,
        channel: str,
        url: str,
        *,
        now: datetime,
        self_service: bool = True,
    ) -> bool:
        """Keep a URL given on the manage page (`self_service`) or by the operator, under
        its target's `channel` key; False when they have MAX_DESTINATIONS, or (given on the
        page) that destination already. The operator giving one the page gave makes it the
        operator's."""
        with failing_as("keep the destination"), self.database.session() as session:
            same = session.exec(
                select(DestinationRow).where(
                    DestinationRow.subscriber_id == subscriber_id, DestinationRow.channel == channel
                )
            ).first()
            if same is not None:
                if self_service:
                    return False
                same.url, same.self_service = url, False
                session.add(same)
                session.commit()
                return True
            count = len(
                session.exec(
                    select(DestinationRow.id).where(DestinationRow.subscriber_id == subscriber_id)
                ).all()
            )
            if count >= MAX_DESTINATIONS:
                return False
            session.add(
                DestinationRow(
                    subscriber_id=subscriber_id,
                    channel=channel,
                    url=url,
                    created_at=now,
                    self_service=self_service,
                )
            )
            try:
                session.commit()
            except IntegrityError:
                return False
            return True

    def given_on_page(self) -> list[str]:
        """The URLs of every destination given on the manage page (sent through the
        guard)."""
        query = select(DestinationRow.url).where(col(DestinationRow.self_service))
        with failing_as("read the destinations"), self.database.session() as session:
            return list(session.exec(query).all())

    def remove_destination(self, subscriber_id: int, channel: str) -> bool:
        """Forget one of the subscriber's destinations (and its pause); False if unknown.
        Its delivery history stays: added again, it does not get those papers twice."""
        with failing_as("remove the destination"), self.database.session() as session:
            result = session.execute(
                delete(DestinationRow).where(
                    col(DestinationRow.subscriber_id) == subscriber_id,
                    col(DestinationRow.channel) == channel,
                )
            )
            session.execute(
                delete(TargetPauseRow).where(
                    col(TargetPauseRow.subscriber_id) == subscriber_id,
                    col(TargetPauseRow.channel) == channel,
                )
            )
            session.commit()
            return bool(result.rowcount)  # type: ignore[attr-defined]

    # -- pauses --------------------------------------------------------------------------

    def pause(self, subscriber_id: int, channel: str, reason: str, *, now: datetime) -> None:
        """Stop building digests for one target of a subscriber, saying why, and withdraw
        its digests still queued (`withdraw_queued`): an address that hard-bounced gets
        no digest that waited for its retry."""
        with failing_as("pause the target"), self.database.session() as session:
            row = session.get(TargetPauseRow, (subscriber_id, channel))
            row = row or TargetPauseRow(
                subscriber_id=subscriber_id, channel=channel, reason=reason, paused_at=now
            )
            row.reason, row.paused_at = reason, now
            session.add(row)
            withdraw_queued(session, subscriber_id, f"not sent: {reason}", now=now, channel=channel)
            session.commit()

    def paused(self, subscriber_id: int | None = None) -> dict[tuple[int, str], TargetPause]:
        """(subscriber id, channel) -> its pause (of one subscriber, when given)."""
        query = select(TargetPauseRow)
        if subscriber_id is not None:
            query = query.where(TargetPauseRow.subscriber_id == subscriber_id)
        with self.database.session() as session:
            return {
                (row.subscriber_id, row.channel): TargetPause(
                    row.subscriber_id, row.channel, row.reason, aware(row.paused_at)
                )
                for row in session.exec(query).all()
            }

    def resume(self, subscriber_id: int, channel: str | None = None) -> int:
        """Resume a subscriber's paused targets (one, when `channel` is given); how many."""
        query = delete(TargetPauseRow).where(col(TargetPauseRow.subscriber_id) == subscriber_id)
        if channel is not None:
            query = query.where(col(TargetPauseRow.channel) == channel)
        with failing_as("resume the targets"), self.database.session() as session:
            result = session.execute(query)
            session.execute(refusals_forgotten(subscriber_id, channel))  # counted afresh
            session.commit()
            return int(result.rowcount)  # type: ignore[attr-defined]
