"""Several `paperbell run` processes on one database: one leads (polls and plans), every one
sends, each digest once.

Real parts: PostgreSQL (PAPERBELL_TEST_DATABASE_URL; these tests are skipped without it,
but for SQLite's one-`run`-per-file refusal), real `paperbell run` processes, an SMTP server
on loopback (aiosmtpd) that counts what it received by Message-ID. The digests are queued
before the workers are told to send them (their retry time moved to now in one UPDATE), so
that every worker is up when the sending starts.
"""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlmodel import col
from support.cli import invoke, run
from support.clock import Clock
from support.config import local_feed_config
from support.servers import Route, feed_server, smtp_sink, wait_for
from support.workers import (
    CONNECTIONS,
    Owners,
    config_text,
    leased_by,
    on_postgres,
    queue,
    received,
    release,
    sent,
    up,
    workers_running,
)

from bot.channels.email import EmailChannel, SmtpSettings
from bot.channels.outbox import RetryPolicy, drain
from bot.config import parse_config
from bot.core.models import Paper
from bot.pipeline import wire, wire_daemon
from bot.pipeline.scheduler import Daemon
from bot.sources.http import PoliteFetcher, make_client
from bot.store import Leadership, Store, utcnow, workers
from bot.store.database import aware
from bot.store.tables import OutboxRow

# -- the outbox: claims at the same moment ---------------------------------------------------


