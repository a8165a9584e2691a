"""The view model's types: what the renderers show of one paper (`ItemView`, with its
categories and links), of a rule (`RuleName`: a rule's label, or the rule itself, never in
quotes) and of a rule's papers (`GroupView`), and the words for how much of each paper's
text a digest shows (`TextLength`) and how it is laid out (`Layout`).

Data, and a rule's name as shown (`rule_name`, `rule_names`). The views are made by
`bot.render.view.papers` and given their summaries and translations by
`bot.render.view.texts`; this module imports neither.

Pure: no I/O, no clock. It escapes nothing (each renderer escapes for its own format).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from bot.core.models import HUGGING_FACE, Paper
from bot.render.text import Excerpt, Segment, plural, tidy

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
        return RuleName(rule=tidy(rule))
    label = labels.get(rule) or labels.get(rule.strip())
    return RuleName(rule=tidy(rule), label=tidy(label) if label else None)


def rule_names(rules: Sequence[str], labels: Mapping[str, str] | None = None) -> list[RuleName]:
    """Each rule (blank ones left out) as shown."""
    if not labels:
        return [name for name in (RuleName(rule=tidy(rule)) for rule in rules) if name.rule]
    return [rule_name(rule, labels) for rule in rules if tidy(rule)]


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


@dataclass(frozen=True)
class GroupView:
    """One rule's papers, under its heading."""

    rule: RuleName  # as shown: its label, or the rule
    heading: str
    items: tuple[ItemView, ...] = field(default=())

    @property
    def count(self) -> str:
        return plural(len(self.items), "paper")
