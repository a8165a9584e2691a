"""The store on a real database: SQLite file, or PostgreSQL with PAPERBELL_TEST_DATABASE_URL."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, time
from pathlib import Path
from time import monotonic

import pytest

from bot.core.errors import StoreError
from bot.core.models import Paper, Subscriber
from bot.core.schedule import Defaults, Schedule
from bot.sources import FetchState
from bot.store import Store

pytestmark = pytest.mark.database
NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)


def test_upsert_counts_and_keeps_the_latest_version(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    counts = store.papers.upsert(full_feed_papers, now=NOW)
    assert (counts.new, counts.updated, counts.unchanged) == (1504, 0, 0)
    again = store.papers.upsert(full_feed_papers, now=NOW)
    assert (again.new, again.updated, again.unchanged) == (0, 0, 1504)
    assert store.papers.count() == 1504

    paper = full_feed_papers[0]
    v2 = replace(paper, version=paper.version + 1, title="Second version", announce_type="replace")
    assert store.papers.upsert([v2], now=NOW).updated == 1
    older = replace(paper, title="stale copy")
    assert store.papers.upsert([older], now=NOW).unchanged == 1
    stored = {p.id: p for p in store.papers.announced_since(date(2024, 11, 28))}
    assert stored[paper.id].version == paper.version + 1
    assert stored[paper.id].title == "Second version"
    assert stored[paper.id].authors == paper.authors
    assert store.papers.latest_announcement() == date(2024, 11, 28)
    assert store.papers.announced_since(date(2024, 11, 29)) == []


def test_round_trip_of_every_field(store: Store, full_feed_papers: tuple[Paper, ...]) -> None:
    with_doi = next(p for p in full_feed_papers if p.dois and p.journal_ref)
    store.papers.upsert([with_doi], now=NOW)
    expected = replace(with_doi, first_announced=with_doi.announced, first_type="new")
    assert store.papers.announced_since(date(2000, 1, 1)) == [expected]


def test_the_first_announcement_survives_an_update(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    v1 = next(p for p in full_feed_papers if p.announce_type == "new")
    store.papers.upsert([v1], now=NOW)
    v2 = replace(v1, version=2, announce_type="replace", announced=date(2024, 11, 29))
    store.papers.upsert([v2], now=NOW)
    (stored,) = store.papers.announced_since(date(2024, 11, 1))
    assert (stored.version, stored.announce_type, stored.announced) == (2, "replace", v2.announced)
    assert (stored.first_type, stored.first_announced) == ("new", v1.announced)


def test_fetch_state_is_kept_per_source(store: Store) -> None:
    assert store.sources.fetch_state("arxiv") == FetchState()
    store.sources.record_poll(
        "arxiv", url="u", now=NOW, result="ok", state=FetchState('"abc"', "Thu"), items=3, new=3
    )
    assert store.sources.fetch_state("arxiv") == FetchState('"abc"', "Thu")
    store.sources.record_poll("arxiv", url="u", now=NOW, result="error", error="boom")
    # errors keep validators
    assert store.sources.fetch_state("arxiv") == FetchState('"abc"', "Thu")
    assert store.sources.fetch_state("arxiv", "u") == FetchState('"abc"', "Thu")
    assert store.sources.fetch_state("arxiv", "https://new-url") == FetchState()  # URL changed
    (row,) = store.sources.states()
    assert (row.last_result, row.last_error, row.items) == ("error", "boom", 3)


def test_each_sources_newest_listing_and_its_repair(store: Store) -> None:
    now = datetime(2026, 11, 24, 5, 15, tzinfo=UTC)
    for day, items in (
        (date(2026, 11, 20), 230),
        (date(2026, 11, 23), 16),
        (date(2026, 11, 24), 9),
    ):
        store.sources.record_listing("arxiv-cs", day, items=items, now=now)
    store.sources.record_listing("arxiv-cs", date(2026, 11, 24), items=7, now=now)  # the most
    store.sources.record_listing("arxiv-math", date(2026, 11, 20), items=40, now=now)
    store.sources.record_repair(
        "arxiv-math", date(2026, 11, 24), reason="stale", now=now, papers=41, new=38
    )
    newest = store.sources.latest_listings()
    assert {name: (n.day.day, n.items) for name, n in newest.items()} == {
        "arxiv-cs": (24, 9),
        "arxiv-math": (24, 0),
    }
    assert (newest["arxiv-math"].repaired, newest["arxiv-math"].repaired_new) == (41, 38)
    assert store.sources.newest_listing("arxiv-cs") == newest["arxiv-cs"]
    assert store.sources.newest_listing("nothing") is None
    earlier = store.sources.listings("arxiv-cs", before=date(2026, 11, 24))
    assert [(n.day.day, n.items) for n in earlier] == [(23, 16), (20, 230)]


def test_subscribers_from_config_and_database(store: Store) -> None:
    ada = Subscriber(name="ada", email="ada@example.org", rules=("robot",))
    store.subscribers.sync_config([ada], now=NOW)
    bob, created = store.subscribers.add(
        "bob", email="bob@example.org", rules=["a", "b", "a"], now=NOW, categories=["cs"]
    )
    assert created and bob.rules == ("a", "b") and bob.categories == ("cs",)
    bob, created = store.subscribers.add("bob", email=None, rules=["c"], now=NOW)
    assert not created and bob.rules == ("a", "b", "c") and bob.email == "bob@example.org"
    names = [(s.name, s.origin, s.id is not None) for s in store.subscribers.all([ada])]
    assert names == [("ada", "config", True), ("bob", "database", True)]

    assert store.subscribers.remove_rule("bob", 2) == ("b", False)
    with pytest.raises(StoreError, match="has no rule 5"):
        store.subscribers.remove_rule("bob", 5)
    assert store.subscribers.remove_rule("bob", 2) == ("c", False)
    with pytest.raises(StoreError, match="is the last rule of 'bob'"):
        store.subscribers.remove_rule("bob", 1)
    with pytest.raises(StoreError, match="declared in the config file"):
        store.subscribers.add("ada", email=None, rules=["x"], now=NOW)

    assert store.subscribers.set_active("ada", False, now=NOW)
    store.subscribers.sync_config([ada], now=NOW)  # the file does not undo an unsubscribe
    assert [s.name for s in store.subscribers.all([ada])] == ["bob"]
    assert [s.active for s in store.subscribers.all([ada], include_inactive=True)] == [False, True]
    store.subscribers.delete("bob")
    assert store.subscribers.all([]) == []


def test_one_subscriber_is_read_by_id_name_or_slack_place_as_everyone_s_list_has_it(
    store: Store,
) -> None:
    """`stored` reads the subscriber of a record (`get` by id or name, `by_slack`) alone,
    the same value `all` gives: rules in order, labels, destinations, schedule defaults, a
    config file's with its stored id and state (and none once the file drops it)."""
    ada = Subscriber(name="ada", email="ada@example.org", rules=("robot", "arm"), slack_user="U1")
    store.subscribers.sync_config([ada], now=NOW)
    store.subscribers.set_active("ada", False, now=NOW)
    store.subscribers.add(
        "bob", email=None, rules=["b", "a"], now=NOW, slack_user="U2", labels={"a": "A"}
    )
    store.subscribers.add("cy", email="cy@example.org", rules=["c"], now=NOW, slack_channel="C9")
    store.subscribers.set_schedule("cy", schedule="weekly", day="friday")
    bob = store.subscribers.get("bob")
    assert bob is not None
    store.targets.add_destination(bob.id, "apprise:abc", "json://example.org/hook", now=NOW)
    defaults = Defaults(Schedule(at=time(7, 30), timezone="Europe/Paris"), notify_empty=True)
    declared = {"ada": ada}.get
    everyone = store.subscribers.all([ada], include_inactive=True, defaults=defaults)
    assert [s.name for s in everyone] == ["ada", "bob", "cy"]
    for sub in everyone:
        assert sub.id is not None
        by_id, by_name = store.subscribers.get(sub.id), store.subscribers.get(sub.name)
        assert by_id is not None and by_id == by_name
        assert store.subscribers.stored(by_id, declared=declared, defaults=defaults) == sub
    for user, channel, name in (("U1", None, "ada"), ("U2", None, "bob"), (None, "C9", "cy")):
        record = store.subscribers.by_slack(user=user, channel=channel)
        assert record is not None
        found = store.subscribers.stored(record, declared=declared, defaults=defaults)
        assert found is not None and found.name == name
    # Counted as `all` lists them: a config subscriber the file declares, stored or not.
    assert store.subscribers.tally(["ada"]) == (2, 1)
    assert store.subscribers.tally(["ada", "dan"]) == (3, 1)
    assert store.subscribers.tally([]) == (2, 0)
    store.subscribers.set_active("bob", False, now=NOW)
    assert store.subscribers.tally(["ada"]) == (1, 2)
    ada_record = store.subscribers.get("ada")
    assert ada_record is not None
    assert store.subscribers.stored(ada_record) is None  # the file declares it no more
    assert store.subscribers.get("nobody") is None and store.subscribers.get(10**6) is None


