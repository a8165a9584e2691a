"""The page of an email's one rating link: who and which digest the link names, the papers
that email carried and the subscriber's verdict on each. A part of `Manager` (its mixin):
the verdicts themselves are recorded and taken back by `Manager.record_feedback` and
`undo_feedback`, exactly as a paper's own 👍 / 👎 link does.

What an email carried is read from the outbox's record of it (`store.archive`), so a
rating link opens only a digest that was sent to the subscriber it names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from bot.core.links import LinkSigner, TokenProblem, Visitor
from bot.core.models import Feedback, Paper, Subscriber
from bot.store import SentDigest, Store

__all__ = ["RatingLink", "Ratings", "SentPapers"]


@dataclass(frozen=True)
class RatingLink:
    """What a genuine rating link opens: the digest `digest_id` sent to `subscriber`."""

    subscriber: Subscriber
    digest_id: str


@dataclass(frozen=True)
class SentPapers:
    """A digest as sent, the papers it carried (in its order, as the store holds them now)
    and the subscriber's verdict on each of them that has one, by paper key."""

    digest: SentDigest
    papers: tuple[Paper, ...]
    verdicts: dict[str, Feedback]


class Ratings:
    """The rating link's part of `Manager`."""

    signer: LinkSigner
    store: Store
    clock: Callable[[], datetime]

    def subscriber(self, subscriber_id: int) -> Subscriber | None:  # pragma: no cover
        raise NotImplementedError

    def _owner(self, visitor: Visitor) -> Subscriber | None:  # pragma: no cover
        raise NotImplementedError

    def feedback(self, sub: Subscriber) -> list[Feedback]:  # pragma: no cover
        raise NotImplementedError

    def rating_link(self, token: str) -> RatingLink | tuple[str, Subscriber | None]:
        """The digest a rating link opens and for whom, if the link is genuine, in date and
        still theirs; else why not ("forged", "expired", "gone") and, expired, whose it was.
        A link naming a subscriber not stored is "forged", as `Manager.open_feedback` says."""
        found = self.signer.read_rating(token, now=self.clock(), owner=self.subscriber)
        if found is None:
            return "forged", None
        if isinstance(found, TokenProblem):
            whose = self._owner(found.visitor) if found.visitor is not None else None
            return found.reason, whose
        owner = self._owner(found)
        if owner is None or found.digest is None:
            return "gone", None
        return RatingLink(owner, found.digest)

    def sent_papers(self, link: RatingLink, *, leave_out: tuple[str, ...]) -> SentPapers | None:
        """The papers of the digest the link names, as sent to its subscriber, with their
        verdicts; None when no such digest was sent to them (or only on `leave_out`)."""
        sub = link.subscriber
        if sub.id is None:
            return None
        found = self.store.archive.digest(sub.id, link.digest_id, leave_out=leave_out)
        if found is None:
            return None
        digest, papers = found
        keys = {paper.id for paper in papers}
        verdicts = {f.key: f for f in self.feedback(sub) if f.key in keys}
        return SentPapers(digest, tuple(papers), verdicts)
