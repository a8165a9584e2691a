"""Two runs queuing digests for the same subscriber and channel at once (a scheduled slot
and a "send now" from Slack or the command line): each built from what was delivered
before either queued, under periods of their own. The second queues only the papers the
first did not take; left with none, it is not queued at all.

Real parts: the database (SQLite file, or PostgreSQL with PAPERBELL_TEST_DATABASE_URL), the
bundled listing's papers; one fixed clock.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import UTC, date, datetime

import pytest
from sqlmodel import select
from support.config import sink_email

from bot.config import parse_config
from bot.core.models import Digest, Paper
from bot.pipeline import DeliveryRequest, build_channels
from bot.pipeline.deliver import build_digests, plan_delivery
from bot.pipeline.dispatch import queue
from bot.pipeline.jobs import digest_of
from bot.pipeline.wiring import Parts, wire
from bot.store import Queued, Store
from bot.store.tables import DeliveryRow, OutboxMessageRow, OutboxRow

pytestmark = pytest.mark.database
NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
DAY = date(2024, 11, 28)
SLOT = DeliveryRequest(since=DAY, period=lambda sub: "daily:2024-11-28", sends=False)
NOW_REQUEST = DeliveryRequest(since=DAY, sends=False)  # "send now": its own id as period


def parts_of(database_url: str, store: Store, rules: list[str]) -> Parts:
    config = parse_config(
        {
            "version": 1,
            "database": {"url": database_url},
            "email": sink_email(2525),  # nothing is sent: the digests are only queued
            "subscribers": [{"name": "ada", "email": "ada@lab.example", "rules": rules}],
        },
        environ={},
    )
    return wire(config, store, build_channels(config))


def built(parts: Parts, request: DeliveryRequest) -> list[tuple[Digest, object]]:
    plan = plan_delivery(parts, request, now=NOW)
    digests, reports = build_digests(parts, plan, request, now=NOW)
    assert reports == []
    return digests  # type: ignore[return-value]


def queued(store: Store) -> list[tuple[str, int]]:
    """Every paper version queued (or sent), to anyone, anywhere."""
    with store.database.session() as session:
        rows = session.exec(select(DeliveryRow).where(DeliveryRow.status == "queued")).all()
    return sorted((row.paper_id, row.paper_version) for row in rows)


def papers_of_jobs(store: Store) -> list[list[str]]:
    """The papers each queued job would send, in the order queued."""
    with store.database.session() as session:
        jobs = session.exec(select(OutboxMessageRow).order_by(OutboxMessageRow.outbox_id)).all()
    return [sorted(i.paper.versioned_id for i in digest_of(j.job).items) for j in jobs if j.job]


def test_a_newer_version_queued_by_a_send_now_is_not_sent_again_by_the_slot(
    database_url: str, store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """The slot's digest is built (and waits for its summaries); a poll brings the paper's
    next version; "send now" builds and queues that one. The slot's digest must not send
    the paper again: the unique key of the deliveries, one per version, cannot see it."""
    paper = next(p for p in full_feed_papers if p.announce_type == "new")
    store.papers.upsert(full_feed_papers, now=NOW)
    parts = parts_of(database_url, store, [f"id:{paper.id}"])
    slot = built(parts, SLOT)
    newer = replace(paper, version=paper.version + 1, announce_type="replace")
    store.papers.upsert([newer], now=NOW)
    now = built(parts, NOW_REQUEST)
    assert [r.status for r in queue(store, now, NOW_REQUEST, now=NOW)] == ["queued"]
    reports = queue(store, slot, SLOT, now=NOW)
    assert [(r.status, r.count) for r in reports] == [("nothing", 0)]
    assert queued(store) == [(paper.id, newer.version)]


def test_a_digest_queues_only_the_papers_another_run_did_not_take(
    database_url: str, store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Both built from the same deliveries; the slot's before a rule was added, "send now"
    after. The slot's digest, queued second, keeps its own paper and drops the shared one:
    its job holds exactly what its record's deliveries say (no paper shown twice, none
    held back to a later slot)."""
    ours, shared, added = [p for p in full_feed_papers if p.announce_type == "new"][:3]
    store.papers.upsert(full_feed_papers, now=NOW)
    parts = parts_of(database_url, store, [f"id:{ours.id}", f"id:{shared.id}"])
    slot = built(parts, SLOT)
    parts = parts_of(database_url, store, [f"id:{shared.id}", f"id:{added.id}"])
    now = built(parts, NOW_REQUEST)
    assert [r.status for r in queue(store, now, NOW_REQUEST, now=NOW)] == ["queued"]
    reports = queue(store, slot, SLOT, now=NOW)
    assert [(r.status, r.count) for r in reports] == [("queued", 1)]
    assert queued(store) == sorted((p.id, p.version) for p in (ours, shared, added))
    assert papers_of_jobs(store) == [
        sorted((shared.versioned_id, added.versioned_id)),
        [ours.versioned_id],
    ]
    with store.database.session() as session:
        records = session.exec(select(OutboxRow).order_by(OutboxRow.id)).all()
    assert [(r.period, r.papers) for r in records][1] == ("daily:2024-11-28", 1)


def test_two_runs_queuing_at_once_take_turns(
    database_url: str, store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Two processes queue for ada at the same moment: the slot the paper's next version,
    "send now" the version it knew. The second waits for the first's transaction to end,
    then finds the paper taken: neither fails, and the paper goes once."""
    earlier, paper = [p for p in full_feed_papers if p.announce_type == "new"][:2]
    newer = replace(paper, version=paper.version + 1)
    ada, _ = store.subscribers.add("ada", email="ada@lab.example", rules=["x"], now=NOW)
    assert ada.id is not None
    ada_id = ada.id

    def entry(period: str, sent: list[Paper]) -> Queued:
        return Queued(ada_id, "email", period, period, "ada@lab.example", b"message", sent)

    store.outbox.enqueue_many([entry("earlier", [earlier])], now=NOW)
    other = Store.open(database_url)  # the other process's own connections
    second: list[int | None] = []
    send_now = threading.Thread(
        target=lambda: second.extend(
            other.outbox.enqueue_many([entry("send-now", [paper])], now=NOW)
        )
    )

    def trim(slot: Queued, taken: frozenset[str]) -> Queued:
        # Inside the slot's transaction, its turn taken: "send now" comes to queue.
        send_now.start()
        time.sleep(0.5)
        return replace(slot, sent=[newer])

    try:
        first = store.outbox.enqueue_many(
            [entry("daily:2024-11-28", [earlier, newer])], now=NOW, trim=trim
        )
        send_now.join()
    finally:
        other.close()
    assert first[0] is not None and second == [None]
    assert queued(store) == sorted([(earlier.id, earlier.version), (paper.id, newer.version)])
