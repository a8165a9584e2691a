"""The schema's migrations: every one from the baseline gives exactly the tables (SQLite, and
PostgreSQL when PAPERBELL_TEST_DATABASE_URL is set); a database written by 0d0a80b, the last
paperbell without migrations (tests/fixtures/legacy_0d0a80b/), is recognised, upgraded
with `paperbell db upgrade`, and keeps every subscriber, rule and delivery; an older schema
is refused by the commands with the line that says what to run."""

from __future__ import annotations

import gzip
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from click.testing import CliRunner
from sqlalchemy import MetaData, create_engine, event, text
from sqlalchemy import inspect as sqlalchemy_inspect
from support.cli import run
from support.database import differences, index_names, migrate_to
from support.paths import FIXTURES, FULL_FEED
from support.servers import smtp_sink

import bot
from bot.cli import main
from bot.core.errors import OutdatedSchema, StoreError
from bot.core.models import Feedback, Paper
from bot.store import Queued, Store, normalize_url, schema_state, upgrade_schema
from bot.store.schema import BASELINE, alembic_config, head, scripts

LEGACY = FIXTURES / "legacy_0d0a80b"
LISTING = FULL_FEED


# A subscriber row as every schema since the baseline takes it, in raw SQL: the models
# are the newest schema's, not the revision a test writes at (`insert_subscriber`).
SUBSCRIBER_ROW: dict[str, object] = {
    "name": "ada",
    "email": "ada@example.org",
    "origin": "database",
    "active": True,
    "categories": "[]",
    "max_papers": 20,
    "include": '["new"]',
    "email_confirmed": True,
    "email_format": "html",
    "abstracts": "short",
}


def insert_subscriber(connection: Any, when: str, **columns: object) -> int:
    """Write a subscriber (`SUBSCRIBER_ROW`, made at `when`, with `columns` changed or
    added: a later revision's own); its id."""
    row = {**SUBSCRIBER_ROW, "created_at": when, **columns}
    insert_row(connection, "subscribers", row)
    found = text("SELECT id FROM subscribers WHERE name = :name")
    return int(connection.execute(found, {"name": row["name"]}).scalar_one())


def insert_sent_email(connection: Any, subscriber_id: int, when: object, **columns: object) -> None:
    """Write an outbox record of an email sent at `when` to ada@example.org (digest d1),
    with `columns` changed or added (before 0013, its `payload`)."""
    row = {
        "subscriber_id": subscriber_id,
        "channel": "email",
        "period": "daily:2026-11-01",
        "digest_id": "d1",
        "recipient": "ada@example.org",
        "papers": 1,
        "omitted": 0,
        "status": "sent",
        "attempts": 0,
        "next_attempt": when,
        "created_at": when,
        "sent_at": when,
        **columns,
    }
    insert_row(connection, "outbox", row)


def insert_row(connection: Any, table: str, row: dict[str, object]) -> None:
    """Write `row` (column -> value) into `table` in raw SQL, as any revision takes it."""
    names, values = ", ".join(row), ", ".join(f":{name}" for name in row)
    connection.execute(text(f"INSERT INTO {table} ({names}) VALUES ({values})"), row)


@pytest.mark.database
def test_every_migration_from_the_baseline_gives_the_tables(database_url: str) -> None:
    revisions = [script.revision for script in scripts().walk_revisions()][::-1]
    assert revisions[0] == BASELINE and revisions[-1] == head()
    for revision in revisions:  # one at a time, as databases of each version would
        migrate_to(database_url, revision)
    assert differences(database_url) == []
    assert schema_state(database_url).up_to_date


@pytest.mark.database
def test_a_new_database_is_made_by_the_migrations(database_url: str) -> None:
    assert not schema_state(database_url).exists
    Store.open(database_url).close()
    state = schema_state(database_url)
    assert state.current == head() and state.up_to_date
    assert differences(database_url) == []


@pytest.mark.database
def test_an_unversioned_database_with_the_later_tables_is_stamped_and_upgraded(
    database_url: str,
) -> None:
    # Made by a paperbell between 0d0a80b and migrations: it created source_left_out,
    # slack_request and rule_counts on first use (the schema of revision 0002), and has no
    # revision.
    migrate_to(database_url, "0002")
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        connection.execute(text("DROP TABLE alembic_version"))
    engine.dispose()
    state = schema_state(database_url)
    assert state.unversioned and not state.up_to_date
    with pytest.raises(OutdatedSchema):
        Store.open(database_url)
    before, done = upgrade_schema(database_url)
    assert before.unversioned and done is not None and done.before == BASELINE
    assert differences(database_url) == []
    assert upgrade_schema(database_url)[1] is None  # up to date: nothing to do


