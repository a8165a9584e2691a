"""Slack rendering: a Digest into Block Kit messages, a summary and the papers in its thread.

This module owns what a digest says in Slack and how it is cut to fit Slack's limits. It is
pure: it builds `slack_sdk.models` blocks (data classes; nothing here talks to Slack), never
posts (that is `bot.channels`), never reads the clock or the environment, and never trusts
its input: paper text is escaped wherever it goes into mrkdwn, every text is cut to its
block's limit, and the thread is split so each message stays within every limit.

A paper's URLs become links only through `bot.core.links.web_url` (http and https: a feed's
`javascript:` or `data:` link stays out), and `|`, `<`, `>` in them are percent-encoded.

Where paper text goes:

- titles are mrkdwn (they are links): `&`, `<`, `>` escaped, `|` and the formatting marks
  `* _ ~ \\`` swapped for look-alikes (Slack has no escape for them inside a link label, and
  `Ta$_2$NiSe$_5$` would otherwise turn italic);
- abstracts, authors, categories and notes are `plain_text`: shown literally;
- a paper's title, abstract and author names show their TeX as letters (`bot.render.tex`,
  through the view and `shorten_authors`), as in email;
- a rule is shown by its label, else in words (`bot.render.view.RuleName`: never its
  syntax), as text: escaped, its formatting marks swapped for look-alikes as a title's are;
- what a model wrote (`Digest.texts`: summaries, translated titles and texts, who wrote
  them) is `plain_text` only: never mrkdwn, so no link or formatting comes from it.

Each paper of a thread ends with its 👍 / 👎 buttons (an actions block) when the caller
gives its signed tokens (`VoteTokens`, by paper id): a button's value is the token, which
names the subscriber, the paper and the verdict (`bot.slack.actions` reads it back).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from bot.core.links import web_url
from bot.core.models import Digest, DigestItem
from bot.render.mrkdwn import ELLIPSIS, as_text, escape_mrkdwn, fit, link, shorten, url_length
from bot.render.text import letters, shorten_authors, tidy
from bot.render.view import (
    RuleName,
    TextsView,
    cut_like,
    digest_summaries_note,
    item_view,
    ranking_note,
    rule_name,
    rule_names,
    shown_note,
    similar_group,
    texts_note,
    texts_view,
)
from bot.render.words import Words, words_for

__all__ = [
    "SLACK_LIMITS",
    "SlackLimits",
    "SlackMessage",
    "VoteTokens",
    "build_posts",
    "text_length",
]


@dataclass(frozen=True, slots=True)
class SlackLimits:
    """What Slack accepts in one message (`text` counts every text object in the blocks).

    The thread splitter fills messages up to `blocks` and `text_budget`; the per-block
    limits hold by construction (every piece of paper text is cut first) and slack_sdk
    checks them again as each block is built, raising rather than letting Slack refuse."""

    blocks: int = 50
    section_text: int = 3000  # also held for every other text object (context elements)
    header_text: int = 150  # plain_text only
    context_elements: int = 10
    message_text: int = 13_000  # above it Slack has answered `msg_blocks_too_long`
    text_budget: int = 12_000  # what the thread splitter fills up to: a margin under the above


SLACK_LIMITS = SlackLimits()

# How much of each piece of a paper is shown, in characters as sent (escaped, for mrkdwn).
TITLE_CHARS = 300
SUMMARY_TITLE_CHARS = 200
ABSTRACT_CHARS = 300
SUMMARY_CHARS = 600  # a model's summary (the pipeline asks for about 300)
TRANSLATED_TITLE_CHARS = 300
TRANSLATED_TEXT_CHARS = 600  # the summary's translation, or the shown abstract's
AUTHORS_CHARS = 400
CATEGORIES_CHARS = 300
MARKER_CHARS = 100  # cross-list from ..., updated: v3
RULE_CHARS = 100  # one rule in a list
RULES_CHARS = 600  # a list of rules
NOTE_CHARS = 2000
FALLBACK_CHARS = 300
URL_CHARS = 500  # a longer link (encoded and escaped) is left out rather than cut
# The summary's five top titles share one section (3000): each link at most this long.
SUMMARY_URL_CHARS = 350
LINK_LABEL_CHARS = 80  # "PDF", "Code", "DOI"
TOP_TITLES = 5
MAX_DOIS = 2

DASH = "\u2014"  # em dash
RANGE = "\u2013"  # en dash, as in "Papers 1-12"
BULLET = "\u2022"
DOWN = "\u2193"

# The action ids of the buttons paperbell posts (`bot.slack.actions` answers them).
LIKE_ACTION = "paperbell_like"
DISLIKE_ACTION = "paperbell_dislike"
UNDO_ACTION = "paperbell_undo"


@dataclass(frozen=True, slots=True)
class VoteTokens:
    """A paper's 👍 and 👎 buttons' values: signed tokens (`LinkSigner.feedback_token`)."""

    like: str
    dislike: str


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """One message to post: the plain fallback (notifications, screen readers) and blocks."""

    text: str
    blocks: tuple[dict[str, Any], ...]
    numbers: tuple[int, ...] = ()  # the digest's papers (1-based) this message holds

    def to_dict(self) -> dict[str, Any]:
        """The `chat.postMessage` arguments this message stands for: text and blocks."""
        return {"text": self.text, "blocks": list(self.blocks)}


# -- text helpers ---------------------------------------------------------------------


def _shown_rule(name: RuleName, limit: int = RULE_CHARS) -> str:
    """A rule as shown: its label, else its words, as text (never its syntax)."""
    return as_text(name.text, limit)


def text_length(value: Any) -> int:
    """How many characters of text a block (or list of blocks) carries: every text object."""
    if isinstance(value, dict):
        text = value.get("text")
        if value.get("type") in ("plain_text", "mrkdwn") and isinstance(text, str):
            return len(text)
        return sum(text_length(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(text_length(v) for v in value)
    return 0


def _rule_list(
    rules: Sequence[RuleName], limit: int = RULES_CHARS, words: Words | None = None
) -> str:
    """`robot, multi-agent RL (+3 more)`, at most about `limit` characters."""
    words = words or words_for(None)
    comma = words.gettext(", ")
    spans = [_shown_rule(rule) for rule in rules]
    shown: list[str] = []
    for span in spans:
        if shown and len(comma.join([*shown, span])) > limit:
            break
        shown.append(span)
    hidden = len(spans) - len(shown)
    more = words.ngettext(" (+%(count)s more)", " (+%(count)s more)", hidden) if hidden else ""
    return comma.join(shown) + more


def _when(days: Iterable[date], words: Words) -> str:
    """`Thu 28 Nov 2024`, or a span: `Mon 25 – Thu 28 Nov 2024`, in the reader's words."""
    ordered = sorted(set(days))
    if not ordered:
        return ""
    first, last = ordered[0], ordered[-1]
    if first == last:
        return words.day(first, short=True)
    if first.year != last.year:
        start = words.day(first, short=True)
    elif first.month != last.month:
        start = words.day_part(
            # Translators: a CLDR date pattern (docs/languages.md): the same fields in your order.
            first,
            words.pgettext("date pattern: a short day in the year", "EEE d MMM"),
        )
    else:
        start = words.day_part(
            # Translators: a CLDR date pattern (docs/languages.md): the same fields in your order.
            first,
            words.pgettext("date pattern: a short day in the month", "EEE d"),
        )
    return f"{start} {RANGE} {words.day(last, short=True)}"


