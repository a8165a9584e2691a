"""The outbox worker: claim queued digests, send them, record each at once, retry or give up.

Owns the delivery policy: leases, retries of transient failures with exponential backoff
and jitter, permanent failures (the papers go back to the subscriber's next digest), and
pausing a subscriber whose address keeps bouncing. The store does the bookkeeping in
transactions; the channel moves the bytes. A record queued as a job (its digest) is
rendered by the worker that claims it, with the `render` it is given (the pipeline's:
`bot.pipeline.jobs`), and its message kept before it is sent: a digest re-sent after a
crash is the same message (same Message-ID) as the one that may already have arrived.

Leases: a worker holds the records it claimed for `RetryPolicy.lease`, and renews the lease
of every record of its batch not yet done once a third of it has passed: looked at before
each message, and every third of a lease while one message is slow (`Held`, the same for
every channel). So before each message the worker holds every record of its batch for two
thirds of a lease more at least, which no other worker can have taken; and a batch that
takes longer than the lease keeps it. A record claimed by a worker that dies is taken by
the next one when the lease runs out. A worker that finds a record of its batch taken over
(it was frozen past the lease) stops the batch and never sends a record it no longer holds;
nor does it go on once a send could not be recorded (the database is down): the records not
tried are handed back, untouched. Leases are read on each worker's own clock (`clock`):
workers on several machines rely on their clocks agreeing (NTP keeps them within
milliseconds). A worker whose clock runs ahead of the holder's by two thirds of a lease,
less the time one message takes, may see the lease run out while the holder is sending.

The window in which a digest can be sent twice: the channel accepted it and its
`store.outbox.mark_sent` did not commit, because the process died in between (one small UPDATE
later: one digest for each batch being sent, `RetryPolicy.connections` at most), or the
database failed that write (the batch stops there: at most one digest per batch being sent
per outage), or the worker was frozen while sending it until its lease ran out (two
thirds of a lease at least after it last looked) and another took it over (the late send is
still recorded, so the other one does not repeat it unless it had sent it already), or the
other worker's clock ran ahead of its own by that much and took it over early (the same). A
channel may add its own: an SMTP connection that drops after the server took the message
but before its "250" is sent again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import random
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import cast

from bot.channels.base import Channel, SendOutcome
from bot.channels.registry import channel_kind, kind_of
from bot.core.errors import StoreError, unexpected
from bot.core.models import target_label
from bot.core.plurals import plural
from bot.store import OutboxItem, RenderedJob, Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How the worker leases, retries and gives up."""

    lease: timedelta = timedelta(minutes=5)  # renewed while sending; a dead worker's wait
    batch: int = 20  # records claimed at a time (sent over one SMTP connection)
    connections: int = 1  # batches sent side by side, each over its own connection
    max_attempts: int = 8  # transient failures before a record is given up
    first_delay: timedelta = timedelta(minutes=1)
    max_delay: timedelta = timedelta(hours=3)
    bounce_limit: int = 3  # permanent failures in a row before the subscriber is paused

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> timedelta:
        """The wait after the `attempt`-th failure: exponential, capped, "full jitter"
        between half and all of it so that workers retrying together spread out."""
        # Doubling stops once it passes the cap: 2**41 minutes no longer fits a timedelta.
        doublings = 0
        while doublings < min(attempt - 1, 64) and self.first_delay * 2**doublings < self.max_delay:
            doublings += 1
        ceiling = min(self.max_delay, self.first_delay * 2**doublings)
        return ceiling * (0.5 + rand() / 2)


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one send attempt of a queued record came to."""

    item: OutboxItem
    # "sent", "retry", "failed", "unrecorded" (sent, but the record failed), "waiting" (left
    # queued for the relay's limits: not a failure, no attempt counted)
    status: str
    error: str | None = None
    next_attempt: datetime | None = None
    paused: bool = False  # the subscriber was paused after this failure
    paused_target: bool = False  # this target alone was (an Apprise service refusing)


# Renders a claimed record's job (`item.job`: its digest) into its message and what that
# holds; raises ValueError when the channel refuses the digest (given up at once). Any other
# error is a fault of that record alone: it is tried again later, as a failed send is.
RenderJob = Callable[[OutboxItem], RenderedJob]


def worker_name(pid: int | None = None) -> str:
    """Who holds a lease: host and process (this one, or the child `pid` on this host), for
    `status` and the logs."""
    return f"{platform.node()}:{os.getpid() if pid is None else pid}"


Channels = Channel | Mapping[str, Channel]


async def drain(
    store: Store,
    channels: Channels,
    *,
    clock: Callable[[], datetime],
    owner: str | None = None,
    retry: RetryPolicy | None = None,
    due_only: bool = True,
    rand: Callable[[], float] = random.random,
    should_stop: Callable[[], bool] = lambda: False,
    tried: set[int] | None = None,
    render: RenderJob | None = None,
    only: Collection[str] | None = None,
    attempts_before: Mapping[int, int] | None = None,
    subscribers: Collection[int] | None = None,
) -> list[Attempt]:
    """Send every claimable record once, batch by batch, until none is left (or
    `should_stop()` says so between batches: a daemon shutting down).

    `due_only=False` (a run from the command line) also takes records waiting for a retry:
    the person running it asked for delivery now. Each record is tried at most once per
    call, or once for all the calls that share `tried` (a run that queues and sends its
    digests a share at a time: the records it tried that may still be pending, a record
    sent leaving it). `channels` maps a record's channel kind ("email", "slack",
    "apprise": the kind of "apprise:<key>") to what sends it. The kinds of a batch are
    sent side by side: a slow service holds up no email; and `retry.connections` batches
    at a time, each over its own connection. `render` makes the message of each record
    queued as a job, in a thread (without it, such a record fails, as any record that
    cannot be sent). `only`: claim only the records of these channels (the web app's
    notices: it renders no digest); `subscribers`: only these subscribers' records (ids: a
    run for one subscriber sends no one else's). `attempts_before`: a one-off run's sender
    beside others (each with its own `tried`), the failed attempts of each pending record
    when the run began; a record claimed with more failed during the run, in another sender,
    and is handed back untried: it waits for its retry time, not tried at once again."""
    if not isinstance(channels, Mapping):
        channels = {channels.name: channels}
    retry = retry or RetryPolicy()
    owner = owner or worker_name()
    attempts: list[Attempt] = []
    tried = set() if tried is None else tried
    handed_back: set[int] = set()  # records of a batch cut short, claimable once more
    broken = False  # the database is gone: claiming more would only fail

    async def batches() -> None:
        nonlocal broken
        while not should_stop() and not broken:
            # Claimed without an await between the read and the lease: the other batches
            # of this call never claim the same records.
            items = store.outbox.claim(
                owner,
                now=clock(),
                lease=retry.lease,
                limit=retry.batch,
                due_only=due_only,
                exclude=tried,
                channels=only,
                subscribers=subscribers,
            )
            if not items:
                return
            tried.update(item.id for item in items)
            if attempts_before is not None:
                items = _failed_elsewhere(store, owner, items, attempts_before)
                if not items:
                    continue
            held = Held(store, items, owner=owner, clock=clock, lease=retry.lease)
            kinds: dict[str, list[OutboxItem]] = {}
            for item in items:
                kinds.setdefault(kind_of(item.channel), []).append(item)
            sends = []
            for kind, group in kinds.items():
                channel = channels.get(kind)
                if channel is None:
                    attempts.extend(
                        map(
                            _kept,
                            _unsendable(
                                store, held, group, kind, clock=clock, retry=retry, rand=rand
                            ),
                        )
                    )
                    continue
                sends.append(
                    _send_batch(
                        store,
                        channel,
                        held,
                        group,
                        clock=clock,
                        retry=retry,
                        rand=rand,
                        should_stop=should_stop,
                        render=render,
                    )
                )
            for sent in await asyncio.gather(*sends):
                attempts.extend(map(_kept, sent))
                # A record sent (and recorded) can never be claimed again: it leaves the
                # set each claim excludes, which so stays as small as what failed this run
                # (not every record the run sent: a claim would name thousands).
                tried.difference_update(a.item.id for a in sent if a.status == "sent")
            untried = held.hand_back()
            if held.broken:
                broken = True
                return
            # A batch cut short (a lost lease, a shutdown): its untried records may be
            # claimed again, once, if no other worker holds them by then.
            again = untried - handed_back
            handed_back.update(again)
            tried.difference_update(again)

    await asyncio.gather(*(batches() for _ in range(max(1, retry.connections))))
    return attempts


class Held:
    """The records of one claimed batch that its worker still holds, their lease renewed
    once a third of it has passed (one UPDATE for the batch, not one per message): a batch
    that takes longer than the lease keeps it, and a worker that lost a record (it stalled
    past the lease and another worker took over) stops the batch before it sends anything
    it no longer holds. So does a failure to write to the database."""

    RENEW_AFTER = 1 / 3  # of the lease, since the claim or the last renewal

    def __init__(
        self,
        store: Store,
        items: list[OutboxItem],
        *,
        owner: str,
        clock: Callable[[], datetime],
        lease: timedelta,
    ) -> None:
        self.store, self.owner, self.clock, self.lease = store, owner, clock, lease
        self.open: dict[int, OutboxItem] = {item.id: item for item in items}  # not yet done
        self.lost = False  # another worker took over one of the records
        self.broken = False  # the database could not record a send (or renew a lease)
        # Until when every open record is surely this worker's: the claim's lease, then
        # each renewal's (None: not known, renew at the first chance).
        self.until = min((i.lease_until for i in items if i.lease_until), default=None)

    @property
    def stopped(self) -> bool:
        return self.lost or self.broken

    def renew(self) -> bool:
        """Extend the lease of every record not yet done, if a third of it has passed;
        False: stop the batch."""
        if self.stopped:
            return False
        if not self.open:
            return True
        now = self.clock()
        if self.until is not None and self.until - now > self.lease * (1 - self.RENEW_AFTER):
            return True  # held for two thirds of a lease more at least: no one can take it
        until = now + self.lease
        try:
            held = self.store.outbox.renew(self.open, owner=self.owner, lease_until=until)
        except StoreError as exc:
            log.error("cannot renew the lease of the digests being sent; stopping: %s", exc)
            self.broken = True
            return False
        taken = [item.subscriber for i, item in self.open.items() if i not in held]
        if taken:
            self.lose(f"another worker took over the digests for {', '.join(taken)}")
        else:
            self.until = until
        return not self.stopped

    def lose(self, why: str) -> None:
        log.error("%s (the lease ran out); this batch stops here", why)
        self.lost = True

    def done(self, item: OutboxItem) -> None:
        self.open.pop(item.id, None)

    def hand_back(self) -> set[int]:
        """Release the records not tried (the batch stopped early): another worker may send
        them at once. Left to their lease if the database cannot be reached."""
        untried = set(self.open)
        if untried:
            try:
                self.store.outbox.release(self.owner, untried)
            except StoreError as exc:
                log.error("cannot hand back %s: %s", plural(len(untried), "claimed digest"), exc)
        self.open.clear()
        return untried


def _failed_elsewhere(
    store: Store, owner: str, items: list[OutboxItem], attempts_before: Mapping[int, int]
) -> list[OutboxItem]:
    """The claimed records that did not fail since the run began; the others are handed
    back (left to their retry time)."""
    failed = {i.id for i in items if i.attempts > attempts_before.get(i.id, 0)}
    if failed:
        store.outbox.release(owner, failed)
    return [item for item in items if item.id not in failed]


def _kept(attempt: Attempt) -> Attempt:
    """The attempt as `drain` keeps it until it returns: its record without the message and
    the job, which no report reads (tens of KB each; a run sends thousands)."""
    return replace(attempt, item=replace(attempt.item, payload=b"", job=None))


def _unsendable(
    store: Store,
    held: Held,
    items: list[OutboxItem],
    kind: str,
    *,
    clock: Callable[[], datetime],
    retry: RetryPolicy,
    rand: Callable[[], float],
) -> list[Attempt]:
    """Records for a channel this run cannot send (its section left the config): they wait
    for a run that can, and are given up like any failure after the last attempt."""
    outcomes = [
        SendOutcome(item, ok=False, error=f"no {kind} channel is configured ([{kind}])")
        for item in items
    ]
    return _record_failures(store, held, outcomes, clock=clock, retry=retry, rand=rand)


async def _send_batch(
    store: Store,
    channel: Channel,
    held: Held,
    items: list[OutboxItem],
    *,
    clock: Callable[[], datetime],
    retry: RetryPolicy,
    rand: Callable[[], float],
    should_stop: Callable[[], bool],
    render: RenderJob | None,
) -> list[Attempt]:
    results: list[Attempt] = []
    if any(item.job is not None for item in items):
        items, refused, later = await asyncio.to_thread(
            _render_jobs, store, held, items, render, now=clock()
        )
        for item, why in refused:  # given up (its papers go back), never counted as a bounce
            try:
                given_up = store.outbox.mark_failed(item.id, owner=held.owner, error=why)
            except StoreError as exc:  # its lease runs out: then it is claimed, and fails, again
                held.broken = True
                log.error("digest for %s: cannot record that it failed: %s", item.subscriber, exc)
                continue
            if given_up is not None:
                log.error("digest for %s could not be rendered: %s", item.subscriber, why)
                results.append(Attempt(item, "failed", error=why))
        results += _record_failures(store, held, later, clock=clock, retry=retry, rand=rand)
        if held.stopped:
            return results
    unrecorded: dict[int, str] = {}
    owner = held.owner

    def on_sent(item: OutboxItem) -> None:
        held.done(item)
        try:
            mine = store.outbox.mark_sent(item.id, owner=owner, now=clock())
        except StoreError as exc:
            # Sent but not recorded: when the lease expires it is sent again (same
            # Message-ID, so mail clients fold the two). Nothing more is sent: each
            # further send could not be recorded either.
            log.error("digest for %s was sent but not recorded: %s", item.subscriber, exc)
            unrecorded[item.id] = f"sent, but not recorded: {exc}"
            held.broken = True
            return
        if not mine:  # recorded, so that the worker that took it over does not send it
            held.lose(f"digest for {item.subscriber} was sent after another worker took it")

    def on_progress(item: OutboxItem, progress: str) -> None:
        # Each message of a long digest also renews the lease: a Slack thread paced at a
        # message a second can outlast it.
        try:
            mine = store.outbox.mark_progress(
                item.id, progress, owner=owner, lease_until=clock() + retry.lease
            )
        except StoreError as exc:  # a retry may repeat the messages sent so far
            log.error("digest for %s: cannot record its progress: %s", item.subscriber, exc)
            held.broken = True
            return
        if not mine:
            held.lose(f"digest for {item.subscriber}: another worker took it over")

    async def heartbeat() -> None:
        # One message slower than the lease (a slow server, Slack's Retry-After) keeps it too.
        while not held.stopped:
            await asyncio.sleep(retry.lease.total_seconds() / 3)
            held.renew()

    batch: list[tuple[OutboxItem, object]] = []
    unreadable: list[SendOutcome] = []
    for item in items:
        try:
            batch.append((item, channel.load(item.payload, item.progress)))
        except Exception as exc:  # a fault of this record alone: its batch goes on
            log.exception("digest for %s: its stored message cannot be read", item.subscriber)
            error = f"its stored message cannot be read: {unexpected(exc)}"
            unreadable.append(SendOutcome(item, ok=False, error=error))
    results += _record_failures(store, held, unreadable, clock=clock, retry=retry, rand=rand)
    if held.stopped:
        return results
    beating = asyncio.create_task(heartbeat())
    try:
        outcomes: list[SendOutcome] = await channel.send_all(
            batch,
            on_sent,
            # Before each message: a daemon shutting down, or a lease lost or not renewable.
            should_stop=lambda: should_stop() or not held.renew(),
            on_progress=on_progress,
        )
    finally:
        beating.cancel()
        await asyncio.gather(beating, return_exceptions=True)
    for outcome in outcomes:
        item = cast(OutboxItem, outcome.item)
        if outcome.ok:
            problem = unrecorded.get(item.id)
            results.append(Attempt(item, "unrecorded" if problem else "sent", error=problem))
        elif outcome.retry_at is not None:
            results += _record_waits(store, held, [outcome])
        else:
            results += _record_failures(store, held, [outcome], clock=clock, retry=retry, rand=rand)
    return results


def _render_jobs(
    store: Store, held: Held, items: list[OutboxItem], render: RenderJob | None, *, now: datetime
) -> tuple[list[OutboxItem], list[tuple[OutboxItem, str]], list[SendOutcome]]:
    """Each record of the batch queued as a job rendered, and its message kept (one
    transaction) before any is sent: the records to send, in order; those the channel
    refused, and why; those that fail here (no `render` is given, or it broke: tried
    again later, as a failed send is). A job
    rendered as numbered messages sends its first here; the others are queued as records
    of their own, for the next claim."""
    ready: dict[int, OutboxItem] = {item.id: item for item in items if item.job is None}
    rendered: list[RenderedJob] = []
    refused: list[tuple[OutboxItem, str]] = []
    later: list[SendOutcome] = []
    jobs = {item.id: item for item in items if item.job is not None}
    for item in jobs.values():
        if render is None:
            later.append(SendOutcome(item, ok=False, error="this process renders no jobs"))
            continue
        try:
            rendered.append(render(item))
        except ValueError as exc:
            held.done(item)
            refused.append((item, str(exc)))
        except Exception as exc:  # a fault of this record alone: its batch goes on
            log.exception("digest for %s: rendering failed", item.subscriber)
            later.append(SendOutcome(item, ok=False, error=f"rendering failed: {unexpected(exc)}"))
    try:
        kept = (
            store.outbox.mark_rendered(rendered, owner=held.owner, now=now) if rendered else set()
        )
    except StoreError as exc:
        log.error("cannot keep the rendered digests; stopping: %s", exc)
        held.broken = True
        return [], refused, later
    for job in rendered:
        item = jobs[job.outbox_id]
        if job.outbox_id not in kept:
            held.lose(f"another worker took over the digest for {item.subscriber}")
            continue
        ready[item.id] = replace(
            item, payload=job.payload, job=None, papers=job.papers, omitted=job.omitted
        )
    return [ready[i] for i in sorted(ready)], refused, later


def _record_failures(
    store: Store,
    held: Held,
    outcomes: list[SendOutcome],
    *,
    clock: Callable[[], datetime],
    retry: RetryPolicy,
    rand: Callable[[], float],
) -> list[Attempt]:
    """Schedule a retry of each failed record, or give it up (its papers go back); a record
    whose lease was lost is the other worker's, and left alone."""
    results: list[Attempt] = []
    for outcome in outcomes:
        item = cast(OutboxItem, outcome.item)
        held.done(item)
        try:
            result = _record_failure(
                store, held.owner, outcome, clock=clock, retry=retry, rand=rand
            )
        except StoreError as exc:
            held.broken = True
            error = f"{outcome.error}; not recorded ({exc}): tried again when its lease runs out"
            log.error("digest for %s: %s", item.subscriber, error)
            results.append(Attempt(item, "retry", error=error))
            continue
        if result is None:
            log.error("digest for %s: another worker took it over", item.subscriber)
        else:
            results.append(result)
    return results


