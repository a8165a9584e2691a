"""A digest as chat messages for a service reached through Apprise (ntfy, Discord, Telegram,
Matrix, Mattermost, a webhook ...): Markdown where the service takes it, else plain text,
each message within the service's limits (`ChatShape`).

Owns the layout (a heading, the papers numbered as in every digest and grouped under their
rules, the subscriber's manage link and arXiv's thanks in the last message) and the split:
the papers fill as few messages as the limit allows, cut between two papers, never inside
one; a single paper longer than a message is shortened (its abstract first, then its
title), never split. Messages are numbered ("(2/3)") in the order they are sent.

Pure: no I/O, no clock. Feed and model text is untrusted: in Markdown every ASCII
punctuation mark of it is escaped (CommonMark lets each be), so a title cannot open a link,
an image, a heading or emphasis; in plain text the marks that make links on services that
read Markdown anyway (`[`, `]`, `<`, `>`) are swapped for look-alikes. Only the checked
URLs of the view model (`bot.core.links.web_url`) become links.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import quote

from bot.core.models import Digest
from bot.render.email import ACKNOWLEDGEMENT, subject_line
from bot.render.text import clip, shorten_authors, tidy
from bot.render.view import (
    ItemView,
    RuleName,
    TextLength,
    digest_summaries_note,
    item_view,
    model_text,
    ranking_note,
    rule_name,
    shown_note,
    similar_group,
    texts_note,
    texts_view,
)
from bot.render.words import Words, words_for

__all__ = [
    "MIN_BODY",
    "ChatMessage",
    "ChatShape",
    "chat_messages",
    "escape_markdown",
    "plain",
]

# The shortest message body a digest is laid out in: a numbered title and its link.
MIN_BODY = 120
TITLE_CHARS = 300
AUTHORS_CHARS = 300
CATEGORIES_CHARS = 200
ABSTRACT_CHARS = {"full": 2000, "short": 320, "brief": 140, "none": 0}
NOTE_CHARS = 500
URL_CHARS = 500  # a longer link is left out rather than cut
PART_MARK = " ({index}/{total})"
PART_ROOM = len(PART_MARK.format(index=999, total=999))
SEPARATOR = "\n\n"
ELLIPSIS = "\u2026"
DOT = " \u00b7 "
# Kept as written in a URL inside a Markdown link: no space, quote or parenthesis.
_URL_SAFE = ":/?#[]@!$&'*+,;=%~-._"
# Every ASCII punctuation mark: CommonMark lets a backslash escape each.
_MARKDOWN = re.compile(r"([!-/:-@\[-`{-~])")
# Plain text on a service that reads Markdown (or Slack-like <url|text>) anyway.
_LINK_MARKS = str.maketrans({"[": "\uff3b", "]": "\uff3d", "<": "\u2039", ">": "\u203a"})


@dataclass(frozen=True, slots=True)
class ChatShape:
    """What one service takes (from its Apprise plugin): Markdown or plain text, how long a
    message body may be (`body`, counted as the service counts it: `json` when its limit is
    on the JSON-escaped body, as ntfy's is), and a title (`title`; 0: none, the heading
    opens the body)."""

    markdown: bool
    body: int
    title: int = 0
    json: bool = False

    def size(self, text: str) -> int:
        """How much of the limit `text` takes."""
        return len(json.dumps(text)) - 2 if self.json else len(text)


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message: its title ("" when the service takes none), its body, and the numbers
    of the digest's papers it holds (in the digest's order)."""

    title: str
    body: str
    numbers: tuple[int, ...] = ()


def escape_markdown(text: str) -> str:
    """Untrusted text as Markdown that shows it as written, on one line: each ASCII
    punctuation mark escaped (no link, image, emphasis, code, heading, list or HTML can
    start), each run of whitespace one space (no line break, no indented code block)."""
    return _MARKDOWN.sub(r"\\\1", " ".join(text.split()))