@pytest.mark.database
def test_0003_keeps_each_sources_polls_and_dates_its_last_success(database_url: str) -> None:
    """Revision 0003 adds source health: a source whose last poll worked has that poll as
    its last success; one whose last poll failed fails since then."""
    migrate_to(database_url, "0002")
    engine = create_engine(normalize_url(database_url))
    polled = "2026-11-24 05:15:00+00:00"
    with engine.begin() as connection:
        for name, result in (("arxiv-cs", "ok"), ("hf", "error"), ("feed", "not_modified")):
            connection.execute(
                text(
                    "INSERT INTO source_state (name, url, last_poll, last_result, items, new, "
                    "updated) VALUES (:name, '', :polled, :result, 3, 1, 0)"
                ),
                {"name": name, "polled": polled, "result": result},
            )
    engine.dispose()
    migrate_to(database_url, "0003")
    migrate_to(database_url, head())  # read by today's store: later revisions keep it
    with Store.open(database_url) as store:
        states = {s.name: s for s in store.sources.states()}
    assert states["arxiv-cs"].last_success == states["arxiv-cs"].last_poll is not None
    assert states["feed"].last_success == states["feed"].last_poll
    assert states["hf"].last_success is None
    assert states["hf"].failing_since == states["hf"].last_poll is not None
    assert (states["arxiv-cs"].items, states["arxiv-cs"].new) == (3, 1)


@pytest.mark.database
def test_0004_keeps_every_subscriber_and_gives_them_english_abstracts(database_url: str) -> None:
    """Revision 0004 adds summaries and translations: every stored subscriber keeps its
    settings and gets none of them until asked (summaries off, no language)."""
    migrate_to(database_url, "0003")
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        subscriber_id = insert_subscriber(
            connection, "2026-11-01 08:00:00+00:00", email_format="text", abstracts="full"
        )
        connection.execute(
            text(
                "INSERT INTO rules (subscriber_id, text, created_at) VALUES "
                "(:sid, 'diffusion', '2026-11-01 08:00:00+00:00')"
            ),
            {"sid": subscriber_id},
        )
    engine.dispose()
    migrate_to(database_url, "0004")
    migrate_to(database_url, head())  # read by today's store: later revisions keep it
    assert differences(database_url) == []
    with Store.open(database_url) as store:
        (ada,) = store.subscribers.all()
    assert (ada.name, ada.email, ada.rules, ada.max_papers) == (
        "ada",
        "ada@example.org",
        ("diffusion",),
        20,
    )
    assert (ada.email_format, ada.abstracts) == ("text", "full")
    assert (ada.summaries, ada.language) == (False, None)


@pytest.mark.database
def test_0005_keeps_every_rule_from_the_oldest_database_and_labels_none(
    database_url: str,
) -> None:
    """Revision 0005 adds rule labels: a database at the oldest schema (the baseline, as
    0d0a80b wrote it) keeps every subscriber and rule, in order, each shown as itself (no
    label) until one is given; going back to 0004 keeps the rules and drops the labels."""
    migrate_to(database_url, BASELINE)
    engine = create_engine(normalize_url(database_url))
    when = "2026-11-01 08:00:00+00:00"
    with engine.begin() as connection:
        ids = {
            name: insert_subscriber(connection, when, name=name, email=f"{name}@example.org")
            for name in ("ada", "bob")
        }
        for sid, rule in (
            (ids["ada"], '"diffusion policy"'),
            (ids["bob"], "robot cat:cs.RO"),
            (ids["ada"], 'marl OR "multi-agent reinforcement learning"'),
        ):
            connection.execute(
                text("INSERT INTO rules (subscriber_id, text, created_at) VALUES (:s, :t, :w)"),
                {"s": sid, "t": rule, "w": when},
            )
    engine.dispose()
    migrate_to(database_url, "0004")
    migrate_to(database_url, "0005")
    migrate_to(database_url, head())  # read by today's store: later revisions keep it
    assert differences(database_url) == []
    with Store.open(database_url) as store:
        ada, bob = store.subscribers.all()
        assert ada.rules == ('"diffusion policy"', 'marl OR "multi-agent reinforcement learning"')
        assert bob.rules == ("robot cat:cs.RO",)
        assert ada.labels == bob.labels == {}
        assert store.subscribers.set_label("ada", 2, "multi-agent RL") == ada.rules[1]
        (ada, _) = store.subscribers.all()
        assert ada.labels == {ada.rules[1]: "multi-agent RL"}
    migrate_to(database_url, head())

    engine = create_engine(normalize_url(database_url))
    try:
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), "0004")
        with engine.connect() as connection:
            kept = connection.execute(text("SELECT text FROM rules ORDER BY id")).scalars().all()
    finally:
        engine.dispose()
    assert kept == ['"diffusion policy"', "robot cat:cs.RO", ada.rules[1]]


