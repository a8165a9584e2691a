"""Subscribers read, never changed: everyone for a run (`all`), one by its record
(`stored`), by name or id (`get`), by Slack user or channel (`by_slack`), every record,
the counts and the slot notes. Apart from bot.store.subscribers, which changes them and
checks names, rules and addresses: reading checks nothing. `Subscribers`
(`store.subscribers`) does both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields, replace
from typing import cast

from sqlalchemy import select as sa_select
from sqlmodel import col, func, select

from bot.core.models import DEFAULT_INCLUDE, AbstractLength, EmailFormat, LongEmails, Subscriber
from bot.core.schedule import Defaults
from bot.store.bulk import RULES, SUBSCRIBERS
from bot.store.database import Repository, aware
from bot.store.lookups import (
    BY_SLACK_CHANNEL,
    BY_SLACK_USER,
    ONE_PLACES,
    ONE_RULES,
    ONE_SUBSCRIBER,
    PLACES,
    SubscriberRecord,
)
from bot.store.tables import SubscriberRow, as_record, load_list

# The largest id a subscriber can have: the id column is a 32-bit integer on PostgreSQL.
MAX_ID = 2**31 - 1


class SubscriberQueries(Repository):
    """The subscribers as the store has them, read (`store.subscribers`)."""

    def all(
        self,
        config_subscribers: Sequence[Subscriber] = (),
        *,
        include_inactive: bool = False,
        defaults: Defaults | None = None,
        only: int | None = None,
    ) -> list[Subscriber]:
        """Every subscriber: the config file's (with their ids, if stored) and the database's,
        whose unset schedule settings take `defaults` (the config's [digest]); `only`: the
        stored one with this id alone (one query each, not everyone's)."""
        defaults = defaults or Defaults()
        # Read as rows, not as ORM objects: a run reads everyone, and making 10,000
        # subscribers' and their rules' objects took a second (their rows: a tenth).
        if only is None:
            query = sa_select(SUBSCRIBERS)
            rule_query = sa_select(RULES.c.subscriber_id, RULES.c.text, RULES.c.label)
            rule_query = rule_query.order_by(RULES.c.id)
            places = sa_select(PLACES.c.subscriber_id, PLACES.c.url).order_by(PLACES.c.id)
            params = {}
        else:
            query, rule_query, places, params = (
                ONE_SUBSCRIBER,
                ONE_RULES,
                ONE_PLACES,
                {"only": only},
            )
        with self.database.session() as session:
            rows = {r.name: r for r in session.execute(query, params)}
            if only is not None:
                config_subscribers = [s for s in config_subscribers if s.name in rows]
            urls: dict[int, list[str]] = {}
            for subscriber_id, url in session.execute(places, params):
                urls.setdefault(subscriber_id, []).append(url)
            rules: dict[int, list[str]] = {}
            labels: dict[int, dict[str, str]] = {}
            for subscriber_id, text, label in session.execute(rule_query, params):
                rules.setdefault(subscriber_id, []).append(text)
                if label:
                    labels.setdefault(subscriber_id, {})[text] = label
        result: list[Subscriber] = []
        for sub in config_subscribers:
            row = rows.get(sub.name)
            active = row.active if row is not None else True
            stored = replace(
                sub,
                id=row.id if row else None,
                active=active,
                created=aware(row.created_at) if row else None,
                last_slot=row.last_slot if row else None,
            )
            if active or include_inactive:
                result.append(stored)
        for row in sorted(rows.values(), key=lambda r: r.name):
            if row.origin != "database" or not (row.active or include_inactive):
                continue
            assert row.id is not None
            result.append(
                Subscriber(
                    id=row.id,
                    name=row.name,
                    email=row.email,
                    rules=tuple(rules.get(row.id, ())),
                    labels=labels.get(row.id, {}),
                    categories=load_list(row.categories),
                    max_papers=row.max_papers,
                    include=frozenset(load_list(row.include)) or DEFAULT_INCLUDE,
                    origin="database",
                    active=row.active,
                    schedule=defaults.resolve(row.schedule, row.day, row.time, row.timezone),
                    notify_empty=(
                        defaults.notify_empty if row.notify_empty is None else row.notify_empty
                    ),
                    created=aware(row.created_at),
                    last_slot=row.last_slot,
                    slack_channel=row.slack_channel,
                    slack_user=row.slack_user,
                    slack_webhook=row.slack_webhook,
                    apprise=tuple(urls.get(row.id, ())),
                    apprise_env=row.apprise_env,
                    email_confirmed=row.email_confirmed,
                    pending_email=row.pending_email,
                    email_format=cast(EmailFormat, row.email_format),
                    abstracts=cast(AbstractLength, row.abstracts),
                    long_emails=cast(LongEmails, row.long_emails),
                    summaries=row.summaries,
                    language=row.language,
                    similar_max=row.similar_max,
                    similar_min=row.similar_min,
                )
            )
        return result

    def slot_notes(self) -> dict[int, tuple[str, str]]:
        """Per subscriber id, its last handled slot and why it sent nothing (only those
        whose last slot sent nothing)."""
        with self.database.session() as session:
            rows = session.exec(
                select(SubscriberRow.id, SubscriberRow.last_slot, SubscriberRow.last_slot_note)
            ).all()
            return {sid: (slot, note) for sid, slot, note in rows if note and slot and sid}

    def by_slack(
        self, *, user: str | None = None, channel: str | Sequence[str] | None = None
    ) -> SubscriberRecord | None:
        """The subscriber a Slack user (their direct messages) or a channel is, if any; a
        channel may be given by its id and its "#name" (the config may use either)."""
        if (user is None) == (channel is None):
            raise ValueError("give one of user, channel")
        names = [channel] if isinstance(channel, str) else list(channel or ())
        with self.database.session() as session:
            if user is not None:
                found = session.execute(BY_SLACK_USER, {"user": user})
            else:
                found = session.execute(BY_SLACK_CHANNEL, {"channels": names})
            row = found.first()
            return None if row is None else SubscriberRecord(*row)

    def records(self) -> list[SubscriberRecord]:
        """Every stored subscriber's record (the config file's and the database's), by
        name: one query."""
        columns = [getattr(SubscriberRow, f.name) for f in fields(SubscriberRecord)]
        with self.database.session() as session:  # the columns alone: no row objects
            rows = session.exec(select(*columns).order_by(col(SubscriberRow.name)))
            return [SubscriberRecord(*row) for row in rows]

    def stored(
        self,
        record: SubscriberRecord,
        *,
        declared: Callable[[str], Subscriber | None] = lambda name: None,
        defaults: Defaults | None = None,
    ) -> Subscriber | None:
        """A record's subscriber (`get`, `by_slack`: by an index) as `all` gives it, its
        rules and places read alone, never everyone's: a config file's is `declared(name)`
        (None: the file has it no more)."""
        mirrored = declared(record.name) if record.origin == "config" else None
        found = self.all(
            [mirrored] if mirrored else [], include_inactive=True, defaults=defaults, only=record.id
        )
        return next((s for s in found if s.id == record.id), None)

    def tally(self, declared: Iterable[str] = ()) -> tuple[int, int]:
        """(active, paused) as `all` lists them with the config file's subscribers
        (`declared`: their names), counted by the database, not read one by one."""
        inactive = ~col(SubscriberRow.active)
        with self.database.session() as session:
            stored = session.exec(select(func.count()).where(SubscriberRow.origin == "database"))
            total = stored.one()
            stopped = session.exec(select(SubscriberRow.name, SubscriberRow.origin).where(inactive))
            stopped_rows = stopped.all()
        names = set(declared)
        paused = sum(1 for name, origin in stopped_rows if origin == "database" or name in names)
        return total + len(names) - paused, paused

    def get(self, name: str | int) -> SubscriberRecord | None:
        """The subscriber named `name` (or whose id it is), config or database, if stored.
        An id no row can have (a number out of a stranger's token) finds no one: PostgreSQL
        would refuse to compare it with its 32-bit ids."""
        if isinstance(name, int) and not 0 < name <= MAX_ID:
            return None
        key = SubscriberRow.name == name if isinstance(name, str) else SubscriberRow.id == name
        with self.database.session() as session:
            row = session.exec(select(SubscriberRow).where(key)).first()
            return None if row is None else as_record(SubscriberRecord, row)