def plain(text: str) -> str:
    """Untrusted text as plain text for a service that may read Markdown anyway: the
    marks that make links swapped for look-alikes."""
    return text.translate(_LINK_MARKS)


@dataclass(frozen=True)
class _Writer:
    """Writes text, links and emphasis in the shape's format."""

    markdown: bool

    def text(self, value: str) -> str:
        return escape_markdown(value) if self.markdown else plain(value)

    def strong(self, value: str) -> str:
        """Already escaped text, set in bold (Markdown)."""
        return f"**{value}**" if self.markdown and value else value

    def link(self, label: str, url: str | None) -> str:
        """`label` (untrusted text) linking to `url` (checked): `[label](url)`, or in plain
        text `label: url`; the label alone without a URL."""
        shown = self.text(label)
        if not url or len(url) > URL_CHARS:
            return shown
        if self.markdown:
            return f"[{shown}]({quote(url, safe=_URL_SAFE)})"
        return f"{shown}: {url}"


def chat_messages(
    digest: Digest, shape: ChatShape, *, manage_url: str | None = None
) -> list[ChatMessage]:
    """The digest as the messages sent to one service, in order. Raises ValueError for a
    shape too small for any digest (a body shorter than MIN_BODY)."""
    if shape.body < MIN_BODY:
        raise ValueError(
            f"the service takes messages of {shape.body} characters at most: too short for "
            f"a digest (at least {MIN_BODY})"
        )
    writer = _Writer(shape.markdown)
    words = words_for(digest.subscriber.language)
    subject = subject_line(digest, words=words)
    footer = _footer(writer, manage_url, words)
    if digest.count == 0:
        note = model_text(digest.note, NOTE_CHARS) or words.gettext(
            "No new papers matched your rules."
        )
        return _assemble(shape, writer, subject, [], [writer.text(note)], footer)
    notes = [writer.text(n) for n in _notes(digest, words)]
    units = _paper_units(digest, writer, shape, words)
    return _assemble(shape, writer, subject, units, notes, footer)


@dataclass(frozen=True)
class _Unit:
    """One paper as laid out: its number, its group's heading (and whether the group
    starts with it), and its block at each length (longest first)."""

    number: int
    heading: str
    continued: str
    opens_group: bool
    blocks: tuple[str, ...]
    title: str  # for a paper longer than any message: its title, cut, and its link
    url: str | None


def _paper_units(digest: Digest, writer: _Writer, shape: ChatShape, words: Words) -> list[_Unit]:
    units: list[_Unit] = []
    labels = digest.subscriber.labels
    texts = texts_view(digest)
    wanted: TextLength = "full" if digest.subscriber.abstracts == "full" else "short"
    lengths = [length for length in ("full", "short", "brief", "none") if _at_most(length, wanted)]
    number = 0
    for group in digest.groups:
        rule = similar_group(words) if group.similar else rule_name(group.rule, labels)
        count = len(group.items)
        heading = _heading(writer, rule, count, continued=False, words=words)
        continued = _heading(writer, rule, count, continued=True, words=words)
        for index, item in enumerate(group.items):
            number += 1
            view = item_view(
                number, item, abstracts="full", texts=texts, labels=labels, words=words
            )
            blocks = tuple(_paper(writer, view, length) for length in lengths)
            title = tidy(view.title_text) or item.paper.label
            units.append(_Unit(number, heading, continued, index == 0, blocks, title, view.url))
    return units


def _at_most(length: str, wanted: str) -> bool:
    order = ("full", "short", "brief", "none")
    return order.index(length) >= order.index(wanted)


def _heading(writer: _Writer, rule: RuleName, count: int, *, continued: bool, words: Words) -> str:
    """A group's heading: its rule as shown (its label, else its words), its count."""
    name = writer.text(clip(tidy(rule.text), 200))
    more = words.gettext(" (continued)") if continued else ""
    papers = words.ngettext("%(count)s paper", "%(count)s papers", count)
    return writer.strong(f"{name}{DOT}{papers}{more}")


