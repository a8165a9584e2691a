"""A digest queued as a job: planning writes the digest itself into the outbox
(`outbox_messages.job`), and the worker that claims it renders it into its message
(`renderer`), keeps that message, then sends it (`bot.channels.outbox`).

A job is the digest as JSON (pydantic reads it back into the same frozen dataclasses, and
refuses one it cannot read), compressed: a few KB where its email is tens.
"""

from __future__ import annotations

import zlib

from pydantic import TypeAdapter

from bot.channels import ChannelKind, Target, channel_kind
from bot.channels.outbox import RenderJob
from bot.core.models import Digest
from bot.pipeline.wiring import Parts
from bot.store import OutboxItem, RenderedJob, RenderedPart

_DIGEST = TypeAdapter(Digest)


def job_of(digest: Digest) -> bytes:
    """The job that queues `digest`."""
    return zlib.compress(_DIGEST.dump_json(digest), 1)


def digest_of(job: bytes) -> Digest:
    """The digest a job holds; ValueError for bytes that hold none."""
    try:
        return _DIGEST.validate_json(zlib.decompress(job))
    except zlib.error as exc:
        raise ValueError(f"a job that cannot be read: {exc}") from exc


def renderer(parts: Parts) -> RenderJob:
    """What renders a claimed job for its channel with these parts: the message, the
    digest's papers it leaves out, and the further parts of a digest sent as numbered
    messages. The message is dated, and its links signed, at the
    time the digest was made (`Digest.created`): whichever worker renders a job, and
    whenever, makes the same message."""

    def render(item: OutboxItem) -> RenderedJob:
        if item.job is None:
            raise ValueError("this record holds its message, not a job")
        digest = digest_of(item.job)
        kind = channel_kind(item.channel)
        if kind is None:
            raise ValueError(f"no channel kind {item.channel!r} is known")
        target = _target(parts, kind, digest, item)
        rendered = kind.render(digest, target, parts.render_context(digest.created))
        shown = rendered.digest
        more = [RenderedPart(m.digest.digest_id, m.payload, _keys(m.digest)) for m in rendered.more]
        sent = {*_keys(shown), *(key for part in more for key in part.papers)}
        return RenderedJob(
            item.id,
            rendered.payload,
            papers=len(shown.items),
            omitted=len(shown.omitted) + len(shown.disliked),
            left_out=[key for key in _keys(digest) if key not in sent],
            more=more,
        )

    return render


def _keys(digest: Digest) -> list[tuple[str, int]]:
    return [(item.paper.id, item.paper.version) for item in digest.items]


def _target(parts: Parts, kind: type[ChannelKind], digest: Digest, item: OutboxItem) -> Target:
    """The place the job was planned for: its channel's target of the digest's subscriber."""
    for target in kind.targets(digest.subscriber, parts.settings.get(kind.kind)):
        if target.channel == item.channel:
            return target
    raise ValueError(f"{digest.subscriber.name}'s digests no longer go to {item.channel}")
