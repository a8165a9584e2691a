"""The outbox: built digests waiting to be sent, being sent, sent or failed, and the
deliveries (which paper versions went, or will go, to whom on which channel).

`Outbox` (`store.outbox`) is the one repository callers use; its parts live apart:

- bot.store.outbox.queue: `enqueue`, `enqueue_many` (`Queued`): a digest's papers are
  written with its outbox record in one transaction (delivery status "queued"), so a re-run
  can never send a paper twice; two runs queuing for one subscriber take turns, the second
  queuing only the papers the first did not take; a digest is queued as its message, or as
  a job (the digest itself) that the worker claiming it renders;
- bot.store.outbox.leases: a worker leases records (`claim`, `renew`, `release`; an
  `OutboxItem` each), keeps each job's message once rendered (`mark_rendered`) and records
  how each went (`mark_sent` only after the channel
  accepted the message, `mark_progress`, `mark_retry`, `defer`, `mark_failed`); a lease
  held by another worker is never written over;
- bot.store.outbox.queries: read only: `status`, `target_status` (`OutboxStatus`),
  `totals`, `waiting` (`Waiting`), and the deliveries: `delivered_versions`,
  `delivered_versions_of`, `delivery_counts`.
"""

from __future__ import annotations

from bot.store.outbox.leases import OutboxItem, OutboxLeases, RenderedJob, RenderedPart
from bot.store.outbox.queries import OutboxQueries, OutboxStatus, RecordState, Waiting
from bot.store.outbox.queue import OutboxQueue, Queued

__all__ = [
    "Outbox",
    "OutboxItem",
    "OutboxStatus",
    "Queued",
    "RecordState",
    "RenderedJob",
    "RenderedPart",
    "Waiting",
]


class Outbox(OutboxQueue, OutboxLeases, OutboxQueries):
    """The outbox and the deliveries (`store.outbox`): queueing (bot.store.outbox.queue),
    a worker's leases (bot.store.outbox.leases), read-only queries (bot.store.outbox.queries)."""