def _paper(writer: _Writer, view: ItemView, length: str) -> str:
    """A paper: its number and linked title (its translation beneath), authors and
    categories, its abstract (or summary) at `length`, its other links."""
    paper = view.paper
    title = clip(tidy(view.title_text), TITLE_CHARS) or paper.label
    lines = [_title_line(writer, view.number, title, view.url, upvotes=view.upvotes_shown)]
    if view.translated_title:
        lines.append(writer.text(clip(view.translated_title, TITLE_CHARS)))
    lines += [writer.text(part) for part in _abstract(view, length)]
    # One quiet line: authors, categories in words, markers, then the few links.
    meta = [clip(shorten_authors(paper.authors), AUTHORS_CHARS)]
    meta.append(clip("; ".join(c.words for c in view.categories), CATEGORIES_CHARS))
    meta += [clip(marker, 100) for marker in view.markers]
    quiet = [writer.text(part) for part in meta if part]
    quiet += [writer.link(other.label, other.url) for other in view.links]
    if quiet := [part for part in quiet if part]:
        lines.append(DOT.join(quiet))
    return "\n".join(lines)


def _abstract(view: ItemView, length: str) -> list[str]:
    limit = ABSTRACT_CHARS[length]
    if limit == 0:
        return []
    english = view.summary or "".join(part for part, _ in view.abstract.head)
    shown = [clip(tidy(english), limit)] if tidy(english) else []
    if view.translated_text:
        shown.append(clip(tidy(view.translated_text), limit))
    return shown


def _notes(digest: Digest, words: Words) -> list[str]:
    """What the digest says of itself: who wrote its summaries, papers left out, the
    ranking, missing texts."""
    notes = [digest_summaries_note(digest, words), shown_note(digest, words)]
    notes += [ranking_note(digest, words), texts_note(digest)]
    if texts := texts_view(digest):
        notes.append(texts.language_note_in(words))
    if digest.note:
        notes.append(model_text(digest.note, NOTE_CHARS))
    return [clip(note, NOTE_CHARS) for note in notes if note]


def _footer(writer: _Writer, manage_url: str | None, words: Words) -> str:
    lines = []
    if manage_url and len(manage_url) <= URL_CHARS:
        label = words.gettext("Change your rules or stop these digests")
        lines.append(writer.link(label, manage_url))
    lines.append(writer.text(ACKNOWLEDGEMENT))
    return "\n".join(lines)


def _fitting_footer(shape: ChatShape, writer: _Writer, footer: str, room: int) -> str:
    """The footer, or arXiv's thanks alone, or as much of them as `room` holds (cut before
    it is escaped)."""
    for candidate in (footer, writer.text(ACKNOWLEDGEMENT)):
        if shape.size(candidate) <= room:
            return candidate
    keep = len(ACKNOWLEDGEMENT)
    while keep > 1 and shape.size(writer.text(clip(ACKNOWLEDGEMENT, keep))) > room:
        keep -= 1
    return writer.text(clip(ACKNOWLEDGEMENT, keep))


