"""The outbox worker: claim queued digests, send them, record each at once, retry or give up.

Owns the delivery policy: leases (a record claimed by a worker that dies is taken by the
next one when the lease expires), retries of transient failures with exponential backoff
and jitter, permanent failures (the papers go back to the subscriber's next digest), and
pausing a subscriber whose address keeps bouncing. The store does the bookkeeping in
transactions; the channel moves the bytes. Must not build or render digests: a queued
record holds the finished message, so a digest re-sent after a crash is the same message
(same Message-ID) as the one that may already have arrived.

The window in which a digest can be sent twice is between the server's "250 accepted" and
the commit of `Store.mark_sent` a few statements later: one small UPDATE, no other work.
"""

from __future__ import annotations

import logging
import os
import platform
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import cast

from bot.channels import Channel, SendOutcome
from bot.errors import StoreError
from bot.store import OutboxItem, Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How the worker leases, retries and gives up."""

    lease: timedelta = timedelta(minutes=5)  # longer than one batch takes to send
    batch: int = 20  # records claimed at a time (sent over one SMTP connection)
    max_attempts: int = 8  # transient failures before a record is given up
    first_delay: timedelta = timedelta(minutes=1)
    max_delay: timedelta = timedelta(hours=3)
    bounce_limit: int = 3  # permanent failures in a row before the subscriber is paused

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> timedelta:
        """The wait after the `attempt`-th failure: exponential, capped, "full jitter"
        between half and all of it so that workers retrying together spread out."""
        ceiling = min(self.max_delay, self.first_delay * (2 ** (attempt - 1)))
        return ceiling * (0.5 + rand() / 2)


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one send attempt of a queued record came to."""

    item: OutboxItem
    status: str  # "sent", "retry", "failed", "unrecorded" (sent, but the record failed)
    error: str | None = None
    next_attempt: datetime | None = None
    paused: bool = False  # the subscriber was paused after this failure


def worker_name() -> str:
    """Who holds a lease: host and process, for `status` and the logs."""
    return f"{platform.node()}:{os.getpid()}"


async def drain(
    store: Store,
    channel: Channel,
    *,
    clock: Callable[[], datetime],
    owner: str | None = None,
    retry: RetryPolicy | None = None,
    due_only: bool = True,
    rand: Callable[[], float] = random.random,
    should_stop: Callable[[], bool] = lambda: False,
) -> list[Attempt]:
    """Send every claimable record once, batch by batch, until none is left (or
    `should_stop()` says so between batches: a daemon shutting down).

    `due_only=False` (a run from the command line) also takes records waiting for a retry:
    the person running it asked for delivery now. Each record is tried at most once per
    call."""
    retry = retry or RetryPolicy()
    owner = owner or worker_name()
    attempts: list[Attempt] = []
    tried: set[int] = set()
    while not should_stop():
        items = store.claim(
            owner,
            now=clock(),
            lease=retry.lease,
            limit=retry.batch,
            due_only=due_only,
            exclude=tried,
        )
        if not items:
            return attempts
        tried.update(item.id for item in items)
        attempts += await _send_batch(
            store, channel, items, clock=clock, retry=retry, rand=rand, should_stop=should_stop
        )
    return attempts


async def _send_batch(
    store: Store,
    channel: Channel,
    items: list[OutboxItem],
    *,
    clock: Callable[[], datetime],
    retry: RetryPolicy,
    rand: Callable[[], float],
    should_stop: Callable[[], bool],
) -> list[Attempt]:
    unrecorded: dict[int, str] = {}

    def on_sent(item: OutboxItem) -> None:
        try:
            store.mark_sent(item.id, now=clock())
        except StoreError as exc:
            # Sent but not recorded: when the lease expires it is sent again (same
            # Message-ID, so mail clients fold the two).
            log.error("digest for %s was sent but not recorded: %s", item.subscriber, exc)
            unrecorded[item.id] = f"sent, but not recorded: {exc}"

    batch = [(item, _message(item)) for item in items]
    outcomes: list[SendOutcome] = await channel.send_all(batch, on_sent, should_stop=should_stop)
    results: list[Attempt] = []
    for outcome in outcomes:
        item = cast(OutboxItem, outcome.item)
        if outcome.ok:
            problem = unrecorded.get(item.id)
            results.append(Attempt(item, "unrecorded" if problem else "sent", error=problem))
            continue
        error = outcome.error or "unknown error"
        attempt = item.attempts + 1
        if outcome.permanent or attempt >= retry.max_attempts:
            why = error if outcome.permanent else f"gave up after {attempt} attempts: {error}"
            failed_in_row = store.mark_failed(item.id, error=why)
            paused = outcome.permanent and failed_in_row >= retry.bounce_limit
            if paused:
                store.pause(
                    item.subscriber_id,
                    f"{failed_in_row} digests in a row refused: {error}",
                )
                log.error("paused %s: %d digests in a row refused", item.subscriber, failed_in_row)
            log.error("digest for %s failed: %s", item.subscriber, why)
            results.append(Attempt(item, "failed", error=why, paused=paused))
        else:
            when = clock() + retry.delay(attempt, rand)
            store.mark_retry(item.id, error=error, next_attempt=when)
            log.warning("digest for %s: %s; retry at %s", item.subscriber, error, when)
            results.append(Attempt(item, "retry", error=error, next_attempt=when))
    return results


def _message(item: OutboxItem) -> EmailMessage:
    """The queued message, parsed back (sent byte for byte as it was built)."""
    return cast(EmailMessage, message_from_bytes(item.payload, policy=policy.SMTP))
