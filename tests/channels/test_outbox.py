"""The outbox: queue once, claim under a lease, send, record at once, retry or give back.

Real parts: the database (SQLite file, or PostgreSQL with PAPERBELL_TEST_DATABASE_URL) and an
SMTP server on loopback (aiosmtpd); the clock is a variable the test moves, or the real one
where two workers (threads with their own connections, or a `paperbell digest` process) share
the database.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from support.cli import start
from support.clock import Clock
from support.config import sink_email, toml_table
from support.database import dead_database
from support.servers import SinkHandler, smtp_sink

from bot.channels import Channel
from bot.channels.email import EmailChannel, SmtpSettings
from bot.channels.outbox import Attempt, RetryPolicy, drain
from bot.channels.slack import SlackChannel, SlackSettings
from bot.core.models import Paper, Subscriber
from bot.demo.slack_standin import SlackStandIn
from bot.store import Store, utcnow

pytestmark = pytest.mark.database

T0 = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)


def message(to: str, subject: str) -> bytes:
    msg = EmailMessage()
    msg["From"] = "papers@paperbell.example"
    msg["To"] = to
    msg["Subject"] = subject
    msg["Message-ID"] = f"<{subject}@paperbell.example>"
    msg.set_content(f"digest {subject}")
    return bytes(msg)


def subscribe(store: Store, name: str) -> Subscriber:
    sub, _ = store.subscribers.add(name, email=f"{name}@lab.example", rules=["robot"], now=T0)
    return sub


def queue(
    store: Store, sub: Subscriber, papers: tuple[Paper, ...], *, period: str, now: datetime = T0
) -> int | None:
    assert sub.id is not None and sub.email is not None
    return store.outbox.enqueue(
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
    assert store.outbox.delivered_versions(ada.id, "email") == {p.id: p.version for p in papers}
    assert store.outbox.status()[ada.id or 0].pending == 1  # type: ignore[index]


def test_a_lease_keeps_others_out_until_it_expires(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada = subscribe(store, "ada")
    queue(store, ada, full_feed_papers[:2], period="p1")
    lease = timedelta(minutes=5)
    first = store.outbox.claim("worker-a", now=T0, lease=lease)
    assert [item.subscriber for item in first] == ["ada"]
    assert store.outbox.claim("worker-b", now=T0 + timedelta(minutes=4), lease=lease) == []
    # worker-a died: once its lease is over, the record is someone else's to send.
    again = store.outbox.claim("worker-b", now=T0 + timedelta(minutes=6), lease=lease)
    assert [item.id for item in again] == [first[0].id]


def test_greylisting_451_is_retried_later_and_delivered_once(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada = subscribe(store, "ada")
    queue(store, ada, full_feed_papers[:2], period="p1")
    clock = Clock(T0)
    policy = RetryPolicy(first_delay=timedelta(minutes=2))
    with smtp_sink() as (sink, port):
        sink.transient["ada@lab.example"] = 1
        first = asyncio.run(drain(store, channel(port), clock=clock, retry=policy))
        assert [a.status for a in first] == ["retry"] and "451" in (first[0].error or "")
        wait = first[0].next_attempt
        assert wait is not None and T0 + timedelta(minutes=1) <= wait <= T0 + timedelta(minutes=2)
        assert store.outbox.status()[ada.id].next_attempt == wait  # type: ignore[index]
        # Not due yet: the daemon's worker leaves it alone.
        assert asyncio.run(drain(store, channel(port), clock=clock, retry=policy)) == []
        clock.now = wait + timedelta(seconds=1)
        second = asyncio.run(drain(store, channel(port), clock=clock, retry=policy))
        assert [a.status for a in second] == ["sent"]
        assert asyncio.run(drain(store, channel(port), clock=clock, retry=policy)) == []
    assert [m["Subject"] for m in sink.messages] == ["ada-p1"]
    status = store.outbox.status()[ada.id]  # type: ignore[index]
    assert status.pending == 0 and status.last_sent == clock.now


def test_a_connection_dropped_mid_data_is_sent_again(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada, bob = subscribe(store, "ada"), subscribe(store, "bob")
    queue(store, ada, full_feed_papers[:2], period="p1")
    queue(store, bob, full_feed_papers[:2], period="p1")
    with smtp_sink() as (sink, port):
        sink.drop_data = 1
        done = asyncio.run(drain(store, channel(port), clock=Clock(T0)))
    assert sorted(a.status for a in done) == ["sent", "sent"]
    assert sorted(m["Subject"] for m in sink.messages) == ["ada-p1", "bob-p1"]


def test_550_fails_gives_the_papers_back_and_pauses_a_bouncing_address(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada, bob = subscribe(store, "ada"), subscribe(store, "bob")
    clock = Clock(T0)
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
            assert store.outbox.delivered_versions(ada.id, "email") == {}
            assert done["ada"].paused == (day == 2)
            clock.now += timedelta(days=1)
    assert len(sink.messages) == 3
    row = store.subscribers.get("ada")
    assert (
        row is not None
        and not row.active
        and "3 digests in a row refused" in (row.paused_reason or "")
    )
    status = store.outbox.status()[ada.id]  # type: ignore[index]
    assert status.failed == 3 and "550" in (status.last_error or "")
    assert "ada" not in {s.name for s in store.subscribers.all()}  # no digest is built for her


def test_a_pause_withdraws_the_digests_still_queued(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """A hard bounce pauses Ada's email, and Bob is paused for refusing three in a row,
    while digests of theirs wait for their retries: those went out after the pause, to an
    address known to bounce. They are given up, their papers handed back; Cy's go."""
    ada, bob, cy = (subscribe(store, name) for name in ("ada", "bob", "cy"))
    for sub in (ada, bob, cy):
        queue(store, sub, full_feed_papers[:2], period="p1")
    assert ada.id is not None and bob.id is not None
    store.targets.pause(ada.id, "email", "mailbox unknown (5.1.1)", now=T0)
    store.subscribers.pause(bob.id, "3 digests in a row refused", now=T0)
    with smtp_sink() as (sink, port):
        done = asyncio.run(drain(store, channel(port), clock=Clock(T0), due_only=False))
    assert [(a.item.subscriber, a.status) for a in done] == [("cy", "sent")]
    assert [m["To"] for m in sink.messages] == ["cy@lab.example"]
    for sub, why in ((ada, "mailbox unknown (5.1.1)"), (bob, "3 digests in a row refused")):
        assert sub.id is not None
        assert store.outbox.pending(sub.id, "email") == 0
        assert store.outbox.status()[sub.id].last_error == f"not sent: {why}"  # type: ignore[index]
        assert store.outbox.delivered_versions(sub.id, "email") == {}  # to come again


