"""How a digest becomes the bytes queued for each of its targets (delivery's render step).

Owns what a renderer is given from the config (`render_context`: each kind's settings,
the subscriber's signed links, the 👍 / 👎 buttons' values); the renderer itself is the
target's channel kind's (`bot.channels.registry`), the sending the channels'; nothing here
queues or sends.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from bot.channels import RenderContext, Rendered, Target, channel_kind
from bot.config import SECRET_KEY, Config
from bot.core.links import placeholder_url
from bot.core.models import Digest, Subscriber
from bot.pipeline.wiring import channel_settings
from bot.render.email import DigestLinks, VoteLinks
from bot.render.slack import VoteTokens


def digest_links(
    config: Config,
    subscriber: Subscriber,
    now: datetime,
    papers: Sequence[str] = (),
    *,
    digest_id: str | None = None,
) -> DigestLinks | None:
    """The subscriber's signed manage and one-click unsubscribe links, and the 👍 / 👎 links
    of each of `papers` (paper ids), the digest `digest_id` in their archive and their Atom
    feed, when [web] is set up for them (public_url, secret_key_env) and the subscriber is
    stored (has an id). When
    the secret key's variable is not set (a preview: `digest --out`, `--dry-run`), the links
    are placeholders that say so (`placeholder_url`): nothing can sign them, and a message
    that is sent never carries them (`bot.pipeline.deliver` refuses to send without the
    key)."""
    if subscriber.id is None:
        return None
    signer = config.web.link_signer()
    feedback: dict[str, VoteLinks] = {}
    if signer is not None:
        unsubscribe = signer.url("unsubscribe", subscriber, now=now)
        manage = signer.url("manage", subscriber, now=now)
        archive = signer.archive_url(subscriber, digest_id) if digest_id else None
        feed = signer.feed_url(subscriber)
        for key in papers:
            like = signer.feedback_url(subscriber, key, "like", now=now)
            dislike = signer.feedback_url(subscriber, key, "dislike", now=now)
            if like and dislike:
                feedback[key] = VoteLinks(like=like, dislike=dislike)
    elif config.web.public_url and config.missing(SECRET_KEY):
        unsubscribe = placeholder_url(config.web.public_url, "unsubscribe")
        manage = placeholder_url(config.web.public_url, "manage")
        archive = placeholder_url(config.web.public_url, "archive") if digest_id else None
        feed = placeholder_url(config.web.public_url, "feed")
        vote = VoteLinks(*(placeholder_url(config.web.public_url, "feedback"),) * 2)
        feedback = dict.fromkeys(papers, vote)
    else:
        return None
    return DigestLinks(
        unsubscribe=unsubscribe if unsubscribe.startswith("https://") else None,
        manage=manage,
        feedback=feedback,
        archive=archive,
        feed=feed,
    )


def vote_tokens(config: Config, digest: Digest, now: datetime) -> dict[str, VoteTokens]:
    """Each paper's 👍 / 👎 buttons' signed values, when [web] has its secret key and the
    subscriber is stored; else none (no buttons)."""
    signer = config.web.link_signer()
    sub = digest.subscriber
    if signer is None or sub.id is None:
        return {}
    votes: dict[str, VoteTokens] = {}
    for item in digest.items:
        like = signer.feedback_token(sub, item.paper.id, "like", now=now)
        dislike = signer.feedback_token(sub, item.paper.id, "dislike", now=now)
        if like and dislike:
            votes[item.paper.id] = VoteTokens(like=like, dislike=dislike)
    return votes


def render_context(
    config: Config, now: datetime, settings: Mapping[str, Any] | None = None
) -> RenderContext:
    """What every renderer is given for a run at `now`: each kind's settings (by default
    `channel_settings`), the subscribers' signed links and vote buttons' values."""
    return RenderContext(
        now=now,
        settings=channel_settings(config) if settings is None else settings,
        links=functools.partial(_links, config, now),
        votes=lambda digest: vote_tokens(config, digest, now),
    )


def _links(
    config: Config, now: datetime, sub: Subscriber, papers: Sequence[str], digest_id: str | None
) -> DigestLinks | None:
    return digest_links(config, sub, now, papers, digest_id=digest_id)


def render_for(digest: Digest, target: Target, context: RenderContext) -> Rendered:
    """The digest rendered for `target` by its channel kind. Raises ValueError when it
    cannot be (its kind is not registered, or refuses the digest)."""
    kind = channel_kind(target.channel)
    if kind is None:
        raise ValueError(f"no channel kind {target.kind!r} is known")
    return kind.render(digest, target, context)
