"""The view model of a digest: what the renderers show of each paper and each rule.

Owns what email and Slack both compute from a digest: one paper's view (`ItemView`: its
title and abstract highlighted, its markers, its links checked by `bot.core.links.web_url`,
its Hugging Face and code figures, in words), the rules as shown (`quote_rule`), and the
digest's groups of numbered papers (`GroupView`). Shared by `bot.render.email` and
`bot.render.slack`, which lay these out, each for its medium; neither imports the other.

Pure: no I/O, no clock. It escapes nothing (each renderer escapes for its own format) and
never makes a link of a paper's raw fields: only the checked URLs of an `ItemView` are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from urllib.parse import quote

from bot.core.links import web_url
from bot.core.models import Digest, DigestItem, Paper
from bot.render.text import Excerpt, Segment, excerpt, highlight, plural, tidy, unicode_math

__all__ = ["CategoryView", "GroupView", "ItemView", "group_views", "item_view", "quote_rule"]


def quote_rule(rule: str) -> str:
    """A rule as shown to people: in double quotes, unless it already carries its own."""
    rule = tidy(rule)
    return rule if '"' in rule else f'"{rule}"'


@dataclass(frozen=True)
class CategoryView:
    """One of a paper's categories; the first is its primary one."""

    name: str
    primary: bool


@dataclass(frozen=True)
class ItemView:
    """One paper of a digest as shown: numbered in the digest, with the rules it matched."""

    number: int
    paper: Paper
    rules: tuple[str, ...]  # as shown: quoted
    title: tuple[Segment, ...]  # highlighted, simple math as Unicode
    abstract: Excerpt  # the whole abstract, or its first lines and a snippet
    categories: tuple[CategoryView, ...]
    markers: tuple[str, ...]
    dois: tuple[tuple[str, str], ...]  # (doi, https://doi.org/... link)
    day: str | None  # the announcement day: "Thu 28 Nov 2024"
    upvotes: str | None  # Hugging Face: "12 upvotes" (None: not there)
    hf_rank: str | None = None  # "#1 of the day"
    code: str | None = None  # "Code (1,204 stars)", linking to code_url
    # The paper's links, each checked by bot.core.links.web_url (None: no link): only these
    # become links, never a paper's raw fields.
    url: str | None = None  # its page: arXiv's abstract page, else its link or DOI's
    pdf_url: str | None = None
    html_url: str | None = None
    code_url: str | None = None
    hf_url: str | None = None

    @property
    def anchor(self) -> str:
        return f"paper-{self.number}"

    @property
    def title_text(self) -> str:
        return "".join(text for text, _ in self.title)


@dataclass(frozen=True)
class GroupView:
    """One rule's papers, under its heading."""

    rule: str  # as shown: quoted
    heading: str
    items: tuple[ItemView, ...] = field(default=())

    @property
    def count(self) -> str:
        return plural(len(self.items), "paper")


def item_view(number: int, item: DigestItem, *, abstracts: str = "short") -> ItemView:
    """The view of the digest's `number`th paper; `abstracts`: "short" (the first lines and a
    snippet around the hits) or the whole abstract."""
    paper = item.paper
    primary = paper.primary_category
    markers: list[str] = []
    if paper.is_cross and primary:
        markers.append(f"cross-list from {primary}")
    if paper.is_update:
        markers.append(f"updated: v{paper.version}")
    title_spans = [(h.start, h.end) for h in item.hits if h.field == "title"]
    abstract_spans = [(h.start, h.end) for h in item.hits if h.field == "abstract"]
    title = unicode_math(highlight(paper.title, title_spans))
    abstract = unicode_math(highlight(paper.abstract, abstract_spans))
    whose = f"paper {paper.id[:80]}: a link"
    code_url = web_url(paper.github, what=whose)
    return ItemView(
        number=number,
        paper=paper,
        rules=tuple(quote_rule(rule) for rule in item.rules),
        title=tuple(title),
        abstract=(
            excerpt(abstract, seen=(text for text, marked in title if marked))
            if abstracts == "short"
            else Excerpt(head=tuple(abstract))
        ),
        categories=tuple(
            CategoryView(name, index == 0) for index, name in enumerate(paper.categories)
        ),
        markers=tuple(markers),
        dois=tuple(
            (doi, url)
            for doi in paper.dois
            if (url := web_url("https://doi.org/" + quote(doi, safe="/:;()._-"), what=whose))
        ),
        day=_short_day(paper.announced) if paper.announced else None,
        upvotes=plural(paper.upvotes, "upvote") if paper.upvotes is not None else None,
        hf_rank=f"#{paper.hf_rank} of the day" if paper.hf_rank else None,
        code=_code_label(paper) if code_url else None,
        url=web_url(paper.abs_url, what=whose),
        pdf_url=web_url(paper.pdf_url, what=whose),
        html_url=web_url(paper.html_url, what=whose),
        code_url=code_url,
        # Hugging Face lists arXiv papers only: its page of any other id is no page.
        hf_url=web_url(paper.hf_url, what=whose) if paper.on_arxiv else None,
    )


def _code_label(paper: Paper) -> str | None:
    """The code link's text: `Code (1,204 stars)`; None without a repository."""
    if not paper.github:
        return None
    stars = f" ({plural(paper.github_stars, 'star')})" if paper.github_stars else ""
    return f"Code{stars}"


def group_views(digest: Digest) -> tuple[GroupView, ...]:
    """The digest's groups, their papers numbered from 1 across the digest."""
    groups: list[GroupView] = []
    number = 0
    abstracts = digest.subscriber.abstracts
    for group in digest.groups:
        items = []
        for item in group.items:
            number += 1
            items.append(item_view(number, item, abstracts=abstracts))
        rule = quote_rule(group.rule)
        heading = f"{rule} · {plural(len(items), 'paper')}"
        groups.append(GroupView(rule=rule, heading=heading, items=tuple(items)))
    return tuple(groups)


def _short_day(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b %Y}"