def test_rules_keep_their_labels(store: Store) -> None:
    marl = 'marl OR "multi-agent reinforcement learning"'
    ada, _ = store.subscribers.add(
        "ada", email="ada@example.org", rules=["robot", marl], now=NOW, labels={marl: "MARL"}
    )
    assert ada.labels == {marl: "MARL"} and ada.label_of("robot") is None
    # A rule given again with a label is labelled; without one, it keeps its label.
    ada, _ = store.subscribers.add(
        "ada", email=None, rules=["robot", marl], now=NOW, labels={"robot": "robots"}
    )
    assert ada.rules == ("robot", marl) and ada.labels == {"robot": "robots", marl: "MARL"}
    with pytest.raises(StoreError, match="has a rule labelled 'marl' already"):
        store.subscribers.add_rule("ada", "drone", now=NOW, label="marl")
    with pytest.raises(StoreError, match="has a rule labelled 'Robots' already"):
        store.subscribers.add("ada", email=None, rules=["x"], now=NOW, labels={"x": "Robots"})
    assert store.subscribers.rule_texts("ada") == ["robot", marl]  # nothing changed
    assert store.subscribers.add_rule("ada", "drone", now=NOW, label="drones")
    assert not store.subscribers.add_rule("ada", "drone", now=NOW, label="other")
    # Editing a rule keeps its label unless one is given (None: none).
    assert store.subscribers.replace_rule("ada", 3, "drone*") == "drone"
    assert store.subscribers.replace_rule("ada", 1, "robot*", label=None) == "robot"
    assert store.subscribers.set_label("ada", 2, "multi-agent RL") == marl
    (ada,) = store.subscribers.all()
    assert ada.rules == ("robot*", marl, "drone*")
    assert ada.labels == {marl: "multi-agent RL", "drone*": "drones"}
    assert store.subscribers.set_label("ada", 3, None) == "drone*"
    with pytest.raises(StoreError, match="has no rule 4"):
        store.subscribers.set_label("ada", 4, "x")
    (ada,) = store.subscribers.all()
    assert ada.labels == {marl: "multi-agent RL"}


