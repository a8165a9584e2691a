"""A stored subscriber's record, and the statements that read one subscriber: by its id,
with its rules and places (`SubscriberQueries.all(only=...)`), or by its Slack user or
channel (`SubscriberQueries.by_slack`). Made once, with bind parameters: the slash command
and the pages read one subscriber a request.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from sqlalchemy import bindparam
from sqlalchemy import select as sa_select

from bot.store.bulk import RULES, SUBSCRIBERS
from bot.store.tables import DestinationRow

PLACES = DestinationRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class SubscriberRecord:
    """A stored subscriber as the database has it, for what `Subscriber` does not say:
    where it came from, whether and why it is paused, its address as stored (a config
    file's subscriber: as last mirrored)."""

    id: int
    name: str
    origin: str  # "config" or "database"
    email: str | None
    email_confirmed: bool  # False: learnt from Slack, not confirmed by its owner
    active: bool
    paused_reason: str | None  # why paperbell paused it (an address that bounces)
    last_slot: str | None  # the last schedule slot the daemon handled


RECORD = [SUBSCRIBERS.c[f.name] for f in fields(SubscriberRecord)]
BY_SLACK_USER = (
    sa_select(*RECORD)
    .where(SUBSCRIBERS.c.slack_user == bindparam("user"), SUBSCRIBERS.c.slack_channel.is_(None))
    .order_by(SUBSCRIBERS.c.id)
    .limit(1)
)
BY_SLACK_CHANNEL = (
    sa_select(*RECORD)
    .where(SUBSCRIBERS.c.slack_channel.in_(bindparam("channels", expanding=True)))
    .order_by(SUBSCRIBERS.c.id)
    .limit(1)
)
ONE_SUBSCRIBER = sa_select(SUBSCRIBERS).where(SUBSCRIBERS.c.id == bindparam("only"))
ONE_PLACES = (
    sa_select(PLACES.c.subscriber_id, PLACES.c.url)
    .where(PLACES.c.subscriber_id == bindparam("only"))
    .order_by(PLACES.c.id)
)
ONE_RULES = (
    sa_select(RULES.c.subscriber_id, RULES.c.text, RULES.c.label)
    .where(RULES.c.subscriber_id == bindparam("only"))
    .order_by(RULES.c.id)
)
