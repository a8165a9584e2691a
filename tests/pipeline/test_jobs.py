"""A digest queued as a job: the digest itself in the outbox, rendered by the worker that
claims it, its message kept before it is sent.

Real parts: the database (SQLite file, or PostgreSQL with PAPERBELL_TEST_DATABASE_URL), an
SMTP server on loopback, the bundled listing's papers; one fixed clock.
"""

from __future__ import annotations

import asyncio
import email.utils
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from email.message import EmailMessage

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sqlmodel import select
from support.config import sink_email
from support.servers import smtp_sink

from bot.config import parse_config
from bot.core.models import Paper
from bot.manage import notice_sender
from bot.pipeline import DeliveryRequest, build_channels, deliver
from bot.pipeline.dispatch import DeliveryReport, send, settle
from bot.pipeline.jobs import digest_of, job_of
from bot.pipeline.wiring import NOTICE_CHANNEL, Parts, wire
from bot.store import OutboxItem, Queued, RenderedJob, RenderedPart, Store
from bot.store.tables import DeliveryRow, OutboxMessageRow, OutboxRow, RuleRow

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
DAY = date(2024, 11, 28)


def config_of(database_url: str, port: int, *, names: tuple[str, ...] = ("ada",)) -> object:
    return parse_config(
        {
            "version": 1,
            "database": {"url": database_url},
            "email": sink_email(port),
            "subscribers": [
                {"name": name, "email": f"{name}@lab.example", "rules": ["learning"]}
                for name in names
            ],
        },
        environ={},
    )


def two_queued(database_url: str, store: Store, papers: tuple[Paper, ...], port: int) -> Parts:
    """ada's and grace's digests of the day queued as jobs, none sent (the sink at `port`):
    the parts they were queued with."""
    store.papers.upsert(papers, now=NOW)
    config = config_of(database_url, port, names=("ada", "grace"))
    parts = wire(config, store, build_channels(config))  # type: ignore[arg-type]
    queued = asyncio.run(deliver(parts, DeliveryRequest(since=DAY, sends=False), now=NOW))
    assert [r.status for r in queued] == ["queued", "queued"]
    return parts


