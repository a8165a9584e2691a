"""Digests made by hand for the renderers' tests: papers with hits, and one digest
(`sample_digest`) with every hard case: TeX, markup in titles, a cross-listing."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, date, datetime

from bot.core.models import Digest, DigestGroup, DigestItem, Hit, Paper, Subscriber

NASTY_TITLE = 'Schr\\"odinger "bridges" & <b>bold</b> $x<y$ for diffusion policy learning'
ABSTRACT = (
    "We study diffusion policy models for robot control.\n"
    "A multi-agent variant with $a<b$ & <script>alert(1)</script> is proposed; "
    "diffusion policy learning scales."
)
NOW = datetime(2024, 11, 28, 6, 30, tzinfo=UTC)


def hits_for(text: str, term: str, field: str) -> list[Hit]:
    """Every occurrence of `term` in `text`, as hits (what the matcher produces)."""
    return [
        Hit(field=field, start=m.start(), end=m.end(), term=term)  # type: ignore[arg-type]
        for m in re.finditer(re.escape(term), text)
    ]


def make_paper(number: int, **changes: object) -> Paper:
    base = Paper(
        id=f"2411.{number:05d}",
        version=1,
        title=f"Paper number {number}",
        abstract=f"Abstract of paper {number}.",
        authors=("Ada Lovelace", "Alan Turing"),
        categories=("cs.LG", "cs.AI"),
        announce_type="new",
        announced=date(2024, 11, 28),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def sample_digest(**changes: object) -> Digest:
    nasty = make_paper(
        1,
        title=NASTY_TITLE,
        abstract=ABSTRACT,
        categories=("cs.RO", "cs.LG"),
        dois=("10.1000/xyz<123>",),
        journal_ref="J. Robots 12 (2024) 1-10",
    )
    nasty_hits = (
        *hits_for(NASTY_TITLE, "diffusion policy", "title"),
        *hits_for(ABSTRACT, "diffusion policy", "abstract"),
        *hits_for(ABSTRACT, "multi-agent", "abstract"),
    )
    cross = make_paper(
        2,
        title="Cross-listed multi-agent planning",
        categories=("cs.AI", "cs.MA", "cs.LG"),
        announce_type="cross",
    )
    update = make_paper(3, title="An updated diffusion policy", version=3, announce_type="replace")
    many = make_paper(
        4,
        title="A very large collaboration on multi-agent systems",
        authors=tuple(f"Author {i:02d}" for i in range(1, 41)),
    )
    subscriber = Subscriber(
        name="alice",
        email="alice@uni.example.edu",
        rules=('"diffusion policy"', "multi-agent"),
        max_papers=4,
    )
    groups = (
        DigestGroup(
            rule='"diffusion policy"',
            items=(
                DigestItem(
                    paper=nasty,
                    rules=('"diffusion policy"', "multi-agent"),
                    hits=nasty_hits,
                    score=2.0,
                ),
                DigestItem(
                    paper=update,
                    rules=('"diffusion policy"',),
                    hits=tuple(hits_for(update.title, "diffusion policy", "title")),
                ),
            ),
        ),
        DigestGroup(
            rule="multi-agent",
            items=(
                DigestItem(
                    paper=cross,
                    rules=("multi-agent",),
                    hits=tuple(hits_for(cross.title, "multi-agent", "title")),
                ),
                DigestItem(
                    paper=many,
                    rules=("multi-agent",),
                    hits=tuple(hits_for(many.title, "multi-agent", "title")),
                ),
            ),
        ),
    )
    digest = Digest(
        subscriber=subscriber,
        digest_id="d-2024-11-28-alice-3f9a",
        created=NOW,
        groups=groups,
        omitted=(make_paper(5), make_paper(6)),
        announced=(date(2024, 11, 28),),
    )
    return replace(digest, **changes)  # type: ignore[arg-type]