# -- blocks ---------------------------------------------------------------------------


def _mrkdwn(text: str) -> MarkdownTextObject:
    # verbatim: no auto-linking of bare URLs or #channel names in what we did not link.
    return MarkdownTextObject(text=text, verbatim=True)


def _plain(text: str) -> PlainTextObject:
    # emoji=False: a `:word:` in an abstract stays text.
    return PlainTextObject(text=text, emoji=False)


def _dict(block: Block) -> dict[str, Any]:
    return block.to_dict()  # validates: a block over a limit raises here, not at Slack


def _section(text: str) -> dict[str, Any]:
    return _dict(SectionBlock(text=_mrkdwn(text)))


def _plain_section(text: str) -> dict[str, Any]:
    return _dict(SectionBlock(text=_plain(text)))


def _context(*elements: MarkdownTextObject | PlainTextObject) -> dict[str, Any]:
    return _dict(ContextBlock(elements=list(elements)))


def _divider() -> dict[str, Any]:
    return _dict(DividerBlock())


def _title(item: DigestItem, limit: int) -> str:
    """The paper's title as shown (TeX as letters), cut to `limit`."""
    paper = item.paper
    return fit(tidy(letters(paper.title)) or paper.versioned_id, limit)


def vote_buttons(number: int, votes: VoteTokens, words: Words | None = None) -> dict[str, Any]:
    """The 👍 / 👎 buttons of the thread's paper `number` (block ids are unique in a
    message: the paper's number is)."""
    words = words or words_for(None)
    return _dict(
        ActionsBlock(
            block_id=f"paperbell-vote-{number}",
            elements=[
                ButtonElement(
                    text=PlainTextObject(text="\U0001f44d", emoji=True),
                    action_id=LIKE_ACTION,
                    value=votes.like,
                    accessibility_label=words.gettext("I like this paper"),
                ),
                ButtonElement(
                    text=PlainTextObject(text="\U0001f44e", emoji=True),
                    action_id=DISLIKE_ACTION,
                    value=votes.dislike,
                    accessibility_label=words.gettext("Fewer papers like this"),
                ),
            ],
        )
    )


