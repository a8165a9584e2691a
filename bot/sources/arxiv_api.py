"""The arXiv API's answers (`export.arxiv.org/api/query`): search results as Atom pages.

Owns turning one API response into an `ApiPage` (its entries as `Paper`s with their
submission and version dates, and the opensearch paging numbers), and telling apart the
outcomes a request can have: a page of results, an empty result (a valid page with no
entries), the API's error answer (HTTP 400 with one entry titled `Error` whose id is
`https://arxiv.org/api/errors#...`: never a paper), and bodies that are not an Atom
response at all (HTML, garbage, a truncated download: FeedFormatError, never half a page).

Both API backends are read (see tests/fixtures/SOURCES.md): the old one hard-wraps
titles and abstracts with indentation and declares namespaces inline; the current one
(2025 onwards) declares them on the root and gives one-line text. Entry ids can be
new-style (`http://arxiv.org/abs/2104.12255v1`) or old-style (`.../abs/quant-ph/0201082v1`).
`<category term>`s that are not arXiv categories (MSC or ACM class codes such as
`53C25, 53A30 (Primary)`) are left out of `Paper.categories`.

Paper.announced is left None: the API does not say which announcement a result belonged
to (its index lags the daily listing), so the caller decides (`bot.sources.arxiv_query`).

Pure: no network, no clock, no files. Text is kept as published (TeX and all, entities
decoded once, whitespace collapsed); escaping for HTML is the renderers' job. Asking the
API (request URLs, paging, the `arxiv_query` source) is `bot.sources.arxiv_query`.
"""

from __future__ import annotations

import logging
import re
import xml.sax
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from bot.core.checks import canonical_category
from bot.core.errors import FeedErrorResponse, FeedFormatError
from bot.core.models import ArxivVersionError, Paper, normalize_doi, split_arxiv_id
from bot.core.plurals import plural
from bot.sources.diagnosis import describe_body, status_prefix
from bot.sources.feedtext import checked, clean_text, collapse, left_out, plausible_year, read_feed

log = logging.getLogger(__name__)

KIND = "arxiv_query"  # the source kind whose papers these are (bot.sources.arxiv_query)
API_BASE = "https://export.arxiv.org/api/query"
API_HELP = "https://info.arxiv.org/help/api/user-manual.html"

_ERROR_ID_MARK = "/api/errors"
# arXiv's own spelling of a category, retired archives included (chao-dyn, q-alg, cmp-lg),
# for terms `canonical_category` does not know; MSC/ACM codes carry digits and never match.
_ARXIV_CATEGORY_RE = re.compile(r"[a-z]+(?:-[a-z]+)?(?:\.[A-Za-z]+(?:-[a-z]+)?)?")


@dataclass(frozen=True, slots=True)
class ApiEntry:
    """One result: the paper (this version), when v1 was submitted, when this version was."""

    paper: Paper
    published: datetime  # v1 submission, aware UTC
    updated: datetime  # this version, aware UTC


@dataclass(frozen=True, slots=True)
class ApiPage:
    """One response of the API: its entries and the opensearch paging numbers."""

    entries: tuple[ApiEntry, ...]
    total: int | None = None  # opensearch:totalResults, for the whole query
    start: int | None = None  # opensearch:startIndex, 0-based
    per_page: int | None = None  # opensearch:itemsPerPage (the max_results asked for)
    # Entries the response held, read or left out: where the next page starts.
    sent: int = 0
    # Entries left out, each with why ("entry 7 (2104.12255v1): no title"); and a page
    # with no entries although `total` says results remain (see `unexpectedly_empty`).
    problems: tuple[str, ...] = ()

    @property
    def papers(self) -> tuple[Paper, ...]:
        return tuple(entry.paper for entry in self.entries)

    @property
    def unexpectedly_empty(self) -> bool:
        """No entries although `total` says results remain from `start`: arXiv's API
        returns such pages now and then under load; asking again usually fills them."""
        return not self.sent and self.total is not None and self.total > (self.start or 0)


