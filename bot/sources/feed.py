"""Any RSS or Atom feed (bioRxiv, medRxiv, a journal's table of contents): `kind = "feed"`.

`parse_feed` is pure: bytes in, `ParsedFeed` out. Each entry becomes a `Paper` named by
what identifies it best (`bot.core.models.paper_id`): an arXiv id found in its link or id
(an arXiv feed read as a plain feed), else its DOI (`prism:doi`, `dc:identifier`, a
doi.org link, or the DOI in a bioRxiv/medRxiv or publisher link), else its link. The
store then joins a journal's entry to the arXiv paper with the same DOI.

Publishers write entries very differently: HTML in titles and descriptions (turned into
plain text here), authors as `dc:creator`, `author` or only inside the description
("Author(s): …"), dates or none. An entry without a title or without any identifier is
left out and described in `ParsedFeed.problems`; the rest are still papers, and so is an
entry whose reading raises (a date out of range, an absurd version: bot.sources.feedtext).
Only http(s) links are kept.
`FeedSource.fetch` is a conditional GET through the shared polite fetcher.
"""

from __future__ import annotations

import html
import logging
import re
import xml.sax
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from bot.core.checks import MAX_URL_LENGTH, canonical_category
from bot.core.errors import FeedFormatError
from bot.core.merge import FEED
from bot.core.models import (
    ARXIV_ID_RE,
    ArxivVersionError,
    Paper,
    normalize_doi,
    paper_id,
    split_arxiv_id,
)
from bot.sources.base import (
    FetchResult,
    FetchState,
    FetchURL,
    ParsedFeed,
    Source,
    SourceOptions,
    interval,
    source_options,
)
from bot.sources.diagnosis import describe_body, status_prefix
from bot.sources.feedtext import (
    ARXIV_DESCRIPTION_RE,
    arxiv_abstract,
    checked,
    clean_text,
    left_out,
    plausible_year,
    read_feed,
    split_authors,
    web_url,
)
from bot.sources.registry import register

if TYPE_CHECKING:
    from bot.sources.http import PoliteFetcher

log = logging.getLogger(__name__)
_ARXIV_LINK_RE = re.compile(
    rf"arxiv\.org/(?:abs|pdf|html)/(?:{ARXIV_ID_RE.pattern})|^oai:arXiv\.org:", re.IGNORECASE
)
# bioRxiv/medRxiv content links carry the DOI and the version: /content/10.1101/…v2
_PREPRINT_RE = re.compile(
    r"/content/(10\.[0-9]{4,9}/[^?#\s]+?)(?:v([0-9]+))?(?:\.full|\.abstract)?(?:[?#]|$)"
)
_DOI_LINK_RE = re.compile(r"(?:doi\.org/|/doi/(?:full|abs|pdf|epdf)?/?)(10\.[0-9]{4,9}/[^?#\s]+)")
_AUTHORS_IN_TEXT_RE = re.compile(r"Author\(s\):\s*(?P<names>.+?)(?:\s{2,}|$)")


