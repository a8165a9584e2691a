"""Leases read on two workers' clocks: how far apart they may be (bot.channels.outbox).

Before each message a worker holds its batch for two thirds of a lease at least, on its own
clock. Another worker whose clock runs ahead by less than that cannot take over the digest
on the wire; one ahead by more can, and that digest may go twice (the documented limit:
machines sharing a database keep their clocks in step). Both clocks are set by hand: the
worst moment, just before the holder would renew.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage

import pytest
from support.clock import Clock
from support.servers import smtp_sink

from bot.channels.email import EmailChannel, SmtpSettings
from bot.channels.outbox import Held, RetryPolicy, drain
from bot.core.models import Paper
from bot.store import Store

pytestmark = pytest.mark.database

T0 = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
MARGIN = LEASE * (1 - Held.RENEW_AFTER)  # held before each message, at least


def queue_three(store: Store, papers: tuple[Paper, ...]) -> list[int]:
    """Three digests queued at T0, their records' ids."""
    ids = []
    for i in range(3):
        name = f"s{i}"
        sub, _ = store.subscribers.add(name, email=f"{name}@lab.example", rules=["robot"], now=T0)
        assert sub.id is not None and sub.email is not None
        message = EmailMessage()
        message["From"] = "papers@paperbell.example"
        message["To"] = sub.email
        message["Subject"] = name
        message["Message-ID"] = f"<{name}@paperbell.example>"
        message.set_content(f"digest {name}")
        queued = store.outbox.enqueue(
            sub.id,
            channel="email",
            period="p1",
            digest_id=f"d-{name}",
            recipient=sub.email,
            payload=bytes(message),
            sent=papers[i : i + 1],
            now=T0,
        )
        assert queued is not None
        ids.append(queued)
    return ids


@pytest.mark.parametrize(
    ("ahead", "takes_over"),
    [(MARGIN - timedelta(seconds=2), False), (MARGIN + timedelta(seconds=2), True)],
    ids=["ahead-by-less-than-the-margin", "ahead-by-more"],
)
def test_a_worker_whose_clock_runs_ahead_takes_over_only_past_the_margin(
    database_url: str,
    store: Store,
    full_feed_papers: tuple[Paper, ...],
    ahead: timedelta,
    takes_over: bool,
) -> None:
    ids = queue_three(store, full_feed_papers)
    holder = Clock(T0)
    taken: list[int] = []

    def meanwhile(_: EmailMessage) -> None:
        if len(sink.messages) == 1:
            # The first digest is accepted a second before the holder would renew: it
            # sends the second one on the lease it claimed.
            holder.now = T0 + LEASE * Held.RENEW_AFTER - timedelta(seconds=1)
        elif len(sink.messages) == 2:
            # The second digest on the wire: another worker, its clock `ahead`, claims.
            with Store.open(database_url) as other:
                later = holder.now + ahead
                taken.extend(i.id for i in other.outbox.claim("other", now=later, lease=LEASE))

    with smtp_sink() as (sink, port):
        sink.on_accept = meanwhile
        channel = EmailChannel(SmtpSettings("127.0.0.1", port, security="none", timeout=5))
        policy = RetryPolicy(lease=LEASE)
        sent = asyncio.run(drain(store, channel, clock=holder, owner="holder", retry=policy))
    if takes_over:
        # The second digest was taken while the holder was sending it: the other worker
        # may send it again. The holder records its send and stops there.
        assert taken == ids[1:]
        assert [a.item.id for a in sent] == ids[:2]
    else:
        assert taken == []
        assert [a.item.id for a in sent] == ids
        assert [a.status for a in sent] == ["sent"] * 3