def test_a_subscriber_taken_out_of_the_config_file_loses_the_digests_still_queued(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Ada is taken out of the config file while a digest of hers waits for its retry: it
    went out after the removal, as a pause's would have. It is given up when the file is
    mirrored again, its papers handed back (her record stays: put back, she goes on);
    Bob's, still in the file, goes."""
    ada = Subscriber("ada", "ada@lab.example", ("robot",))
    bob = Subscriber("bob", "bob@lab.example", ("robot",))
    store.subscribers.sync_config([ada, bob], now=T0)
    stored = {s.name: s for s in store.subscribers.all([ada, bob])}
    for name in ("ada", "bob"):
        queue(store, stored[name], full_feed_papers[:2], period="p1")
    store.subscribers.sync_config([bob], now=T0)
    with smtp_sink() as (sink, port):
        done = asyncio.run(drain(store, channel(port), clock=Clock(T0), due_only=False))
    assert [(a.item.subscriber, a.status) for a in done] == [("bob", "sent")]
    assert [m["To"] for m in sink.messages] == ["bob@lab.example"]
    ada_id = stored["ada"].id
    assert ada_id is not None
    assert store.outbox.pending(ada_id, "email") == 0
    why = "not sent: ada is in the config file no more"
    assert store.outbox.status()[ada_id].last_error == why
    assert store.outbox.delivered_versions(ada_id, "email") == {}  # to come again


class RefusesPaperbell(SinkHandler):
    """A relay that, while `refusing`, will not send for paperbell: at `stage` "sender" it
    refuses paperbell's address (MAIL FROM); at "relaying", every recipient, as a relay
    that does not know paperbell does (Postfix); at "sandbox", every message, as Amazon
    SES does for an address not verified while the account is in its sandbox."""

    def __init__(self, stage: str) -> None:
        super().__init__()
        self.stage = stage
        self.refusing = True

    async def handle_MAIL(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        if self.refusing and self.stage == "sender":
            return "553 5.7.1 sender address rejected: not owned by user"
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        if self.refusing and self.stage == "relaying":
            return f"554 5.7.1 <{address}>: Relay access denied"
        return await super().handle_RCPT(server, session, envelope, address, options)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.refusing and self.stage == "sandbox":
            return (
                "554 Message rejected: Email address is not verified. The following "
                f"identities failed the check in region EU-WEST-1: {envelope.rcpt_tos[0]}"
            )
        return await super().handle_DATA(server, session, envelope)


@pytest.mark.parametrize("refusal", ["login", "sender", "relaying", "sandbox"])
def test_a_relay_refusing_paperbell_pauses_no_subscriber(
    store: Store, full_feed_papers: tuple[Paper, ...], refusal: str
) -> None:
    """The relay refuses paperbell's login, its sender address, or, for its policy, every
    recipient or message, day after day: that is the operator's to fix, not the
    subscriber's address bouncing. Her digests wait for their retries; she is never
    paused, and once the relay takes paperbell they go."""
    ada = subscribe(store, "ada")
    clock = Clock(T0)
    handler = RefusesPaperbell(refusal)
    with smtp_sink(handler, password="right") as (sink, port):
        login = SmtpSettings("127.0.0.1", port, security="none", timeout=5, username="papers")
        wrong = EmailChannel(replace(login, password="wrong" if refusal == "login" else "right"))
        for day in range(3):
            queue(store, ada, full_feed_papers[day : day + 1], period=f"d{day}", now=clock.now)
            done = asyncio.run(drain(store, wrong, clock=clock, due_only=False))
            assert {a.status for a in done} == {"retry"}, done
            clock.now += timedelta(days=1)
        row = store.subscribers.get("ada")
        assert row is not None and row.active
        assert sink.messages == []
        handler.refusing = False  # the operator fixed it
        fixed = EmailChannel(replace(login, password="right"))
        done = asyncio.run(drain(store, fixed, clock=clock, due_only=False))
    assert [a.status for a in done] == ["sent"] * 3


def test_transient_failures_give_up_after_the_limit(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada = subscribe(store, "ada")
    queue(store, ada, full_feed_papers[:1], period="p1")
    clock = Clock(T0)
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
    assert "gave up after 3 attempts" in (store.outbox.status()[ada.id].last_error or "")  # type: ignore[index]
    assert store.outbox.delivered_versions(ada.id, "email") == {}


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(first_delay=timedelta(minutes=1), max_delay=timedelta(minutes=30))
    top = [policy.delay(n, lambda: 1.0) for n in range(1, 8)]
    assert top == [timedelta(minutes=m) for m in (1, 2, 4, 8, 16, 30, 30)]
    assert policy.delay(3, lambda: 0.0) == timedelta(minutes=2)  # jitter: half to all
    # Far past the cap the doubling stops (2**41 minutes overflowed a timedelta).
    assert policy.delay(42, lambda: 1.0) == policy.delay(10_000, lambda: 1.0)
    assert policy.delay(10_000, lambda: 1.0) == timedelta(minutes=30)


# -- leases: two workers on one database, a lease lost, a database outage mid-batch --------


def queue_many(store: Store, papers: tuple[Paper, ...], count: int, *, now: datetime) -> None:
    for i in range(count):
        sub = subscribe(store, f"s{i:02d}")
        queue(store, sub, papers[i : i + 1], period="p1", now=now)


def race(database_url: str, make_channel: Callable[[], Channel], *, digests: int) -> list[Attempt]:
    """A cron `digest` sends one batch of every queued digest, which takes about twice the
    lease, while the daemon's worker, on the same database, keeps draining beside it."""
    lease = timedelta(seconds=1.5)
    deadline = time.monotonic() + 60

    def cron() -> list[Attempt]:
        with Store.open(database_url) as store:  # its own connections, as a process has
            policy = RetryPolicy(lease=lease, batch=digests)
            return asyncio.run(
                drain(store, make_channel(), clock=utcnow, owner="cron", retry=policy)
            )

    def daemon() -> list[Attempt]:
        attempts: list[Attempt] = []
        with Store.open(database_url) as store:
            policy = RetryPolicy(lease=lease, batch=4)
            while store.outbox.totals(now=utcnow())["pending"] and time.monotonic() < deadline:
                attempts += asyncio.run(
                    drain(store, make_channel(), clock=utcnow, owner="daemon", retry=policy)
                )
                time.sleep(0.05)  # the daemon's next tick
        return attempts

    with ThreadPoolExecutor(2) as workers:
        first = workers.submit(cron)
        time.sleep(0.2)  # the cron run claimed its batch; the daemon's worker ticks beside it
        second = workers.submit(daemon)
        attempts = first.result(timeout=90) + second.result(timeout=90)
    with Store.open(database_url) as check:
        assert check.outbox.totals(now=utcnow())["sent"] == digests
    return attempts


def test_two_workers_whose_batches_outlive_the_lease_send_each_digest_once(
    database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    digests = 30
    with Store.open(database_url) as setup:
        queue_many(setup, full_feed_papers, digests, now=utcnow() - timedelta(minutes=1))
    with smtp_sink() as (sink, port):
        sink.delay = 0.1  # a slow server: 30 messages take 3 s, twice the lease
        attempts = race(database_url, lambda: channel(port), digests=digests)
    received = Counter(str(m["Message-ID"]) for m in sink.messages)
    twice = sorted(mid for mid, n in received.items() if n > 1)
    assert twice == [], f"{len(twice)} of {digests} digests arrived twice"
    assert len(received) == digests
    assert sorted(a.status for a in attempts) == ["sent"] * digests


def test_two_workers_send_each_slack_digest_once_when_a_batch_outlives_the_lease(
    database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """The same for Slack: a digest's thread renewed its own lease, but not the lease of
    the digests after it in the batch."""
    digests = 10
    with Store.open(database_url) as setup, SlackStandIn(token="xoxb-standin") as slack:
        slack.add_channel("C0ROBOTS", "robot-learning")
        for i in range(digests):
            sub = subscribe(setup, f"s{i:02d}")
            assert sub.id is not None
            posts = [{"text": f"s{i:02d} summary"}] + [
                {"text": f"s{i:02d} part {n}"} for n in (1, 2)
            ]
            payload = {"target": "C0ROBOTS", "messages": posts, "papers": [[], [], []]}
            setup.outbox.enqueue(
                sub.id,
                channel="slack",
                period="p1",
                digest_id=f"d-s{i:02d}",
                recipient="C0ROBOTS",
                payload=json.dumps(payload).encode(),
                sent=full_feed_papers[i : i + 1],
                now=utcnow() - timedelta(minutes=1),
            )
        settings = SlackSettings(token=slack.token, api_url=slack.base_url, post_interval=0.1)
        # 10 digests of 3 messages a tenth of a second apart: 3 s, twice the lease
        attempts = race(database_url, lambda: SlackChannel(settings), digests=digests)
        texts = Counter(str(m["text"]) for m in slack.messages("C0ROBOTS"))
    twice = sorted(text for text, n in texts.items() if n > 1)
    assert twice == [], f"posted twice: {twice}"
    assert len(texts) == 3 * digests
    assert sorted(a.status for a in attempts) == ["sent"] * digests


def test_a_worker_that_lost_its_lease_stops_its_batch(
    database_url: str, store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """The worker stalled past its lease and another took its records: it sends none of
    them; the other worker sends each once."""
    queue_many(store, full_feed_papers, 5, now=T0)
    clock = Clock(T0)
    policy = RetryPolicy(lease=timedelta(minutes=5))
    taken: list[int] = []

    def take_over(_: EmailMessage) -> None:
        # While the server accepts the second digest, the first worker's lease has run out
        # (it stalled) and another worker claims everything still pending.
        if len(sink.messages) == 2:
            with Store.open(database_url) as other:
                later = T0 + timedelta(minutes=10)
                taken.extend(
                    i.id for i in other.outbox.claim("other", now=later, lease=policy.lease)
                )

    with smtp_sink() as (sink, port):
        sink.on_accept = take_over
        first = asyncio.run(drain(store, channel(port), clock=clock, owner="slow", retry=policy))
        assert len(taken) == 4  # the second digest too: its send was not recorded yet
        # The slow worker stopped at once: the second digest, which the server had already
        # accepted, is recorded as sent (the other worker must not send it again); the rest
        # are the other worker's.
        assert [m["Subject"] for m in sink.messages] == ["s00-p1", "s01-p1"]
        assert [a.status for a in first] == ["sent", "sent"]
        clock.now = T0 + timedelta(minutes=20)  # the other worker's lease ran out too
        second = asyncio.run(drain(store, channel(port), clock=clock, owner="b", retry=policy))
    assert [a.item.subscriber for a in second] == ["s02", "s03", "s04"]
    assert [m["Subject"] for m in sink.messages] == [f"s{i:02d}-p1" for i in range(5)]
    assert store.outbox.totals(now=clock.now)["sent"] == 5


def test_a_database_outage_mid_batch_sends_at_most_one_digest_twice(
    database_url: str, store: Store, full_feed_papers: tuple[Paper, ...], tmp_path: Path
) -> None:
    """The database goes away while the server accepts the third digest of six: that send
    cannot be recorded, so the batch stops there; once the database is back, the rest go
    out and only the third arrives twice."""
    queue_many(store, full_feed_papers, 6, now=T0)
    clock = Clock(T0)
    alive, dead = store.database.engine, dead_database(database_url, tmp_path)

    def outage(_: EmailMessage) -> None:
        if len(sink.messages) == 3:
            store.database.engine = dead

    with smtp_sink() as (sink, port):
        sink.on_accept = outage
        first = asyncio.run(drain(store, channel(port), clock=clock, owner="a"))
        assert [a.status for a in first] == ["sent", "sent", "unrecorded"]
        assert "not recorded" in (first[2].error or "")
        assert len(sink.messages) == 3  # nothing sent after the send that was not recorded
        store.database.engine = alive  # the database is back; the first worker's leases run out
        clock.now = T0 + timedelta(minutes=10)
        second = asyncio.run(drain(store, channel(port), clock=clock, owner="b"))
    dead.dispose()
    assert [a.item.subscriber for a in second] == ["s02", "s03", "s04", "s05"]
    received = Counter(str(m["Subject"]) for m in sink.messages)
    assert set(received) == {f"s{i:02d}-p1" for i in range(6)}
    assert [subject for subject, n in received.items() if n > 1] == ["s02-p1"]


def test_one_message_slower_than_the_lease_is_not_taken_over(
    database_url: str, store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """The server takes longer than the lease to accept one digest: the worker's lease is
    kept alive while it waits, so the daemon's worker ticking beside it does not send it."""
    queue_many(store, full_feed_papers, 1, now=utcnow() - timedelta(minutes=1))
    policy = RetryPolicy(lease=timedelta(seconds=0.6))

    def cron(port: int) -> list[Attempt]:
        with Store.open(database_url) as own:
            return asyncio.run(drain(own, channel(port), clock=utcnow, owner="cron", retry=policy))

    beside: list[Attempt] = []
    with smtp_sink() as (sink, port), ThreadPoolExecutor(1) as workers:
        sink.delay = 2.0  # a slow server: more than three leases for one message
        first = workers.submit(cron, port)
        # The cron run claimed the digest and is sending it (however busy the machine).
        deadline = time.monotonic() + 30
        while sink.data_started < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        while not first.done():  # the daemon's worker ticks
            beside += asyncio.run(
                drain(store, channel(port), clock=utcnow, owner="daemon", retry=policy)
            )
            time.sleep(0.05)
        assert [a.status for a in first.result()] == ["sent"]
    assert beside == []
    assert len(sink.messages) == 1


def test_paperbell_digest_beside_the_daemons_worker_sends_each_digest_once(
    database_url: str, full_feed_papers: tuple[Paper, ...], tmp_path: Path
) -> None:
    """The issue's case: a cron `paperbell digest` (a process) and the daemon's worker on one
    database, the cron run's batch taking twice `lease_seconds`."""
    subscribers = 16
    words = ["quantum", "learning", "model", "network"]
    with Store.open(database_url) as setup:
        setup.papers.upsert(full_feed_papers, now=utcnow())
    with smtp_sink() as (sink, port):
        config = tmp_path / "config.toml"
        config.write_text(
            f'version = 1\n[database]\nurl = "{database_url}"\n'
            f"[delivery]\nlease_seconds = 1\nbatch = {subscribers}\n"
            + toml_table("email", sink_email(port, sender="papers@paperbell.example", timeout=10))
            + "".join(
                f'[[subscribers]]\nname = "s{i:02d}"\nemail = "s{i:02d}@lab.example"\n'
                f'rules = ["{words[i % len(words)]}"]\nmax_papers = 3\n'
                for i in range(subscribers)
            )
        )
        sink.delay = 0.12  # 16 messages: about 2 s, twice the lease
        cron = start("digest", "-c", str(config), "--since", "2024-11-28")
        beside: list[Attempt] = []
        policy = RetryPolicy(lease=timedelta(seconds=1), batch=4)
        with Store.open(database_url) as store:
            while cron.poll() is None:  # the daemon's worker ticks until the cron run ends
                beside += asyncio.run(
                    drain(store, channel(port), clock=utcnow, owner="daemon", retry=policy)
                )
                time.sleep(0.05)
            out, err = cron.communicate()
            assert cron.returncode == 0, out + err
            assert store.outbox.totals(now=utcnow())["sent"] == subscribers
    received = Counter(str(m["Message-ID"]) for m in sink.messages)
    twice = sorted(mid for mid, n in received.items() if n > 1)
    assert twice == [], f"{len(twice)} of {subscribers} digests arrived twice"
    assert len(received) == subscribers


def test_a_stored_message_its_channel_cannot_read_fails_alone(
    store: Store, full_feed_papers: tuple[Paper, ...], caplog: pytest.LogCaptureFixture
) -> None:
    """A queued Slack digest whose stored message lacks its target (a KeyError when it is
    read) costs that digest one attempt, with the traceback in the log; the digests of its
    batch after it are posted, and it is no bounce."""
    with SlackStandIn(token="xoxb-standin") as slack:
        slack.add_channel("C0ROBOTS", "robot-learning")
        for n, name in enumerate(("ada", "bob", "cy")):
            sub = subscribe(store, name)
            assert sub.id is not None
            payload = {"target": "C0ROBOTS", "messages": [{"text": f"{name} summary"}]}
            if name == "ada":
                del payload["target"]
            store.outbox.enqueue(
                sub.id,
                channel="slack",
                period="p1",
                digest_id=f"d-{name}",
                recipient="C0ROBOTS",
                payload=json.dumps(payload).encode(),
                sent=full_feed_papers[n : n + 1],
                now=T0,
            )
        settings = SlackSettings(token=slack.token, api_url=slack.base_url, post_interval=0)
        attempts = asyncio.run(drain(store, {"slack": SlackChannel(settings)}, clock=Clock(T0)))
        posted = sorted(str(m["text"]) for m in slack.messages("C0ROBOTS"))
    outcome = {a.item.subscriber: (a.status, a.error) for a in attempts}
    assert outcome["bob"] == outcome["cy"] == ("sent", None)
    assert outcome["ada"][0] == "retry" and "KeyError" in (outcome["ada"][1] or "")
    assert posted == ["bob summary", "cy summary"]
    ada = store.outbox.status()[store.subscribers.get("ada").id]  # type: ignore[union-attr]
    assert ada.pending == 1 and ada.next_attempt is not None
    assert any(r.exc_info and r.exc_info[0] is KeyError for r in caplog.records)


def test_digests_given_up_on_are_not_counted_as_refused(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada = subscribe(store, "ada")
    clock = Clock(T0)
    retry = RetryPolicy(max_attempts=1)
    replies = ["451 4.4.1 no answer from host", "451 4.4.1 no answer from host"]
    replies.append("550 5.1.1 no such mailbox")
    with smtp_sink() as (sink, port):
        for day, reply in enumerate(replies):
            sink.refuse["ada@lab.example"] = reply
            queue(store, ada, full_feed_papers[:2], period=f"d{day}", now=clock.now)
            [done] = asyncio.run(drain(store, channel(port), clock=clock, retry=retry))
            assert done.status == "failed"
            clock.now += timedelta(days=1)
    assert not done.paused  # one refusal, after two relays that never answered
    row = store.subscribers.get("ada")
    assert row is not None and row.active


def test_refusals_at_an_old_address_do_not_count_for_the_new_one(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    ada = subscribe(store, "ada")
    clock = Clock(T0)
    with smtp_sink() as (sink, port):
        sink.refuse["ada@lab.example"] = "550 5.1.1 no such mailbox"
        sink.refuse["ada@new.example"] = "550 5.1.1 no such mailbox"
        for day in range(3):
            if day == 2:
                store.subscribers.set_email("ada", "ada@new.example", confirmed=True)
                ada = store.subscribers.get("ada") or ada
            queue(store, ada, full_feed_papers[:2], period=f"d{day}", now=clock.now)
            [done] = asyncio.run(drain(store, channel(port), clock=clock))
            assert done.status == "failed" and not done.paused
            clock.now += timedelta(days=1)
    row = store.subscribers.get("ada")
    assert row is not None and row.active


@pytest.mark.parametrize("how", ["resume", "subscribe again"])
def test_a_resume_starts_the_count_of_refusals_again(
    store: Store, full_feed_papers: tuple[Paper, ...], how: str
) -> None:
    """Paused after three refusals and resumed, or subscribed again with a rule (the
    mailbox was full, and is no more): the next refusal is one in a row, not four."""
    ada = subscribe(store, "ada")
    clock = Clock(T0)
    outcomes = []
    with smtp_sink() as (sink, port):
        sink.refuse["ada@lab.example"] = "552 5.2.2 mailbox full"
        for day in range(4):
            if day == 3 and how == "resume":
                assert store.subscribers.set_active("ada", True, now=clock.now)
            elif day == 3:
                store.subscribers.add("ada", email=None, rules=["drone"], now=clock.now)
            queue(store, ada, full_feed_papers[:2], period=f"d{day}", now=clock.now)
            [done] = asyncio.run(drain(store, channel(port), clock=clock))
            outcomes.append(done.paused)
            clock.now += timedelta(days=1)
    assert outcomes == [False, False, True, False]
    row = store.subscribers.get("ada")
    assert row is not None and row.active
