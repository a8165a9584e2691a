"""A run's digests handed on (delivery's last steps): queued in the outbox as jobs and sent
through the channels (each rendered by the worker that claims it), or rendered and written
to files, with a `DeliveryReport` for each.

Owns what a run reports and how its digests reach the outbox and the channels; the
order of the run is `bot.pipeline.deliver`'s, the outbox's rules `bot.channels.outbox`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from bot.channels import Channel, Rendered, Target, kind_of
from bot.channels.outbox import drain
from bot.core.models import Digest, Paper, target_label, version_key
from bot.match.digest import digest_id
from bot.pipeline.jobs import job_of, renderer
from bot.render.parts import with_only
from bot.store import Queued, Store
from bot.store.outbox import RecordState

if TYPE_CHECKING:
    from bot.pipeline.deliver import DeliveryRequest
    from bot.pipeline.wiring import Parts


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """One subscriber's digest run."""

    subscriber: str
    address: str | None
    # "sent", "failed", "retry" (failed, queued for another attempt), "nothing",
    # "queued-elsewhere" (another run queued it first), "queued" (in the outbox, not yet
    # sent by this process: another sends it), "would-send", "written", "skipped",
    # "unrecorded" (sent, but the record failed), "waiting" (left queued for the relay's
    # limits: a later run sends it; not a failure)
    status: str
    count: int = 0  # papers in the digest
    omitted: int = 0  # matching papers left out: over max_papers, close to a 👎, or to fit
    error: str | None = None
    where: str | None = None  # the file written; with no address, the places it would go
    digest: Digest | None = field(default=None, repr=False)
    channel: str = "email"
    outbox_id: int | None = None  # its outbox record, once queued

    @property
    def target(self) -> str:
        """Where it went, for people: `<ada@lab.example>`, `slack #robot-learning`."""
        if self.address is None:
            return self.where or "(nowhere)"
        return target_label(self.channel, self.address)


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
    store: Store,
    built: Sequence[tuple[Digest, Target]],
    request: DeliveryRequest,
    *,
    now: datetime,
) -> list[DeliveryReport]:
    """Queue each digest as a job for its target, with its papers, once per (subscriber,
    channel, period: `request.period`'s, else the digest's own id): a report for each,
    "queued" with its outbox record, or "queued-elsewhere" (another run queued it first).
    Another run queuing for the same target at the same time (a schedule slot and a "send
    now", each built before the other queued) may have taken some of its papers: it is
    queued without them, or, with none left, not at all ("nothing"). A digest its worker
    renders as numbered messages becomes a record a part then."""
    period = request.period

    def entry_of(digest: Digest, target: Target) -> Queued:
        sub = digest.subscriber
        assert sub.id is not None
        return Queued(
            sub.id,
            channel=digest.channel,
            period=period(sub) if period else digest.digest_id,
            digest_id=digest.digest_id,
            recipient=target.recipient,
            payload=b"",
            sent=[item.paper for item in digest.items],
            omitted=(*digest.omitted, *digest.disliked),
            job=job_of(digest),
            updates="replace" in sub.include,
        )

    entries = [entry_of(digest, target) for digest, target in built]
    position = {entry.digest_id: n for n, entry in enumerate(entries)}
    held: list[Digest | None] = [digest for digest, _ in built]  # each as queued

    def trim(entry: Queued, taken: frozenset[str]) -> Queued | None:
        n = position[entry.digest_id]
        digest, target = built[n]
        left = held[n] = without(digest, taken)
        return None if left is None else entry_of(left, target)

    ids = store.outbox.enqueue_many(entries, now=now, trim=trim)
    reports = []
    for (digest, target), as_queued, outbox_id in zip(built, held, ids, strict=True):
        if as_queued is None:
            reports.append(
                DeliveryReport(
                    digest.subscriber.name, target.recipient, "nothing", channel=digest.channel
                )
            )
        elif outbox_id is None:
            reports.append(report_of(as_queued, target.recipient, "queued-elsewhere"))
        else:  # without the digest: a run of many thousands holds none once queued
            queued = report_of(as_queued, target.recipient, "queued")
            reports.append(replace(queued, outbox_id=outbox_id, digest=None))
    return reports


