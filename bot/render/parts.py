"""A digest cut into the numbered parts it is sent as, when one email would be too long to be
shown whole: which papers each part holds, in the digest's order, and each part's own id.

Pure: it decides which papers go where and nothing else; `bot.render.email.render_parts`
renders the parts and checks each is within what mail apps show whole.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from bot.core.models import Digest, DigestGroup, DigestItem, PaperTexts
from bot.render.words import Words, words_for

__all__ = ["DigestPart", "part_id", "parts_needed", "split", "weight", "with_only"]

# What each part shows besides its papers (header, notes, footer, CSS), about.
PART_OVERHEAD = 10_000
# What a paper's entry holds besides its texts (markup, authors, links), about: the weights
# balance the parts, `bot.render.email.render_parts` checks each part's real size.
PAPER_MARKUP = 1_000


@dataclass(frozen=True)
class DigestPart:
    """One part of a digest sent in parts: its number (from 1) of `total`, the digest of its
    papers (its own id; the first carries the papers left out, to record them once), the
    number of its first paper in the whole digest, and the id of the first part (`thread`:
    the later parts answer it, so that mail apps thread them)."""

    number: int
    total: int
    digest: Digest
    first: int
    thread: str

    def note(self, papers: int, words: Words | None = None) -> str:
        """What the part says of itself, of a digest of `papers` papers, in the reader's
        `words` (English: None)."""
        last = self.first + self.digest.count - 1
        return (words or words_for(None)).gettext(
            "Part %(number)s of %(total)s: papers %(first)s–%(last)s of %(papers)s."
        ) % {
            "number": self.number,
            "total": self.total,
            "first": self.first,
            "last": last,
            "papers": papers,
        }


def part_id(digest_id: str, number: int) -> str:
    """The digest id of a digest's `number`th part: its own Message-ID, archive page and
    outbox record (`paperbell.1a2b…p2`). The first part keeps the digest's own id: it is
    sent from the digest's outbox record, which its links (archive, rating) name."""
    return digest_id if number == 1 else f"{digest_id}p{number}"


def parts_needed(size: int, budget: int) -> int:
    """About how many parts a digest of `size` bytes needs, each within `budget` (at least
    two: one would have done)."""
    return max(2, -(-(size - PART_OVERHEAD) // (budget - PART_OVERHEAD)))


def weight(item: DigestItem, texts: PaperTexts | None) -> int:
    """About how many bytes a paper takes in an email with its texts whole."""
    paper = item.paper
    shown = [paper.title, paper.abstract, ", ".join(paper.authors)]
    if texts is not None:
        shown += [texts.summary or "", texts.title or "", texts.text or ""]
    return PAPER_MARKUP + sum(len(text.encode()) for text in shown)


def split(digest: Digest, weights: Sequence[int], count: int) -> list[DigestPart]:
    """The digest's papers, in order, in `count` parts (at most one a paper) of about the
    same weight (`weights`: each paper's, in the digest's order)."""
    count = max(1, min(count, len(weights)))
    total = sum(weights)
    bounds = [0]
    running = 0
    for index, paper in enumerate(weights):
        running += paper
        # Close a part where the running weight passes its share, or where the papers left
        # are as many as the parts still to come (a paper each).
        to_come, left = count - len(bounds), len(weights) - index - 1
        share = running >= total * len(bounds) / count
        if to_come and left >= to_come and (share or left == to_come):
            bounds.append(index + 1)
    bounds.append(len(weights))
    thread = part_id(digest.digest_id, 1)
    parts = []
    for number, (start, end) in enumerate(pairwise(bounds), 1):
        shown = with_only(digest, range(start, end))
        first = number == 1
        shown = replace(
            shown,
            digest_id=part_id(digest.digest_id, number),
            omitted=digest.omitted if first else (),
            disliked=digest.disliked if first else (),
        )
        parts.append(DigestPart(number, len(bounds) - 1, shown, start + 1, thread))
    return parts


def with_only(digest: Digest, kept: Collection[int]) -> Digest:
    """The digest with only its papers at the positions `kept` (in `Digest.items`), in
    their groups, and only the announcement days they come from."""
    groups: list[DigestGroup] = []
    index = 0
    for group in digest.groups:
        items: list[DigestItem] = []
        for item in group.items:
            if index in kept:
                items.append(item)
            index += 1
        if items:
            groups.append(replace(group, items=tuple(items)))
    shown = {item.paper.announced for group in groups for item in group.items}
    return replace(
        digest,
        groups=tuple(groups),
        announced=tuple(day for day in digest.announced if day in shown),
    )
