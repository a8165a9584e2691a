"""Retention ([database] keep_sent_days, keep_bounces_days): a digest's whole message is cut
to its headers after its days, on SQLite and PostgreSQL; the web archive (real HTTP) still
lists it by its subject and shows the papers it carried; no paper is sent again; pending
digests, recent ones and the deliveries are never touched; old bounces go. `paperbell db
prune` (and --dry-run) says what it did; the daemon prunes once a day, a few batches a tick.
"""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timedelta
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from sqlalchemy import func, update
from sqlmodel import col, select
from support.bounces import ENV, write_config
from support.cli import invoke
from support.pages import Site, archive_path, body, emailed_papers, mail_to
from support.workers import queue, release

import bot.store.retention as retention
from bot.core.models import Paper
from bot.pipeline import NOTICE_CHANNEL, wire, wire_daemon
from bot.pipeline.retention import prune_old, pruned_line
from bot.pipeline.scheduler import Daemon
from bot.store import Bounce, Store, utcnow
from bot.store.archive import HEAD_BYTES
from bot.store.retention import head_of
from bot.store.tables import BounceRow, DeliveryRow, OutboxMessageRow, OutboxRow

pytestmark = pytest.mark.database
# A digest's size: its headers, then 20 KB.
PAYLOAD = b"Subject: your papers\r\nTo: a@lab.example\r\n\r\n" + b"papers, papers\r\n" * 1250


def old_digests(store: Store, **values: object) -> None:
    """Every queued digest as large as a real one, with `values` (status, sent_at...)."""
    with store.database.session() as session:
        session.execute(update(OutboxMessageRow).values(payload=PAYLOAD))
        if values:
            session.execute(update(OutboxRow).values(**values))
        session.commit()


def test_an_old_digest_is_cut_to_its_headers_and_the_archive_still_shows_its_papers(
    site: Site,
) -> None:
    site.deliver()
    (message,) = mail_to(site, "ada@lab.example")
    view = re.search(
        r'href="(https://[^"]+/archive/[^"]+)">View in your browser', body(message, "html")
    )
    assert view
    ada = site.subscriber("ada")
    deliveries = site.store.outbox.delivered_versions(ada.id, None)

    pruned = prune_old(site.config.database, site.store, now=site.clock() + timedelta(days=91))
    assert pruned.messages == 2 and pruned.freed > 10_000 and not pruned.more  # ada's, lab's
    with site.store.database.session() as session:
        sizes = session.exec(select(func.length(OutboxMessageRow.payload))).all()
    assert max(sizes) <= HEAD_BYTES

    listing = site.http.get(archive_path(site, "ada"))
    assert message["Subject"] in listing.text.replace("&#34;", '"').replace("&#39;", "'")
    page = site.http.get(site.local(view.group(1)))
    assert page.status_code == 200 and "Email · sent" in page.text
    for paper in emailed_papers(message):
        assert f'href="https://arxiv.org/abs/{paper}' in page.text
    # What was delivered stays: the same run again sends nothing twice.
    assert site.store.outbox.delivered_versions(ada.id, None) == deliveries
    site.deliver()
    assert len(mail_to(site, "ada@lab.example")) == 1


