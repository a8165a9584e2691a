"""A subscriber's papers as an Atom feed (RFC 4287), written by feedgen.

Owns what the feed says: one entry per paper, newest first, with a stable id (the same
paper keeps its entry however often it is sent: a new version updates it), the title and
abstract with their TeX as letters, the authors, the categories (each cut where a digest
cuts it: a broken feed's field of megabytes is no entry of megabytes), and a link to the
paper's page (checked by `bot.core.links.web_url`). Text goes in as text: feedgen
(lxml) escapes it, and characters XML cannot carry (control characters) are left out
first. Pure: the times are passed in (the same papers give the same bytes, which the
feed's ETag relies on), nothing is read but the arguments.

The feed links to itself only: no archive or manage link, since a feed URL is often handed
to a hosted feed reader.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from feedgen.feed import FeedGenerator

from bot import __version__
from bot.core.links import web_url
from bot.core.models import Paper
from bot.render.text import clip, letters, tidy, tidy_author
from bot.render.view.papers import ABSTRACT_CHARS, CATEGORIES_SHOWN, NAME_CHARS, TITLE_CHARS

__all__ = ["FEED_TYPE", "FeedEntry", "FeedInfo", "entry_id", "render_feed"]

FEED_TYPE = "application/atom+xml"
ARXIV_SCHEME = "http://arxiv.org/schemas/atom"  # the scheme arXiv's own Atom feeds use
HOMEPAGE = "https://github.com/paperbell/paperbell"
MAX_AUTHORS = 20  # author elements per entry; a collaboration of thousands is counted
# What XML 1.0 cannot hold (control characters, lone surrogates, U+FFFE/U+FFFF).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class FeedInfo:
    """The feed itself: its stable id, title, its own URL, who makes it, and its `updated`
    time when it has no entries yet."""

    id: str
    title: str
    self_url: str
    author: str
    updated: datetime


@dataclass(frozen=True)
class FeedEntry:
    """A paper sent to the subscriber: first (`published`) and last (`updated`)."""

    paper: Paper
    first: datetime
    last: datetime


def entry_id(site: str, paper: Paper) -> str:
    """A paper's entry id on this site: a URN, the same for every version of it."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"{site}/paper/{paper.id}").urn


def _xml(text: str) -> str:
    return _NOT_XML.sub("", text)


def _text(text: str, limit: int) -> str:
    """Paper text as the feed shows it: TeX as letters, whitespace collapsed, cut at
    `limit` characters."""
    return tidy(_xml(letters(clip(text, limit))))


def _authors(authors: Sequence[str]) -> list[dict[str, str]]:
    names = [
        name for name in (tidy(_xml(tidy_author(clip(a, NAME_CHARS)))) for a in authors) if name
    ]
    if len(names) > MAX_AUTHORS:
        names = [*names[: MAX_AUTHORS - 1], f"et al. ({len(names)} authors)"]
    return [{"name": name} for name in names]


def render_feed(info: FeedInfo, entries: Sequence[FeedEntry], *, site: str) -> bytes:
    """The Atom document (UTF-8) of `entries`, in the order given (newest first); `site`
    is the public address the entries' ids are made under."""
    feed = FeedGenerator()
    feed.id(info.id)
    feed.title(_xml(info.title))
    feed.author({"name": _xml(info.author) or "paperbell"})
    feed.link(href=info.self_url, rel="self", type=FEED_TYPE)
    feed.generator("paperbell", version=__version__, uri=HOMEPAGE)
    feed.updated(max((e.last for e in entries), default=info.updated))
    for entry in entries:
        _add(feed, entry, site)
    return bytes(feed.atom_str(pretty=True, encoding="UTF-8"))


def _add(feed: FeedGenerator, entry: FeedEntry, site: str) -> None:
    paper = entry.paper
    whose = f"paper {paper.id[:80]}: a link"
    item = feed.add_entry(order="append")
    item.id(entry_id(site, paper))
    title = _text(paper.title, TITLE_CHARS)
    item.title(title or paper.id)
    item.published(entry.first)
    item.updated(entry.last)
    abstract = _text(paper.abstract, ABSTRACT_CHARS)
    if abstract:
        item.summary(abstract)
    # One link, the paper's page (its PDF is a click away there): feedgen 1.0 writes an
    # entry's links with their href alone (lkiesow/python-feedgen#135), and two links
    # without rel would be two "alternate" ones, which RFC 4287 4.1.1 forbids.
    page = web_url(paper.abs_url, what=whose)
    if page:
        item.link(href=page, rel="alternate", type="text/html")
    else:  # RFC 4287 4.1.1: an entry without an alternate link has content
        item.content(abstract or title or paper.id, type="text")
    authors = _authors(paper.authors)
    if authors:
        item.author(authors)
    categories = [
        {"term": term, "scheme": ARXIV_SCHEME}
        for term in dict.fromkeys(
            _xml(clip(c, NAME_CHARS)).strip() for c in paper.categories[:CATEGORIES_SHOWN]
        )
        if term
    ]
    if categories:
        item.category(categories)