def test_config_subscribers_rules_and_labels_are_mirrored(store: Store) -> None:
    """The file stays the truth (the pipeline reads it), but the store holds the same rules
    and labels, in the file's order, for whatever reads only the store."""
    ada = Subscriber(
        name="ada", email="ada@example.org", rules=("robot", "drone"), labels={"drone": "UAV"}
    )
    store.subscribers.sync_config([ada], now=NOW)

    def stored() -> list[tuple[str, str | None, datetime]]:
        from sqlmodel import col, select

        from bot.store.tables import RuleRow

        with store.database.session() as session:
            rows = session.exec(select(RuleRow).order_by(col(RuleRow.id))).all()
            return [(r.text, r.label, r.created_at.replace(tzinfo=UTC)) for r in rows]

    assert stored() == [("robot", None, NOW), ("drone", "UAV", NOW)]
    later = datetime(2024, 12, 2, tzinfo=UTC)
    changed = replace(ada, rules=("swarm", "drone"), labels={"drone": "drones", "swarm": "S"})
    store.subscribers.sync_config([changed], now=later)
    assert stored() == [("swarm", "S", later), ("drone", "drones", NOW)]
    store.subscribers.sync_config([changed], now=datetime(2025, 1, 1, tzinfo=UTC))
    assert stored() == [("swarm", "S", later), ("drone", "drones", NOW)]
    (mirrored,) = store.subscribers.all([changed])
    assert mirrored.labels == {"drone": "drones", "swarm": "S"}
    assert store.subscribers.rule_texts("ada") == ["swarm", "drone"]


