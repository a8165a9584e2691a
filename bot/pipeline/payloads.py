"""How a digest becomes the bytes queued for each kind of channel (delivery's second step).

Owns the choice of renderer per channel kind and what it is given from the config: the
email settings and the subscriber's signed links, Slack's threading. The rendering itself
is `bot.render`'s, the sending the channels'; nothing here queues or sends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from bot.channels.slack import WEBHOOK_PREFIX, slack_delivery
from bot.config import SECRET_KEY, Config
from bot.core.links import placeholder_url
from bot.core.models import Digest, Subscriber, version_key
from bot.pipeline.wiring import email_settings
from bot.render.email import DigestLinks, VoteLinks, build_message, render_digest
from bot.render.slack import VoteTokens, build_posts

# A digest as it goes to one recipient: the digest it shows (an email may hold fewer papers
# than its digest, the rest counted with those left out) and the bytes queued for it.
PayloadBuilder = Callable[[Config, Digest, str, datetime], tuple[Digest, bytes]]


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


def email_payload(
    config: Config, digest: Digest, recipient: str, now: datetime
) -> tuple[Digest, bytes]:
    """The digest as the email message it is sent as, and the digest that message shows
    (the papers past what one email holds are left out: `render_digest`)."""
    papers = [item.paper.id for item in digest.items]
    links = digest_links(config, digest.subscriber, now, papers, digest_id=digest.digest_id)
    settings = email_settings(config)
    rendered = render_digest(digest, settings, links=links)
    shown = rendered.digest or digest
    message = build_message(shown, settings, now=now, links=links, rendered=rendered)
    return shown, bytes(message)


def slack_payload(
    config: Config, digest: Digest, recipient: str, now: datetime
) -> tuple[Digest, bytes]:
    """The digest as the Slack messages it is posted as (a summary, then its thread)."""
    threaded = not recipient.startswith(WEBHOOK_PREFIX)
    # 👍 / 👎 buttons need the app's interactivity: not in a webhook's posts (the webhook
    # may be another app's), and only with the key that signs their values.
    votes = vote_tokens(config, digest, now) if threaded else {}
    posts = build_posts(digest, threaded=threaded, votes=votes)
    items = [item.paper for item in digest.items]
    papers = [
        [version_key(items[n - 1].id, items[n - 1].version) for n in p.numbers] for p in posts
    ]
    return digest, slack_delivery(recipient, posts, papers)


# The builder for each of `wiring.DIGEST_CHANNELS`.
PAYLOADS: dict[str, PayloadBuilder] = {
    "email": email_payload,
    "slack": slack_payload,
}