def _paper_blocks(
    number: int,
    item: DigestItem,
    texts: TextsView | None = None,
    labels: Mapping[str, str] | None = None,
    votes: VoteTokens | None = None,
    words: Words | None = None,
) -> list[dict[str, Any]]:
    """A paper: linked title, Hugging Face's upvotes beside it (its translation beneath);
    the abstract's start, or the summary in its place, then its translation; one quiet
    line (authors, categories in words, markers, links); its 👍 / 👎 buttons, with
    `votes`. The rule it matched is its group's heading; who wrote the summaries, the
    digest's first message."""
    paper = item.paper
    words = words or words_for(None)
    view = item_view(number, item, abstracts="full", texts=texts, labels=labels, words=words)
    title = f"*{number}. {link(view.url, _title(item, TITLE_CHARS), url_limit=URL_CHARS)}*"
    if view.upvotes_shown:
        title += f"  {link(view.hf_url, view.upvotes_shown)}"
    blocks = [_section(title)]
    if view.translated_title:
        blocks.append(_context(_plain(shorten(view.translated_title, TRANSLATED_TITLE_CHARS))))

    if view.summary:
        english = shorten(view.summary, SUMMARY_CHARS)
        translation = view.translated_text
    else:
        abstract = "".join(part for part, _ in view.abstract.head)  # the whole, as shown
        english = shorten(abstract, ABSTRACT_CHARS)
        translation = view.translated_text and cut_like(
            view.translated_text, len(english.rstrip(ELLIPSIS)), len(abstract)
        )
    shown = [part for part in (english, shorten(translation or "", TRANSLATED_TEXT_CHARS)) if part]
    if shown:
        blocks.append(_plain_section("\n\n".join(shown)))

    quiet: list[MarkdownTextObject | PlainTextObject] = []
    if authors := shorten(shorten_authors(paper.authors), AUTHORS_CHARS):
        quiet.append(_plain(authors))
    categories = "; ".join(category.words for category in view.categories)
    markers = [shorten(marker, MARKER_CHARS) for marker in view.markers]
    if described := [part for part in (shorten(categories, CATEGORIES_CHARS), *markers) if part]:
        quiet.append(_plain(" \u00b7 ".join(described)))
    # The title goes to the paper's page; beside it, each other destination once.
    links = [escape_mrkdwn(fit(paper.label, 60))]
    doi_urls = {url for _, url in view.dois}
    dois = 0
    for other in view.links:
        if url_length(other.url) > URL_CHARS:
            continue
        if other.url in doi_urls:
            dois += 1
            if dois > MAX_DOIS:
                continue
        links.append(link(other.url, fit(other.label, LINK_LABEL_CHARS)))
    quiet.append(_mrkdwn(" \u00b7 ".join(links)))
    blocks.append(_context(*quiet))
    if votes is not None:
        blocks.append(vote_buttons(number, votes, words))
    return blocks


