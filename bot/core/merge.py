"""One paper from several sources: how a stored paper and a newly polled one become one.

Pure: papers in, a paper out; no database, no clock. `bot.store` finds which stored paper
a new one is (same id, or a DOI they share) and calls `merge_paper`.

A source has an *authority* over the bibliographic fields (title, abstract, authors,
categories, version, announcement): arXiv's daily listing knows them best (it alone says
whether a paper is a cross-list, and on which day it was announced), then the arXiv API,
then a journal or preprint feed, then Hugging Face (which copies arXiv's). Hugging Face
alone knows upvotes, comments and the rest of its facts, and they are always taken from
its latest poll. DOIs and source names are the union of what every source said.

* A newer version (from any source) replaces the bibliographic fields: an update.
* The same version from a source with more authority replaces them too, without being an
  update (the arXiv listing's categories on a paper first seen on Hugging Face).
* Anything else only adds facts (upvotes, DOIs, a link, a source name).

A paper keeps its first announcement (`first_announced`, `first_type`): a merge at the
same version may move it earlier (Hugging Face lists papers a day or more after arXiv
announced them) and take the better source's type (a cross-list), never later.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from bot.core.models import Paper

Outcome = Literal["new", "updated", "merged", "unchanged"]

# The authority of each built-in source kind (a third-party kind sets its own).
ARXIV_LISTING, ARXIV_API, FEED, HUGGINGFACE = 3, 2, 1, 0

_HF_FIELDS = (
    "upvotes",
    "hf_rank",
    "hf_day",
    "comments",
    "ai_summary",
    "github",
    "github_stars",
    "organization",
)


def merge_paper(
    stored: Paper | None, stored_authority: int, new: Paper, new_authority: int
) -> tuple[Paper, int, Outcome]:
    """The paper to keep, its authority, and what the new one changed."""
    if stored is None:
        first = replace(
            new,
            first_announced=new.first_announced or new.announced,
            first_type=new.first_type or new.announce_type,
        )
        return first, new_authority, "new"

    outcome: Outcome
    if new.version > stored.version:
        base, authority, outcome = _bibliographic(new, stored), new_authority, "updated"
        base = replace(base, first_announced=stored.first_announced, first_type=stored.first_type)
    elif new.version == stored.version and new_authority > stored_authority:
        base, authority, outcome = _bibliographic(new, stored), new_authority, "merged"
        base = replace(base, **_earliest_first(stored, new))
    else:
        base, authority, outcome = stored, stored_authority, "unchanged"

    facts: dict[str, Any] = {
        name: getattr(new, name) if getattr(new, name) is not None else getattr(stored, name)
        for name in _HF_FIELDS
    }
    enriched = replace(
        base,
        dois=_union(base.dois, stored.dois, new.dois),
        sources=_union(stored.sources, new.sources),
        link=stored.link or new.link,
        source=stored.source or new.source,
        keywords=new.keywords or stored.keywords,
        **facts,
    )
    if outcome == "unchanged" and enriched != stored:
        outcome = "merged"
    return enriched, authority, outcome


def _bibliographic(new: Paper, stored: Paper) -> Paper:
    """`new`'s bibliographic fields over `stored`, keeping facts `new` lacks."""
    return replace(
        new,
        categories=new.categories or stored.categories,
        abstract=new.abstract or stored.abstract,
        authors=new.authors or stored.authors,
        journal_ref=new.journal_ref or stored.journal_ref,
        license=new.license or stored.license,
        announced=new.announced or stored.announced,
    )


def _earliest_first(stored: Paper, new: Paper) -> dict[str, Any]:
    """At the same version: the earlier first announcement, and the type the source with
    more authority gives it (only the arXiv listing knows a cross-list)."""
    days = [d for d in (stored.first_announced, new.first_announced or new.announced) if d]
    return {
        "first_announced": min(days) if days else None,
        "first_type": new.first_type or new.announce_type,
    }


def _union(*groups: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(value for group in groups for value in group if value))
