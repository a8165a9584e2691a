"""A run's signed links, as its renderers ask for them (`Linker`): each subscriber's manage,
one-click unsubscribe, archive and feed links, an email's rating link (its papers' page of
👍 / 👎, signed over its subscriber and digest: `LinkSigner.rating_url`), and each paper's
👍 / 👎 links and buttons (each signed over its subscriber, paper and verdict:
`LinkSigner.feedback_token`).

Made for each run from the parts wired at start (`bot.pipeline.wiring.Parts.render_context`):
the signer, the site, the time. Pure: it signs, it reads nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from bot.core.links import LinkSigner, placeholder_url
from bot.core.models import Digest, Subscriber
from bot.render.email import DigestLinks, VoteLinks

if TYPE_CHECKING:
    from bot.render.slack import VoteTokens


@dataclass(frozen=True)
class Linker:
    """The links of a run at `now`: signed by `signer` (None: not set up), or, with
    `placeholders` (the site's address, when its secret key's variable is not set: a
    preview), placeholders that say so."""

    now: datetime
    signer: LinkSigner | None = None
    placeholders: str | None = None

    def links(
        self, subscriber: Subscriber, papers: Sequence[str] = (), digest_id: str | None = None
    ) -> DigestLinks | None:
        """The subscriber's signed manage and one-click unsubscribe links, and the 👍 / 👎
        links of each of `papers` (paper ids), the digest `digest_id` in their archive,
        the page to rate its papers (when it has any) and their Atom feed, when [web] is
        set up for them and the subscriber is stored (has an id). Placeholders
        (`placeholder_url`) when nothing can sign them: a message that is sent never
        carries them (`bot.pipeline.deliver` refuses to send without the key)."""
        if subscriber.id is None:
            return None
        signer, now, site = self.signer, self.now, self.placeholders
        feedback: dict[str, VoteLinks] = {}
        rating: str | None = None
        if signer is not None:
            unsubscribe = signer.url("unsubscribe", subscriber, now=now)
            manage = signer.url("manage", subscriber, now=now)
            archive = signer.archive_url(subscriber, digest_id) if digest_id else None
            feed = signer.feed_url(subscriber)
            if digest_id and papers:
                rating = signer.rating_url(subscriber, digest_id, now=now)
            for key in papers:
                like = signer.feedback_url(subscriber, key, "like", now=now)
                dislike = signer.feedback_url(subscriber, key, "dislike", now=now)
                if like and dislike:
                    feedback[key] = VoteLinks(like=like, dislike=dislike)
        elif site is not None:
            unsubscribe = placeholder_url(site, "unsubscribe")
            manage = placeholder_url(site, "manage")
            archive = placeholder_url(site, "archive") if digest_id else None
            feed = placeholder_url(site, "feed")
            rating = placeholder_url(site, "rate") if digest_id and papers else None
            vote = VoteLinks(*(placeholder_url(site, "feedback"),) * 2)
            feedback = dict.fromkeys(papers, vote)
        else:
            return None
        return DigestLinks(
            unsubscribe=unsubscribe if unsubscribe.startswith("https://") else None,
            manage=manage,
            feedback=feedback,
            archive=archive,
            feed=feed,
            rating=rating,
        )

    def votes(self, digest: Digest) -> dict[str, VoteTokens]:
        """Each paper's 👍 / 👎 buttons' signed values, when the links are signed and the
        subscriber is stored; else none (no buttons). Each is signed as an email's links
        are, over its paper and verdict: a member of a channel who read a value off a button
        cannot make it give another verdict, which only the channel's managers may give."""
        # Here: bot.render.slack brings slack-sdk, which a run with no Slack never needs.
        from bot.render.slack import VoteTokens

        signer, sub = self.signer, digest.subscriber
        if signer is None or sub.id is None:
            return {}
        votes: dict[str, VoteTokens] = {}
        for item in digest.items:
            like = signer.feedback_token(sub, item.paper.id, "like", now=self.now)
            dislike = signer.feedback_token(sub, item.paper.id, "dislike", now=self.now)
            if like and dislike:
                votes[item.paper.id] = VoteTokens(like=like, dislike=dislike)
        return votes