def test_pending_recent_and_kept_records_are_left_and_old_bounces_go(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    queue(store, full_feed_papers, 4)
    release(store)
    old_digests(store)
    now = utcnow()
    with store.database.session() as session:  # two sent long ago, one lately, one pending
        ids = sorted(session.exec(select(OutboxRow.id)).all())
        for row_id, status, days in zip(
            ids, ("sent", "failed", "sent"), (100, 100, 10), strict=False
        ):
            session.execute(
                update(OutboxRow)
                .where(col(OutboxRow.id) == row_id)
                .values(
                    status=status,
                    sent_at=now - timedelta(days=days) if status == "sent" else None,
                    created_at=now - timedelta(days=days),
                )
            )
        session.commit()
        deliveries = session.exec(select(func.count()).select_from(DeliveryRow)).one()
    for days in (400, 10):
        store.bounces.record(Bounce(now - timedelta(days=days), "hard", "unknown"))

    before = {"sent_before": now - timedelta(days=90), "bounces_before": now - timedelta(days=365)}
    dry = store.retention.prune(**before, dry_run=True)
    assert (dry.messages, dry.bounces) == (2, 1) and dry.freed > 0
    done = store.retention.prune(**before)
    assert (done.messages, done.bounces, done.more) == (2, 1, False)
    assert store.retention.prune(**before) == retention.Pruned()  # nothing left to do
    with store.database.session() as session:
        stored = select(OutboxMessageRow.outbox_id, OutboxMessageRow.payload)
        payloads = dict(session.exec(stored).all())
        assert session.exec(select(func.count()).select_from(DeliveryRow)).one() == deliveries
        assert session.exec(select(func.count()).select_from(BounceRow)).one() == 1
    cut, kept = [payloads[i] for i in ids[:2]], [payloads[i] for i in ids[2:]]
    assert all(p.endswith(b"\r\n\r\n") and len(p) <= HEAD_BYTES for p in cut)
    assert all(len(p) > HEAD_BYTES for p in kept)  # the recent one, the pending one
    assert store.retention.prune(sent_before=None, bounces_before=None) == retention.Pruned()


def test_the_daemon_prunes_a_few_batches_a_tick_then_waits_a_day(
    store: Store, full_feed_papers: tuple[Paper, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.config import parse_config

    monkeypatch.setattr(retention, "BATCH", 2)
    monkeypatch.setattr("bot.pipeline.scheduler.PRUNE_BATCHES", 1)
    queue(store, full_feed_papers, 5)
    old_digests(store, status="sent", sent_at=utcnow() - timedelta(days=100))
    config = parse_config(
        {"version": 1, "database": {"url": "sqlite:///unused.sqlite"}}, environ={}
    )
    parts = wire(config, store, {})
    daemon = Daemon(parts, wire_daemon(config, parts, clock=utcnow), fetcher=None, clock=utcnow)
    cut = []
    for _ in range(4):
        before = store.retention.prune(sent_before=utcnow(), bounces_before=None, dry_run=True)
        asyncio.run(daemon.prune_due(utcnow()))
        cut.append(before.messages)
    assert cut == [5, 3, 1, 0]  # 2, 2, 1 cut; then a day's wait (nothing asked)
    assert daemon._prune_at is not None and daemon._prune_at > utcnow() + timedelta(hours=23)


def test_db_prune_says_what_it_did(tmp_path: Path, database_url: str) -> None:
    config = write_config(tmp_path, database_url, 9)
    assert invoke("poll", config=config, env=ENV).exit_code == 0
    dry = invoke("db", "prune", "-c", str(config), "--dry-run", env=ENV)
    assert dry.exit_code == 0, dry.output
    assert dry.output == (
        "would cut 0 messages sent over 90 days ago to their headers (0.0 MB); "
        "would delete 0 bounces over 365 days old; "
        "would delete 0 sign-ups never confirmed in 30 days\n"
    )
    config.write_text(
        config.read_text().replace(
            "[database]\n", "[database]\nkeep_sent_days = 0\nkeep_unconfirmed_days = 0\n"
        )
    )
    done = invoke("db", "prune", "-c", str(config), env=ENV)
    assert done.exit_code == 0, done.output
    assert done.output == (
        "sent messages kept for ever (keep_sent_days = 0); deleted 0 bounces over 365 days "
        "old; unconfirmed sign-ups kept for ever (keep_unconfirmed_days = 0)\n"
    )


def test_sign_ups_never_confirmed_go_after_their_days_and_no_one_else(store: Store) -> None:
    """Anyone may sign up any address on the page: each left a subscriber for good. After
    `keep_unconfirmed_days` those go; a subscriber who confirmed, got digests (and whose
    email a complaint stopped since), has Slack or a destination, or signed up lately, stays."""
    from bot.config import parse_config

    now = utcnow()
    long_ago = now - timedelta(days=40)

    def add(name: str, *, when: datetime = long_ago, **options: Any) -> int:
        options.setdefault("email_confirmed", False)
        sub, _ = store.subscribers.add(
            name, email=f"{name}@lab.example", rules=["robot"], now=when, **options
        )
        assert sub.id is not None
        return sub.id

    def queue_for(subscriber_id: int, channel: str) -> None:
        store.outbox.enqueue(
            subscriber_id,
            channel=channel,
            period=f"{channel}-{subscriber_id}",
            digest_id=f"d-{channel}-{subscriber_id}",
            recipient="x@lab.example",
            payload=PAYLOAD,
            sent=[],
            now=long_ago,
        )

    stranger = add("stranger")
    queue_for(stranger, NOTICE_CHANNEL)  # the confirmation mail, never opened
    queue_for(add("unopened"), NOTICE_CHANNEL)
    add("confirmed", email_confirmed=True)
    complained = add("complained")  # got digests, then a complaint stopped the email
    queue_for(complained, "email")
    add("slack", slack_user="U1")
    store.targets.add_destination(
        add("ntfy"), "apprise:ntfy", "ntfy://ntfy.sh/papers", now=long_ago, self_service=True
    )
    add("lately", when=now - timedelta(days=3))
    keep = parse_config(
        {"version": 1, "database": {"url": "sqlite:///unused.sqlite"}}, environ={}
    ).database
    assert keep.keep_unconfirmed_days == 30

    dry = prune_old(keep, store, now=now, dry_run=True)
    assert dry.signups == 2 and store.subscribers.get("stranger") is not None
    assert pruned_line(keep, dry, dry_run=True).endswith(
        "would delete 2 sign-ups never confirmed in 30 days"
    )
    assert prune_old(keep, store, now=now).signups == 2
    left = {record.name for record in store.subscribers.records()}
    assert left == {"confirmed", "complained", "slack", "ntfy", "lately"}
    with store.database.session() as session:
        owners = set(session.exec(select(OutboxRow.subscriber_id)).all())
    assert owners == {complained}  # the strangers' confirmation mails went with them
    assert prune_old(keep, store, now=now).signups == 0


@given(st.binary(max_size=2 * HEAD_BYTES), st.binary(max_size=3 * HEAD_BYTES))
@example(b"Subject: x", b"")  # no blank line, no CRLF at all
@example(b"X-Long: " + b"a" * HEAD_BYTES, b"\r\n\r\nbody")  # headers past HEAD_BYTES
@example(b"Subject: \x00\xff", b"\r\n\r\n")
def test_a_head_is_a_header_block_within_head_bytes(headers: bytes, rest: bytes) -> None:
    payload = headers + rest
    head = head_of(payload)
    assert len(head) <= HEAD_BYTES and payload.startswith(head[:-2] if head else b"")
    assert head == b"" or head.endswith(b"\r\n\r\n") or head.endswith(b"\r\n")
    BytesHeaderParser().parsebytes(head)  # readable as headers, whatever it holds
    end = payload.find(b"\r\n\r\n")
    if 0 <= end <= HEAD_BYTES - 4:
        assert head == payload[: end + 4]
