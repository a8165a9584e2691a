"""A digest's papers as shown: one paper's view (`item_view`: its title and abstract
highlighted, as much of the abstract as asked (`TextLength`), its markers, its links checked
by `bot.core.links.web_url`, one per destination, its Hugging Face upvotes; its summary
and translations by `bot.render.view.texts`), the digest's groups of
numbered papers (`group_views`) and the days its papers were announced (`day_span`).

Remembers a paper's view by its highlights (`_paper_view`): a day's digests show the same
papers. Pure: no I/O, no clock. It escapes nothing and never makes a link of a paper's raw
fields: only the checked URLs of an `ItemView` are.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import date
from urllib.parse import quote

from bot.core.links import web_url
from bot.core.models import Digest, DigestItem, Paper
from bot.render.text import Excerpt, Segment, clip, excerpt, highlight
from bot.render.view.models import (
    BRIEF_CHARS,
    SHORT_CHARS,
    SHORT_SLACK,
    CategoryView,
    GroupView,
    ItemView,
    TextLength,
    rule_name,
    rule_names,
    similar_group,
)
from bot.render.view.texts import TextsView, similar_marker, texts_view, with_texts
from bot.render.words import Words, words_for

# The most a view shows of a paper's own fields, in characters: far past any real paper's
# (arXiv takes titles of about 300 and abstracts of 1,920), so that a broken or hostile
# feed's field of megabytes is shown cut, and never pushes the paper's neighbours out of an
# email that must stay within what mail apps show whole.
TITLE_CHARS = 500
NAME_CHARS = 200  # an author, a category, the journal reference
CATEGORIES_SHOWN = 20  # arXiv lists a handful
ABSTRACT_CHARS = 10_000


def item_view(
    number: int,
    item: DigestItem,
    *,
    abstracts: TextLength = "short",
    texts: TextsView | None = None,
    labels: Mapping[str, str] | None = None,
    words: Words | None = None,
) -> ItemView:
    """The view of the digest's `number`th paper; `abstracts`: how much of its text to show
    (`TextLength`: "short" is the first lines and a snippet around the hits); `texts`: what
    the digest carries of summaries and translations for its subscriber (`texts_view`),
    None: none; `labels`: the subscriber's rule labels (`Subscriber.labels`); `words`: the
    reader's language (English: None)."""
    words = words or words_for(None)
    title_spans = tuple((h.start, h.end) for h in item.hits if h.field == "title")
    abstract_spans = tuple((h.start, h.end) for h in item.hits if h.field == "abstract")
    shown, abstract = _paper_view(item.paper, title_spans, abstract_spans, abstracts, words)
    markers = shown.markers
    if item.similar_to is not None:
        markers = (*markers, similar_marker(item.similar_to, words))
    view = replace(
        shown, number=number, rules=tuple(rule_names(item.rules, labels)), markers=markers
    )
    if texts is None:
        return view
    return with_texts(view, texts.of(item.paper), texts, abstract=abstract, length=abstracts)


# Remembered: a day's papers are shown to many subscribers, most with the same highlights,
# and the TeX, the excerpt and the checked links are the same each time (the view is
# immutable; `item_view` copies it with the subscriber's numbering and rules).
@functools.lru_cache(maxsize=4096)
def _paper_view(
    paper: Paper,
    title_spans: tuple[tuple[int, int], ...],
    abstract_spans: tuple[tuple[int, int], ...],
    abstracts: TextLength,
    words: Words,
) -> tuple[ItemView, tuple[Segment, ...]]:
    """What an item's view owes to its paper, its highlights and the length of text shown
    alone (numbered 0, no rules, no "similar to" marker), and its highlighted abstract."""
    paper = _cut(paper)
    primary = paper.primary_category
    markers: list[str] = []
    if paper.is_cross and primary:
        markers.append(words.gettext("cross-list from %(category)s") % {"category": primary})
    if paper.is_update:
        markers.append(words.gettext("updated: v%(version)s") % {"version": paper.version})
    title = highlight(paper.title, title_spans)
    abstract = highlight(paper.abstract, abstract_spans)
    shown = _excerpt(abstract, abstracts, seen=[text for text, marked in title if marked])
    whose = f"paper {paper.id[:80]}: a link"
    code_url = web_url(paper.github, what=whose)
    view = ItemView(
        number=0,
        paper=paper,
        rules=(),
        title=tuple(title),
        abstract=shown,
        categories=tuple(
            CategoryView(name, index == 0) for index, name in enumerate(paper.categories)
        ),
        markers=tuple(markers),
        dois=tuple(
            (doi, url)
            for doi in paper.dois
            if (url := web_url("https://doi.org/" + quote(doi, safe="/:;()._-"), what=whose))
        ),
        day=words.day(paper.announced, short=True) if paper.announced else None,
        upvotes=paper.upvotes,
        code=words.gettext("Code") if code_url else None,
        url=web_url(paper.abs_url, what=whose),
        pdf_url=web_url(paper.pdf_url, what=whose),
        html_url=web_url(paper.html_url, what=whose),
        code_url=code_url,
        # Hugging Face lists arXiv papers only: its page of any other id is no page.
        hf_url=web_url(paper.hf_url, what=whose) if paper.on_arxiv else None,
    )
    return view, tuple(abstract)


