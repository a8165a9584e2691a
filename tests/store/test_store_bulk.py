"""Many subscribers at once (bot.store.bulk) on a real database: SQLite file, or PostgreSQL
with PAPERBELL_TEST_DATABASE_URL. `add_many` stores what `add` stores, one person at a time;
`sync_config` mirrors the config file as it always did, in a few queries. Queries are asked
a few names at a time here (`CHUNK`), so that every chunked path runs."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import col, select

import bot.store.bulk
from bot.core.errors import StoreError
from bot.core.models import Subscriber
from bot.store import NewSubscriber, Store
from bot.store.tables import RuleRow, SubscriberRow

pytestmark = pytest.mark.database
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LATER = NOW + timedelta(days=3)


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bot.store.bulk, "CHUNK", 3)


def everyone(store: Store) -> dict[str, Subscriber]:
    return {s.name: s for s in store.subscribers.all(include_inactive=True)}


def test_add_many_stores_what_add_stores(store: Store) -> None:
    people = [
        NewSubscriber(
            name=f"p{n}",
            email=f"p{n}@lab.example",
            rules=["robot", '"diffusion policy"', "robot"][: 1 + n % 3],
            labels={"robot": "Robots"} if n % 2 else {},
            categories=("cs.RO",) if n % 4 == 0 else (),
            include=("new", "replace") if n == 5 else None,
            settings={"schedule": "weekly", "day": "friday", "max_papers": 7} if n == 3 else {},
        )
        for n in range(8)
    ]
    added = store.subscribers.add_many(people, now=NOW)
    assert added.created == tuple(f"p{n}" for n in range(8)) and added.existing == ()
    bulk = everyone(store)
    for person in people:  # the same, one at a time, under another name
        twin = f"twin-{person.name}"
        store.subscribers.add(
            twin,
            email=person.email,
            rules=person.rules,
            now=NOW,
            labels=person.labels,
            categories=person.categories,
            include=person.include,
        )
        if person.settings:
            store.subscribers.set_schedule(twin, **person.settings)
    one_by_one = everyone(store)
    for person in people:
        twin = one_by_one[f"twin-{person.name}"]
        assert replace(twin, id=None, name="") == replace(bulk[person.name], id=None, name="")
    assert bulk["p2"].rules == ("robot", '"diffusion policy"')  # a rule given twice, once
    assert bulk["p3"].max_papers == 7 and bulk["p3"].schedule.describe().startswith("weekly")


def test_add_many_leaves_the_stored_as_they_are(store: Store) -> None:
    store.subscribers.sync_config([Subscriber(name="ada", email="a@x.org", rules=("x",))], now=NOW)
    store.subscribers.add("bob", email="bob@x.org", rules=["old"], now=NOW)
    assert store.subscribers.set_active("bob", False, now=NOW)
    people = [
        NewSubscriber(name=name, email=f"{name}@lab.example", rules=["new"])
        for name in ("cy", "bob", "ada", "dee")
    ]
    added = store.subscribers.add_many(people, now=LATER)
    assert (added.created, added.existing) == (("cy", "dee"), ("bob", "ada"))
    found = everyone(store)
    assert not found["bob"].active and found["bob"].rules == ("old",)  # still unsubscribed
    assert found["bob"].email == "bob@x.org"
    assert store.subscribers.add_many(people, now=LATER).created == ()


A, B = NewSubscriber("a", "a@x.org", ["x"]), NewSubscriber("b", "b@x.org", ["1", "2"])


@pytest.mark.parametrize(
    ("people", "max_rules", "error", "said"),
    [
        ([A, replace(B, name="a")], None, StoreError, "'a' is given twice"),
        ([A, B], 1, StoreError, "'b' would have 2 rules, more than the 1"),
        (
            [replace(B, labels={"1": "L", "2": "l"})],
            None,
            StoreError,
            "'b' has a rule labelled 'l' already",
        ),
        ([replace(A, settings={"name": "b"})], None, ValueError, "not a subscriber setting"),
    ],
)
def test_add_many_refuses_before_it_writes(
    store: Store,
    people: list[NewSubscriber],
    max_rules: int | None,
    error: type[Exception],
    said: str,
) -> None:
    with pytest.raises(error, match=said):
        store.subscribers.add_many(people, now=NOW, max_rules=max_rules)
    assert everyone(store) == {}


def stored_rules(store: Store) -> dict[str, list[tuple[str, str | None, datetime]]]:
    """Each stored subscriber's rules, in the order `list` numbers them."""
    with store.database.session() as session:
        names = {row.id: row.name for row in session.exec(select(SubscriberRow))}
        found: dict[str, list[tuple[str, str | None, datetime]]] = {}
        for rule in session.exec(select(RuleRow).order_by(col(RuleRow.id))):
            found.setdefault(names[rule.subscriber_id], []).append(
                (rule.text, rule.label, rule.created_at.replace(tzinfo=UTC))
            )
        return found


