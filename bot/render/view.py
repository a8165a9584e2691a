"""The view model of a digest: what the renderers show of each paper and each rule.

Owns what email and Slack both compute from a digest: one paper's view (`ItemView`: its
title and abstract highlighted, as much of the abstract as asked (`TextLength`), its
markers, its links checked by `bot.core.links.web_url`, one per destination
(`ItemView.links`), its Hugging Face and code figures, in words; its summary and
translations, when the subscriber asked for them and the digest carries them), the rules as
shown (`RuleName`: a rule's label, or the rule itself, never in
quotes), the digest's groups of numbered papers (`GroupView`), its layout
(`layout_of`) and what it says of the papers it leaves out (`shown_note`).
Shared by `bot.render.email` and `bot.render.slack`, which lay these out, each for its
medium; neither imports the other.

Pure: no I/O, no clock. It escapes nothing (each renderer escapes for its own format) and
never makes a link of a paper's raw fields: only the checked URLs of an `ItemView` are.
A model's texts (`Digest.texts`) are untrusted plain text: here they lose control and
bidi-override characters and are capped (`model_text`); they never become links.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import date
from typing import Any, Literal
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
    letters,
    plain_text,
    plural,
    tidy,
)

__all__ = [
    "SIMILAR_GROUP",
    "TEXT_LENGTHS",
    "CategoryView",
    "GroupView",
    "ItemView",
    "Layout",
    "LinkView",
    "RuleName",
    "TextLength",
    "TextsView",
    "asked_length",
    "cut_like",
    "day_span",
    "group_views",
    "item_view",
    "layout_of",
    "model_text",
    "ranking_note",
    "rule_name",
    "rule_names",
    "shown_note",
    "texts_view",
]

# How a digest is laid out: "standard" (rules, metadata, abstracts), "summaries" (a calm
# list: title and summary per paper, one short line under it), "translated" (the standard
# layout with each title's and text's translation beneath the English).
Layout = Literal["standard", "summaries", "translated"]

# How much of each paper's text (its abstract, or the summary shown in its place, and their
# translation) a digest shows: the subscriber's `abstracts` ("full" or "short"), or less
# when an email would be too long in full (`bot.render.email` steps down this list): the
# first lines only ("brief"), then none (title, authors and links).
TextLength = Literal["full", "short", "brief", "none"]
TEXT_LENGTHS: tuple[TextLength, ...] = ("full", "short", "brief", "none")
# A short abstract: its first SHORT_CHARS characters (cut between words; an abstract at
# most SHORT_SLACK longer is shown whole), and a snippet around a hit they hide: about
# four lines on a phone. A brief abstract or summary: its first BRIEF_CHARS.
SHORT_CHARS = 180
SHORT_SLACK = 50
BRIEF_CHARS = 120

# The most shown of a model's texts, in characters: the pipeline asks for shorter (a
# summary is about 300 characters), these only bound what a runaway answer can cost.
SUMMARY_CHARS = 1000
SUMMARY_BY_CHARS = 80  # a model's name
NOTE_CHARS = 500  # Digest.texts_note
SIMILAR_TITLE_CHARS = 70  # the liked paper's title in a similar paper's "like “…”"
TRANSLATED_TITLE_CHARS = 500
TRANSLATED_TEXT_CHARS = 4000
# A translation of a short abstract is cut where the English is: at the same share of its
# length, times this.
TRANSLATION_MARGIN = 1.0
# Scripts written right to left: their translations are marked dir="rtl".
RTL_SCRIPTS = frozenset({"Arab", "Hebr", "Syrc", "Thaa", "Nkoo", "Adlm", "Rohg"})


@dataclass(frozen=True)
class RuleName:
    """A rule as shown to people: its label when it has one, else the rule itself.

    Never wrapped in quotes: a quoted rule reads as an exact-phrase search, the very thing
    the rule language writes with quotes. A rule shown as itself is set apart as code where
    the medium has it (`code`: HTML <code>, a Slack code span); plain in a subject, the
    plain-text email and the terminal, where it follows a colon or opens its line. A label
    is a name, shown as text. `str()` is what is shown."""

    rule: str  # the rule's text, whitespace tidied
    label: str | None = None

    @property
    def text(self) -> str:
        """What is shown: the label, else the rule."""
        return self.label or self.rule

    @property
    def code(self) -> bool:
        """Whether what is shown is the rule itself (set apart as code where it can be)."""
        return self.label is None

    @property
    def both(self) -> str:
        """The label and the rule, where a reader needs the rule too: `multi-agent RL: marl
        OR "multi-agent reinforcement learning"`; a rule without a label, as itself."""
        return f"{self.label}: {self.rule}" if self.label else self.rule

    def __str__(self) -> str:
        return self.text


# The heading of the papers no rule matched but close to what the subscriber liked.
SIMILAR_GROUP = RuleName(rule="", label="Similar to what you like")


def rule_name(rule: str, labels: Mapping[str, str] | None = None) -> RuleName:
    """The rule `rule` as shown, with its label from `labels` (by the rule's text)."""
    if not labels:
        return _unlabelled(rule)
    label = labels.get(rule) or labels.get(rule.strip())
    return RuleName(rule=tidy(rule), label=tidy(label) if label else None)


def rule_names(rules: Sequence[str], labels: Mapping[str, str] | None = None) -> list[RuleName]:
    """Each rule (blank ones left out) as shown."""
    if not labels:
        return [name for name in map(_unlabelled, rules) if name.rule]
    return [rule_name(rule, labels) for rule in rules if tidy(rule)]


# A day's digests name the same few rules again and again, most without labels.
@functools.lru_cache(maxsize=4096)
def _unlabelled(rule: str) -> RuleName:
    return RuleName(rule=tidy(rule))


@dataclass(frozen=True)
class CategoryView:
    """One of a paper's categories; the first is its primary one."""

    name: str
    primary: bool


@dataclass(frozen=True)
class LinkView:
    """One of a paper's links beside its title: what it says and where it goes (checked)."""

    label: str
    url: str


@dataclass(frozen=True)
class ItemView:
    """One paper of a digest as shown: numbered in the digest, with the rules it matched."""

    number: int
    paper: Paper
    rules: tuple[RuleName, ...]  # the rules it matched, as shown
    title: tuple[Segment, ...]  # highlighted, TeX as letters
    abstract: Excerpt  # the whole abstract, or its first lines and a snippet (TeX as letters)
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

    def but(self, **changes: Any) -> ItemView:
        """This view with `changes` (fields by name), as `dataclasses.replace` makes it, at
        a fifth of its cost: the fields are copied as they are (a view has no checks to run
        again), and a day's digests copy one for each paper they show, twice."""
        if not changes.keys() <= _ITEM_FIELDS:
            raise TypeError(f"ItemView has no field {sorted(changes.keys() - _ITEM_FIELDS)}")
        copy = object.__new__(ItemView)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        for name in _ITEM_MEMOS & copy.__dict__.keys():
            del copy.__dict__[name]
        return copy

    # A view is a key of the caches that render a paper's block once for many emails
    # (bot.render.blocks): its hash is kept (its fields never change), and the views of a
    # paper numbered alike from one unnumbered view are one object (`numbered_alike`), which
    # a cache finds at once (the same object) instead of comparing some thirty fields.
    # Neither is pickled: a hash is another process's.

    def __hash__(self) -> int:
        kept: int | None = self.__dict__.get("_hash")
        if kept is None:
            kept = self.__dict__["_hash"] = hash(tuple(self.__dict__[name] for name in _ITEM_ORDER))
        return kept

    def __getstate__(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if name not in _ITEM_MEMOS}

    def numbered(self, number: int) -> ItemView:
        """This view numbered `number`, remembering the view it was numbered from."""
        view = self.but(number=number)
        view.__dict__["_unnumbered"] = self.__dict__.get("_unnumbered", self)
        return view

    def numbered_alike(self, number: Any) -> ItemView:
        """This view numbered `number` (a renderer's placeholder): for views numbered from
        the same view (`numbered`), the same object each time."""
        origin: ItemView | None = self.__dict__.get("_unnumbered")
        if origin is None:
            return self.but(number=number)
        alike: dict[Any, ItemView] = origin.__dict__.setdefault("_alike", {})
        view = alike.get(number)
        if view is None:
            view = alike[number] = origin.numbered(number)
        return view

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
    def links(self) -> tuple[LinkView, ...]:
        """The paper's links beside its title, one per destination: the PDF, the code, its
        Hugging Face page (when the paper is there) and its DOIs, leaving out any that goes
        where the title goes (`url`: arXiv's abstract page, whose own links reach the HTML
        version and the rest) or where an earlier one goes."""
        wanted: list[tuple[str, str | None]] = [("PDF", self.pdf_url)]
        if self.code:
            wanted.append((self.code, self.code_url))
        if self.upvotes:
            figures = ", ".join(part for part in (self.upvotes, self.hf_rank) if part)
            wanted.append((f"Hugging Face ({figures})", self.hf_url))
        for index, (_, doi_url) in enumerate(self.dois):
            wanted.append(("DOI" if index == 0 else f"DOI {index + 1}", doi_url))
        seen = {self.url}
        links: list[LinkView] = []
        for label, url in wanted:
            if url and url not in seen:
                seen.add(url)
                links.append(LinkView(label, url))
        return tuple(links)

    @property
    def translated(self) -> bool:
        return bool(self.translated_title or self.translated_text)

    @property
    def title_text(self) -> str:
        return "".join(text for text, _ in self.title)


_ITEM_ORDER = tuple(f.name for f in fields(ItemView))
_ITEM_FIELDS = frozenset(_ITEM_ORDER)
# What a view remembers besides its fields (see `ItemView.__hash__`), never copied. Few:
# one more (a kept `title_text`) made every view's __dict__ grow from ~150 bytes to ~550
# (measured with tracemalloc: +13 MB in 3,000 digests), likely CPython no longer sharing
# the attribute names among the class's instances.
_ITEM_MEMOS = frozenset({"_hash", "_unnumbered", "_alike"})


@dataclass(frozen=True)
class GroupView:
    """One rule's papers, under its heading."""

    rule: RuleName  # as shown: its label, or the rule
    heading: str
    items: tuple[ItemView, ...] = field(default=())

    @property
    def count(self) -> str:
        return plural(len(self.items), "paper")


def item_view(
    number: int,
    item: DigestItem,
    *,
    abstracts: TextLength = "short",
    texts: TextsView | None = None,
    labels: Mapping[str, str] | None = None,
) -> ItemView:
    """The view of the digest's `number`th paper; `abstracts`: how much of its text to show
    (`TextLength`: "short" is the first lines and a snippet around the hits); `texts`: what
    the digest carries of summaries and translations for its subscriber (`texts_view`),
    None: none; `labels`: the subscriber's rule labels (`Subscriber.labels`)."""
    title_spans = tuple((h.start, h.end) for h in item.hits if h.field == "title")
    abstract_spans = tuple((h.start, h.end) for h in item.hits if h.field == "abstract")
    shown, abstract = _paper_view(item.paper, title_spans, abstract_spans, abstracts)
    rules = tuple(rule_names(item.rules, labels))
    view = _unnumbered_view(shown, rules, item.similar_to).numbered(number)
    if texts is None:
        return view
    return _with_texts(view, texts.of(item.paper), texts, abstract=abstract, length=abstracts)


# Remembered: a day's subscribers who share a paper's highlights and rules share its view
# but for its number (`ItemView.numbered_alike`: its email block is made once, bot.render.blocks).
@functools.lru_cache(maxsize=8192)
def _unnumbered_view(
    shown: ItemView, rules: tuple[RuleName, ...], similar_to: str | None
) -> ItemView:
    view = shown.but(rules=rules)
    if similar_to is not None:
        view = view.but(markers=(*view.markers, similar_marker(similar_to)))
    return view


# Remembered: a day's papers are shown to many subscribers, most with the same highlights,
# and the TeX, the excerpt and the checked links are the same each time (the view is
# immutable; `item_view` copies it with the subscriber's numbering and rules).
@functools.lru_cache(maxsize=4096)
def _paper_view(
    paper: Paper,
    title_spans: tuple[tuple[int, int], ...],
    abstract_spans: tuple[tuple[int, int], ...],
    abstracts: TextLength,
) -> tuple[ItemView, tuple[Segment, ...]]:
    """What an item's view owes to its paper, its highlights and the length of text shown
    alone (numbered 0, no rules, no "similar to" marker), and its highlighted abstract."""
    primary = paper.primary_category
    markers: list[str] = []
    if paper.is_cross and primary:
        markers.append(f"cross-list from {primary}")
    if paper.is_update:
        markers.append(f"updated: v{paper.version}")
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
    return view, tuple(abstract)


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
    tidied, TeX as letters (as titles are), at most `limit` characters (cut with
    "…"); None when nothing is left."""
    if not text:
        return None
    shown = plain_text(text[: 4 * limit])  # a runaway answer is cut before any work on it
    shown = tidy(letters(shown))
    return clip(shown, limit) or None


def shown_note(digest: Digest) -> str | None:
    """What a digest with papers left out says of them, in its reader's words: `The best 15
    of the 34 papers that matched your rules are here.`; None when it shows every one."""
    left = len(digest.omitted)
    matched = digest.count - len(digest.similar)
    if not left or not matched:
        return None
    total = matched + left
    if matched == 1:
        return f"The best of the {total} papers that matched your rules is here."
    return f"The best {matched} of the {total} papers that matched your rules are here."


def ranking_note(digest: Digest) -> str | None:
    """What a digest ranked by its reader's verdicts says of it: the papers their 👎 pushed
    out (`2 papers close to ones you marked 👎 were left out.`), and why the ranking is not
    the usual one today (`Digest.ranking_note`, as shown); None when there is nothing."""
    notes = []
    if disliked := len(digest.disliked):
        were = "was" if disliked == 1 else "were"
        notes.append(f"{plural(disliked, 'paper')} close to ones you marked 👎 {were} left out.")
    if note := model_text(digest.ranking_note, NOTE_CHARS):
        notes.append(note)
    return " ".join(notes) or None


def similar_marker(title: str) -> str:
    """What a paper no rule matched says of why it is there: `like “<the liked paper's
    title>”` (TeX as letters, cut at SIMILAR_TITLE_CHARS)."""
    return f"like “{clip(tidy(letters(title)), SIMILAR_TITLE_CHARS) or 'a paper you liked'}”"


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
    view: ItemView,
    texts: PaperTexts | None,
    wanted: TextsView,
    *,
    abstract: Sequence[Segment],
    length: TextLength = "short",
) -> ItemView:
    """The view with the paper's summary and translations, as far as the digest has them
    and `length` shows them (a brief summary is cut, its translation where the English is;
    "none" shows neither, only the translated title)."""
    if texts is None:
        return view
    written = model_text(texts.summary, SUMMARY_CHARS) if wanted.summaries else None
    summary = written
    if written and length in ("brief", "none"):
        summary = clip(written, BRIEF_CHARS) if length == "brief" else None
    summary_by = model_text(texts.summary_by, SUMMARY_BY_CHARS) if summary else None
    language = wanted.language
    if language is None or not _same_language(texts.language, language):
        # Not asked for, or written in another language than asked: none is shown.
        return replace(view, summary=summary, summary_by=summary_by)
    translated_text = model_text(texts.text, TRANSLATED_TEXT_CHARS)
    title_chars = TRANSLATED_TITLE_CHARS if length in ("full", "short") else BRIEF_CHARS
    if length == "none":
        translated_text = None
    elif translated_text and written and summary and len(summary) < len(written):
        # A brief summary's translation, cut about where the English is cut.
        translated_text = cut_like(translated_text, len(summary.rstrip("…")), len(written))
    elif translated_text and summary is None and view.abstract.clipped:
        # The translation of the whole abstract, cut about where the English is cut.
        whole = sum(len(part) for part, _ in abstract)
        head = sum(len(part) for part, _ in view.abstract.head)
        translated_text = cut_like(translated_text, head, whole)
    return replace(
        view,
        summary=summary,
        summary_by=summary_by,
        translated_title=model_text(texts.title, title_chars),
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


def group_views(digest: Digest, *, abstracts: TextLength | None = None) -> tuple[GroupView, ...]:
    """The digest's groups, their papers numbered from 1 across the digest; `abstracts`:
    how much of each paper's text to show (default: the subscriber's `abstracts`)."""
    groups: list[GroupView] = []
    number = 0
    abstracts = abstracts or asked_length(digest.subscriber.abstracts)
    labels = digest.subscriber.labels
    texts = texts_view(digest)
    for group in digest.groups:
        items = []
        for item in group.items:
            number += 1
            items.append(item_view(number, item, abstracts=abstracts, texts=texts, labels=labels))
        rule = SIMILAR_GROUP if group.similar else rule_name(group.rule, labels)
        heading = f"{rule} · {plural(len(items), 'paper')}"
        groups.append(GroupView(rule=rule, heading=heading, items=tuple(items)))
    return tuple(groups)


def asked_length(abstracts: str) -> TextLength:
    """A subscriber's `abstracts` setting as a `TextLength` ("short" unless "full")."""
    return "full" if abstracts == "full" else "short"


def _short_day(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b %Y}"


def day_span(days: Sequence[date]) -> str:
    """The days a digest's papers were announced, short, without the year unless they span
    two: `Tue 24 Nov`, `Mon 23 – Fri 27 Nov`, `Fri 28 Nov – Tue 2 Dec`, `Mon 29 Dec 2025 –
    Fri 2 Jan 2026`; empty without any."""
    if not days:
        return ""
    first, last = min(days), max(days)
    if first == last:
        return f"{first:%a} {first.day} {first:%b}"
    if first.year != last.year:
        return f"{first:%a} {first.day} {first:%b %Y} \u2013 {last:%a} {last.day} {last:%b %Y}"
    start = f"{first:%a} {first.day}" + ("" if first.month == last.month else f" {first:%b}")
    return f"{start} \u2013 {last:%a} {last.day} {last:%b}"