def parse_api(body: bytes, *, status: int = 200, source: str = "", url: str = "") -> ApiPage:
    """Parse one `export.arxiv.org/api/query` response into an `ApiPage`. Pure.

    Raises FeedErrorResponse for the API's error entry (whatever `status` says), and
    FeedFormatError for a body that is not a well-formed Atom response (HTML, garbage, a
    truncated download), for another error status, or when no entry of a feed without the
    API's paging numbers is readable (a page of the API's is then empty, with its problems).
    """
    where = url or source or "the arXiv API"
    http = status_prefix(status)
    if not body.strip():
        raise FeedFormatError(
            f"{where}: {http}received an empty body, not an arXiv API response",
            source=source,
            url=url,
            hint=(
                "the download may have been cut off; the next poll will try again"
                if not http
                else "check the source's `url`: the server answered with an error"
            ),
        )

    doc = read_feed(body, where=where, source=source, url=url)
    version = doc.get("version") or ""
    channel = doc.get("feed") or {}
    entries = doc.get("entries") or []

    if not version:
        raise FeedFormatError(
            f"{where}: {http}{describe_body(body, doc)}",
            source=source,
            url=url,
            hint="the API may be down, or the source's `url` wrong; the next poll will try again",
        )
    for entry in entries:
        if _is_error_entry_safely(entry):
            raise _error_answer(entry, where=where, status=status, source=source, url=url)
    if http:
        raise FeedFormatError(
            f"{where}: {http}the body is a feed ({version}) but not the API's error answer",
            source=source,
            url=url,
            hint="the service answered with an error; the next poll will try again",
        )
    if not version.startswith("atom"):
        raise FeedFormatError(
            f"{where}: received a {version} feed, not an arXiv API (Atom) response",
            source=source,
            url=url,
            hint=f"check the source's `url`: it should be {API_BASE}?search_query=...",
        )
    problem = doc.get("bozo_exception") if doc.get("bozo") else None
    if isinstance(problem, xml.sax.SAXException):
        # feedparser's loose fallback still yields the entries it got: never take a
        # partial page for the whole answer.
        raise FeedFormatError(
            f"{where}: the response is not well-formed XML: {problem}; the download may be "
            "truncated",
            source=source,
            url=url,
            hint="the next request will download it again",
        )
    if problem is not None:
        log.warning("%s: response parsed with a warning: %s", where, problem)

    parsed: list[ApiEntry] = []
    problems: list[str] = []
    for index, entry in enumerate(entries, start=1):
        try:  # one bad entry never stops the others
            found, why = _entry(entry, source=source)
            if found is not None:
                found = replace(found, paper=checked(found.paper, where=where))
        except Exception as exc:  # any failure of one entry: it is left out
            label = clean_text(collapse(str(entry.get("id") or "")))[:80]
            found, why = None, f"{label}: {left_out(exc)}" if label else left_out(exc)
        if found is None:
            problem = f"entry {index}: {why}"
            problems.append(problem)
            log.warning("%s: skipped %s", where, problem)
            continue
        parsed.append(found)
    total = _int(channel.get("opensearch_totalresults"))
    start = _int(channel.get("opensearch_startindex"))
    if entries and not parsed and total is None:
        raise FeedFormatError(
            f"{where}: none of the {plural(len(entries), 'entry', 'entries')} could be read as "
            f"a paper ({'; '.join(problems[:3])})",
            source=source,
            url=url,
            hint="this does not look like an arXiv API response; check the source's `url`",
        )

    if not entries and total is not None and total > (start or 0):
        problems.append(
            f"no entries at start {start or 0} although totalResults is {total}: arXiv's "
            "API sometimes returns empty pages; ask again"
        )
    return ApiPage(
        entries=tuple(parsed),
        total=total,
        start=start,
        per_page=_int(channel.get("opensearch_itemsperpage")),
        sent=len(entries),
        problems=tuple(problems),
    )


def _is_error_entry_safely(entry: Mapping[str, Any]) -> bool:
    """`_is_error_entry`, False when the entry cannot even be looked at (it is then left
    out as an entry, not taken for the whole answer)."""
    try:
        return _is_error_entry(entry)
    except Exception:  # an entry that raises is no error answer
        return False


def _is_error_entry(entry: Mapping[str, Any]) -> bool:
    """arXiv's error answer: an entry whose id is `https://arxiv.org/api/errors#...`, or one
    titled `Error` that names no paper."""
    entry_id = entry.get("id") or ""
    if _ERROR_ID_MARK in entry_id:
        return True
    return collapse(entry.get("title") or "") == "Error" and _entry_id(entry_id) is None


def _error_answer(
    entry: Mapping[str, Any], *, where: str, status: int, source: str, url: str
) -> FeedErrorResponse:
    message = collapse(entry.get("summary") or "")
    if not message:
        fragment = (entry.get("id") or "").partition("#")[2]
        message = fragment.replace("_", " ") or "no message given"
    http = "" if 200 <= status < 300 else f" (HTTP {status})"
    return FeedErrorResponse(
        f"{where}: arXiv's API rejected the request{http}: {message}",
        source=source,
        url=url,
        hint="check the query: field prefixes (ti: au: abs: cat: all: ...), AND/OR/ANDNOT, "
        f"and ids such as 2104.12255 or quant-ph/0201082; see {API_HELP}",
    )


