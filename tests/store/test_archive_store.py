"""`store.archive`: the papers sent to a subscriber (their feed) and the digests sent to them
(their archive), read back from the outbox and the deliveries, on the real database (SQLite
file, or PostgreSQL with PAPERBELL_TEST_DATABASE_URL)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage

import pytest

from bot.core.models import Paper, Subscriber
from bot.store import Store

pytestmark = pytest.mark.database

T0 = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)


def message(to: str, subject: str) -> bytes:
    msg = EmailMessage()
    msg["From"] = "papers@paperbell.example"
    msg["To"] = to
    msg["Subject"] = subject
    msg.set_content("digest " + "x" * 10_000)
    return bytes(msg)


def subscribe(store: Store, name: str) -> Subscriber:
    sub, _ = store.subscribers.add(name, email=f"{name}@lab.example", rules=["robot"], now=T0)
    return sub


def send(
    store: Store,
    sub: Subscriber,
    papers: tuple[Paper, ...],
    *,
    when: datetime,
    channel: str = "email",
    omitted: tuple[Paper, ...] = (),
    sent: bool = True,
) -> str:
    """Queue a digest of `papers` at `when` and (`sent`) record it sent a minute later."""
    assert sub.id is not None and sub.email is not None
    digest_id = f"paperbell.{sub.name}-{channel}-{when:%Y%m%d%H%M}"
    outbox_id = store.outbox.enqueue(
        sub.id,
        channel=channel,
        period=digest_id,
        digest_id=digest_id,
        recipient=sub.email,
        payload=message(sub.email, f"{len(papers)} new papers for {sub.name}")
        if channel != "slack"
        else b'{"messages": []}',
        sent=papers,
        omitted=omitted,
        now=when,
    )
    assert outbox_id is not None
    if sent:
        [item] = store.outbox.claim("test", now=when, lease=timedelta(minutes=5))
        assert store.outbox.mark_sent(item.id, owner="test", now=when + timedelta(minutes=1))
    return digest_id


def test_the_feed_lists_each_sent_paper_once_newest_first(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    papers = full_feed_papers[:12]
    store.papers.upsert(papers, now=T0)
    ada, ben = subscribe(store, "ada"), subscribe(store, "ben")
    assert ada.id is not None and ben.id is not None
    send(store, ada, papers[:3], when=T0, omitted=papers[3:5])
    day2 = T0 + timedelta(days=1)
    send(store, ada, papers[5:7], when=day2)
    send(store, ada, papers[:1] + papers[7:8], when=day2, channel="slack")  # 0 again, by Slack
    send(store, ada, papers[8:9], when=day2 + timedelta(hours=1), sent=False)  # still queued
    send(store, ben, papers[9:12], when=T0)

    found = store.archive.delivered(ada.id)
    ids = [entry.paper.id for entry in found]
    assert len(ids) == len(set(ids)) == 6  # each paper once; none omitted or still queued
    assert set(ids) == {p.id for p in papers[:3] + papers[5:8]}
    assert not set(ids) & {p.id for p in papers[9:12]}  # never ben's
    assert [entry.last for entry in found] == sorted((e.last for e in found), reverse=True)
    again = next(entry for entry in found if entry.paper.id == papers[0].id)
    assert again.first == T0 + timedelta(minutes=1)  # first sent by email ...
    assert again.last == day2 + timedelta(minutes=1)  # ... and last by Slack
    assert all(entry.first.tzinfo is not None for entry in found)
    assert len(store.archive.delivered(ada.id, limit=2)) == 2
    assert {e.paper.id for e in store.archive.delivered(ben.id)} == {p.id for p in papers[9:12]}


def test_a_paper_sent_by_version_twice_is_one_entry_updated(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    paper = full_feed_papers[0]
    store.papers.upsert([paper], now=T0)
    ada = subscribe(store, "ada")
    assert ada.id is not None
    send(store, ada, (paper,), when=T0)
    v2 = replace(paper, version=paper.version + 1, announce_type="replace")
    store.papers.upsert([v2], now=T0 + timedelta(days=2))
    send(store, ada, (v2,), when=T0 + timedelta(days=2))
    [entry] = store.archive.delivered(ada.id)
    assert entry.paper.version == v2.version
    assert (entry.first, entry.last) == (
        T0 + timedelta(minutes=1),
        T0 + timedelta(days=2, minutes=1),
    )


def test_the_archive_lists_sent_digests_newest_first_and_shows_each_whole(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    papers = full_feed_papers[:6]
    store.papers.upsert(papers, now=T0)
    ada, ben = subscribe(store, "ada"), subscribe(store, "ben")
    assert ada.id is not None and ben.id is not None
    first = send(store, ada, papers[:2], when=T0)
    slack = send(store, ada, papers[2:4], when=T0 + timedelta(days=1), channel="slack")
    send(store, ada, papers[4:5], when=T0 + timedelta(days=1), channel="notice")
    send(store, ada, papers[5:6], when=T0 + timedelta(days=2), sent=False)
    bens = send(store, ben, papers[:1], when=T0)

    listed = store.archive.digests(ada.id, leave_out=["notice"])
    assert [d.digest_id for d in listed] == [slack, first]
    assert listed[1].papers == 2 and listed[1].channel == "email"
    assert b"Subject: 2 new papers for ada" in listed[1].head
    assert len(listed[1].head) <= 4096 and listed[1].message is None
    assert [d.digest_id for d in store.archive.digests(ada.id, leave_out=["notice"], offset=1)] == [
        first
    ]

    found = store.archive.digest(ada.id, first, leave_out=["notice"])
    assert found is not None
    digest, shown = found
    assert digest.message is not None and digest.message.startswith(digest.head)
    assert len(digest.message) > 10_000  # whole, past its head
    assert [p.id for p in shown] == [p.id for p in papers[:2]]
    slack_digest = store.archive.digest(ada.id, slack)
    assert slack_digest is not None and [p.id for p in slack_digest[1]] == [
        p.id for p in papers[2:4]
    ]
    # Another subscriber's digest, a notice, a digest not sent yet, a made-up id: none.
    assert store.archive.digest(ada.id, bens) is None
    assert store.archive.digest(ben.id, first) is None
    assert store.archive.digest(ada.id, "paperbell.nothing") is None
    notices = store.archive.digests(ada.id)
    assert "notice" in {d.channel for d in notices}
    assert all(d.channel != "notice" for d in store.archive.digests(ada.id, leave_out=["notice"]))