def test_a_job_is_rendered_once_and_its_message_kept_before_it_is_sent(
    database_url: str, store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Planning queues each digest as a job; the worker that claims it renders it, keeps the
    message in place of the job, sends it and records it: the record holds exactly the
    bytes that went, dated when the digest was made, whatever time the worker renders."""
    store.papers.upsert(full_feed_papers, now=NOW)
    with smtp_sink() as (sink, port):
        config = config_of(database_url, port, names=("ada", "grace"))
        parts = wire(config, store, build_channels(config))  # type: ignore[arg-type]
        reports = asyncio.run(
            deliver(parts, DeliveryRequest(since=DAY), now=NOW, clock=lambda: NOW.replace(hour=20))
        )
    assert [r.status for r in reports] == ["sent", "sent"]
    with store.database.session() as session:
        kept = session.exec(select(OutboxMessageRow)).all()
    assert [row.job for row in kept] == [None, None]
    assert sorted(bytes(row.payload) for row in kept) == sorted(sink.raw)
    for message in sink.messages:
        assert message["Date"] == email.utils.format_datetime(NOW)


def test_a_job_that_cannot_be_read_is_given_up_and_pauses_no_one(
    database_url: str, store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """A job no worker can render fails at once (its papers go back to the next digest),
    and however often it happens it is no bounce: the subscriber is never paused."""
    ada, _ = store.subscribers.add("ada", email="ada@lab.example", rules=["robot"], now=NOW)
    assert ada.id is not None
    with smtp_sink() as (sink, port):
        config = config_of(database_url, port)
        parts = wire(config, store, build_channels(config))  # type: ignore[arg-type]
        for attempt in range(parts.retry.bounce_limit + 1):
            papers = full_feed_papers[attempt : attempt + 1]
            store.outbox.enqueue_many(
                [
                    Queued(
                        ada.id,
                        channel="email",
                        period=f"p{attempt}",
                        digest_id=f"d{attempt}",
                        recipient="ada@lab.example",
                        payload=b"",
                        sent=papers,
                        job=b"not a digest",
                    )
                ],
                now=NOW,
            )
            (report,) = asyncio.run(send(parts, lambda: NOW, DeliveryRequest(), lambda: False))
            assert report.status == "failed" and "cannot be read" in (report.error or "")
    assert sink.messages == []
    with store.database.session() as session:
        statuses = Counter(row.status for row in session.exec(select(DeliveryRow)))
    assert statuses == {}  # every paper back for the next digest
    record = store.subscribers.get("ada")
    assert record is not None and record.paused_reason is None


def test_the_mail_the_pages_send_at_once_leaves_the_digests_to_the_senders(
    database_url: str, store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """The web app sends a confirmation or a fresh link at once, during a run whose digests
    wait as jobs: it takes that mail alone, never a digest (which it cannot render: each
    one it took would be counted a failed attempt, until given up)."""
    with smtp_sink() as (sink, port):
        parts = two_queued(database_url, store, full_feed_papers, port)
        ada = store.subscribers.get("ada")
        assert ada is not None
        notice = email_bytes("ada@lab.example", "Confirm your address")
        store.outbox.enqueue(
            ada.id,
            channel=NOTICE_CHANNEL,
            period="confirm",
            digest_id="notice-1",
            recipient="ada@lab.example",
            payload=notice,
            sent=[],
            now=NOW,
        )
        asyncio.run(notice_sender(parts, clock=lambda: NOW)())
        assert [m["Subject"] for m in sink.messages] == ["Confirm your address"]
        with store.database.session() as session:
            digests = session.exec(select(OutboxRow).where(OutboxRow.channel == "email")).all()
        assert [(row.status, row.attempts, row.lease_owner) for row in digests] == [
            ("pending", 0, None),
            ("pending", 0, None),
        ]
        sent = asyncio.run(send(parts, lambda: NOW, DeliveryRequest(), lambda: False))
    assert sorted(r.status for r in sent) == ["sent", "sent"]


def test_a_stored_rule_that_no_longer_reads_fails_its_subscriber_alone(
    database_url: str, store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """A rule stored by an older version that this one cannot read: that subscriber's run
    fails, named by where their digests go; everyone else's digest goes."""
    store.papers.upsert(full_feed_papers, now=NOW)
    bob, _ = store.subscribers.add("bob", email="bob@lab.example", rules=["robot"], now=NOW)
    with store.database.session() as session:
        (rule,) = session.exec(select(RuleRow).where(RuleRow.subscriber_id == bob.id)).all()
        rule.text = "robot AND ("
        session.add(rule)
        session.commit()
    with smtp_sink() as (_, port):
        config = config_of(database_url, port)
        parts = wire(config, store, build_channels(config))  # type: ignore[arg-type]
        reports = asyncio.run(deliver(parts, DeliveryRequest(since=DAY), now=NOW))
    outcome = {r.subscriber: (r.status, r.target) for r in reports}
    assert outcome == {"ada": ("sent", "<ada@lab.example>"), "bob": ("failed", "<bob@lab.example>")}


def email_bytes(to: str, subject: str) -> bytes:
    message = EmailMessage()
    message["From"] = "paperbell <digest@lab.example>"
    message["To"] = to
    message["Subject"] = subject
    message.set_content("Click the link.")
    return message.as_bytes()


@pytest.fixture(scope="module")
def bundled_digests(full_feed_papers: tuple[Paper, ...]) -> list[object]:
    from bot.core.models import Subscriber
    from bot.match.digest import build_digest
    from bot.rules import parse_rule

    found = []
    for number, rule in enumerate(("learning", "ti:robot", '"quantum error correction"'), 1):
        sub = Subscriber(
            id=number, name=f"reader{number}", email=f"r{number}@lab.example", rules=(rule,)
        )
        digest = build_digest(
            sub, [parse_rule(rule)], full_feed_papers, delivered={}, now=NOW, since=DAY
        )
        assert digest is not None
        found.append(digest)
    return found


@pytest.mark.parametrize("first_went", [True, False])
def test_settle_tells_each_part_of_a_digest_the_senders_sent(
    store: Store, full_feed_papers: tuple[Paper, ...], first_went: bool
) -> None:
    """`paperbell digest` with sender processes: a digest its sender rendered as numbered
    messages is reported part by part, as when it sends them itself; a part left to retry
    is said, not hidden behind the first part's report (sent, or refused: a record given
    up is renamed, its parts are not)."""
    ada, _ = store.subscribers.add("ada", email="ada@lab.example", rules=["robot"], now=NOW)
    assert ada.id is not None
    first, second = full_feed_papers[:2]
    (job_id,) = store.outbox.enqueue_many(
        [
            Queued(
                ada.id,
                channel="email",
                period="daily:2024-11-28",
                digest_id="paperbell.d1",
                recipient="ada@lab.example",
                payload=b"",
                sent=[first, second],
                job=b"the digest",
            )
        ],
        now=NOW,
    )
    assert job_id is not None
    lease = timedelta(minutes=5)
    # A sender renders the job as two messages and sends the first (or the server refuses
    # it); the second is greylisted and waits for its retry.
    (item,) = store.outbox.claim("sender", now=NOW, lease=lease)
    assert item.id == job_id
    part = RenderedPart("paperbell.d1p2", b"part 2", [(second.id, second.version)])
    rendered = RenderedJob(job_id, b"part 1", papers=1, omitted=0, more=[part])
    assert store.outbox.mark_rendered([rendered], owner="sender", now=NOW) == {job_id}
    if first_went:
        assert store.outbox.mark_sent(job_id, owner="sender", now=NOW)
    else:
        assert store.outbox.mark_failed(job_id, owner="sender", error="550 no") is not None
    (later,) = store.outbox.claim("sender", now=NOW, lease=lease)
    retry_at = NOW + timedelta(minutes=2)
    assert store.outbox.mark_retry(
        later.id, owner="sender", error="451 try again later", next_attempt=retry_at
    )
    queued = DeliveryReport("ada", "ada@lab.example", "queued", count=2, outbox_id=job_id)
    told = [(r.status, r.count, r.error, r.outbox_id) for r in settle(store, [queued])]
    head = ("sent", 1, None, job_id) if first_went else ("failed", 1, "550 no", job_id)
    assert told == [head, ("retry", 1, "451 try again later", later.id)]


def test_a_job_holds_its_digest_exactly(bundled_digests: list[object]) -> None:
    for digest in bundled_digests:
        assert digest_of(job_of(digest)) == digest  # type: ignore[arg-type]


@settings(max_examples=200)
@given(st.binary(max_size=400))
@example(b"")
@example(b"x\x9c\x03\x00\x00\x00\x00\x01")  # an empty zlib stream: no JSON in it
def test_bytes_that_hold_no_digest_are_refused_with_a_value_error(job: bytes) -> None:
    with pytest.raises(ValueError):
        digest_of(job)


def test_a_job_whose_rendering_breaks_fails_alone_and_the_batch_goes_on(
    database_url: str,
    store: Store,
    full_feed_papers: tuple[Paper, ...],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A renderer that breaks on one job (a fault, not a refusal: a KeyError) costs that
    digest one attempt, with the traceback in the log; the rest of its batch is sent, and
    it is no bounce."""
    from bot.channels.outbox import drain
    from bot.pipeline.jobs import renderer

    with smtp_sink() as (sink, port):
        parts = two_queued(database_url, store, full_feed_papers, port)
        render = renderer(parts)

        def breaks_on_ada(item: OutboxItem) -> RenderedJob:
            if item.subscriber == "ada":
                raise KeyError("summary")
            return render(item)

        attempts = asyncio.run(
            drain(store, parts.channels, clock=lambda: NOW, retry=parts.retry, render=breaks_on_ada)
        )
    outcome = {a.item.subscriber: (a.status, a.error) for a in attempts}
    assert outcome["grace"] == ("sent", None)
    assert outcome["ada"][0] == "retry" and "KeyError" in (outcome["ada"][1] or "")
    assert [m["To"] for m in sink.messages] == ["grace@lab.example"]
    with store.database.session() as session:
        rows = {row.recipient: row for row in session.exec(select(OutboxRow))}
    ada_row = rows["ada@lab.example"]
    assert (ada_row.status, ada_row.attempts, ada_row.lease_owner) == ("pending", 1, None)
    assert any(r.exc_info and r.exc_info[0] is KeyError for r in caplog.records)
    record = store.subscribers.get("ada")
    assert record is not None and record.paused_reason is None