def _cut(paper: Paper) -> Paper:
    """The paper with each field it shows cut to its limit (`TITLE_CHARS` ...), and its
    first `CATEGORIES_SHOWN` categories."""
    ref = paper.journal_ref
    return replace(
        paper,
        title=clip(paper.title, TITLE_CHARS),
        abstract=clip(paper.abstract, ABSTRACT_CHARS),
        authors=tuple(clip(name, NAME_CHARS) for name in paper.authors),
        categories=tuple(clip(name, NAME_CHARS) for name in paper.categories[:CATEGORIES_SHOWN]),
        journal_ref=clip(ref, NAME_CHARS) if ref is not None else None,
    )


def _excerpt(abstract: Sequence[Segment], length: TextLength, *, seen: Sequence[str]) -> Excerpt:
    """What is shown of an abstract: whole, its first lines and a snippet around a hit they
    hide (`excerpt`), its first lines only, or nothing."""
    if length == "full":
        return Excerpt(head=tuple(abstract))
    if length == "none":
        return Excerpt(head=(), clipped=bool(abstract))
    if length == "brief":
        head = excerpt(abstract, BRIEF_CHARS, slack=BRIEF_CHARS // 4)
        return Excerpt(head=head.head, clipped=head.clipped)
    return excerpt(abstract, SHORT_CHARS, seen=seen, slack=SHORT_SLACK)


def group_views(
    digest: Digest,
    *,
    abstracts: TextLength | None = None,
    first: int = 1,
    words: Words | None = None,
) -> tuple[GroupView, ...]:
    """The digest's groups, their papers numbered from `first` across the digest (a later
    part of a digest sent in parts goes on from the one before); `abstracts`: how much of
    each paper's text to show (default: the subscriber's `abstracts`); `words`: the
    reader's language (English: None)."""
    words = words or words_for(None)
    groups: list[GroupView] = []
    number = first - 1
    abstracts = abstracts or asked_length(digest.subscriber.abstracts)
    labels = digest.subscriber.labels
    texts = texts_view(digest)
    for group in digest.groups:
        items = []
        for item in group.items:
            number += 1
            items.append(
                item_view(
                    number, item, abstracts=abstracts, texts=texts, labels=labels, words=words
                )
            )
        rule = similar_group(words) if group.similar else rule_name(group.rule, labels)
        papers = words.ngettext("%(count)s paper", "%(count)s papers", len(items))
        heading = f"{rule} · {papers}"
        groups.append(GroupView(rule=rule, heading=heading, items=tuple(items), papers=papers))
    return tuple(groups)


def asked_length(abstracts: str) -> TextLength:
    """A subscriber's `abstracts` setting as a `TextLength` ("short" unless "full")."""
    return "full" if abstracts == "full" else "short"


def day_span(days: Sequence[date], words: Words | None = None) -> str:
    """The days a digest's papers were announced, short, without the year unless they span
    two: `Tue 24 Nov`, `Mon 23 – Fri 27 Nov`, `Fri 28 Nov – Tue 2 Dec`, `Mon 29 Dec 2025 –
    Fri 2 Jan 2026` (`11月24日周二` in Chinese); empty without any."""
    if not days:
        return ""
    words = words or words_for(None)
    first, last = min(days), max(days)
    # The CLDR date patterns of each form, in the reader's words.
    # Translators: a CLDR date pattern (docs/languages.md): the same fields in your order.
    in_year = words.pgettext("date pattern: a short day in the year", "EEE d MMM")
    if first == last:
        return words.day_part(first, in_year)
    if first.year != last.year:
        return f"{words.day(first, short=True)} \u2013 {words.day(last, short=True)}"
    # Translators: a CLDR date pattern (docs/languages.md): the same fields in your order.
    in_month = words.pgettext("date pattern: a short day in the month", "EEE d")
    start = words.day_part(first, in_month if first.month == last.month else in_year)
    return f"{start} \u2013 {words.day_part(last, in_year)}"
