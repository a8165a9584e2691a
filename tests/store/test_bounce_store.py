"""The bounce store (bot.store.bounces) and its migration, 0010: from the oldest database up
and back down (SQLite, and PostgreSQL with PAPERBELL_TEST_DATABASE_URL); each bounce kept
with what was done, a subscriber's bounced digests in a row, a day's counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from alembic import command
from sqlalchemy import create_engine, text
from support.database import differences, migrate_to, tables

from bot.store import Bounce, Store, normalize_url
from bot.store.schema import BASELINE, alembic_config, head
from bot.store.tables import MAX_DIAGNOSTIC

pytestmark = pytest.mark.database

T0 = datetime(2026, 12, 3, 7, 0, tzinfo=UTC)


def queue(store: Store, sub_id: int, n: int, *, sent: bool = True, channel: str = "email") -> int:
    record = store.outbox.enqueue(
        sub_id,
        channel=channel,
        period=f"p{n}",
        digest_id=f"paperbell.d{sub_id}-{n}",
        recipient="ada@lab.example",
        payload=b"Subject: x\r\n\r\nx\r\n",
        sent=(),
        now=T0 + timedelta(minutes=n),
    )
    assert record is not None
    if sent:
        claimed = store.outbox.claim("w", now=T0, lease=timedelta(minutes=5), due_only=False)
        for item in claimed:
            store.outbox.mark_sent(item.id, owner="w", now=T0 + timedelta(minutes=n))
    return record


def test_0010_adds_the_bounces_and_keeps_every_subscriber(database_url: str) -> None:
    """A database at the oldest schema keeps its subscriber through 0010, which adds the
    bounces (and an index to find a digest by its id); back to 0009, they go alone."""
    migrate_to(database_url, BASELINE)
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO subscribers (name, email, origin, active, categories, "
                "max_papers, include, created_at, email_confirmed, email_format, "
                "abstracts) VALUES ('ada', 'ada@lab.example', 'database', true, '[]', 20, "
                "'[\"new\"]', :w, true, 'html', 'short')"
            ),
            {"w": "2026-11-01 08:00:00+00:00"},
        )
    engine.dispose()
    migrate_to(database_url, "0009")
    assert "bounces" not in tables(database_url)
    migrate_to(database_url, head())
    assert "bounces" in tables(database_url)
    assert differences(database_url) == []
    with Store.open(database_url) as store:
        ada = store.subscribers.get("ada")
        assert ada is not None
        record = queue(store, ada.id, 1)
        store.bounces.record(
            Bounce(T0, "hard", "paused", record, ada.id, "5.1.1", "unknown user", "ada@x")
        )
        message = store.bounces.message_by_digest(f"paperbell.d{ada.id}-1")
        assert message is not None and message.id == record and message.subscriber == "ada"
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0009")
        names = connection.execute(text("SELECT name FROM subscribers")).scalars()
        assert list(names) == ["ada"]
        assert connection.execute(text("SELECT count(*) FROM outbox")).scalar() == 1
    engine.dispose()
    assert "bounces" not in tables(database_url)
    migrate_to(database_url, head())  # and up again
    assert differences(database_url) == []


def test_a_bounce_is_kept_bounded_and_counted_by_day(store: Store) -> None:
    sub, _ = store.subscribers.add("ada", email="ada@lab.example", rules=["robot"], now=T0)
    assert sub.id is not None
    record = queue(store, sub.id, 1)
    store.bounces.record(Bounce(T0, "hard", "paused", record, sub.id, "5.1.1", "x" * 5000))
    store.bounces.record(Bounce(T0, "complaint", "unsubscribed", record, sub.id))
    store.bounces.record(Bounce(T0, "auto-reply", "ignored", record, sub.id))
    store.bounces.record(Bounce(T0, "hard", "forged"))
    store.bounces.record(Bounce(T0, "unknown", "unreadable"))
    store.bounces.record(Bounce(T0 - timedelta(days=1), "soft", "counted", record, sub.id))
    kept = store.bounces.of(sub.id)
    assert [b.kind for b in kept] == ["soft", "auto-reply", "complaint", "hard"]
    assert kept[-1].diagnostic is not None and len(kept[-1].diagnostic) == MAX_DIAGNOSTIC
    day = store.bounces.day(T0.date())
    assert (day.hard, day.soft, day.complaints, day.auto_replies, day.unmatched) == (1, 0, 1, 1, 2)
    assert day.sent == 1 and day.rate(day.bounces) == 1.0
    with pytest.raises(ValueError, match="not a bounce kind"):
        store.bounces.record(Bounce(T0, "bad", "paused"))
    store.subscribers.delete("ada")  # with its bounces: nothing points at it any more
    assert store.bounces.of(sub.id) == []


def test_the_streak_is_the_run_of_bounced_messages_that_holds_this_one(store: Store) -> None:
    sub, _ = store.subscribers.add("ada", email="ada@lab.example", rules=["robot"], now=T0)
    assert sub.id is not None
    ids = [queue(store, sub.id, n) for n in range(1, 6)]
    notice = queue(store, sub.id, 9, channel="notice")

    def bounce(record: int, kind: str = "soft") -> int:
        message = store.bounces.message(record)
        assert message is not None
        streak = store.bounces.streak(message)
        store.bounces.record(Bounce(T0, kind, "counted", record, sub.id, "4.2.2"))
        return streak

    assert bounce(ids[0]) == 1
    assert bounce(ids[2]) == 1  # ids[1] went through in between
    assert bounce(ids[1]) == 3  # it did not: three in a row
    assert bounce(ids[4], "hard") == 1
    assert bounce(ids[3]) == 5
    message = store.bounces.message(notice)
    assert message is not None and message.channel == "notice"
    assert store.bounces.streak(message) == 1  # a notice is counted apart from the digests
    assert store.bounces.message(10**9) is None and store.bounces.message_by_digest("") is None
