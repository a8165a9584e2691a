"""Subscribers written many at a time: database subscribers added in bulk (`add_many`), and
the config file's mirrored (`mirror_config`), each in one transaction, set-based.

A few queries whatever the number of subscribers: the rows concerned are read at once (by
name, or for many names the whole table in one query), compared in memory, and only what
differs is written, by executemany. Used by
`bot.store.subscribers.Subscribers`, which callers ask; no other repository's tables here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, insert, select, update
from sqlmodel import Session

from bot.core.errors import StoreError
from bot.core.models import Subscriber
from bot.store.tables import RuleRow, SubscriberRow, dump_list

CHUNK = 500  # names or ids in one `IN (...)`; more: the table is read once instead
SUBSCRIBERS = SubscriberRow.__table__  # type: ignore[attr-defined]
RULES = RuleRow.__table__  # type: ignore[attr-defined]
# The columns the config file's subscribers mirror (beside their rules).
MIRRORED = (
    "email",
    "slack_channel",
    "slack_user",
    "slack_webhook",
    "categories",
    "max_papers",
    "include",
)


@dataclass(frozen=True, slots=True)
class NewSubscriber:
    """A database subscriber to add (`Subscribers.add_many`), its values checked already:
    rules (each once; a rule given twice is kept once), their labels by rule, and settings
    (keys of `bot.store.subscribers.SETTINGS`: schedule, time, max_papers ...; absent: the
    defaults). An address added by an admin is confirmed (`email_confirmed`)."""

    name: str
    email: str | None
    rules: Sequence[str]
    labels: Mapping[str, str] = field(default_factory=dict)
    categories: Sequence[str] = ()
    include: Iterable[str] | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    email_confirmed: bool = True


@dataclass(frozen=True, slots=True)
class Added:
    """What `add_many` did: the names it added, and those it left as they were (stored
    already, from the config file or the database), each in the order given."""

    created: tuple[str, ...]
    existing: tuple[str, ...]


def add_many(
    session: Session,
    people: Sequence[NewSubscriber],
    *,
    now: datetime,
    settings: Iterable[str],
    max_rules: int | None = None,
) -> Added:
    """Add the subscribers not stored yet, with their rules (not committed: the caller's
    session does); `settings` are the setting names a person may carry. A name given twice,
    a person over `max_rules` rules or with two rules under one label is refused (a
    StoreError) before anything is written."""
    allowed = frozenset(settings)
    seen: set[str] = set()
    for person in people:
        if person.name in seen:
            raise StoreError(f"subscriber {person.name!r} is given twice")
        seen.add(person.name)
        if unknown := set(person.settings) - allowed:
            raise ValueError(f"not a subscriber setting: {', '.join(sorted(unknown))}")
    stored = set(_stored_names(session, list(seen)))
    new = [person for person in people if person.name not in stored]
    rules = {person.name: list(dict.fromkeys(person.rules)) for person in new}
    for person in new:
        count = len(rules[person.name])
        if max_rules is not None and count > max_rules:
            raise too_many_rules(person.name, count, max_rules)
        check_labels(person.name, [(t, person.labels.get(t)) for t in rules[person.name]])
    if new:
        base = _column_defaults() | {"origin": "database", "created_at": now}
        ids = _insert_subscribers(session, [_subscriber_values(p, base) for p in new])
        _insert_rules(
            session,
            [
                {"subscriber_id": ids[p.name], "text": text, "label": p.labels.get(text) or None}
                | {"created_at": now}
                for p in new
                for text in rules[p.name]
            ],
        )
    return Added(
        created=tuple(p.name for p in new),
        existing=tuple(p.name for p in people if p.name in stored),
    )


def _subscriber_values(person: NewSubscriber, base: dict[str, Any]) -> dict[str, Any]:
    """A new database subscriber's row, every column given (executemany takes one shape):
    `base`'s values, then the person's."""
    values = base | {
        "name": person.name,
        "email": person.email,
        "email_confirmed": person.email_confirmed,
    }
    if person.categories:
        values["categories"] = dump_list(person.categories)
    if person.include is not None:
        values["include"] = dump_list(sorted(set(person.include)))
    values |= person.settings
    return values


def mirror_config(session: Session, subscribers: Sequence[Subscriber], *, now: datetime) -> None:
    """Mirror the config file's subscribers (not committed: the caller's session does): new
    ones inserted, changed ones updated, each one's rules and labels as the file has them, in
    its order (a rule kept keeps when it was first stored); an unsubscribe stays in force.
    A name the database has as its own is refused (a StoreError), before anything is
    written."""
    wanted = {sub.name: sub for sub in subscribers}  # a name twice: the last one, as before
    rows = {row.name: row for row in _rows_named(session, list(wanted))}
    for name in wanted:
        row = rows.get(name)
        if row is not None and row.origin != "config":
            raise StoreError(
                f"subscriber {name!r} is in the config file and in the database",
                hint=f"rename one of them, or `paperbell unsubscribe {name} --delete`",
            )
    changed = []
    for name, row in rows.items():
        values = _mirrored(wanted[name])
        if any(getattr(row, key) != value for key, value in values.items()):
            changed.append({"_id": row.id, **values})
    if changed:
        statement = (
            update(SUBSCRIBERS)
            .where(SUBSCRIBERS.c.id == bindparam("_id"))
            .values({key: bindparam(key) for key in MIRRORED})
        )
        session.connection().execute(statement, changed)
    new = [sub for name, sub in wanted.items() if name not in rows]
    ids = {name: row.id for name, row in rows.items()}
    if new:
        base = _column_defaults() | {"origin": "config", "created_at": now}
        ids |= _insert_subscribers(
            session, [base | {"name": sub.name} | _mirrored(sub) for sub in new]
        )
    stored = _rules_of(session, [row.id for row in rows.values()])
    gone: list[int] = []
    fresh: list[dict[str, Any]] = []
    for name, sub in wanted.items():
        have = stored.get(ids[name], [])
        rules = [(text, sub.label_of(text)) for text in sub.rules]
        if [(rule.text, rule.label) for rule in have] == rules:
            continue
        since = {rule.text: rule.created_at for rule in have}
        gone += [rule.id for rule in have]
        fresh += [
            {"subscriber_id": ids[name], "text": text, "label": label}
            | {"created_at": since.get(text, now)}
            for text, label in rules
        ]
    if gone:  # one statement by id, executemany: no IN list to scan
        removal = delete(RULES).where(RULES.c.id == bindparam("_id"))
        session.connection().execute(removal, [{"_id": rule_id} for rule_id in gone])
    _insert_rules(session, fresh)


def _column_defaults() -> dict[str, Any]:
    """A subscriber row's columns (the id aside) with their defaults (None: no default)."""
    return {
        column.name: column.default.arg if column.default is not None else None
        for column in SUBSCRIBERS.columns
        if column.name != "id"
    }


