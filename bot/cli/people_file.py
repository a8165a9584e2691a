"""`paperbell subscribe --from-file FILE`: everyone a CSV file lists, subscribed at once.

Every row is checked first (bot.config.people: the file's format; here what the config file
and the store already hold); a bad row adds nothing, and by default neither does any other
(`--skip-bad` adds the good rows). Rows are matched with the stored subscribers by name, a
row without a name by its address: those stored already are reported and left as they
are, so running a file again adds nothing twice. The others are added in one transaction
(`store.subscribers.add_many`), their addresses confirmed as with `subscribe --email`: an
admin vouches for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import BinaryIO

import click

from bot.cli.secrets import database_url
from bot.cli.shell import EXIT_FAILED, open_store
from bot.config import BadRow, Config, Person, read_people
from bot.config.people import MAX_PEOPLE_BYTES
from bot.core.errors import ConfigError
from bot.core.plurals import plural
from bot.store import NewSubscriber, SubscriberRecord, schema_state, utcnow

SHOWN_NAMES = 10  # names listed in "left as they are: ..."


@dataclass
class Sorted:
    """The file's rows against what is stored: to add, stored already, and bad."""

    new: list[NewSubscriber] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    bad: list[BadRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    named: int = 0  # rows without a name, given one


def subscribe_from_file(config: Config, file: BinaryIO, *, dry_run: bool, skip_bad: bool) -> None:
    """Check the file, then add the subscribers it lists that are not stored yet."""
    source = _file_name(file)
    data = file.read(MAX_PEOPLE_BYTES + 1)
    read = read_people(data, source=source, max_rules=config.digest.max_rules)
    # A dry run makes no database: where there is none yet, nothing is stored.
    none_yet = dry_run and not schema_state(database_url(config)).exists
    store = None if none_yet else open_store(config)
    stored = store.subscribers.records() if store is not None else []
    rows = sort_rows(read.people, config, stored, file_names=read.names)
    bad = sorted([*read.bad, *rows.bad], key=lambda row: row.line)
    problems = [line for row in bad for line in row.lines()]
    if bad and not skip_bad:
        raise ConfigError(
            problems,
            source=source,
            hint=f"nothing was added: fix {'it' if len(bad) == 1 else 'them'} and run it again "
            "(the subscribers stored already are left as they are), or add the other rows "
            "with --skip-bad",
        )
    for line in problems:
        click.echo(f"skipped {line}", err=True)
    if dry_run:
        rules = sum(len(person.rules) for person in rows.new)
        click.echo(
            f"would add {plural(len(rows.new), 'subscriber')} from {source} "
            f"({plural(rules, 'rule')}); added nothing (--dry-run)"
        )
        existing = rows.existing
    else:
        assert store is not None
        added = store.subscribers.add_many(
            rows.new, now=utcnow(), max_rules=config.digest.max_rules
        )
        created = set(added.created)
        rules = sum(len(set(p.rules)) for p in rows.new if p.name in created)
        if added.created:
            click.echo(
                f"added {plural(len(added.created), 'subscriber')} from {source} "
                f"({plural(rules, 'rule')}), their addresses confirmed"
            )
        else:
            click.echo(f"added no one from {source}")
        existing = [*rows.existing, *added.existing]
    if rows.named:
        click.echo(
            f"named after their address: {plural(rows.named, 'row')} without a name "
            f"(`paperbell list` shows them)"
        )
    if existing:
        shown = ", ".join(existing[:SHOWN_NAMES])
        more = f" and {len(existing) - SHOWN_NAMES:,} more" if len(existing) > SHOWN_NAMES else ""
        click.echo(
            f"left as they are: {plural(len(existing), 'subscriber')} stored already "
            f"({shown}{more}); `paperbell subscribe NAME ...` changes one"
        )
    for note in rows.notes:
        click.echo(f"note: {note}")
    if bad:
        click.echo(f"left out: {plural(len(bad), 'bad row')} (listed above)", err=True)
        raise SystemExit(EXIT_FAILED)


def sort_rows(
    people: Iterable[Person],
    config: Config,
    stored: Iterable[SubscriberRecord],
    *,
    file_names: Iterable[str] = (),
) -> Sorted:
    """Sort the file's good rows: a name of the config file is a bad row, one stored
    already (or, for a row without a name, an address stored already) is left as it is,
    the others are added; a row without a name gets one made from its address's local
    part, taken by no one (`ada`, `ada-2` ...)."""
    declared = {s.name for s in config.subscribers}
    by_name = {record.name: record for record in stored}
    by_address: dict[str, str] = {}
    for record in by_name.values():
        if record.email:
            by_address.setdefault(record.email.lower(), record.name)
    for sub in config.subscribers:
        if sub.email:
            by_address.setdefault(sub.email.lower(), sub.name)
    taken = declared | set(by_name) | set(file_names)
    out = Sorted()
    for person in people:
        name = person.name
        if name is None:
            known = by_address.get(person.email.lower())
            if known is not None:
                out.existing.append(known)
                continue
            name = free_name(person.email, taken)
            taken.add(name)
            out.named += 1
        elif name in declared or (name in by_name and by_name[name].origin == "config"):
            out.bad.append(
                BadRow(
                    person.line,
                    (f"name: {name!r} is declared in the config file: change it there",),
                )
            )
            continue
        elif name in by_name:
            out.existing.append(name)
            had = by_name[name].email
            if (had or "").lower() != person.email.lower():
                out.notes.append(
                    f"line {person.line}: {name} is stored with another address; left as it "
                    f"is (`paperbell subscribe {name} --email ...` changes it)"
                )
            continue
        out.new.append(_new_subscriber(name, person))
    return out


def _new_subscriber(name: str, person: Person) -> NewSubscriber:
    return NewSubscriber(
        name=name,
        email=person.email,
        rules=person.rules,
        labels=person.labels,
        categories=person.categories,
        include=person.include,
        settings=person.settings,
    )


def free_name(email: str, taken: set[str]) -> str:
    """A subscriber name made from an address's local part that no one has: `ada`, `ada-2`
    ... (a name shows on pages a forwarded link opens; the whole address does not)."""
    local = email.rpartition("@")[0]
    base = re.sub(r"[^A-Za-z0-9_.\-]", "-", local)[:56].strip("-._") or "subscriber"
    name, number = base, 1
    while name in taken:
        number += 1
        name = f"{base}-{number}"
    return name


def _file_name(file: BinaryIO) -> str:
    name = getattr(file, "name", None)
    return "standard input" if name in (None, "<stdin>", "-") else str(name)