def _entry(entry: Mapping[str, Any], *, source: str) -> tuple[ApiEntry | None, str]:
    """One Atom entry as an `ApiEntry`, or None and why it cannot be one."""
    raw_id = collapse(entry.get("id") or "")
    found = _entry_id(raw_id) or _entry_id(entry.get("link") or "")
    if found is None:
        return None, f"no arXiv identifier in its id {raw_id[:80]!r}"
    paper_id, version = found
    label = f"{paper_id}v{version}" if version else paper_id
    if version is None:
        log.warning("%s: no version for %s; assuming v1", source or KIND, paper_id)
        version = 1

    title = collapse(entry.get("title") or "")
    if title == "":  # a title can be "0": only an empty one is missing
        return None, f"{label}: no title"
    published = _timestamp(entry, "published")
    updated = _timestamp(entry, "updated")
    published, updated = published or updated, updated or published  # v1: the same
    if published is None or updated is None:
        return None, f"{label}: no published or updated date"

    paper = Paper(
        id=paper_id,
        version=version,
        title=title,
        abstract=collapse(entry.get("summary") or ""),
        authors=_authors(entry),
        categories=_categories(entry),
        announce_type="new" if version == 1 else "replace",
        announced=None,
        dois=_dois(entry.get("arxiv_doi") or ""),
        journal_ref=collapse(entry.get("arxiv_journal_ref") or "") or None,
        source=source,
        sources=_sources(source, KIND),
        link=None,
    )
    return ApiEntry(paper=paper, published=published, updated=updated), ""


def _entry_id(text: str) -> tuple[str, int | None] | None:
    """Id and version from `http://arxiv.org/abs/<id>v<N>` (new or old style), or a bare
    `<id>v<N>`; None unless the whole text after `/abs/` is one arXiv identifier."""
    text = text.strip()
    if "/abs/" in text:
        text = text.split("/abs/", 1)[1]
    try:
        found, version = split_arxiv_id(text)
    except ArxivVersionError:
        raise  # the entry is left out: its version is absurd
    except ValueError:
        return None
    exact = found if version is None else f"{found}v{version}"
    return (found, version) if text == exact else None


def _authors(entry: Mapping[str, Any]) -> tuple[str, ...]:
    names = (collapse(author.get("name") or "") for author in entry.get("authors") or ())
    return tuple(name for name in names if name)


def _categories(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """`arxiv:primary_category` first, then the other `<category term>`s, arXiv's only."""
    terms: list[str] = []
    primary = entry.get("arxiv_primary_category")
    if isinstance(primary, Mapping):
        terms.append(primary.get("term") or "")
    terms.extend(tag.get("term") or "" for tag in entry.get("tags") or ())
    found: list[str] = []
    for term in terms:
        category = _category(term)
        if category and category not in found:
            found.append(category)
    return tuple(found)


def _category(term: str) -> str | None:
    """The arXiv category `term` names, or None (an MSC or ACM class code, say)."""
    term = term.strip()
    try:
        return canonical_category(term)
    except ValueError:
        pass
    return term if _ARXIV_CATEGORY_RE.fullmatch(term) else None


def _dois(text: str) -> tuple[str, ...]:
    found: list[str] = []
    for part in text.replace(",", " ").replace(";", " ").split():
        doi = normalize_doi(part)
        if doi and doi not in found:
            found.append(doi)
    return tuple(found)


def _timestamp(entry: Mapping[str, Any], key: str) -> datetime | None:
    """An entry's `published`/`updated` as an aware UTC datetime."""
    # As stored: feedparser's own lookup maps a missing `updated` to `published`, warning.
    text = dict.get(entry, key) if isinstance(entry, dict) else entry.get(key)
    if isinstance(text, str) and text.strip():
        try:
            moment = datetime.fromisoformat(text.strip())
        except ValueError:
            moment = None
        if moment is not None and plausible_year(moment.year):
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            try:
                return moment.astimezone(UTC)
            except OverflowError:
                return None
    parsed = (
        dict.get(entry, f"{key}_parsed") if isinstance(entry, dict) else entry.get(f"{key}_parsed")
    )
    if parsed:
        try:
            year, month, day, hour, minute, second = (int(part) for part in parsed[:6])
            if not plausible_year(year):  # a time at year 1 overflows the arXiv calendar
                return None
            return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
        except (TypeError, ValueError, OverflowError):
            return None
    return None


def _int(value: Any) -> int | None:
    text = str(value).strip()
    if len(text) > 18:  # no paging number is that long
        return None
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _sources(*names: str) -> tuple[str, ...]:
    found: list[str] = []
    for name in names:
        lowered = name.strip().lower()
        if lowered and lowered not in found:
            found.append(lowered)
    return tuple(found)