def _assemble(
    shape: ChatShape,
    writer: _Writer,
    subject: str,
    units: list[_Unit],
    notes: list[str],
    footer: str,
) -> list[ChatMessage]:
    """Fill the messages: each opens with the heading (in the title when the service takes
    one, else in the body), the first with the digest's notes, the last closes with the
    footer; papers go whole, in order, as many as fit."""
    size = shape.size
    in_title = shape.title > 0
    body_head = "" if in_title else writer.strong(writer.text(clip(subject, 200)))
    head_room = 0 if in_title else size(body_head) + PART_ROOM + size(SEPARATOR)
    footer_room = size(footer) + size(SEPARATOR)
    room = shape.body - head_room - footer_room
    own_footer = room < MIN_BODY  # too little beside it: the footer is a message of its own
    if own_footer:
        room = shape.body - head_room
    if room < MIN_BODY // 2:  # the heading does not fit either: the papers alone
        body_head, head_room, room = "", 0, shape.body - (0 if own_footer else footer_room)
    notes_text = SEPARATOR.join(notes)

    parts: list[list[str]] = [[]]
    numbers: list[list[int]] = [[]]
    used = 0
    if notes_text and size(notes_text) <= room // 2:
        parts[0].append(notes_text)
        used = size(notes_text)
    for unit in units:
        fresh = not parts[-1] or (len(parts[-1]) == 1 and parts[-1][0] == notes_text)
        heading = unit.heading if unit.opens_group else (unit.continued if fresh else None)
        chunk = _fit(shape, writer, unit, heading, room)
        cost = size(chunk) + (size(SEPARATOR) if parts[-1] else 0)
        if parts[-1] and used + cost > room:
            parts.append([])
            numbers.append([])
            used = 0
            heading = unit.heading if unit.opens_group else unit.continued
            chunk = _fit(shape, writer, unit, heading, room)
            cost = size(chunk)
        parts[-1].append(chunk)
        numbers[-1].append(unit.number)
        used += cost
    if own_footer:
        parts.append([])
        numbers.append([])
        used = 0
    left = shape.body - head_room - used - (size(SEPARATOR) if parts[-1] else 0)
    parts[-1].append(
        _fitting_footer(shape, writer, footer, max(left, shape.body - used - size(SEPARATOR)))
    )
    total = len(parts)
    messages = []
    for index, (pieces, held) in enumerate(zip(parts, numbers, strict=True), start=1):
        mark = PART_MARK.format(index=index, total=total) if total > 1 else ""
        body = SEPARATOR.join(piece for piece in pieces if piece)
        title = ""
        if in_title:
            title = clip(subject, max(shape.title - len(mark), 1)) + mark
        elif body_head and size(f"{body_head}{mark}{SEPARATOR}{body}") <= shape.body:
            body = f"{body_head}{mark}{SEPARATOR}{body}"
        messages.append(ChatMessage(title=title, body=body, numbers=tuple(held)))
    return messages


def _fit(shape: ChatShape, writer: _Writer, unit: _Unit, heading: str | None, room: int) -> str:
    """The unit (with `heading` above it) at the longest of its lengths that fits `room`;
    past the shortest, its title cut until it does (a paper is shortened, never split)."""
    top = f"{heading}\n" if heading else ""
    for block in unit.blocks:
        if shape.size(top + block) <= room:
            return top + block
    if heading and shape.size(unit.blocks[-1]) <= room:
        return unit.blocks[-1]  # the heading goes first
    return _cut(shape, writer, unit, room)


def _title_line(
    writer: _Writer, number: int, title: str, url: str | None, *, upvotes: str | None = None
) -> str:
    """`1. [Title](url)` in Markdown; in plain text the title, and its link on a line of
    its own (a link an app can open: never cut, never in the middle of a sentence);
    `upvotes`: Hugging Face's, beside the title (`▲ 163`)."""
    beside = f" {writer.text(upvotes)}" if upvotes else ""
    if writer.markdown:
        return f"{writer.strong(f'{number}.')} {writer.link(title, url)}{beside}"
    line = f"{number}. {writer.text(title)}{beside}"
    return f"{line}\n{url}" if url and len(url) <= URL_CHARS else line


def _cut(shape: ChatShape, writer: _Writer, unit: _Unit, room: int) -> str:
    """The paper's number and title alone, the title cut (before it is escaped, so no
    escape is cut in half) until it fits `room` with its link, else without: for limits
    too small for the whole paper."""
    for url in (unit.url, None):
        low, high = 0, len(unit.title)
        while low < high:  # the longest cut of the title that fits
            middle = (low + high + 1) // 2
            if shape.size(_title_line(writer, unit.number, clip(unit.title, middle), url)) <= room:
                low = middle
            else:
                high = middle - 1
        line = _title_line(writer, unit.number, clip(unit.title, low), url)
        if low > 0 and shape.size(line) <= room:
            return line
    return writer.strong(f"{unit.number}.")
