"""The view model of a digest: what the renderers show of each paper and each rule.

Owns what email and Slack both compute from a digest: one paper's view (`ItemView`: its
title and abstract highlighted, its markers, its links checked by `bot.core.links.web_url`,
its Hugging Face and code figures, in words; its summary and translations, when the
subscriber asked for them and the digest carries them), the rules as shown (`quote_rule`),
the digest's groups of numbered papers (`GroupView`) and its layout (`layout_of`).
Shared by `bot.render.email` and `bot.render.slack`, which lay these out, each for its
medium; neither imports the other.

Pure: no I/O, no clock. It escapes nothing (each renderer escapes for its own format) and
never makes a link of a paper's raw fields: only the checked URLs of an `ItemView` are.
A model's texts (`Digest.texts`) are untrusted plain text: here they lose control and
bidi-override characters and are capped (`model_text`); they never become links.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Literal
from urllib.parse import quote

from bot.core.languages import (
    LanguageError,
    language_name,
    language_script,
    standard_tag,
    usable_tag,
)
from bot.core.links import web_url
from bot.core.models import HUGGING_FACE, Digest, DigestItem, Paper, PaperTexts, Subscriber
from bot.render.text import (
    Excerpt,
    Segment,
    clip,
    excerpt,
    highlight,
    plain_text,
    plural,
    tidy,
    unicode_math,
)

__all__ = [
    "CategoryView",
    "GroupView",
    "ItemView",
    "Layout",
    "TextsView",
    "cut_like",
    "group_views",
    "item_view",
    "layout_of",
    "model_text",
    "quote_rule",
    "texts_view",
]

# How a digest is laid out: "standard" (rules, metadata, abstracts), "summaries" (a calm
# list: title and summary per paper, one short line under it), "translated" (the standard
# layout with each title's and text's translation beneath the English).
Layout = Literal["standard", "summaries", "translated"]

# The most shown of a model's texts, in characters: the pipeline asks for shorter (a
# summary is about 300 characters), these only bound what a runaway answer can cost.
SUMMARY_CHARS = 1000
SUMMARY_BY_CHARS = 80  # a model's name
NOTE_CHARS = 500  # Digest.texts_note
TRANSLATED_TITLE_CHARS = 500
TRANSLATED_TEXT_CHARS = 4000
# A translation of a short abstract is cut where the English is: at the same share of its
# length, times this.
TRANSLATION_MARGIN = 1.0
# Scripts written right to left: their translations are marked dir="rtl".
RTL_SCRIPTS = frozenset({"Arab", "Hebr", "Syrc", "Thaa", "Nkoo", "Adlm", "Rohg"})


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
    # What a model (or Hugging Face) wrote of the paper, each checked by `model_text`:
    # untrusted plain text, to be escaped, never a link. None: not asked for, or missing
    # (the paper's own title and abstract are shown).
    summary: str | None = None  # shown in place of the abstract
    summary_by: str | None = None  # who wrote it: the model's name, or HUGGING_FACE
    translated_title: str | None = None  # shown under the title
    # The translation of the English text shown in place of the abstract (the summary when
    # there is one, else the abstract: cut where a short abstract is cut), shown after it.
    translated_text: str | None = None
    language: str | None = None  # the translations' BCP 47 tag (HTML lang="...")
    language_name: str | None = None  # "Chinese"
    direction: str = "ltr"  # the translations' writing direction ("rtl": Arabic, Hebrew)

    @property
    def anchor(self) -> str:
        return f"paper-{self.number}"

    @property
    def summary_label(self) -> str | None:
        """Who wrote the summary, as shown beside it: `Summary by Hugging Face`,
        `AI summary · qwen2.5:7b-instruct`; None without a summary."""
        if self.summary is None:
            return None
        if self.summary_by == HUGGING_FACE:
            return f"Summary by {HUGGING_FACE}"
        return f"AI summary · {self.summary_by}" if self.summary_by else "AI summary"

    @property
    def translated(self) -> bool:
        return bool(self.translated_title or self.translated_text)

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


def item_view(
    number: int,
    item: DigestItem,
    *,
    abstracts: str = "short",
    texts: TextsView | None = None,
) -> ItemView:
    """The view of the digest's `number`th paper; `abstracts`: "short" (the first lines and a
    snippet around the hits) or the whole abstract; `texts`: what the digest carries of
    summaries and translations for its subscriber (`texts_view`), None: none."""
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
    shown = (
        excerpt(abstract, seen=(text for text, marked in title if marked))
        if abstracts == "short"
        else Excerpt(head=tuple(abstract))
    )
    whose = f"paper {paper.id[:80]}: a link"
    code_url = web_url(paper.github, what=whose)
    view = ItemView(
        number=number,
        paper=paper,
        rules=tuple(quote_rule(rule) for rule in item.rules),
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
    if texts is None:
        return view
    return _with_texts(view, texts.of(paper), texts, abstract=abstract)


@dataclass(frozen=True)
class TextsView:
    """What a digest shows of its `Digest.texts`, for its subscriber: summaries (when asked
    for) and translations into `language` (when asked for; None: none)."""

    texts: Mapping[str, PaperTexts]
    summaries: bool = False
    language: str | None = None  # the subscriber's tag

    def of(self, paper: Paper) -> PaperTexts | None:
        return self.texts.get(paper.id)

    @property
    def language_name(self) -> str | None:
        return language_name(self.language) if self.language else None

    @property
    def language_note(self) -> str | None:
        """The line that says the translations are a machine's: `With machine translations
        into Chinese.`; None without translations."""
        return f"With machine translations into {self.language_name}." if self.language else None


def texts_view(digest: Digest) -> TextsView | None:
    """The digest's summaries and translations as its subscriber asked for them; None when
    it asked for neither (the digest is shown exactly as without them)."""
    subscriber = digest.subscriber
    language = _language(subscriber)
    if not subscriber.summaries and language is None:
        return None
    return TextsView(texts=digest.texts, summaries=subscriber.summaries, language=language)


def layout_of(subscriber: Subscriber) -> Layout:
    """The subscriber's layout: translated with a language, else summaries when asked for."""
    if _language(subscriber):
        return "translated"
    return "summaries" if subscriber.summaries else "standard"


def _language(subscriber: Subscriber) -> str | None:
    """The language translations are shown in: None for none, English, or a tag that is
    no tag (the pipeline writes none for those either: `usable_tag` decides for both)."""
    return usable_tag(subscriber.language)


def model_text(text: str | None, limit: int) -> str | None:
    """A model's text as shown: control and bidi-override characters dropped, whitespace
    tidied, simple TeX math as Unicode (as titles are), at most `limit` characters (cut with
    "…"); None when nothing is left."""
    if not text:
        return None
    shown = plain_text(text[: 4 * limit])  # a runaway answer is cut before any work on it
    shown = "".join(part for part, _ in unicode_math([(shown, False)]))
    return clip(shown, limit) or None


def texts_note(digest: Digest) -> str | None:
    """The digest's line about the texts that could not be written, as shown."""
    return model_text(digest.texts_note, NOTE_CHARS)


def cut_like(translation: str, shown: int, whole: int) -> str:
    """A translation of a text of `whole` characters, cut (with "…") at the same share of
    its length as the `shown` characters of the English are."""
    if shown >= whole:
        return translation
    keep = round(len(translation) * TRANSLATION_MARGIN * shown / max(whole, 1))
    return clip(translation, max(keep, 1))


def _with_texts(
    view: ItemView, texts: PaperTexts | None, wanted: TextsView, *, abstract: Sequence[Segment]
) -> ItemView:
    """The view with the paper's summary and translations, as far as the digest has them."""
    if texts is None:
        return view
    summary = model_text(texts.summary, SUMMARY_CHARS) if wanted.summaries else None
    summary_by = model_text(texts.summary_by, SUMMARY_BY_CHARS) if summary else None
    language = wanted.language
    if language is None or not _same_language(texts.language, language):
        # Not asked for, or written in another language than asked: none is shown.
        return replace(view, summary=summary, summary_by=summary_by)
    translated_text = model_text(texts.text, TRANSLATED_TEXT_CHARS)
    if translated_text and summary is None and view.abstract.clipped:
        # The translation of the whole abstract, cut about where the English is cut.
        whole = sum(len(part) for part, _ in abstract)
        head = sum(len(part) for part, _ in view.abstract.head)
        translated_text = cut_like(translated_text, head, whole)
    return replace(
        view,
        summary=summary,
        summary_by=summary_by,
        translated_title=model_text(texts.title, TRANSLATED_TITLE_CHARS),
        translated_text=translated_text,
        language=language,
        language_name=language_name(language),
        direction="rtl" if language_script(language) in RTL_SCRIPTS else "ltr",
    )


def _same_language(written: str | None, wanted: str) -> bool:
    """Whether texts tagged `written` (None: untagged, taken as asked) are in `wanted`."""
    if written is None or written == wanted:
        return True
    try:
        return standard_tag(written) == standard_tag(wanted)
    except LanguageError:
        return False


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
    texts = texts_view(digest)
    for group in digest.groups:
        items = []
        for item in group.items:
            number += 1
            items.append(item_view(number, item, abstracts=abstracts, texts=texts))
        rule = quote_rule(group.rule)
        heading = f"{rule} · {plural(len(items), 'paper')}"
        groups.append(GroupView(rule=rule, heading=heading, items=tuple(items)))
    return tuple(groups)


def _short_day(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b %Y}"