def test_sync_config_mirrors_the_file_as_before(store: Store) -> None:
    subs = [
        Subscriber(name=f"s{n}", email=f"s{n}@lab.example", rules=("robot", f"topic{n}"))
        for n in range(10)
    ]
    store.subscribers.sync_config(subs, now=NOW)
    mirrored = store.subscribers.all(subs)
    assert [(s.name, s.id is not None) for s in mirrored] == [(s.name, True) for s in subs]
    assert {r.origin for r in store.subscribers.records()} == {"config"}
    assert stored_rules(store)["s4"] == [("robot", None, NOW), ("topic4", None, NOW)]
    store.subscribers.set_active("s1", False, now=NOW)
    changed = list(subs)
    changed[0] = replace(subs[0], email="new@lab.example", categories=("cs.LG",), max_papers=9)
    changed[2] = replace(subs[2], rules=("topic2", "swarm"), labels={"swarm": "Swarms"})
    changed[3] = replace(subs[3], rules=("topic3", "robot"))  # the order is the file's
    changed.append(Subscriber(name="s10", email=None, rules=("x",), slack_channel="#robots"))
    store.subscribers.sync_config(changed, now=LATER)
    rules = stored_rules(store)
    assert rules["s2"] == [("topic2", None, NOW), ("swarm", "Swarms", LATER)]
    assert rules["s3"] == [("topic3", None, NOW), ("robot", None, NOW)]  # kept: their times too
    assert rules["s10"] == [("x", None, LATER)] and rules["s5"] == [
        ("robot", None, NOW),
        ("topic5", None, NOW),
    ]
    with store.database.session() as session:
        rows = {r.name: r for r in session.exec(select(SubscriberRow))}
    assert (rows["s0"].email, rows["s0"].categories, rows["s0"].max_papers) == (
        "new@lab.example",
        '["cs.LG"]',
        9,
    )
    assert rows["s10"].slack_channel == "#robots" and rows["s10"].origin == "config"
    assert not rows["s1"].active  # an unsubscribe stays in force
    assert [rows[f"s{n}"].id for n in range(11)] == sorted(rows[f"s{n}"].id for n in range(11))
    before = stored_rules(store)
    store.subscribers.sync_config(changed, now=LATER + timedelta(days=1))  # nothing changed
    assert stored_rules(store) == before
    # A name twice in the list: the last one, as the one-at-a-time sync had it.
    store.subscribers.sync_config([*changed, replace(subs[5], rules=("last",))], now=LATER)
    assert stored_rules(store)["s5"] == [("last", None, LATER)]


def test_sync_config_refuses_a_database_name_and_writes_nothing(store: Store) -> None:
    store.subscribers.add("bob", email="bob@x.org", rules=["x"], now=NOW)
    subs = [Subscriber(name=n, email=f"{n}@x.org", rules=("y",)) for n in ("ada", "bob", "cy")]
    with pytest.raises(StoreError, match="'bob' is in the config file and in the database"):
        store.subscribers.sync_config(subs, now=NOW)
    assert set(everyone(store)) == {"bob"}


def test_add_many_meets_a_subscriber_added_meanwhile(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process added one of them between the look-up and the insert: the unique
    name refuses it, nothing is added, and running it again is the way out."""
    store.subscribers.add("bob", email="bob@x.org", rules=["x"], now=NOW)
    monkeypatch.setattr(bot.store.bulk, "_stored_names", lambda session, names: iter(()))
    people = [NewSubscriber("ada", "a@x.org", ["y"]), NewSubscriber("bob", "b@x.org", ["y"])]
    with pytest.raises(StoreError, match="another process added some of these subscribers"):
        store.subscribers.add_many(people, now=NOW)
    assert set(everyone(store)) == {"bob"}
    monkeypatch.undo()
    assert store.subscribers.add_many(people, now=NOW).created == ("ada",)