@pytest.mark.database
def test_0006_keeps_every_subscriber_from_the_oldest_database_with_no_feedback(
    database_url: str,
) -> None:
    """Revision 0006 adds verdicts on papers, vectors and fitted models: a database at the
    oldest schema keeps every subscriber and rule, each with no verdicts and the default
    similar papers setting (up to 5, the ranking's own threshold), so each digests as before;
    going back to 0005 keeps them and drops the verdicts."""
    migrate_to(database_url, BASELINE)
    engine = create_engine(normalize_url(database_url))
    when = "2026-11-01 08:00:00+00:00"
    with engine.begin() as connection:
        sid = insert_subscriber(connection, when)
        connection.execute(
            text("INSERT INTO rules (subscriber_id, text, created_at) VALUES (:s, :t, :w)"),
            {"s": sid, "t": '"diffusion policy"', "w": when},
        )
    engine.dispose()
    migrate_to(database_url, "0005")
    migrate_to(database_url, "0006")
    migrate_to(database_url, head())  # read by today's store: later revisions keep it
    assert differences(database_url) == []
    later = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
    with Store.open(database_url) as store:
        (ada,) = store.subscribers.all()
        assert ada.rules == ('"diffusion policy"',)
        assert (ada.similar_max, ada.similar_min) == (5, None)
        assert store.feedback.of_all() == {}
        liked = Feedback("2411.18179", "like", "command", "A title", "A title\n\nText", later)
        assert store.feedback.set(sid, liked)
        assert store.feedback.of(sid) == [liked]

    engine = create_engine(normalize_url(database_url))
    try:
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), "0005")
        with engine.connect() as connection:
            kept = connection.execute(text("SELECT text FROM rules")).scalars().all()
            tables = set(sqlalchemy_inspect(connection).get_table_names())
    finally:
        engine.dispose()
    assert kept == ['"diffusion policy"']
    assert "feedback" not in tables and "subscribers" in tables


@pytest.mark.database
def test_0007_keeps_every_verdict_and_undo_then_removes_it_as_before(database_url: str) -> None:
    """Revision 0007 lets a verdict keep the one it replaced (for Undo): the verdicts stored
    at 0006 are kept, with none before them (Undo removes them, as at 0006); going back to
    0006 keeps the verdicts as they stand."""
    migrate_to(database_url, "0006")
    when = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
    liked = Feedback("2411.18179", "like", "email", "A title", "A title\n\nText", when)
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        sid = insert_subscriber(connection, when, summaries=False, similar_max=5)
        connection.execute(
            text(
                "INSERT INTO feedback (subscriber_id, paper_key, verdict, via, title, text, "
                "created_at) VALUES (:s, '2411.18179', 'like', 'email', 'A title', :t, :w), "
                "(:s, '2411.00001', 'dislike', 'email', '', '', :w)"
            ),
            {"s": sid, "t": liked.text, "w": when},
        )
    engine.dispose()
    migrate_to(database_url, "0007")
    migrate_to(database_url, head())  # read by today's store: later revisions keep it
    assert differences(database_url) == []
    with Store.open(database_url) as store:
        assert store.feedback.of(sid)[0] == liked
        assert store.feedback.take_back(sid, "2411.18179", "like")
        assert [f.key for f in store.feedback.of(sid)] == ["2411.00001"]
        store.feedback.set(sid, Feedback("2411.00001", "like", "slack", created=when))
    engine = create_engine(normalize_url(database_url))
    try:
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), "0006")
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT paper_key, verdict FROM feedback")).all()
    finally:
        engine.dispose()
    assert [tuple(r) for r in rows] == [("2411.00001", "like")]