@on_postgres
@pytest.mark.database
def test_claims_at_the_same_moment_take_other_records_and_do_not_wait(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    queue(store, full_feed_papers, 8)
    release(store)
    lease = timedelta(seconds=30)
    # Another worker is in the middle of its claim: it has locked the three oldest records
    # and not yet leased them.
    with store.database.engine.connect() as other:
        other.execute(text("SELECT id FROM outbox ORDER BY id LIMIT 3 FOR UPDATE"))
        began = time.monotonic()
        mine = store.outbox.claim("me", now=utcnow(), lease=lease, limit=4)
        assert time.monotonic() - began < 2  # skipped, not waited for
        other.rollback()
    assert [item.subscriber for item in mine] == ["s0003", "s0004", "s0005", "s0006"]
    rest = store.outbox.claim("other", now=utcnow(), lease=lease, limit=10)
    assert [item.subscriber for item in rest] == ["s0000", "s0001", "s0002", "s0007"]


@pytest.mark.database
def test_a_batch_renews_its_lease_once_a_third_of_it_has_passed(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Ten messages, each taking 10 s of a 60 s lease: the lease is renewed when 20 s have
    passed since the claim or the last renewal (before the 3rd, 5th, 7th and 9th message),
    not before every message, and never runs low: each message starts with 40 s of it left
    at least."""
    queue(store, full_feed_papers, 10)
    release(store)
    start = utcnow()
    clock = Clock(start)
    renewed: list[datetime] = []
    left: list[timedelta] = []
    renew = store.outbox.renew

    def counting(ids: Any, *, owner: str, lease_until: datetime) -> set[int]:
        renewed.append(clock.now)
        return renew(ids, owner=owner, lease_until=lease_until)

    store.outbox.renew = counting  # type: ignore[method-assign]
    policy = RetryPolicy(lease=timedelta(seconds=60), batch=10)

    def accepted(_: EmailMessage) -> None:
        soonest = select(func.min(OutboxRow.lease_until)).where(col(OutboxRow.status) == "pending")
        with store.database.session() as session:
            until = session.execute(soonest).scalar()
        if until is not None:
            left.append(aware(until) - clock.now)
        clock.now += timedelta(seconds=10)

    with smtp_sink() as (sink, port):
        sink.on_accept = accepted
        channel = EmailChannel(SmtpSettings("127.0.0.1", port, security="none", timeout=5))
        attempts = asyncio.run(drain(store, channel, clock=clock, owner="w", retry=policy))
    assert [a.status for a in attempts] == ["sent"] * 10
    assert [(t - start).seconds for t in renewed] == [20, 40, 60, 80]
    assert min(left) >= timedelta(seconds=40)


# -- the lead ----------------------------------------------------------------------------


@on_postgres
@pytest.mark.database
def test_one_process_leads_and_hands_the_lead_over_when_it_stops(store: Store) -> None:
    first = Leadership(store.database, name="host-a:1")
    second = Leadership(store.database, name="host-b:2")
    try:
        assert first.take() and not second.take()
        assert first.take() and not second.take()  # asked again, each tick: no change
        assert workers(store.database).leader == "host-a:1"
        assert set(workers(store.database).running) == {"host-a:1", "host-b:2"}
        first.resign()  # a process stopping
        assert second.take() and not first.take()
        assert workers(store.database).leader == "host-b:2"
    finally:
        first.resign()
        second.resign()
    # The server ends a session's backend a moment after its client hung up (it showed
    # in pg_stat_activity once after resign, in CI): gone within seconds.
    deadline = time.monotonic() + 10
    while workers(store.database).running != ():
        assert time.monotonic() < deadline, workers(store.database).running
        time.sleep(0.05)


@on_postgres
@pytest.mark.database
def test_a_leader_whose_session_ended_knows_it_lost_the_lead(store: Store) -> None:
    """The server ended the leader's session (a connection cut, an administrator): the lock
    went with it. The old leader sees it at its next look, and the other one takes over."""
    first = Leadership(store.database, name="host-a:1")
    second = Leadership(store.database, name="host-b:2")
    try:
        assert first.take() and not second.take()
        with store.database.engine.connect() as admin:
            admin.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'paperbell run host-a:1'"
                )
            )
        deadline = time.monotonic() + 10
        while not second.take():  # the server frees the lock once the backend is gone
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert not first.take()  # it knows: its session is gone, and the lock is taken
        assert workers(store.database).leader == "host-b:2"
    finally:
        first.resign()
        second.resign()


@on_postgres
@pytest.mark.database
def test_only_the_leader_polls_and_a_follower_takes_over_when_it_stops(
    database_url: str, full_feed_bytes: bytes
) -> None:
    """Two daemons on one database: the leader polls, the other only sends; once the leader
    has stopped, the other's next tick takes the lead and polls."""
    with feed_server() as feed:
        feed.routes["/rss/cs"] = Route(full_feed_bytes)
        config = parse_config(
            {
                "version": 1,
                "database": {"url": database_url},
                "sources": [{"kind": "arxiv", "categories": ["cs"], "url": feed.url("/rss/cs")}],
            },
            environ={},
        )
        clock = Clock(datetime(2026, 11, 24, 5, 30, tzinfo=UTC))  # 00:30 in New York

        async def ticks() -> list[tuple[bool, int]]:
            seen = []
            with Store.open(database_url) as one, Store.open(database_url) as two:
                async with make_client() as client:
                    fetcher = PoliteFetcher(client, min_interval=0, retries=0)
                    wired = [wire(config, store, {}) for store in (one, two)]
                    a, b = (
                        Daemon(
                            parts,
                            wire_daemon(config, parts, clock=clock),
                            fetcher=fetcher,
                            clock=clock,
                            owner=name,
                            leadership=Leadership(store.database, name=name),
                        )
                        for parts, store, name in zip(
                            wired, (one, two), ("host-a:1", "host-b:2"), strict=True
                        )
                    )
                    for daemon in (a, b):
                        report = await daemon.tick()
                        seen.append((daemon.leading, len(report.polls)))
                    assert a.leadership is not None
                    a.leadership.resign()  # `a` stopped
                    clock.now += timedelta(days=1)  # the next listing's poll is due
                    report = await b.tick()
                    seen.append((b.leading, len(report.polls)))
                    assert b.counters.leader_since == clock.now
                    report = await a.tick()  # back, too late: it sends only
                    seen.append((a.leading, len(report.polls)))
                    for daemon in (a, b):
                        assert daemon.leadership is not None
                        daemon.leadership.resign()
            return seen

        assert asyncio.run(ticks()) == [(True, 1), (False, 0), (True, 1), (False, 0)]


def test_a_second_run_on_one_sqlite_file_is_refused(tmp_path: Path) -> None:
    """SQLite: one `paperbell run` per database file; a second one says which one runs."""
    config = tmp_path / "config.toml"
    config.write_text(local_feed_config(f"sqlite:///{tmp_path / 'paperbell.sqlite'}"))
    with workers_running(config, 1, tmp_path, web=False) as (first,):
        with Store.open(f"sqlite:///{tmp_path / 'paperbell.sqlite'}") as store:
            wait_for(lambda: workers(store.database).leader == first.name)
        status = invoke("status", config=config).output
        assert f"daemon: `paperbell run` {first.name}, leading" in status
        second = run("run", "-c", str(config), "--no-web", cwd=tmp_path)
        assert second.returncode == 1
        assert (
            f"another `paperbell run` ({first.name}) uses the SQLite "
            f"database {tmp_path / 'paperbell.sqlite'}" in second.stderr + second.stdout
        )
        assert "for several, use PostgreSQL" in second.stderr + second.stdout
    after = invoke("status", config=config).output
    assert "daemon: no `paperbell run` on this database" in after


# -- real worker processes ---------------------------------------------------------------


@on_postgres
@pytest.mark.database
def test_three_workers_share_the_outbox_and_send_each_digest_once(
    tmp_path: Path, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    digests = 240
    with Store.open(database_url) as store, smtp_sink() as (sink, port):
        # A server that takes its time until every worker holds leases: each worker's next
        # tick comes within a second of the release (the leader's after its poll), and the
        # first two must not have sent everything by then (on a loaded machine they had, in
        # CI). The leases are renewed while a message waits, so nothing is sent twice.
        sink.delay = 0.5
        queue(store, full_feed_papers, digests)
        config = tmp_path / "config.toml"
        config.write_text(config_text(database_url, port))
        with workers_running(config, 3, tmp_path, web=True) as group:
            wait_for(lambda: up(store, group))
            leaders = [w for w in group if w.health()["leader"]]
            assert [w.name for w in leaders] == [workers(store.database).leader]
            with Owners(store) as owners:
                release(store)
                wait_for(lambda: owners.names == {w.name for w in group})
                sink.delay = 0.01  # all three overlap; the rest goes quickly
                wait_for(lambda: sent(store) == digests)
            assert [w.stop() for w in group] == [0, 0, 0]
        totals = store.outbox.totals(now=utcnow())
    got = received(sink)
    print(f"\n3 workers, {digests} digests: leases held by each {dict(owners.seen)}")
    assert sorted(got.values()) == [1] * digests  # every digest, each once
    assert totals == {"pending": 0, "sent": digests, "failed": 0, "in flight": 0}
    assert set(owners.seen) == {w.name for w in group}  # every worker sent some


@on_postgres
@pytest.mark.database
def test_the_leader_killed_mid_batch_loses_nothing_and_another_takes_the_lead(
    tmp_path: Path, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """SIGKILL the leader while it holds a batch: the other two send the rest (its batch
    once its lease runs out), at most one digest twice for each of its SMTP connections
    (the one the server had accepted and the dead worker had not recorded: the documented
    window), and one of them leads."""
    digests = 300
    with Store.open(database_url) as store, smtp_sink() as (sink, port):
        sink.delay = 0.01
        queue(store, full_feed_papers, digests)
        config = tmp_path / "config.toml"
        config.write_text(config_text(database_url, port))
        with workers_running(config, 3, tmp_path, web=True) as group:
            wait_for(lambda: up(store, group))
            leader = next(w for w in group if w.name == workers(store.database).leader)
            release(store)

            def holds_a_batch() -> bool:
                return len(sink.messages) >= digests // 3 and leased_by(store, leader.name) > 0

            wait_for(holds_a_batch)
            leader.process.send_signal(signal.SIGKILL)
            leader.process.wait()
            killed_at = len(sink.messages)
            others = [w for w in group if w is not leader]
            wait_for(lambda: sent(store) == digests)
            wait_for(lambda: workers(store.database).leader in {w.name for w in others})
            new = [w for w in others if w.health()["leader"]]
            assert [w.name for w in new] == [workers(store.database).leader]
            assert [w.stop() for w in others] == [0, 0]
        totals = store.outbox.totals(now=utcnow())
    got = received(sink)
    twice = sum(n - 1 for n in got.values())
    print(
        f"\nleader killed after {killed_at} of {digests} messages; the server received "
        f"{len(sink.messages)} messages, {len(got)} digests, {twice} twice; "
        f"{new[0].name} leads now"
    )
    assert len(got) == digests  # none lost
    assert twice <= CONNECTIONS  # those in flight at the kill, one a connection at most
    assert totals == {"pending": 0, "sent": digests, "failed": 0, "in flight": 0}