def _mirrored(sub: Subscriber) -> dict[str, Any]:
    """A config file's subscriber's mirrored columns, as stored."""
    return {
        "email": sub.email,
        "slack_channel": sub.slack_channel,
        "slack_user": sub.slack_user,
        "slack_webhook": sub.slack_webhook,
        "categories": dump_list(sub.categories),
        "max_papers": sub.max_papers,
        "include": dump_list(sorted(sub.include)),
    }


def _insert_subscribers(session: Session, rows: list[dict[str, Any]]) -> dict[str, int]:
    """Insert subscriber rows (in their order: ids ascend with it); their ids by name, read
    back in one query (an executemany with RETURNING is slower: it is sent as statements of
    a thousand rows' values, each one long text the driver parses)."""
    session.connection().execute(insert(SUBSCRIBERS), rows)
    names = [row["name"] for row in rows]
    columns = [SUBSCRIBERS.c.id, SUBSCRIBERS.c.name]
    return {row.name: row.id for row in _where_in(session, columns, SUBSCRIBERS.c.name, names)}


def _insert_rules(session: Session, rows: list[dict[str, Any]]) -> None:
    """Insert rule rows, in their order (which is the order `list` numbers them in)."""
    if rows:
        session.connection().execute(insert(RULES), rows)


def _stored_names(session: Session, names: list[str]) -> Iterator[str]:
    for row in _where_in(session, [SUBSCRIBERS.c.name], SUBSCRIBERS.c.name, names):
        yield row.name


def _rows_named(session: Session, names: list[str]) -> Iterator[Any]:
    """The stored subscribers named `names`: their id, name, origin and mirrored columns."""
    columns = [SUBSCRIBERS.c.id, SUBSCRIBERS.c.name, SUBSCRIBERS.c.origin]
    columns += [SUBSCRIBERS.c[key] for key in MIRRORED]
    return _where_in(session, columns, SUBSCRIBERS.c.name, names)


def _rules_of(session: Session, ids: list[int]) -> dict[int, list[Any]]:
    """The stored rules of these subscribers (the config file's), by subscriber id, in the
    order `list` numbers them."""
    query = select(RULES).order_by(RULES.c.id)
    if len(ids) > CHUNK:  # the config file's subscribers' rules, in one query
        query = query.join(SUBSCRIBERS, SUBSCRIBERS.c.id == RULES.c.subscriber_id).where(
            SUBSCRIBERS.c.origin == "config"
        )
    else:
        query = query.where(RULES.c.subscriber_id.in_(ids))
    wanted = set(ids)
    found: dict[int, list[Any]] = {}
    for rule in session.connection().execute(query):
        if rule.subscriber_id in wanted:
            found.setdefault(rule.subscriber_id, []).append(rule)
    return found


def _where_in(session: Session, columns: list[Any], column: Any, values: list[Any]) -> Any:
    """`columns` of the rows whose `column` is one of `values`: asked with `IN (...)` for up
    to CHUNK values; for more, the whole table read once, without parameters, and the rows
    kept here. (Many long IN lists cost more: PostgreSQL, once it prepares one, compares
    each row with every value.)"""
    if len(values) <= CHUNK:
        return session.connection().execute(select(*columns).where(column.in_(values)))
    wanted = set(values)
    selected = [*columns, column] if column not in columns else columns
    rows = session.connection().execute(select(*selected))
    return (row for row in rows if row._mapping[column] in wanted)


def check_labels(name: str, rules: Iterable[tuple[str, str | None]]) -> None:
    """Refuse two rules of one subscriber with one label (case aside): the digests would
    show two headings alike. `rules`: each rule's text and label."""
    seen: dict[str, str] = {}
    for text, label in rules:
        if not label:
            continue
        key = label.casefold()
        if key in seen and seen[key] != text:
            raise StoreError(
                f"{name!r} has a rule labelled {label!r} already",
                hint="give each rule its own label",
            )
        seen[key] = text


def too_many_rules(name: str, count: int, max_rules: int) -> StoreError:
    return StoreError(
        f"{name!r} would have {count} rules, more than the {max_rules} a subscriber may have",
        hint="remove a rule first, or join rules with OR ([digest] max_rules sets the limit)",
    )
