"""Benchmark: adding and syncing many subscribers at once.

Owns the figures behind issue 24's "bulk" goal: `paperbell subscribe --from-file people.csv`
(and the store API, `store.subscribers.add_many`) adds 10,000 subscribers in seconds, and
the config's 10,000 `[[subscribers]]` sync in seconds. It generates N people (default
10,000; names and addresses made up, each with 1-3 rules of real title words of the bundled
listing of 2024-11-28) and times, each into a fresh database:

(a) `paperbell subscribe --from-file people.csv` as a subprocess (interpreter start and
    imports included: a user waits for them too), then the same file again (everyone
    already stored: nothing added);
(b) `store.subscribers.add_many` (the API the command uses), in this process;
(c) a config file with N `[[subscribers]]`: `load_config`, then `sync_config` as `paperbell
    digest` and `run` call it: the first sync (all new) and a second (nothing changed);
(d) the baselines, in the same run: a bare executemany of the same rows through the
    database's own driver (sqlite3, psycopg: the floor), `store.subscribers.add` one person
    at a time on a sample (`--sample`, extrapolated to N), `add` as it was before bulk adds
    (each add then reloaded every subscriber: `--old-sample` adds into a store of N/2,
    extrapolated to N adds from empty), and the per-subscriber sync
    (one query per subscriber and per subscriber's rules: sync_config before this change,
    kept here as the naive reference).

Each fast path's result is compared with its baseline's (same subscribers, rules, labels,
settings): OK or MISMATCH (exit code 1). Not part of the test suite.

    .venv/bin/python bench/bulk.py [--people 10000] [--sample 1000] [--seed 1]
    .venv/bin/python bench/bulk.py --database-url postgresql://postgres@127.0.0.1:5432/bench

A PostgreSQL database named by --database-url is emptied (every table dropped) before each
step: give one of its own. Deterministic: the same arguments make the same people.
"""

from __future__ import annotations

import argparse
import csv
import gc
import io
import itertools
import random
import re
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlmodel import Session, col, select  # noqa: E402

from bot.core.errors import ConfigError, RuleError, StoreError  # noqa: E402
from bot.core.models import Subscriber  # noqa: E402
from bot.demo.data import bundled_papers  # noqa: E402
from bot.rules import parse_rule  # noqa: E402
from bot.store import Store  # noqa: E402
from bot.store.database import normalize_url  # noqa: E402
from bot.store.tables import RuleRow, SubscriberRow, dump_list  # noqa: E402

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
TARGET_SECONDS = 10.0  # "in seconds": each bulk figure for 10,000 people


# ---------------------------------------------------------------------------------------------
# People


@dataclass(frozen=True)
class Person:
    name: str
    email: str
    rules: tuple[str, ...]