@pytest.mark.database
def test_0008_keeps_every_delivery_from_the_oldest_database_and_widens_the_channel(
    database_url: str,
) -> None:
    """Revision 0008 gives each target its own channel key: a database at the oldest schema
    keeps every subscriber, outbox record and delivery ("email" and "slack" are their own
    keys), and takes an Apprise target's longer key ("apprise:<12 hex digits>"), URLs given
    on the manage page, apprise_env and paused targets; going back to 0007 keeps the email
    history and drops what only 0008 holds."""
    migrate_to(database_url, BASELINE)
    engine = create_engine(normalize_url(database_url))
    when = "2026-11-01 08:00:00+00:00"
    with engine.begin() as connection:
        sid = insert_subscriber(connection, when)
        insert_sent_email(connection, sid, when, payload=b"message")
        (outbox_id,) = connection.execute(text("SELECT id FROM outbox")).scalars().all()
        connection.execute(
            text(
                "INSERT INTO deliveries (subscriber_id, paper_id, paper_version, channel, "
                "status, digest_id, outbox_id, created_at) "
                "VALUES (:s, '2411.17700', 1, 'email', 'sent', 'd1', :o, :w)"
            ),
            {"s": sid, "o": outbox_id, "w": when},
        )
    engine.dispose()
    migrate_to(database_url, "0007")
    migrate_to(database_url, "0008")
    migrate_to(database_url, head())  # read by today's store: later revisions keep it
    assert differences(database_url) == []
    later = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
    channel = "apprise:" + "0123456789ab"
    with Store.open(database_url) as store:
        (ada,) = store.subscribers.all()
        assert (ada.apprise, ada.apprise_env) == ((), None)
        assert store.outbox.delivered_versions(sid, "email") == {"2411.17700": 1}
        assert store.targets.add_destination(sid, channel, "ntfy://ntfy.example/t", now=later)
        store.subscribers.add("ada", email=None, rules=[], now=later, apprise_env="ADA_CHATS")
        store.targets.pause(sid, channel, "3 digests in a row refused", now=later)
        (ada,) = store.subscribers.all()
        assert (ada.apprise, ada.apprise_env) == (("ntfy://ntfy.example/t",), "ADA_CHATS")
        assert list(store.targets.paused()) == [(sid, channel)]
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO outbox (subscriber_id, channel, period, digest_id, recipient, "
                "papers, omitted, status, attempts, next_attempt, created_at) "
                "VALUES (:s, :c, 'daily:2026-11-27', 'd2', 'ntfy://ntfy.example/t', 1, 0, "
                "'pending', 0, :w, :w)"
            ),
            {"s": sid, "c": channel, "w": later},
        )
        (apprise_id,) = (
            connection.execute(text("SELECT id FROM outbox WHERE channel = :c"), {"c": channel})
            .scalars()
            .all()
        )
        connection.execute(
            text("INSERT INTO outbox_messages (outbox_id, payload) VALUES (:o, :p)"),
            {"o": apprise_id, "p": b"{}"},
        )
        connection.execute(
            text(
                "INSERT INTO deliveries (subscriber_id, paper_id, paper_version, channel, "
                "status, digest_id, outbox_id, created_at) "
                "VALUES (:s, '2411.17700', 1, :c, 'queued', 'd2', :o, :w)"
            ),
            {"s": sid, "c": channel, "o": apprise_id, "w": later},
        )
        command.downgrade(alembic_config(connection), "0007")
    with engine.connect() as connection:
        kept = connection.execute(text("SELECT channel FROM deliveries")).scalars().all()
        boxes = connection.execute(text("SELECT channel FROM outbox")).scalars().all()
        tables = set(sqlalchemy_inspect(connection).get_table_names())
    engine.dispose()
    assert kept == boxes == ["email"]
    assert "destinations" not in tables and "target_pauses" not in tables


@pytest.mark.database
def test_0009_indexes_the_slack_channel_and_keeps_every_subscriber(database_url: str) -> None:
    """Revision 0009 adds an index on subscribers.slack_channel (a channel's commands find
    its subscription through it): a database at the oldest schema keeps its subscribers,
    the channel's is found; going back to 0008 drops the index alone."""
    migrate_to(database_url, BASELINE)
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        for name, channel in (("robots", "C07ROBOTS"), ("ada", None)):
            insert_subscriber(
                connection,
                "2026-11-01 08:00:00+00:00",
                name=name,
                email=None,
                slack_channel=channel,
            )
    engine.dispose()

    def indexes() -> set[str]:
        engine = create_engine(normalize_url(database_url))
        try:
            with engine.connect() as connection:
                found = sqlalchemy_inspect(connection).get_indexes("subscribers")
                return {str(index["name"]) for index in found}
        finally:
            engine.dispose()

    migrate_to(database_url, "0008")
    assert "ix_subscribers_slack_channel" not in indexes()
    migrate_to(database_url, "0009")
    assert "ix_subscribers_slack_channel" in indexes()
    migrate_to(database_url, head())
    assert differences(database_url) == []
    with Store.open(database_url) as store:
        robots = store.subscribers.by_slack(channel=("C07ROBOTS", "#robot-learning"))
        assert robots is not None and robots.name == "robots"
        assert [s.name for s in store.subscribers.all()] == ["ada", "robots"]
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0008")
        names = connection.execute(text("SELECT name FROM subscribers ORDER BY name")).scalars()
        assert list(names) == ["ada", "robots"]
    engine.dispose()
    assert "ix_subscribers_slack_channel" not in indexes()


@pytest.mark.database
def test_0012_gives_the_relays_their_failures_and_keeps_their_slow_downs(database_url: str) -> None:
    """Revision 0012 adds relays.failing_until and failure ([[email.servers]]: a relay that
    cannot be reached is skipped by every process): from the oldest database, through 0011
    with a relay slowed down, it keeps the slow-down and its sends; back to 0011, the same."""
    migrate_to(database_url, BASELINE)
    migrate_to(database_url, "0011")
    slow = datetime(2026, 12, 3, 7, 10, tzinfo=UTC)
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO relays (relay, slow_until, slow_seconds) VALUES (:r, :u, 0.5)"),
            {"r": "smtp.example.org:587", "u": slow},
        )
        connection.execute(
            text("INSERT INTO relay_sends (relay, sent_at) VALUES (:r, :t)"),
            {"r": "smtp.example.org:587", "t": datetime(2026, 12, 3, 7, 0, tzinfo=UTC)},
        )
    engine.dispose()
    migrate_to(database_url, head())
    assert differences(database_url) == []
    now = datetime(2026, 12, 3, 7, 0, 30, tzinfo=UTC)
    with Store.open(database_url) as store:
        state = store.relays.state("smtp.example.org:587", now=now)
        assert (state.slow_until, state.slow_seconds, state.last_hour) == (slow, 0.5, 1)
        assert state.failing_until is None and state.failure is None
        store.relays.fail("smtp.example.org:587", until=slow, why="connection refused")
        state = store.relays.state("smtp.example.org:587", now=now)
        assert (state.failing_until, state.failure) == (slow, "connection refused")
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0011")
        row = connection.execute(text("SELECT relay, slow_seconds FROM relays")).one()
        assert tuple(row) == ("smtp.example.org:587", 0.5)
        columns = {c["name"] for c in sqlalchemy_inspect(connection).get_columns("relays")}
        assert "failing_until" not in columns
    engine.dispose()


