"""The outbox: queue once, claim under a lease, send, record at once, retry or give back.

Real parts: the database (SQLite file, or PostgreSQL with PAPERBELL_TEST_DATABASE_URL) and an
SMTP server on loopback (aiosmtpd); the clock is a variable the test moves.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage

import pytest
from servers import smtp_sink

from bot.channels.email import EmailChannel, SmtpSettings
from bot.models import Paper, Subscriber
from bot.outbox import RetryPolicy, drain
from bot.store import Store

pytestmark = pytest.mark.database

T0 = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


def message(to: str, subject: str) -> bytes:
    msg = EmailMessage()
    msg["From"] = "papers@paperbell.example"
    msg["To"] = to
    msg["Subject"] = subject
    msg["Message-ID"] = f"<{subject}@paperbell.example>"
    msg.set_content(f"digest {subject}")
    return bytes(msg)


def subscribe(store: Store, name: str) -> Subscriber:
    sub, _ = store.add_subscriber(name, email=f"{name}@lab.example", rules=["robot"], now=T0)
    return sub


def queue(
    store: Store, sub: Subscriber, papers: tuple[Paper, ...], *, period: str, now: datetime = T0
) -> int | None:
    assert sub.id is not None and sub.email is not None
    return store.enqueue(
        sub.id,
        channel="email",
        period=period,
        digest_id=f"d-{sub.name}-{period}",
        recipient=sub.email,
        payload=message(sub.email, f"{sub.name}-{period}"),
        sent=papers,
        now=now,
    )


def channel(port: int) -> EmailChannel:
    return EmailChannel(SmtpSettings("127.0.0.1", port, security="none", timeout=5))


def test_a_period_and_a_paper_are_queued_once(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada = subscribe(store, "ada")
    papers = full_feed_papers[:3]
    assert queue(store, ada, papers, period="daily:2026-11-23") is not None
    # A second builder for the same slot (another daemon, a cron run) queues nothing.
    assert queue(store, ada, full_feed_papers[3:5], period="daily:2026-11-23") is None
    # Nor can another slot take a paper already queued: all or nothing.
    assert queue(store, ada, full_feed_papers[2:4], period="daily:2026-11-24") is None
    assert store.delivered_versions(ada.id, "email") == {p.id: p.version for p in papers}
    assert store.outbox_status()[ada.id or 0].pending == 1  # type: ignore[index]


def test_a_lease_keeps_others_out_until_it_expires(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada = subscribe(store, "ada")
    queue(store, ada, full_feed_papers[:2], period="p1")
    lease = timedelta(minutes=5)
    first = store.claim("worker-a", now=T0, lease=lease)
    assert [item.subscriber for item in first] == ["ada"]
    assert store.claim("worker-b", now=T0 + timedelta(minutes=4), lease=lease) == []
    # worker-a died: once its lease is over, the record is someone else's to send.
    again = store.claim("worker-b", now=T0 + timedelta(minutes=6), lease=lease)
    assert [item.id for item in again] == [first[0].id]


def test_greylisting_451_is_retried_later_and_delivered_once(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada = subscribe(store, "ada")
    queue(store, ada, full_feed_papers[:2], period="p1")
    clock = Clock()
    policy = RetryPolicy(first_delay=timedelta(minutes=2))
    with smtp_sink() as (sink, port):
        sink.transient["ada@lab.example"] = 1
        first = asyncio.run(drain(store, channel(port), clock=clock, retry=policy))
        assert [a.status for a in first] == ["retry"] and "451" in (first[0].error or "")
        wait = first[0].next_attempt
        assert wait is not None and T0 + timedelta(minutes=1) <= wait <= T0 + timedelta(minutes=2)
        assert store.outbox_status()[ada.id].next_attempt == wait  # type: ignore[index]
        # Not due yet: the daemon's worker leaves it alone.
        assert asyncio.run(drain(store, channel(port), clock=clock, retry=policy)) == []
        clock.now = wait + timedelta(seconds=1)
        second = asyncio.run(drain(store, channel(port), clock=clock, retry=policy))
        assert [a.status for a in second] == ["sent"]
        assert asyncio.run(drain(store, channel(port), clock=clock, retry=policy)) == []
    assert [m["Subject"] for m in sink.messages] == ["ada-p1"]
    status = store.outbox_status()[ada.id]  # type: ignore[index]
    assert status.pending == 0 and status.last_sent == clock.now


def test_a_connection_dropped_mid_data_is_sent_again(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada, bob = subscribe(store, "ada"), subscribe(store, "bob")
    queue(store, ada, full_feed_papers[:2], period="p1")
    queue(store, bob, full_feed_papers[:2], period="p1")
    with smtp_sink() as (sink, port):
        sink.drop_data = 1
        done = asyncio.run(drain(store, channel(port), clock=Clock()))
    assert sorted(a.status for a in done) == ["sent", "sent"]
    assert sorted(m["Subject"] for m in sink.messages) == ["ada-p1", "bob-p1"]


def test_550_fails_gives_the_papers_back_and_pauses_a_bouncing_address(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada, bob = subscribe(store, "ada"), subscribe(store, "bob")
    clock = Clock()
    with smtp_sink() as (sink, port):
        sink.refuse["ada@lab.example"] = "550 5.1.1 no such mailbox"
        for day in range(3):
            queue(store, ada, full_feed_papers[:2], period=f"d{day}", now=clock.now)
            queue(store, bob, full_feed_papers[day : day + 1], period=f"d{day}", now=clock.now)
            done = {
                a.item.subscriber: a for a in asyncio.run(drain(store, channel(port), clock=clock))
            }
            assert done["bob"].status == "sent"  # the others are not held up
            assert done["ada"].status == "failed" and "550" in (done["ada"].error or "")
            # The papers went back: the next digest may hold them again.
            assert store.delivered_versions(ada.id, "email") == {}
            assert done["ada"].paused == (day == 2)
            clock.now += timedelta(days=1)
    assert len(sink.messages) == 3
    row = store.subscriber_row("ada")
    assert (
        row is not None
        and not row.active
        and "3 digests in a row refused" in (row.paused_reason or "")
    )
    status = store.outbox_status()[ada.id]  # type: ignore[index]
    assert status.failed == 3 and "550" in (status.last_error or "")
    assert "ada" not in {s.name for s in store.subscribers()}  # no digest is built for her


def test_transient_failures_give_up_after_the_limit(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada = subscribe(store, "ada")
    queue(store, ada, full_feed_papers[:1], period="p1")
    clock = Clock()
    policy = RetryPolicy(max_attempts=3)
    with smtp_sink() as (sink, port):
        sink.transient["ada@lab.example"] = 10
        statuses = []
        for _ in range(4):
            statuses += [
                a.status
                for a in asyncio.run(drain(store, channel(port), clock=clock, retry=policy))
            ]
            clock.now += timedelta(hours=4)
    assert statuses == ["retry", "retry", "failed"]
    assert "gave up after 3 attempts" in (store.outbox_status()[ada.id].last_error or "")  # type: ignore[index]
    assert store.delivered_versions(ada.id, "email") == {}


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(first_delay=timedelta(minutes=1), max_delay=timedelta(minutes=30))
    top = [policy.delay(n, lambda: 1.0) for n in range(1, 8)]
    assert top == [timedelta(minutes=m) for m in (1, 2, 4, 8, 16, 30, 30)]
    assert policy.delay(3, lambda: 0.0) == timedelta(minutes=2)  # jitter: half to all
