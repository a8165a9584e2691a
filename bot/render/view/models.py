"""The view model's types: what the renderers show of one paper (`ItemView`, with its
categories in arXiv's words and its links), of a rule (`RuleName`: a rule's label, or the
rule in words, never its syntax) and of a rule's papers (`GroupView`), and the words for
how much of each paper's text a digest shows (`TextLength`) and how it is laid out
(`Layout`).

Data, and a rule's name as shown (`rule_name`, `rule_names`). The views are made by
`bot.render.view.papers` and given their summaries and translations by
`bot.render.view.texts`; this module imports neither.

Pure: no I/O, no clock. It escapes nothing (each renderer escapes for its own format).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from bot.core.categories import category_words
from bot.core.models import Paper
from bot.render.text import Excerpt, Segment, plural, tidy
from bot.render.words import N_, Words
from bot.rules import describe

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
    """A rule as shown to people: its label when it has one, else the rule in words
    (`bot.rules.describe`: `"reinforcement learning" -survey` is `reinforcement learning,
    not survey`, `hf:top10` is `Top 10 on Hugging Face`). A reader sees words, never the
    rule's syntax (its quotes read as a quotation, its operators as noise); the rule itself
    (`rule`) is for the places where a subscriber edits it. `str()` is what is shown."""

    rule: str  # the rule's text, whitespace tidied
    label: str | None = None
    words: str = ""  # the rule in words (empty: the rule's text is shown)

    @property
    def text(self) -> str:
        """What is shown: the label, else the rule in words."""
        return self.label or self.words or self.rule

    @property
    def both(self) -> str:
        """The label and the rule, where a subscriber needs the rule too (listing their
        rules to edit them): `multi-agent RL: marl OR "multi-agent reinforcement
        learning"`; a rule without a label, as itself."""
        return f"{self.label}: {self.rule}" if self.label else self.rule

    def __str__(self) -> str:
        return self.text


# The heading of the papers no rule matched but close to what the subscriber liked (in the
# reader's words: `similar_group`).
SIMILAR_GROUP = RuleName(rule="", label=N_("Similar to what you like"))


def similar_group(words: Words) -> RuleName:
    """`SIMILAR_GROUP` in the reader's words."""
    return RuleName(rule="", label=words.gettext(SIMILAR_GROUP.text))


def rule_name(rule: str, labels: Mapping[str, str] | None = None) -> RuleName:
    """The rule `rule` as shown, with its label from `labels` (by the rule's text)."""
    text = tidy(rule)
    label = (labels.get(rule) or labels.get(rule.strip())) if labels else None
    return RuleName(rule=text, label=tidy(label) if label else None, words=tidy(describe(text)))


def rule_names(rules: Sequence[str], labels: Mapping[str, str] | None = None) -> list[RuleName]:
    """Each rule (blank ones left out) as shown."""
    return [rule_name(rule, labels) for rule in rules if tidy(rule)]


@dataclass(frozen=True)
class CategoryView:
    """One of a paper's categories; the first is its primary one."""

    name: str
    primary: bool

    @property
    def words(self) -> str:
        """The category as arXiv names it: `Computation and Language (cs.CL)`."""
        return category_words(self.name)


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
    upvotes: int | None  # Hugging Face's upvotes (None: not there), shown beside the title
    code: str | None = None  # "Code", linking to code_url
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
    def upvotes_shown(self) -> str | None:
        """The upvotes beside the title, as Hugging Face shows them: `▲ 163`."""
        # A no-break space: the figure never wraps away from its triangle.
        return None if self.upvotes is None else f"\u25b2\u00a0{self.upvotes:,}"

    @property
    def links(self) -> tuple[LinkView, ...]:
        """The paper's links on its quiet line, one per destination: the PDF, the code, and
        for a paper not on arXiv its DOI; leaving out any that goes where the title goes
        (`url`: arXiv's abstract page, whose own links reach the HTML version, the DOIs
        and the rest) or where an earlier one goes. Hugging Face's page is reached from the
        upvotes beside the title (`hf_url`)."""
        wanted: list[tuple[str, str | None]] = [("PDF", self.pdf_url)]
        if self.code:
            wanted.append((self.code, self.code_url))
        if self.dois and not self.paper.on_arxiv:
            wanted.append(("DOI", self.dois[0][1]))
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
    papers: str = ""  # how many, in the reader's words: "3 papers", "3 篇论文"

    @property
    def count(self) -> str:
        return self.papers or plural(len(self.items), "paper")