@pytest.mark.database
def test_0013_moves_every_message_to_its_own_table_byte_for_byte_and_back(
    database_url: str,
) -> None:
    """Revision 0013 moves each outbox record's message to `outbox_messages` (SQLite wrote
    the whole row again for every status change): from the oldest database, through 0012
    with a sent digest and a pending one, every message is kept byte for byte, the pending
    one is claimed with its message and the archive reads the sent one; back to 0012, the
    messages are in `outbox.payload` again."""
    migrate_to(database_url, BASELINE)
    migrate_to(database_url, "0012")
    when = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
    messages = {
        "d1": b"Subject: sent\r\n\r\n" + bytes(range(256)) * 200,
        "d2": b"Subject: pending\r\n\r\n\xe2\x80\x94 still to go\r\n",
    }
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        sid = insert_subscriber(connection, when)
        for digest_id, status in (("d1", "sent"), ("d2", "pending")):
            insert_sent_email(
                connection,
                sid,
                when,
                period=f"daily:{digest_id}",
                digest_id=digest_id,
                payload=messages[digest_id],
                papers=0,
                status=status,
                sent_at=when if status == "sent" else None,
            )
    engine.dispose()
    migrate_to(database_url, head())
    assert differences(database_url) == []
    with Store.open(database_url) as store:
        (item,) = store.outbox.claim("w1", now=when, lease=timedelta(minutes=5))
        assert (item.digest_id, item.payload) == ("d2", messages["d2"])
        found = store.archive.digest(sid, "d1")
        assert found is not None and found[0].message == messages["d1"]
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0012")
        back = dict(connection.execute(text("SELECT digest_id, payload FROM outbox")).all())
        tables = set(sqlalchemy_inspect(connection).get_table_names())
    engine.dispose()
    assert {d: bytes(p) for d, p in back.items()} == messages
    assert "outbox_messages" not in tables