def queue_digest(
    store: Store,
    subscriber_id: int,
    digest_id: str,
    sent: Sequence[Paper],
    omitted: Sequence[Paper] = (),
) -> int | None:
    """Queue an email digest for ada of these papers (None: already queued)."""
    return store.outbox.enqueue(
        subscriber_id,
        channel="email",
        period=digest_id,
        digest_id=digest_id,
        recipient="ada@example.org",
        payload=b"message",
        sent=sent,
        omitted=omitted,
        now=NOW,
    )


def test_deliveries_are_unique_and_recorded_once(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    sub, _ = store.subscribers.add("ada", email="ada@example.org", rules=["x"], now=NOW)
    assert sub.id is not None
    first, second, third = full_feed_papers[:3]

    def queue(digest_id: str, sent: list[Paper], omitted: list[Paper]) -> int | None:
        assert sub.id is not None
        return queue_digest(store, sub.id, digest_id, sent, omitted)

    d1 = queue("d1", [first, second], [third])
    assert d1 is not None
    store.outbox.mark_sent(d1, owner="worker", now=NOW)
    # A paper already queued or sent is never queued again, not even in another digest.
    assert queue("d1b", [first], []) is None
    v2 = replace(first, version=first.version + 1)
    d2 = queue("d2", [v2, v2], [v2])  # duplicates inside one digest are recorded once
    assert d2 is not None
    store.outbox.mark_sent(d2, owner="worker", now=NOW)
    delivered = store.outbox.delivered_versions(sub.id, "email")
    assert delivered == {first.id: v2.version, second.id: second.version, third.id: third.version}
    assert store.outbox.delivered_versions(sub.id, "slack") == {}
    # Papers sent: the two papers (its new version does not make `first` two papers);
    # omitted papers are not counted as sent.
    assert store.outbox.delivery_counts()[sub.id][0] == 2


def test_deleting_a_subscriber_takes_its_outbox_and_deliveries_along(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """`unsubscribe --delete` of someone with digests sent and queued: on PostgreSQL the
    outbox's foreign key refused the delete with a raw IntegrityError."""
    sub, _ = store.subscribers.add("ada", email="ada@example.org", rules=["x"], now=NOW)
    assert sub.id is not None
    for period, papers in (("d1", full_feed_papers[:2]), ("d2", full_feed_papers[2:3])):
        queued = queue_digest(store, sub.id, period, papers)
        assert queued is not None
        if period == "d1":
            store.outbox.mark_sent(queued, owner="worker", now=NOW)
    store.subscribers.delete("ada")
    assert store.subscribers.all([]) == []
    assert store.outbox.totals(now=NOW) == {"pending": 0, "sent": 0, "failed": 0, "in flight": 0}
    again, created = store.subscribers.add("ada", email="ada@example.org", rules=["x"], now=NOW)
    assert created and again.id is not None
    assert store.outbox.delivered_versions(again.id, "email") == {}


def test_bad_database_url_is_a_clear_error(tmp_path: object) -> None:
    with pytest.raises(StoreError, match="cannot open the database"):
        Store.open("sqlite:////nonexistent-dir/sub/x.sqlite")


def test_a_sqlite_file_lets_readers_in_while_a_writer_holds_it(tmp_path: Path) -> None:
    """SQLite files are kept in write-ahead-log mode: lookups (the slash command's, the
    pages') go on while a digest run holds a write transaction open, where the rollback
    journal would make them wait for its end (or fail after the busy timeout)."""
    database = tmp_path / "paperbell.sqlite"
    with Store.open(f"sqlite:///{database}") as store:
        store.subscribers.add("ada", email="ada@example.org", rules=["robot"], now=NOW)
        writer = sqlite3.connect(database, isolation_level=None)
        try:
            writer.execute("BEGIN EXCLUSIVE")
            writer.execute("UPDATE subscribers SET max_papers = 7")
            started = monotonic()
            found = store.subscribers.get("ada")
            assert monotonic() - started < 1
            writer.execute("ROLLBACK")
            mode = writer.execute("PRAGMA journal_mode").fetchone()[0]
        finally:
            writer.close()
    assert found is not None and found.name == "ada"
    assert mode == "wal"