def _page(item: DigestItem) -> str | None:
    """The paper's page, checked (bot.core.links.web_url): None, no link."""
    return web_url(item.paper.abs_url, what=f"paper {item.paper.id[:80]}: a link")


def _heading(rule: RuleName, count: int, *, continued: bool, words: Words) -> dict[str, Any]:
    more = words.gettext(" (continued)") if continued else ""
    name = _shown_rule(rule, 2 * RULE_CHARS)
    papers = words.ngettext("%(count)s paper", "%(count)s papers", count)
    return _section(f"*{name}* \u00b7 {papers}{more}")


# -- messages -------------------------------------------------------------------------


def _header(digest: Digest, words: Words) -> str:
    when = _when(digest.announced, words)
    head = words.ngettext(
        "%(count)s new paper for you", "%(count)s new papers for you", digest.count
    )
    return shorten(f"{head} {DASH} {when}" if when else head, SLACK_LIMITS.header_text)


def _fallback(text: str) -> str:
    return escape_mrkdwn(fit(text, FALLBACK_CHARS)) or "paperbell"


def _note_post(digest: Digest, words: Words) -> SlackMessage:
    note = tidy(digest.note or "") or words.gettext("No new papers matched your rules.")
    return SlackMessage(text=_fallback(note), blocks=(_plain_section(shorten(note, NOTE_CHARS)),))


def _summary_post(digest: Digest, words: Words, *, threaded: bool = True) -> SlackMessage:
    header = _header(digest, words)
    rules = rule_names(digest.rules, digest.subscriber.labels)
    matched = words.gettext("%(papers)s matched %(rules)s") % {
        "papers": words.ngettext("%(count)s paper", "%(count)s papers", digest.count),
        "rules": words.ngettext("%(count)s rule", "%(count)s rules", len(rules)),
    }
    listed = _rule_list(rules, words=words)
    blocks = [
        _dict(HeaderBlock(text=PlainTextObject(text=header))),
        _section(
            words.gettext("%(matched)s: %(rules)s.") % {"matched": matched, "rules": listed}
            if rules
            else words.gettext("%(matched)s.") % {"matched": matched}
        ),
    ]
    # The best papers (digest order breaks ties), shown in the thread's order with the
    # thread's numbers: they run upwards, as the thread does.
    numbered = enumerate(digest.items, start=1)
    ranked = sorted(numbered, key=lambda pair: (-pair[1].score, pair[0]))
    lines = [
        f"{BULLET} {number}. "
        f"{link(_page(item), _title(item, SUMMARY_TITLE_CHARS), url_limit=SUMMARY_URL_CHARS)}"
        for number, item in sorted(ranked[:TOP_TITLES], key=lambda pair: pair[0])
    ]
    blocks.append(_section("\n".join(lines)))
    follow = (
        words.gettext("The papers are in the thread")
        if threaded
        else words.gettext("The papers follow")
    )
    notes = [f"{follow} {DOWN}"]
    if shown := shown_note(digest, words):
        notes.append(shown)
    if said := ranking_note(digest, words):
        notes.append(escape_mrkdwn(said))
    if digest.note:
        notes.append(escape_mrkdwn(fit(digest.note, NOTE_CHARS)))
    elements: list[MarkdownTextObject | PlainTextObject] = [_mrkdwn(note) for note in notes]
    if written_by := digest_summaries_note(digest, words):  # once here, not on every paper
        elements.append(_plain(shorten(written_by, NOTE_CHARS)))
    if (texts := texts_view(digest)) and (language_note := texts.language_note_in(words)):
        elements.append(_plain(language_note))
    if note := texts_note(digest):
        elements.append(_plain(shorten(note, NOTE_CHARS)))
    blocks.append(_context(*elements))
    shown = words.gettext(", ").join(rule.text for rule in rules)
    text = _fallback(f"{header}: {shown}" if shown else header)
    return SlackMessage(text=text, blocks=tuple(blocks))