class FeedOptions(SourceOptions):
    """The options of a `feed` source: `url` (required) and how often to poll it."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    url: FetchURL
    interval_minutes: float | None = Field(None, gt=0, le=1440)


@register("feed")
class FeedSource(Source):
    """Papers from any RSS or Atom feed, polled at an interval with a conditional GET."""

    authority = FEED
    Options: ClassVar[type[BaseModel]] = FeedOptions

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        checked = source_options(FeedOptions, name, options, hint="see the feed source")
        self.url: str = checked.url
        self.interval = interval(checked.interval_minutes)

    async def fetch(self, http: PoliteFetcher, state: FetchState) -> FetchResult:
        """Download the feed through the shared polite fetcher (conditional GET)."""
        return await http.get(self.url, state, source=self.name)

    def parse(self, body: bytes, *, status: int = 200) -> ParsedFeed:
        return parse_feed(body, source=self.name, url=self.url, status=status)


def parse_feed(
    body: bytes, *, source: str = "feed", url: str = "", status: int = 200
) -> ParsedFeed:
    """Parse any RSS (0.9x, 1.0, 2.0) or Atom body into papers. Pure."""
    where = url or source or "the feed"
    doc = read_feed(body, where=where, source=source, url=url)
    version = doc.get("version") or ""
    if not body.strip() or not version or not 200 <= status < 300:
        detail = describe_body(body, doc) if not version else f"the body is a feed ({version})"
        raise FeedFormatError(
            f"{where}: {status_prefix(status)}{detail}",
            source=source,
            url=url,
            hint="check the source's `url`; the service may be down (the next poll will try again)",
        )
    problem = doc.get("bozo_exception")
    if doc.get("bozo") and isinstance(problem, xml.sax.SAXException):
        raise FeedFormatError(
            f"{where}: the feed is not well-formed XML: {problem}; the download may be truncated",
            source=source,
            url=url,
            hint="the next poll will download it again",
        )
    if doc.get("bozo"):  # read all the same (in another encoding than declared ...)
        log.warning("%s: feed parsed with a warning: %s", where, problem)
    channel = doc.get("feed") or {}
    journal = _text(channel.get("prism_publicationname", "")) or None
    papers: list[Paper] = []
    problems: list[str] = []
    for index, entry in enumerate(doc.get("entries") or [], start=1):
        try:  # one bad entry never stops the others
            paper = _paper(entry, source=source, journal=journal)
            if not isinstance(paper, str):
                paper = checked(paper, where=where)
        except Exception as exc:  # any failure of one entry: it is left out
            paper = left_out(exc)
        if isinstance(paper, str):
            label = clean_text(str(entry.get("id") or entry.get("link") or ""))[:80]
            problem = f"entry {index}{f' ({label})' if label else ''}: {paper}"
            log.warning("%s: left out %s", where, problem)
            problems.append(problem)
        else:
            papers.append(paper)
    return ParsedFeed(
        papers=tuple(papers),
        title=_text(channel.get("title", "")),
        empty_reason=None if papers or problems else "the feed has no entries",
        problems=tuple(problems),
    )


def _paper(entry: Mapping[str, Any], *, source: str, journal: str | None) -> Paper | str:
    """The entry as a paper, or why it cannot be one."""
    title = " ".join(_text(entry.get("title", "")).split())
    if not title:
        return "no title"
    raw_link = entry.get("link") or None
    link = web_url(raw_link)
    if raw_link and link is None:
        log.warning("%s: dropped the link %r: not an http(s) URL", source, str(raw_link)[:80])
    candidates = [str(entry.get(key) or "") for key in ("link", "id")]
    candidates += [str(other.get("href") or "") for other in entry.get("links") or []]
    candidates = [text for text in candidates if len(text) <= MAX_URL_LENGTH]
    arxiv, version = _arxiv_id(candidates)
    dois, doi_version = _dois(entry, candidates)
    # A permalink guid names the entry more stably than a link with tracking parameters.
    guid = web_url(entry.get("id"))
    key = paper_id(arxiv=arxiv, dois=dois, link=guid or link)
    if not key:
        return f"{title[:60]!r} has no link, id or DOI"
    summary = entry.get("summary") or ""
    contents = entry.get("content") or []
    if not summary and contents:
        summary = contents[0].get("value") or ""
    text = _text(summary)
    abstract = " ".join(text.split())
    if arxiv and ARXIV_DESCRIPTION_RE.match(abstract):  # an arXiv listing read as a plain feed
        abstract = arxiv_abstract(abstract)
    return Paper(
        id=key,
        version=version or doi_version or 1,
        title=title,
        abstract=abstract,
        authors=_authors(entry, text),
        categories=_categories(entry),
        announce_type="new",
        announced=_entry_date(entry),
        dois=tuple(dois),
        journal_ref=journal,
        source=source,
        link=link,
    )


def _arxiv_id(candidates: list[str]) -> tuple[str | None, int | None]:
    for text in candidates:
        if _ARXIV_LINK_RE.search(text):
            try:
                return split_arxiv_id(text.rsplit("/abs/", 1)[-1].rsplit(":", 1)[-1])
            except ArxivVersionError:
                raise  # the entry is left out: its version is absurd
            except ValueError:
                continue
    return None, None


def _dois(entry: Mapping[str, Any], candidates: list[str]) -> tuple[list[str], int | None]:
    """The entry's DOIs, and a bioRxiv/medRxiv version found in its link."""
    found: list[str] = []
    version = None
    for key in ("prism_doi", "dc_identifier", "doi"):
        if value := normalize_doi(str(entry.get(key) or "")):
            found.append(value)
    for text in candidates:
        if preprint := _PREPRINT_RE.search(text):
            found.append(preprint.group(1).lower())
            version = version or (int(preprint.group(2)) if preprint.group(2) else None)
        elif link := _DOI_LINK_RE.search(text):
            found.append(link.group(1).lower())
    return list(dict.fromkeys(doi.rstrip(".") for doi in found)), version


