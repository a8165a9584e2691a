"""A run's rendered digests handed on (delivery's last steps): queued in the outbox and sent
through the channels, or written to files, with a `DeliveryReport` for each.

Owns what a run reports and how its payloads reach the outbox and the channels; the
order of the run is `bot.pipeline.deliver`'s, the outbox's rules `bot.channels.outbox`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from bot.channels import Channel, Rendered, kind_of
from bot.channels.outbox import drain
from bot.core.models import Digest, target_label
from bot.store import Queued, Store

if TYPE_CHECKING:
    from bot.pipeline.deliver import DeliveryRequest
    from bot.pipeline.wiring import Parts


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """One subscriber's digest run."""

    subscriber: str
    address: str | None
    # "sent", "failed", "retry" (failed, queued for another attempt), "nothing",
    # "queued-elsewhere" (another run queued it first), "would-send", "written", "skipped",
    # "unrecorded" (sent, but the record failed), "waiting" (left queued for the relay's
    # limits: a later run sends it; not a failure)
    status: str
    count: int = 0  # papers in the digest
    omitted: int = 0
    error: str | None = None
    where: str | None = None
    digest: Digest | None = field(default=None, repr=False)
    channel: str = "email"

    @property
    def target(self) -> str:
        """Where it went, for people: `<ada@lab.example>`, `slack #robot-learning`."""
        return "(nowhere)" if self.address is None else target_label(self.channel, self.address)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A digest rendered for its channel: the bytes queued (or written) for `recipient`. A
    part of a digest sent as numbered messages: its number (`part`, from 1; 0: a digest
    sent whole) and the digest id of its first part (`first`)."""

    digest: Digest
    recipient: str
    payload: bytes
    part: int = 0
    first: str | None = None


def outgoing_of(rendered: Rendered, recipient: str) -> list[Outgoing]:
    """The messages of a rendered digest: itself, or each of its parts (`Rendered.more`)."""
    if not rendered.more:
        return [Outgoing(rendered.digest, recipient, rendered.payload)]
    first = rendered.digest.digest_id
    return [
        Outgoing(message.digest, recipient, message.payload, part=number, first=first)
        for number, message in enumerate((rendered, *rendered.more), 1)
    ]


def queue(
    store: Store, outgoing: Sequence[Outgoing], request: DeliveryRequest, *, now: datetime
) -> list[DeliveryReport]:
    """Queue each payload in the outbox with its papers, once per (subscriber, channel,
    period: `request.period`'s, else the digest's own id; a part after the first: that
    and its number), the parts of a digest all or none: a report for each that another
    run had queued first. Each part is its own record, sent and recorded alone."""
    period = request.period
    elsewhere: list[DeliveryReport] = []
    entries = []
    for o in outgoing:
        digest = o.digest
        sub = digest.subscriber
        assert sub.id is not None
        slot = period(sub) if period else (o.first or digest.digest_id)
        entries.append(
            Queued(
                sub.id,
                channel=digest.channel,
                period=f"{slot}#{o.part}" if o.part > 1 else slot,
                digest_id=digest.digest_id,
                recipient=o.recipient,
                payload=o.payload,
                sent=[item.paper for item in digest.items],
                omitted=(*digest.omitted, *digest.disliked),
                together=o.first,
            )
        )
    for o, outbox_id in zip(outgoing, store.outbox.enqueue_many(entries, now=now), strict=True):
        if outbox_id is None:
            elsewhere.append(report_of(o.digest, o.recipient, "queued-elsewhere"))
    return elsewhere


async def send(
    parts: Parts,
    clock: Callable[[], datetime],
    request: DeliveryRequest,
    should_stop: Callable[[], bool],
    *,
    attempted: set[int] | None = None,
) -> list[DeliveryReport]:
    """Send what the outbox holds (and is due, unless `request.catch_up`), this run's
    digests among it; a report per attempt (without the digest: a run of many thousands
    holds none once sent). `attempted`: the records this run tried already (each is tried
    once a run)."""
    reports = []
    for attempt in await drain(
        parts.store,
        parts.channels,
        clock=clock,
        retry=parts.retry,
        due_only=not request.catch_up,
        should_stop=should_stop,
        tried=attempted,
    ):
        item = attempt.item
        error = attempt.error
        if attempt.status == "retry" and attempt.next_attempt is not None:
            error = f"{error} (queued: next attempt {attempt.next_attempt:%Y-%m-%d %H:%M} UTC)"
        elif attempt.status == "waiting" and attempt.next_attempt is not None:
            error = f"{error}: goes at {attempt.next_attempt:%Y-%m-%d %H:%M:%S} UTC or later"
        if attempt.paused:
            error = f"{error}; {item.subscriber} is paused (`paperbell resume {item.subscriber}`)"
        elif attempt.paused_target:
            where = target_label(item.channel, item.recipient)
            error = f"{error}; {where} is paused (`paperbell resume {item.subscriber}`)"
        reports.append(
            DeliveryReport(
                item.subscriber,
                item.recipient,
                attempt.status,
                count=item.papers,
                omitted=item.omitted,
                error=error,
                channel=item.channel,
            )
        )
    return reports


async def write_files(
    channels: Mapping[str, Channel], outgoing: Sequence[Outgoing]
) -> list[DeliveryReport]:
    """Send each payload through its kind's channel (files), queueing and recording
    nothing: "written", or "failed" with why."""
    recipients = {id(o.digest): o.recipient for o in outgoing}
    reports = []
    for channel in dict.fromkeys(o.digest.channel for o in outgoing):
        files = [(o.digest, o.payload) for o in outgoing if o.digest.channel == channel]
        sender = channels.get(channel) or channels[kind_of(channel)]
        for outcome in await sender.send_all(files, lambda _: None):
            reports.append(
                report_of(
                    outcome.item,
                    recipients[id(outcome.item)],
                    "written" if outcome.ok else "failed",
                    error=outcome.error,
                    where=outcome.where,
                )
            )
    return reports


def report_of(
    digest: Digest,
    recipient: str,
    status: str,
    *,
    error: str | None = None,
    where: str | None = None,
) -> DeliveryReport:
    return DeliveryReport(
        digest.subscriber.name,
        recipient,
        status,
        count=digest.count,
        omitted=len(digest.omitted),
        error=error,
        where=where,
        digest=digest,
        channel=digest.channel,
    )