@pytest.mark.database
def test_0014_indexes_the_outbox_for_bounces_and_keeps_every_record(database_url: str) -> None:
    """Revision 0014 indexes the outbox on lower(recipient) and on sent_at: from the oldest
    database, through 0013 with a sent email, the record is kept and found for a bounce
    to its address in any case; on SQLite the bounce's lookup and the day's count read
    through the indexes (EXPLAIN QUERY PLAN), not every record; back to 0013, the indexes
    alone are gone."""
    migrate_to(database_url, BASELINE)
    migrate_to(database_url, "0013")
    when = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        sid = insert_subscriber(connection, when)
        insert_sent_email(connection, sid, when, recipient="Ada@Example.org")
    engine.dispose()
    names = {("outbox", "ix_outbox_recipient_lower"), ("outbox", "ix_outbox_sent_at")}
    assert ("missing expression index", *sorted(names)[0]) in differences(database_url)
    migrate_to(database_url, head())
    assert differences(database_url) == []
    with Store.open(database_url) as store:
        statements: list[tuple[str, Any]] = []

        def seen(_c: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
            statements.append((statement, parameters))

        event.listen(store.database.engine, "before_cursor_execute", seen)
        found = store.bounces.latest_to("ADA@example.ORG", since=when - timedelta(days=7))
        assert found is not None and found.digest_id == "d1"
        assert store.bounces.day(when.date()).sent == 1
        event.remove(store.database.engine, "before_cursor_execute", seen)
        if store.database.engine.dialect.name == "sqlite":
            with store.database.engine.connect() as connection:
                plans = [
                    " ".join(
                        str(row[-1])
                        for row in connection.exec_driver_sql(
                            "EXPLAIN QUERY PLAN " + statement, parameters
                        )
                    )
                    for statement, parameters in statements
                    if "FROM outbox" in statement
                ]
            assert any("USING INDEX ix_outbox_recipient_lower" in plan for plan in plans), plans
            assert any("USING INDEX ix_outbox_sent_at" in plan for plan in plans), plans
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0013")
        assert not names & index_names(connection)
        kept = connection.execute(text("SELECT digest_id, recipient FROM outbox")).all()
    engine.dispose()
    assert [tuple(row) for row in kept] == [("d1", "Ada@Example.org")]


@pytest.mark.database
def test_0016_gives_every_subscriber_long_digests_in_parts_and_back(database_url: str) -> None:
    """Revision 0016 adds `long_emails`: from the oldest database, through 0015, every
    stored subscriber keeps its settings and gets "parts", the default; its own choice is
    stored; back to 0015, the column alone is gone."""
    migrate_to(database_url, BASELINE)
    migrate_to(database_url, "0015")
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        insert_subscriber(connection, "2026-11-01 08:00:00+00:00", abstracts="full")
    engine.dispose()
    migrate_to(database_url, head())
    assert differences(database_url) == []
    with Store.open(database_url) as store:
        (ada,) = store.subscribers.all()
        assert (ada.name, ada.abstracts, ada.long_emails) == ("ada", "full", "parts")
        store.subscribers.set_schedule("ada", long_emails="one")
        (ada,) = store.subscribers.all()
        assert ada.long_emails == "one"
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0015")
        columns = {c["name"] for c in sqlalchemy_inspect(connection).get_columns("subscribers")}
        kept = connection.execute(text("SELECT name, abstracts FROM subscribers")).all()
    engine.dispose()
    assert "long_emails" not in columns and "abstracts" in columns
    assert [tuple(row) for row in kept] == [("ada", "full")]


def test_0017_queues_jobs_and_going_back_drops_only_those_not_rendered(
    database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Revision 0017 lets a queued digest wait as a job: from the oldest database, through
    0016 with a pending message, that message is claimed as it was (no job); a job queued
    after it is claimed with its job. Back to 0016, the job not yet rendered leaves the
    outbox with its papers' deliveries (the older paperbell builds that digest again);
    the message queued before is kept byte for byte."""
    migrate_to(database_url, BASELINE)
    migrate_to(database_url, "0016")
    when = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        sid = insert_subscriber(connection, when)
        insert_sent_email(connection, sid, when, status="pending", sent_at=None)
        outbox_id = connection.execute(text("SELECT id FROM outbox")).scalar_one()
        message = {"outbox_id": outbox_id, "payload": b"Subject: waiting\r\n\r\nhello\r\n"}
        insert_row(connection, "outbox_messages", message)
    engine.dispose()
    migrate_to(database_url, head())
    assert differences(database_url) == []
    job = Queued(
        sid,
        channel="email",
        period="daily:2026-11-02",
        digest_id="d2",
        recipient="ada@example.org",
        payload=b"",
        sent=full_feed_papers[:2],
        job=b"the digest",
    )
    with Store.open(database_url) as store:
        store.outbox.enqueue_many([job], now=when)
        claimed = store.outbox.claim("w1", now=when, lease=timedelta(minutes=5))
        assert [(i.digest_id, i.payload, i.job) for i in claimed] == [
            ("d1", message["payload"], None),
            ("d2", b"", b"the digest"),
        ]
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0016")
        kept = connection.execute(text("SELECT digest_id FROM outbox")).scalars().all()
        payloads = connection.execute(text("SELECT payload FROM outbox_messages")).scalars()
        deliveries = connection.execute(text("SELECT count(*) FROM deliveries")).scalar_one()
        columns = {c["name"] for c in sqlalchemy_inspect(connection).get_columns("outbox_messages")}
        assert [bytes(p) for p in payloads] == [message["payload"]]
    engine.dispose()
    assert kept == ["d1"] and deliveries == 0 and "job" not in columns


@pytest.mark.database
def test_0018_takes_old_failures_as_refusals_unless_given_up_and_goes_back(
    database_url: str,
) -> None:
    """Revision 0018 marks a failed digest refused or not: of the digests failed before it,
    those given up after their retries are not refusals, the others are (as the count of
    refusals in a row read them); a sent or pending one is not. Back to 0017, the column
    goes and every record stays."""
    migrate_to(database_url, BASELINE)
    migrate_to(database_url, "0017")
    when = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
    engine = create_engine(normalize_url(database_url))
    errors = {
        "d1": ("failed", "550 5.1.1 no such mailbox"),
        "d2": ("failed", "gave up after 8 attempts: 451 4.4.1 no answer from host"),
        "d3": ("sent", None),
        "d4": ("pending", "451 4.4.1 no answer from host"),
    }
    with engine.begin() as connection:
        sid = insert_subscriber(connection, when)
        for day, (digest, (status, error)) in enumerate(errors.items(), start=1):
            insert_sent_email(
                connection,
                sid,
                when,
                digest_id=digest,
                period=f"daily:2026-11-0{day}",
                status=status,
                last_error=error,
            )
    engine.dispose()
    migrate_to(database_url, head())
    assert differences(database_url) == []
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        refused = dict(connection.execute(text("SELECT digest_id, refused FROM outbox")).all())
        assert {digest: bool(flag) for digest, flag in refused.items()} == {
            "d1": True,
            "d2": False,
            "d3": False,
            "d4": False,
        }
        command.downgrade(alembic_config(connection), "0017")
        kept = connection.execute(text("SELECT count(*) FROM outbox")).scalar_one()
        columns = {c["name"] for c in sqlalchemy_inspect(connection).get_columns("outbox")}
    engine.dispose()
    assert kept == 4 and "refused" not in columns


@pytest.mark.database
def test_0019_lets_a_new_address_wait_beside_the_confirmed_one_and_back(
    database_url: str,
) -> None:
    """Revision 0019 adds `pending_email`: from the oldest database, through 0018, every
    stored subscriber keeps its confirmed address with none waiting; a new one waits beside
    it until confirmed; back to 0018, the column alone is gone."""
    migrate_to(database_url, BASELINE)
    migrate_to(database_url, "0018")
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        sid = insert_subscriber(connection, "2026-11-01 08:00:00+00:00")
    engine.dispose()
    migrate_to(database_url, head())
    assert differences(database_url) == []
    with Store.open(database_url) as store:
        (ada,) = store.subscribers.all()
        assert (ada.email, ada.email_confirmed, ada.pending_email) == (
            "ada@example.org",
            True,
            None,
        )
        store.subscribers.set_email("ada", "ada@home.example", confirmed=False)
        (ada,) = store.subscribers.all()
        assert (ada.email, ada.email_confirmed) == ("ada@example.org", True)
        assert ada.pending_email == "ada@home.example"
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0018")
        columns = {c["name"] for c in sqlalchemy_inspect(connection).get_columns("subscribers")}
        kept = connection.execute(text("SELECT id, email, email_confirmed FROM subscribers"))
        rows = [(row[0], row[1], bool(row[2])) for row in kept]
    engine.dispose()
    assert "pending_email" not in columns and "email_confirmed" in columns
    assert rows == [(sid, "ada@example.org", True)]


def legacy_database(folder: Path) -> Path:
    """A copy of the database 0d0a80b wrote, in `folder`."""
    path = folder / "paperbell-0d0a80b.sqlite"
    path.write_bytes(gzip.decompress((LEGACY / "paperbell-0d0a80b.sqlite.gz").read_bytes()))
    return path


def test_the_baseline_is_the_schema_0d0a80b_wrote(tmp_path: Path) -> None:
    legacy = legacy_database(tmp_path)
    written = MetaData()
    engine = create_engine(f"sqlite:///{legacy}")
    written.reflect(engine)
    engine.dispose()
    baseline = f"sqlite:///{tmp_path / 'baseline.sqlite'}"
    migrate_to(baseline, BASELINE)
    assert differences(baseline, written) == []
    assert "alembic_version" not in written.tables


def legacy_config(folder: Path, smtp_port: int, **database: str) -> Path:
    config = folder / "config.toml"
    text_ = (LEGACY / "config.toml").read_text()
    text_ = text_.replace("PORT", str(smtp_port)).replace("LISTING", str(LISTING))
    for key, value in database.items():
        text_ = text_.replace("[database]\n", f"[database]\n{key} = {value}\n")
    config.write_text(text_)
    return config


def test_a_database_0d0a80b_wrote_upgrades_and_keeps_everyone(tmp_path: Path) -> None:
    legacy = legacy_database(tmp_path)
    original = legacy.read_bytes()
    runner = CliRunner()
    with smtp_sink() as (sink, port):
        config = legacy_config(tmp_path, port)

        def cli(*args: str) -> Any:
            return runner.invoke(main, [*args, "-c", str(config)])

        upgrade_line = f"run `paperbell db upgrade -c {config}`"
        current = cli("db", "current")
        assert current.exit_code == 0, current.output
        assert "made before migrations (0d0a80b's schema)" in current.output
        assert upgrade_line in current.output
        checked = cli("check-config")
        assert checked.exit_code == 0
        assert (
            f"schema: none: made before migrations (0d0a80b's schema); newest "
            f"{head()}: needs `paperbell db upgrade -c {config}`" in checked.output
        )
        # Every command that opens the database refuses, with one line, and changes nothing.
        for args in (
            ("list",),
            ("status",),
            ("poll",),
            ("digest", "--since", "2024-11-28"),
            ("subscribe", "fay", "--email", "fay@example.org", "robot"),
        ):
            refused = cli(*args)
            assert refused.exit_code == 1, (args, refused.output)
            assert refused.output.count("\n") == 1 and upgrade_line in refused.output, args
            assert refused.output == (
                f"error: the database sqlite:///{legacy} was made before migrations (0d0a80b's "
                f"schema), older than this paperbell's {head()}: {upgrade_line}\n"
            ), args
        daemon = run("run", "-c", str(config), "--no-web", cwd=tmp_path)
        assert daemon.returncode == 1 and upgrade_line in daemon.stderr
        pages = tmp_path / "pages.toml"
        pages.write_text(
            config.read_text()
            + '[web]\npublic_url = "https://papers.lab.example"\nsecret_key_env = "PB_KEY"\n'
        )
        served = runner.invoke(main, ["serve", "-c", str(pages)], env={"PB_KEY": "k" * 40})
        assert served.exit_code == 1 and f"run `paperbell db upgrade -c {pages}`" in served.output
        assert legacy.read_bytes() == original and sink.messages == []

        upgraded = cli("db", "upgrade")
        assert upgraded.exit_code == 0, upgraded.output
        backup = tmp_path / f"paperbell-0d0a80b.sqlite.bak-{BASELINE}"
        assert upgraded.output == (
            f"copied the database, at schema {BASELINE}, to {backup}\n"
            f"sqlite:///paperbell-0d0a80b.sqlite: upgraded schema {BASELINE} -> {head()} "
            "(newest)\n"
        )
        assert not schema_state(f"sqlite:///{backup}").up_to_date  # the file as it was
        assert differences(f"sqlite:///{legacy}") == []
        assert cli("db", "current").output.endswith(f"schema {head()} (newest)\n")
        assert f"schema: up to date ({head()})" in cli("check-config").output
        again = cli("db", "upgrade")
        assert again.exit_code == 0 and "nothing to do" in again.output

        listed = cli("list")
        assert listed.exit_code == 0, listed.output
        assert listed.output == (LEGACY / "list-before.txt").read_text()
        assert sum(int(n) for n in re.findall(r"(\d+) papers? sent", listed.output)) == 77

        digest = cli("digest", "--since", "2024-11-28")
        assert digest.exit_code == 0, digest.output
        assert sink.messages == []  # the same day again: nothing is sent twice
        assert digest.output.count("no new matching papers") == 5, digest.output


def test_auto_upgrade_lets_the_commands_upgrade_by_themselves(tmp_path: Path) -> None:
    legacy = legacy_database(tmp_path)
    config = legacy_config(tmp_path, 25, auto_upgrade="true")
    checked = CliRunner().invoke(main, ["check-config", "-c", str(config)])
    assert "or the next command upgrades it: [database] auto_upgrade = true" in checked.output
    listed = CliRunner().invoke(main, ["list", "-c", str(config)])
    assert listed.exit_code == 0, listed.output
    assert listed.output == (LEGACY / "list-before.txt").read_text()
    assert (tmp_path / f"{legacy.name}.bak-{BASELINE}").exists()
    assert schema_state(f"sqlite:///{legacy}").up_to_date


def test_check_config_and_db_current_say_when_there_is_no_database_yet(tmp_path: Path) -> None:
    config = legacy_config(tmp_path, 25)
    checked = CliRunner().invoke(main, ["check-config", "-c", str(config)])
    assert checked.exit_code == 0
    assert f"schema: no database yet (created at {head()}" in checked.output
    current = CliRunner().invoke(main, ["db", "current", "-c", str(config)])
    assert "no database yet" in current.output
    assert not (tmp_path / "paperbell-0d0a80b.sqlite").exists()  # asking created nothing
    created = CliRunner().invoke(main, ["db", "upgrade", "-c", str(config)])
    assert created.exit_code == 0 and f"created at schema {head()} (newest)" in created.output


@pytest.mark.database
def test_a_revision_this_paperbell_does_not_know_is_refused(database_url: str) -> None:
    Store.open(database_url).close()
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'fff9'"))
    engine.dispose()
    with pytest.raises(StoreError, match="fff9, unknown to this paperbell"):
        Store.open(database_url, upgrade=True)
    with pytest.raises(StoreError, match="fff9, unknown to this paperbell"):
        upgrade_schema(database_url)


@pytest.mark.database
def test_a_child_process_opens_only_the_revision_its_parent_checked(
    database_url: str, tmp_path: Path
) -> None:
    """A sender or planner confirms the revision with one query (no Alembic): the one its
    parent's check left it at, or nothing."""
    Store.open(database_url).close()
    with Store.open_at(database_url, head()) as store:
        assert schema_state(database_url).current == head()
        assert store.outbox.totals(now=datetime(2026, 11, 1, tzinfo=UTC))["pending"] == 0
    with pytest.raises(StoreError, match=f"is at schema {head()}, not {BASELINE}"):
        Store.open_at(database_url, BASELINE)  # another paperbell's parent checked it
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(StoreError, match=f"is at schema none, not {head()}"):
        Store.open_at(f"sqlite:///{missing}", head())
    assert not missing.exists()  # refused, not made


def test_the_migrations_ship_inside_the_package() -> None:
    # In the wheel with the code (pyproject: packages = ["bot"]); no alembic.ini anywhere.
    folder = Path(alembic_config().get_main_option("script_location") or "")
    assert folder == Path(bot.__file__).resolve().parent / "store" / "migrations"
    assert {"env.py", "script.py.mako", "versions"} <= {p.name for p in folder.iterdir()}