def _record_waits(store: Store, held: Held, outcomes: list[SendOutcome]) -> list[Attempt]:
    """Leave each record queued for the time its relay's limits give (`retry_at`): not a
    failure, no attempt counted; the next run (the daemon's next look) sends it."""
    results: list[Attempt] = []
    for outcome in outcomes:
        item = cast(OutboxItem, outcome.item)
        when = cast(datetime, outcome.retry_at)
        held.done(item)
        try:
            mine = store.outbox.defer(item.id, owner=held.owner, next_attempt=when)
        except StoreError as exc:  # its lease runs out: then it is claimed again
            held.broken = True
            log.error("digest for %s: cannot leave it queued: %s", item.subscriber, exc)
            mine = True
        if mine:
            results.append(Attempt(item, "waiting", error=outcome.error, next_attempt=when))
    if results:
        log.info("%s left queued for the relay's limits", plural(len(results), "digest"))
    return results


def _record_failure(
    store: Store,
    owner: str,
    outcome: SendOutcome,
    *,
    clock: Callable[[], datetime],
    retry: RetryPolicy,
    rand: Callable[[], float],
) -> Attempt | None:
    item = cast(OutboxItem, outcome.item)
    error = outcome.error or "unknown error"
    attempt = item.attempts + 1
    if outcome.permanent or attempt >= retry.max_attempts:
        why = error if outcome.permanent else f"gave up after {plural(attempt, 'attempt')}: {error}"
        refused_in_row = store.outbox.mark_failed(
            item.id, owner=owner, error=why, sent=outcome.sent_papers, refused=outcome.permanent
        )
        if refused_in_row is None:
            return None
        # What repeated refusals pause is the kind's to say: mail bounces pause the
        # subscriber; a refusing Apprise service, itself alone; a Slack channel the bot
        # left, nothing (its papers go to the next digest, with the error in status).
        kind = channel_kind(item.channel)
        pauses = kind.pauses if kind is not None else None
        pausing = pauses is not None and outcome.permanent and refused_in_row >= retry.bounce_limit
        reason = f"{plural(refused_in_row, 'digest')} in a row refused: {error}"
        paused = pausing and pauses == "subscriber"
        paused_target = pausing and pauses == "target"
        if paused:
            store.subscribers.pause(item.subscriber_id, reason, now=clock())
            log.error(
                "paused %s: %s in a row refused", item.subscriber, plural(refused_in_row, "digest")
            )
        elif paused_target:
            store.targets.pause(item.subscriber_id, item.channel, reason, now=clock())
            log.error(
                "paused %s's %s: %s in a row refused",
                item.subscriber,
                target_label(item.channel, item.recipient),
                plural(refused_in_row, "digest"),
            )
        log.error("digest for %s failed: %s", item.subscriber, why)
        return Attempt(item, "failed", error=why, paused=paused, paused_target=paused_target)
    when = clock() + retry.delay(attempt, rand)
    if not store.outbox.mark_retry(item.id, owner=owner, error=error, next_attempt=when):
        return None
    log.warning("digest for %s: %s; retry at %s", item.subscriber, error, when)
    return Attempt(item, "retry", error=error, next_attempt=when)