def without(digest: Digest, taken: Collection[str]) -> Digest | None:
    """`digest` without the papers ("id@version") another run queued first, under the id
    of the papers it still holds; None when it has none left to send."""

    def kept(paper: Paper) -> bool:
        return version_key(paper.id, paper.version) not in taken

    shown = {n for n, item in enumerate(digest.items) if kept(item.paper)}
    if not shown:
        return None
    left = with_only(digest, shown)  # its groups and announcement days, as parts are cut
    sent = [item.paper for item in left.items]
    omitted = tuple(paper for paper in digest.omitted if kept(paper))
    disliked = tuple(paper for paper in digest.disliked if kept(paper))
    ids = {paper.id for paper in sent}
    return replace(
        left,
        digest_id=digest_id(digest.subscriber, digest.channel, [*sent, *omitted, *disliked]),
        omitted=omitted,
        disliked=disliked,
        texts={key: text for key, text in digest.texts.items() if key in ids},
    )


def settle(store: Store, reports: Sequence[DeliveryReport]) -> list[DeliveryReport]:
    """The reports, each digest this run queued and another process sent (or tried) told
    as its outbox record now stands; one still waiting stays "queued". A digest its sender
    rendered as numbered messages is told part by part, as `send` tells them."""
    queued = [r.outbox_id for r in reports if r.status == "queued" and r.outbox_id is not None]
    if not queued:
        return list(reports)
    records = store.outbox.records(queued)
    parts = store.outbox.parts_of(queued)
    settled = []
    for report in reports:
        if report.status != "queued" or report.outbox_id is None:
            settled.append(report)
            continue
        settled.append(_settled(report, records.get(report.outbox_id)))
        for part_id, part in parts.get(report.outbox_id, ()):
            alone = replace(
                report, outbox_id=part_id, count=part.papers, omitted=part.omitted, digest=None
            )
            settled.append(_settled(alone, part))
    return settled


def _settled(report: DeliveryReport, record: RecordState | None) -> DeliveryReport:
    """A "queued" report told as its outbox record stands: still "queued" while it waits
    untried (or the record is gone)."""
    if record is None or (record.status == "pending" and not record.attempts):
        return report
    return replace(
        report,
        status=record.status if record.status != "pending" else "retry",
        count=record.papers,
        omitted=record.omitted,
        error=record.last_error,
        digest=None,
    )


async def send(
    parts: Parts,
    clock: Callable[[], datetime],
    request: DeliveryRequest,
    should_stop: Callable[[], bool],
    *,
    tried: set[int] | None = None,
) -> list[DeliveryReport]:
    """Render and send what the outbox holds (and is due, unless `request.catch_up`), this
    run's digests among it; a report per attempt (without the digest: a run of many thousands
    holds none once sent). `tried`: the records this run tried already (each is tried
    once a run). A run for one subscriber (`request.only`) sends theirs alone: the others'
    are the daemon's and its senders' to send."""
    reports = []
    theirs = None
    if request.only is not None:
        theirs = await asyncio.to_thread(_ids_of, parts.store, request.only)
    for attempt in await drain(
        parts.store,
        parts.channels,
        clock=clock,
        retry=parts.retry,
        due_only=not request.catch_up,
        should_stop=should_stop,
        tried=tried,
        render=renderer(parts),
        subscribers=theirs,
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
                outbox_id=item.id,
            )
        )
    return reports


def _ids_of(store: Store, name: str) -> list[int]:
    """The id of the subscriber `name`, as a list (none: no such subscriber)."""
    record = store.subscribers.get(name)
    return [record.id] if record is not None and record.id is not None else []


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
        omitted=len(digest.omitted) + len(digest.disliked),
        error=error,
        where=where,
        digest=digest,
        channel=digest.channel,
    )