def title_vocabulary(titles: Sequence[str]) -> tuple[list[str], list[str]]:
    """Topical title words (at least 5 letters, in 2 to 2% of the titles) and two-word
    phrases of titles made of them, most frequent first."""
    words: Counter[str] = Counter()
    spelled = [re.findall(r"[a-z]+", title.lower()) for title in titles]
    for title in spelled:
        words.update(set(title))
    most = max(2, len(titles) // 50)
    topical = {w for w, c in words.items() if len(w) >= 5 and 2 <= c <= most}
    phrases: Counter[str] = Counter()
    for title in spelled:
        phrases.update({f"{a} {b}" for a, b in itertools.pairwise(title)})
    pairs = [p for p, c in phrases.items() if c >= 2 and set(p.split()) <= topical]
    by_count = sorted(topical, key=lambda w: (-words[w], w))
    return by_count, sorted(pairs, key=lambda p: (-phrases[p], p))


def make_people(count: int, seed: int) -> list[Person]:
    """`count` people, each with 1-3 distinct rules: a title word (60%), a title's two-word
    phrase in quotes (25%) or two title words (15%); drawn with a popularity skew."""
    rng = random.Random(seed)
    words, phrases = title_vocabulary([paper.title for paper in bundled_papers(source="arxiv")])
    word_weights = [1 / (rank + 5) for rank in range(len(words))]
    phrase_weights = [1 / (rank + 5) for rank in range(len(phrases))]

    def rule() -> str:
        shape = rng.random()
        if shape < 0.6:
            return rng.choices(words, word_weights)[0]
        if shape < 0.85:
            return f'"{rng.choices(phrases, phrase_weights)[0]}"'
        first, second = rng.choices(words, word_weights, k=2)
        return f"{first} {second}"

    given = ["ada", "alan", "grace", "lin", "emmy", "kurt", "sofia", "ravi", "mei", "omar"]
    people = []
    for number in range(count):
        rules: list[str] = []
        wanted = rng.choice((1, 1, 2, 2, 3))
        while len(rules) < wanted:
            text = rule()
            if text not in rules and _parses(text):
                rules.append(text)
        name = f"{rng.choice(given)}.{number:05d}"
        people.append(Person(name, f"{name}@lab{number % 37}.example", tuple(rules)))
    return people


def _parses(text: str) -> bool:
    try:
        parse_rule(text)
    except RuleError:
        return False
    return True


def people_csv(people: Sequence[Person]) -> str:
    """The people as `subscribe --from-file` reads them: rules joined by "; "."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["name", "email", "rules"])
    for person in people:
        writer.writerow([person.name, person.email, "; ".join(person.rules)])
    return out.getvalue()


def config_toml(url: str, people: Sequence[Person]) -> str:
    """A config file declaring the people as [[subscribers]]."""
    lines = ["version = 1", "[database]", f'url = "{url}"', "[email]", 'from = "p@example.org"']
    for person in people:
        rules = ", ".join(f"'{text}'" for text in person.rules)  # no ' in the generated rules
        lines += [
            "[[subscribers]]",
            f'name = "{person.name}"',
            f'email = "{person.email}"',
            f"rules = [{rules}]",
        ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Databases


class Databases:
    """A fresh database for each step: a new SQLite file, or the PostgreSQL at `url`
    emptied (every table dropped)."""

    def __init__(self, url: str | None, folder: Path) -> None:
        self.url, self.folder, self.made = url, folder, 0

    @property
    def kind(self) -> str:
        return "PostgreSQL" if self.url else "SQLite file"

    def fresh(self) -> str:
        self.made += 1
        if self.url is None:
            return f"sqlite:///{self.folder / f'step{self.made}.sqlite'}"
        from sqlalchemy import MetaData, create_engine

        engine = create_engine(normalize_url(self.url))
        found = MetaData()
        found.reflect(engine)
        found.drop_all(engine)
        engine.dispose()
        return self.url


@contextmanager
def opened(url: str) -> Iterator[Store]:
    store = Store.open(url)  # the migrations make the schema: not timed
    try:
        yield store
    finally:
        store.close()


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    """Run `action` once: its result and wall seconds (database time is not CPU time)."""
    gc.collect()
    start = time.perf_counter()
    result = action()
    return result, time.perf_counter() - start


def snapshot(store: Store) -> list[tuple[Any, ...]]:
    """What the subscribers and rules tables hold, ids aside, in a stable order."""
    with store.database.session() as session:
        subscribers = session.exec(select(SubscriberRow)).all()
        names = {row.id: row.name for row in subscribers}
        out: list[tuple[Any, ...]] = [
            tuple(sorted((k, v) for k, v in row.model_dump().items() if k != "id"))
            for row in subscribers
        ]
        rules = session.exec(select(RuleRow).order_by(col(RuleRow.id))).all()
        out += [(names[r.subscriber_id], r.text, r.label, r.created_at) for r in rules]
    return sorted(out, key=repr)


# ---------------------------------------------------------------------------------------------
# Baselines


def bare_insert(url: str, people: Sequence[Person]) -> None:
    """The floor: the same subscriber and rule rows by executemany through the database's
    own driver, in one transaction (ids read back with one SELECT)."""
    columns = (
        "name, email, origin, active, categories, max_papers, include, created_at, "
        "email_confirmed, email_format, abstracts, summaries, similar_max"
    )
    defaults = ("database", True, "[]", 50, '["cross", "new"]', NOW, True, "html", "short")
    rows = [(p.name, p.email, *defaults, False, 5) for p in people]
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None
    if path is not None:
        connection: Any = sqlite3.connect(path)
        mark, stamp = "?", NOW.replace(tzinfo=None).isoformat(" ")
        rows = [(*row[:7], stamp, *row[8:]) for row in rows]
    else:
        import psycopg

        connection = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
        mark, stamp = "%s", NOW
    marks = ", ".join([mark] * 13)
    cursor = connection.cursor()
    cursor.executemany(f"INSERT INTO subscribers ({columns}) VALUES ({marks})", rows)
    cursor.execute("SELECT id, name FROM subscribers")
    ids = {name: sid for sid, name in cursor.fetchall()}
    rule_rows = [(ids[p.name], text, stamp) for p in people for text in p.rules]
    cursor.executemany(
        f"INSERT INTO rules (subscriber_id, text, created_at) VALUES ({mark}, {mark}, {mark})",
        rule_rows,
    )
    connection.commit()
    connection.close()


def one_by_one(store: Store, people: Sequence[Person]) -> None:
    """`store.subscribers.add`, one person at a time (one transaction each)."""
    for person in people:
        store.subscribers.add(person.name, email=person.email, rules=person.rules, now=NOW)


def reloading(store: Store, people: Sequence[Person]) -> None:
    """`add` as it was before this change: each add then read every subscriber back (with
    their rules and destinations) to return the one it added."""
    for person in people:
        store.subscribers.add(person.name, email=person.email, rules=person.rules, now=NOW)
        next(s for s in store.subscribers.all(include_inactive=True) if s.name == person.name)


def naive_sync(store: Store, subscribers: Sequence[Subscriber], *, now: datetime) -> None:
    """sync_config as it was before bulk sync: for each subscriber, a query for its row and
    one for its rules, an update or an insert, its rules replaced when they differ."""
    with store.database.session() as session:
        for sub in subscribers:
            found = session.exec(
                select(SubscriberRow).where(SubscriberRow.name == sub.name)
            ).first()
            if found is not None and found.origin != "config":
                raise StoreError(f"subscriber {sub.name!r} is in the config file and the database")
            found = found or SubscriberRow(name=sub.name, origin="config", created_at=now)
            found.email = sub.email
            found.slack_channel = sub.slack_channel
            found.slack_user = sub.slack_user
            found.slack_webhook = sub.slack_webhook
            found.categories = dump_list(sub.categories)
            found.max_papers = sub.max_papers
            found.include = dump_list(sorted(sub.include))
            session.add(found)
            session.flush()
            _naive_rules(session, found, sub, now=now)
        session.commit()


def _naive_rules(session: Session, row: SubscriberRow, sub: Subscriber, *, now: datetime) -> None:
    query = select(RuleRow).where(RuleRow.subscriber_id == row.id).order_by(col(RuleRow.id))
    stored = list(session.exec(query).all())
    wanted = [(text, sub.label_of(text)) for text in sub.rules]
    if [(r.text, r.label) for r in stored] == wanted:
        return
    since = {r.text: r.created_at for r in stored}
    for rule in stored:
        session.delete(rule)
    session.flush()
    assert row.id is not None
    for text, label in wanted:
        created = since.get(text, now)
        session.add(RuleRow(subscriber_id=row.id, text=text, label=label, created_at=created))


# ---------------------------------------------------------------------------------------------
# The steps


class Report:
    def __init__(self) -> None:
        self.ok = True

    def line(self, text: str) -> None:
        print(text, flush=True)

    def check(self, what: str, same: bool) -> None:
        self.ok &= same
        self.line(f"    check: {what}: {'OK' if same else 'MISMATCH'}")


def cli_step(report: Report, dbs: Databases, people: Sequence[Person], folder: Path) -> None:
    """(a) The command as a user runs it, twice."""
    url = dbs.fresh()
    config = folder / "cli.toml"
    config.write_text(f'version = 1\n[database]\nurl = "{url}"\n[email]\nfrom = "p@example.org"\n')
    people_file = folder / "people.csv"
    people_file.write_text(people_csv(people), encoding="utf-8")
    command = [sys.executable, "-m", "bot.cli", "subscribe", "-c", str(config)]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    with opened(url):
        pass  # the schema made beforehand, as for the other steps
    version = [*command[:3], "--version"]
    startup = min(
        timed(lambda: subprocess.run(version, env=env, check=True, capture_output=True))[1]
        for _ in range(3)
    )
    for attempt in ("first", "again"):
        done, seconds = timed(
            lambda: subprocess.run(
                [*command, "--from-file", people_file.name],
                env=env,
                capture_output=True,
                text=True,
                cwd=folder,
            )
        )
        if done.returncode != 0:
            report.line(f"(a) FAILED ({done.returncode}): {done.stderr.strip()[:500]}")
            report.ok = False
            return
        said = done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        label = "(a) paperbell subscribe --from-file" if attempt == "first" else "    again"
        report.line(
            f"{label}: {seconds:.2f} s wall (of which starting Python and importing paperbell: "
            f"{startup:.2f} s, the best of 3 `--version`), peak RSS {rss:.0f} MB: {said}"
        )


def api_step(
    report: Report, dbs: Databases, people: Sequence[Person], sample: int, old_sample: int
) -> None:
    """(b) add_many, (d) its baselines, each into a fresh database."""
    from bot.store.subscribers import NewSubscriber

    n = len(people)
    new = [NewSubscriber(name=p.name, email=p.email, rules=p.rules) for p in people]
    with opened(dbs.fresh()) as store:
        added, bulk = timed(lambda: store.subscribers.add_many(new, now=NOW))
        assert len(added.created) == n, added
        _, again = timed(lambda: store.subscribers.add_many(new, now=NOW))
        fast_rows = snapshot(store)
    report.line(
        f"(b) store.subscribers.add_many: {bulk:.2f} s for {n:,} people "
        f"({n / bulk:,.0f}/s); again (all stored, nothing added): {again:.2f} s "
        f"[{'PASS' if bulk <= TARGET_SECONDS * n / 10_000 else 'MISS'}: <= "
        f"{TARGET_SECONDS * n / 10_000:g} s]"
    )
    url = dbs.fresh()
    with opened(url) as store:
        pass
    _, bare = timed(lambda: bare_insert(url, people))
    with opened(url) as store:
        bare_rows = snapshot(store)
    report.line(
        f"(d) baseline, bare executemany ({'sqlite3' if dbs.url is None else 'psycopg'}): "
        f"{bare:.2f} s -> add_many takes {bulk / bare:.1f}x the floor"
    )
    report.check("add_many's rows == the bare inserts' rows", fast_rows == bare_rows)
    part = people[:sample]
    with opened(dbs.fresh()) as store:
        _, single = timed(lambda: one_by_one(store, part))
        single_rows = snapshot(store)
    with opened(dbs.fresh()) as store:
        store.subscribers.add_many(new[:sample], now=NOW)
        bulk_part_rows = snapshot(store)
    whole = single * n / len(part)
    report.line(
        f"    baseline, store.subscribers.add one by one: {single:.2f} s for {len(part):,} "
        f"-> {whole:.1f} s for {n:,} (extrapolated) -> add_many is {whole / bulk:.0f}x faster"
    )
    report.check("add_many's rows == add's rows (the sample)", single_rows == bulk_part_rows)
    if old_sample:
        half = n // 2  # the old add's cost grows with the subscribers stored: its mean
        with opened(dbs.fresh()) as store:
            store.subscribers.add_many(new[:half], now=NOW)
            _, reloaded = timed(lambda: reloading(store, people[half : half + old_sample]))
        per_add = reloaded / old_sample
        report.line(
            f"    baseline, add as before (each add reloads everyone): {reloaded:.2f} s for "
            f"{old_sample:,} adds into {half:,} stored -> ~{per_add * n:,.0f} s for {n:,} from "
            f"empty (extrapolated: {n:,} x the cost at {half:,}) -> add_many is "
            f"~{per_add * n / bulk:,.0f}x faster"
        )


def config_step(report: Report, dbs: Databases, people: Sequence[Person], folder: Path) -> None:
    """(c) A config with N [[subscribers]]: loaded, then synced as `digest` and `run` do."""
    from bot.pipeline.wiring import load_config

    url = dbs.fresh()
    path = folder / "config.toml"
    path.write_text(config_toml(url, people), encoding="utf-8")
    try:
        config, load = timed(lambda: load_config(path, environ={}))
    except ConfigError as exc:  # a config file is at most MAX_CONFIG_BYTES
        report.line(f"(c) config with {len(people):,} [[subscribers]]: not loaded: {exc}")
        return
    declared = config.declared_subscribers()
    with opened(url) as store:
        _, first = timed(lambda: store.subscribers.sync_config(declared, now=NOW))
        _, second = timed(lambda: store.subscribers.sync_config(declared, now=NOW))
        fast_rows = snapshot(store)
    n = len(people)
    report.line(
        f"(c) config with {n:,} [[subscribers]]: load_config {load:.2f} s (not the sync's: "
        f"reading and checking the file); sync_config: first {first:.2f} s, again (no change) "
        f"{second:.2f} s [{'PASS' if first <= TARGET_SECONDS * n / 10_000 else 'MISS'}]"
    )
    with opened(dbs.fresh()) as store:
        _, naive_first = timed(lambda: naive_sync(store, declared, now=NOW))
        _, naive_second = timed(lambda: naive_sync(store, declared, now=NOW))
        naive_rows = snapshot(store)
    report.line(
        f"    baseline, one query per subscriber (sync_config before): first {naive_first:.2f} s, "
        f"again {naive_second:.2f} s -> {naive_first / first:.1f}x, "
        f"{naive_second / second:.1f}x faster"
    )
    report.check("sync_config's rows == the per-subscriber sync's", fast_rows == naive_rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=10_000)
    parser.add_argument("--sample", type=int, default=1_000, help="for the one-by-one baseline")
    parser.add_argument(
        "--old-sample", type=int, default=100, help="adds timed for add as it was (0: none)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--database-url", help="a PostgreSQL database of its own (emptied)")
    parser.add_argument(
        "--only", choices=("cli", "api", "config"), action="append", help="only these steps"
    )
    args = parser.parse_args()
    steps = set(args.only or ("cli", "api", "config"))
    people = make_people(args.people, args.seed)
    rules = sum(len(p.rules) for p in people)
    report = Report()
    with tempfile.TemporaryDirectory(prefix="paperbell-bulk-") as tmp:
        folder = Path(tmp)
        dbs = Databases(args.database_url, folder)
        report.line(
            f"{len(people):,} people, {rules:,} rules (1-3 each, title words of the "
            f"2024-11-28 listing), seed {args.seed}; {dbs.kind}; Python {sys.version.split()[0]}"
        )
        if "cli" in steps:
            cli_step(report, dbs, people, folder)
        if "api" in steps:
            sample = min(args.sample, len(people))
            api_step(report, dbs, people, sample, min(args.old_sample, len(people) // 2))
        if "config" in steps:
            config_step(report, dbs, people, folder)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