@dataclass
class _Thread:
    """The thread messages being filled: blocks and numbers of the current one."""

    limits: SlackLimits
    words: Words
    total: int
    messages: list[SlackMessage]
    blocks: list[dict[str, Any]]
    numbers: list[int]
    text: int = 0

    def fits(self, blocks: Sequence[dict[str, Any]]) -> bool:
        return (
            len(self.blocks) + len(blocks) <= self.limits.blocks
            and self.text + text_length(blocks) <= self.limits.text_budget
        )

    def add(self, blocks: Sequence[dict[str, Any]], number: int) -> None:
        self.blocks.extend(blocks)
        self.text += text_length(blocks)
        self.numbers.append(number)

    def flush(self) -> None:
        if not self.blocks:
            return
        first, last = self.numbers[0], self.numbers[-1]
        total = self.words.number(self.total)
        if first == last:
            text = self.words.gettext("Paper %(number)s of %(total)s") % {
                "number": first,
                "total": total,
            }
        else:
            text = self.words.gettext("Papers %(first)s–%(last)s of %(total)s") % {
                "first": first,
                "last": last,
                "total": total,
            }
        self.messages.append(
            SlackMessage(text=text, blocks=tuple(self.blocks), numbers=tuple(self.numbers))
        )
        self.blocks, self.numbers, self.text = [], [], 0


def _thread_posts(
    digest: Digest, limits: SlackLimits, votes: Mapping[str, VoteTokens] | None = None
) -> list[SlackMessage]:
    """The papers, grouped by rule, filled greedily into as few messages as fit the limits.

    A group's heading opens each message the group appears in ("continued" after the
    first), always together with a paper; a divider separates groups. Papers need none:
    each opens with its bold numbered title and closes with its quiet line, and three
    blocks a paper (four with its buttons) let twelve share a message."""
    words = words_for(digest.subscriber.language)
    thread = _Thread(
        limits=limits, words=words, total=digest.count, messages=[], blocks=[], numbers=[]
    )
    texts = texts_view(digest)
    labels = digest.subscriber.labels
    number = 0
    for group in digest.groups:
        rule = similar_group(words) if group.similar else rule_name(group.rule, labels)
        for index, item in enumerate(group.items):
            number += 1
            mine = votes.get(item.paper.id) if votes else None
            paper = _paper_blocks(number, item, texts, labels, mine, words)
            heading = _heading(rule, len(group.items), continued=index > 0, words=words)
            unit = [_divider(), heading, *paper] if index == 0 else paper
            if thread.blocks and not thread.fits(unit):
                thread.flush()
            if not thread.blocks:  # a message opens with its group's heading
                unit = [heading, *paper]
            thread.add(unit, number)
    thread.flush()
    return thread.messages


def build_posts(
    digest: Digest,
    *,
    limits: SlackLimits = SLACK_LIMITS,
    threaded: bool = True,
    votes: Mapping[str, VoteTokens] | None = None,
) -> list[SlackMessage]:
    """The summary message first, then the messages for its thread (`threaded=False`: an
    incoming webhook, which cannot thread, posts them after it in the channel); `votes`:
    each paper's 👍 / 👎 buttons' tokens, by paper id (none: no buttons).

    A digest with no papers is one message: its note (why there is nothing today)."""
    words = words_for(digest.subscriber.language)
    if digest.count == 0:
        return [_note_post(digest, words)]
    return [_summary_post(digest, words, threaded=threaded), *_thread_posts(digest, limits, votes)]