def _authors(entry: Mapping[str, Any], abstract: str) -> tuple[str, ...]:
    names = [_text(author.get("name", "")) for author in entry.get("authors") or []]
    names = [name for name in names if name]
    if len(names) == 1 and ("," in names[0] or " and " in names[0]):
        return split_authors(names[0])  # dc:creator "A, B and C" in one element
    if names:
        return tuple(names)
    listed = _AUTHORS_IN_TEXT_RE.search(abstract)
    return split_authors(listed.group("names")) if listed else ()


def _categories(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """The entry's tags that are arXiv categories (a journal's subjects are not)."""
    found = []
    for tag in entry.get("tags") or []:
        try:
            found.append(canonical_category(str(tag.get("term") or "")))
        except ValueError:
            continue
    return tuple(dict.fromkeys(found))


def _entry_date(entry: Mapping[str, Any]) -> date | None:
    for key in ("published_parsed", "updated_parsed", "created_parsed"):
        # As stored: feedparser's own lookup maps a missing `updated_parsed` to
        # `published_parsed` with a DeprecationWarning.
        parsed = dict.get(entry, key) if isinstance(entry, dict) else entry.get(key)
        if parsed:
            try:
                year, month, day, hour, minute, second = (int(part) for part in parsed[:6])
                if plausible_year(year):
                    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).date()
            except (TypeError, ValueError, OverflowError):
                continue
    return None


# A tag (start, end, declaration, processing instruction): it ends at the next `>` or `<`,
# so stripping tags is linear. The standard library's HTMLParser is quadratic on unclosed
# tags (81 s for 90,000 characters of `<a `), which a feed's escaped text can hold.
_TAG_RE = re.compile(r"<(?:(/?)([A-Za-z][A-Za-z0-9]*)(?![A-Za-z0-9])[^<>]*|[!?][^<>]*)>")
_BREAK_TAGS = frozenset({"p", "br", "div", "li", "tr"})


def _tag(match: re.Match[str]) -> str:
    closing, name = match.group(1), match.group(2)
    return "  " if name and not closing and name.lower() in _BREAK_TAGS else ""


def _without_comments(text: str) -> str:
    """`text` without `<!-- ... -->` comments (an unclosed one runs to the end)."""
    parts: list[str] = []
    position = 0
    while (start := text.find("<!--", position)) >= 0:
        parts.append(text[position:start])
        end = text.find("-->", start + 4)
        position = len(text) if end < 0 else end + 3
    parts.append(text[position:])
    return "".join(parts)


def _text(fragment: str) -> str:
    """Plain text from a title or description that may hold HTML: tags dropped, entities
    decoded once, spaces collapsed, but a paragraph break kept as two spaces for
    `Author(s):` to end at. Linear in the fragment's length."""
    if "<" not in fragment and "&" not in fragment:
        return " ".join(fragment.split())
    text = html.unescape(_TAG_RE.sub(_tag, _without_comments(fragment)))
    return "  ".join(" ".join(part.split()) for part in text.split("  ") if part.strip())
