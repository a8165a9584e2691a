"""What every source's parser shares to survive hostile input (one bad item never stops a
poll) and to read text as feeds write it.

Pure: no network, no clock, no files. What a refused body looks like, for the error
message, is bot.sources.diagnosis.

- `clean_body(body)`: an XML body made safe to hand to feedparser. A numeric character
  reference that names no XML character (`&#0;`, `&#99999999999;`, a surrogate) and a raw
  control byte XML forbids (NUL ...) make the whole document ill-formed: feedparser then
  falls back to its loose parser, which raises OverflowError for the document (so every
  item was lost for one item's title). Such references become U+FFFD, such bytes are
  dropped, and the other items survive. So do U+FFFE and U+FFFF written raw in a UTF-8
  body (they are no XML characters either): they become U+FFFD. In a UTF-8 body, a few
  bytes that are no UTF-8 become U+FFFD too: for one of them, feedparser would read the
  whole body as windows-1252 and garble every name outside ASCII (a body mostly of such
  bytes is latin-1, whatever it declares, and feedparser reads it right). A body declared
  latin-1 (ISO-8859-1, windows-1252) but written in UTF-8 is read as UTF-8: feedparser
  would take each of its letters for two or three ("Ş" as "Åž"), and undoes that only for
  ISO-8859-1 and only in an element with no character reference past latin-1. It also
  cuts runs of more than `MAX_EMAIL_RUN` e-mail-like characters inside author-type
  elements (`author`, `dc:creator`, `managingEditor`, `webMaster`, `dc:publisher`):
  feedparser looks for an e-mail address in their text with a regex that is quadratic in
  such a run (0.3 s at 10,000 characters, about 30 s at 100,000), and no option turns it
  off. No real name holds such a run.
- `read_feed(body, ...)`: feedparser's reading of the cleaned body; whatever feedparser
  raises becomes a FeedFormatError (a refusal with a message, never a crash). A body that is
  not well-formed XML comes back as feedparser reports it (bozo, the SAX error, no version)
  without feedparser's second, loose reading, which is superlinear on unclosed tags and
  whose result every parser here refuses.
- `clean_text(text)`: NUL removed (PostgreSQL refuses it in text) and lone surrogates
  replaced by U+FFFD (no database encodes them).
- `web_url(value)`: the value if it is an http(s) URL, else None: only those become links.
- `checked(paper)`: a parsed paper ready to store: every text field cleaned, links http(s)
  only, counts and dates in range, or ValueError (a version no database integer holds,
  an id or announce type too long to store): the item is then left out.
- `left_out(exc)`: how an unexpected exception from one item is described in
  `ParsedFeed.problems`.
- `collapse(text)`: whitespace collapsed to single spaces (titles carry hard line breaks).
- `split_authors(text)`: arXiv's one-string author list (`A, B (Univ. X, Y) and C`) as
  names; a journal's `dc:creator` is written the same way.
- `ARXIV_DESCRIPTION_RE` and `arxiv_abstract(description)`: an arXiv listing item's
  description (`arXiv:2411.17700v1 Announce Type: new Abstract: ...`), whether the arXiv
  parser or the plain feed parser reads it.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import logging
import re
import xml.sax
import xml.sax.handler
import xml.sax.xmlreader
from dataclasses import replace
from datetime import date
from typing import Any, cast

from bot.core.checks import is_web_url
from bot.core.errors import FeedFormatError
from bot.core.models import MAX_ID_LENGTH, MAX_VERSION, Paper

log = logging.getLogger(__name__)

MAX_EMAIL_RUN = 256
MAX_ANNOUNCE_TYPE = 16  # the database column's length
MAX_COUNT = MAX_VERSION  # upvotes, comments, stars: what the database integer holds
# Dates outside these years are read as missing (year 1 overflows a time-zone conversion).
MIN_YEAR, MAX_YEAR = 1900, 2999

_CONTROL_BYTES = bytes(c for c in range(32) if c not in (9, 10, 13))
_CHAR_REF_RE = re.compile(rb"&#(?:x([0-9A-Fa-f]+)|([0-9]+));")
_REPLACEMENT_REF = b"&#xFFFD;"
# U+FFFE and U+FFFF in UTF-8, and U+FFFD that replaces them.
_NONCHARACTERS = (b"\xef\xbf\xbe", b"\xef\xbf\xbf")
_REPLACEMENT = b"\xef\xbf\xbd"
# The encoding an XML declaration names (the body is read in it; UTF-8 when none).
_DECLARED_ENCODING_RE = re.compile(rb"<\?xml[^>]*?encoding\s*=\s*[\"']([^\"'>]{1,40})[\"']")
_UTF_8_BOM = b"\xef\xbb\xbf"
# Latin-1 and its kin, by Python's names: (almost) every byte is a character in them, so
# a UTF-8 body declared in one is read without an error, its letters outside ASCII garbled.
_LATIN_CODECS = frozenset({"iso8859-1", "cp1252", "iso8859-15"})
# An author-type element's start tag and its text (up to the next tag; CDATA opened).
_AUTHOR_TEXT_RE = re.compile(
    rb"<(?:[A-Za-z_][\w.-]{0,40}:)?(?:author|creator|managingeditor|webmaster|publisher)"
    rb"(?:\s[^<>]*)?>(?:<!\[CDATA\[)?([^<\]]*)",
    re.IGNORECASE,
)
# A run of what feedparser's author e-mail regex scans: characters and entity references
# (which the XML parser decodes into characters), started only where a run starts.
_RUN_TOKEN = rb"(?:[A-Za-z0-9_.+\-]|&#?[0-9A-Za-z]{1,8};)"
_RUN_RE = re.compile(rb"(?<![A-Za-z0-9_.+\-])" + _RUN_TOKEN + rb"{%d,}" % (MAX_EMAIL_RUN + 1))
_RUN_HEAD_RE = re.compile(_RUN_TOKEN + rb"{%d}" % MAX_EMAIL_RUN)
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# `arXiv:2411.17700v1 Announce Type: new \nAbstract: ...`
ARXIV_DESCRIPTION_RE = re.compile(r"^\s*arXiv:(?P<id>\S+)\s+Announce Type:\s*(?P<type>[\w-]+)")


def clean_body(body: bytes) -> bytes:
    """The body with what would make feedparser lose the whole document neutralised (see
    the module's docstring). A UTF-16 or UTF-32 body is left as it is."""
    head = body[:4]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head:
        return body
    cleaned = body.translate(None, _CONTROL_BYTES)
    if b"&#" in cleaned:
        cleaned = _CHAR_REF_RE.sub(_char_ref, cleaned)
    if not cleaned.isascii():
        cleaned = _utf_8_declared_so(cleaned)
    if not cleaned.isascii() and _in_utf_8(cleaned):
        cleaned = _stray_bytes_replaced(cleaned)
        for raw in _NONCHARACTERS:
            cleaned = cleaned.replace(raw, _REPLACEMENT)
    return _AUTHOR_TEXT_RE.sub(_cut_runs, cleaned)


def _stray_bytes_replaced(body: bytes) -> bytes:
    """A UTF-8 body with its few bytes that are no UTF-8 replaced (U+FFFD): for one of them,
    feedparser would read the whole body as windows-1252, garbling every name outside ASCII.
    A body with more such bytes than UTF-8 characters outside ASCII is no UTF-8 at all (an
    old server's latin-1, declared or not): it is left to feedparser, which reads it right."""
    try:
        body.decode("utf-8")
        return body
    except UnicodeDecodeError:
        pass
    text = body.decode("utf-8", "replace")
    stray = text.count("\ufffd") - body.count(_REPLACEMENT)
    wide = len(text) - len(text.encode("ascii", "ignore")) - stray
    return text.encode("utf-8") if wide > stray else body


def _utf_8_declared_so(body: bytes) -> bytes:
    """A body declared latin-1 but valid UTF-8 with its declaration naming UTF-8 (latin-1
    text is almost never valid UTF-8: é followed by a letter or a space is not). Read as
    latin-1, nothing fails, so feedparser never falls back to UTF-8: it would garble every
    letter outside ASCII."""
    skip = len(_UTF_8_BOM) if body.startswith(_UTF_8_BOM) else 0
    declared = _DECLARED_ENCODING_RE.match(body[: skip + 512], skip)
    if declared is None or _codec(declared.group(1)) not in _LATIN_CODECS:
        return body
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return body  # latin-1 indeed
    return body[: declared.start(1)] + b"UTF-8" + body[declared.end(1) :]


def _codec(name: bytes) -> str:
    """Python's name for the encoding `name` names ("" for none it knows)."""
    try:
        return codecs.lookup(name.decode("ascii")).name
    except (LookupError, UnicodeDecodeError):
        return ""


def _in_utf_8(body: bytes) -> bool:
    """Whether feedparser reads `body` as UTF-8: its XML declaration names no encoding, or
    UTF-8 (in another, the bytes of U+FFFE, or bytes that are no UTF-8, may be other
    characters)."""
    declared = _DECLARED_ENCODING_RE.match(body[:512].removeprefix(b"\xef\xbb\xbf"))
    return declared is None or declared.group(1).lower().replace(b"_", b"-") in (
        b"utf-8",
        b"utf8",
    )


def _char_ref(match: re.Match[bytes]) -> bytes:
    hex_digits, digits = match.group(1), match.group(2)
    text = (hex_digits or digits).lstrip(b"0") or b"0"
    if len(text) > 8:
        return _REPLACEMENT_REF
    value = int(text, 16 if hex_digits else 10)
    valid = (
        value in (0x9, 0xA, 0xD)
        or 0x20 <= value <= 0xD7FF
        or 0xE000 <= value <= 0xFFFD
        or 0x10000 <= value <= 0x10FFFF
    )
    return match.group(0) if valid else _REPLACEMENT_REF


def _cut_runs(match: re.Match[bytes]) -> bytes:
    whole, text = match.group(0), match.group(1)
    if len(text) <= MAX_EMAIL_RUN:
        return whole
    cut = _RUN_RE.sub(lambda run: _RUN_HEAD_RE.match(run.group(0)).group(0), text)  # type: ignore[union-attr]
    return whole[: match.start(1) - match.start(0)] + cut


# arXiv text is ASCII with TeX: feedparser's HTML sanitizer reads `$1<p<2$` as a tag and
# rewrites it to `$1<p><2$`, and URI resolution would touch the text too. Off, the fields
# come out as the XML text with entities decoded once (`&amp;` -> `&`, `&lt;` -> `<`).
FEEDPARSER_OPTIONS: dict[str, Any] = {"sanitize_html": False, "resolve_relative_uris": False}


def read_feed(body: bytes, *, where: str, source: str = "", url: str = "") -> Any:
    """feedparser's reading of `clean_body(body)` (a stream, never the bytes themselves:
    feedparser treats a bytes/str argument that names an existing file or a URL as
    something to open). Whatever feedparser raises is a FeedFormatError."""
    import feedparser  # here: the store checks papers with this module, and never reads feeds

    cleaned = clean_body(body)
    try:
        problem = _not_well_formed(cleaned)
        if problem is not None:
            # feedparser would now read it again with its loose parser, superlinear in how
            # deep unclosed tags nest (1.2 s for 160 KB of `<a`), for a result every parser
            # here refuses: ill-formed XML is a truncated download or not a feed.
            return feedparser.FeedParserDict(
                bozo=1,
                bozo_exception=problem,
                entries=[],
                feed=feedparser.FeedParserDict(),
                headers={},
                version="",
            )
        return feedparser.parse(io.BytesIO(cleaned), **FEEDPARSER_OPTIONS)
    except Exception as exc:  # feedparser's own failures, whatever their type
        log.warning("%s: feedparser failed", where, exc_info=True)
        raise FeedFormatError(
            f"{where}: the feed could not be read ({left_out(exc)})",
            source=source,
            url=url,
            hint="the next poll will download it again; if this persists, the feed is broken",
        ) from None


class _FatalOnly:
    """Like feedparser's strict parser: only a fatal error stops the reading (typeshed says
    `error` must raise; feedparser's does not, so neither does this one)."""

    def error(self, exception: BaseException) -> None:
        pass

    def warning(self, exception: BaseException) -> None:
        pass

    def fatalError(self, exception: BaseException) -> None:  # SAX names it so
        raise exception


def _not_well_formed(body: bytes) -> xml.sax.SAXException | None:
    """Why feedparser's strict parser would refuse `body` (None: it would not), read as it
    reads it: converted to UTF-8, the DOCTYPE replaced, namespaces on, no external entity."""
    from feedparser.encodings import convert_to_utf8
    from feedparser.sanitizer import replace_doctype

    result: dict[str, Any] = {"headers": {}}
    data = convert_to_utf8({}, body, result)
    if not result.get("encoding"):
        return None  # feedparser goes straight to its loose parser: let it
    _, data, _ = replace_doctype(data)
    parser = xml.sax.make_parser()
    parser.setFeature(xml.sax.handler.feature_namespaces, 1)
    with contextlib.suppress(xml.sax.SAXNotSupportedException):
        parser.setFeature(xml.sax.handler.feature_external_ges, 0)
    parser.setContentHandler(xml.sax.handler.ContentHandler())
    parser.setErrorHandler(cast(Any, _FatalOnly()))
    source = xml.sax.xmlreader.InputSource()
    source.setByteStream(io.BytesIO(data))
    try:
        parser.parse(source)
    except xml.sax.SAXException as exc:
        return exc
    return None


def clean_text(text: str) -> str:
    """`text` without NUL and with lone surrogates replaced: storable in any database."""
    if text.isascii():
        return text.replace("\x00", "") if "\x00" in text else text
    return _SURROGATE_RE.sub("\ufffd", text.replace("\x00", ""))


def web_url(value: object) -> str | None:
    """`value` if it may be a paper's link (`bot.core.checks.is_web_url`), else None."""
    if not isinstance(value, str):
        return None
    url = value.strip()
    return url if is_web_url(url) else None


def checked(paper: Paper, *, where: str = "") -> Paper:
    """`paper` ready to store (see the module's docstring); ValueError if it cannot be."""
    if not 1 <= paper.version <= MAX_VERSION:
        shown = str(paper.version) if paper.version < 10**12 else f"{str(paper.version)[:12]}…"
        raise ValueError(f"{paper.id[:60]}: version {shown} is out of range (1..{MAX_VERSION})")
    key = clean_text(paper.id).strip()
    if not key or len(key) > MAX_ID_LENGTH:
        raise ValueError(f"the id {key[:60]!r}… is too long to store")
    announce_type = clean_text(paper.announce_type)
    if len(announce_type) > MAX_ANNOUNCE_TYPE:
        raise ValueError(f"{key}: announce type {announce_type[:20]!r}… is not one arXiv uses")
    links: dict[str, str | None] = {}
    for name in ("link", "github"):
        value = getattr(paper, name)
        kept = web_url(value)
        if value is not None and kept is None:
            log.warning(
                "%s: %s: dropped the %s %r: not an http(s) URL",
                where or paper.source or "source",
                key,
                name,
                str(value)[:80],
            )
        links[name] = kept
    return replace(
        paper,
        id=key,
        title=clean_text(paper.title),
        abstract=clean_text(paper.abstract),
        authors=_texts(paper.authors),
        categories=_texts(paper.categories),
        announce_type=announce_type,
        announced=_plausible(paper.announced),
        first_announced=_plausible(paper.first_announced),
        hf_day=_plausible(paper.hf_day),
        dois=tuple(doi for doi in _texts(paper.dois) if len(doi) <= MAX_ID_LENGTH - 4),
        journal_ref=_optional(paper.journal_ref),
        license=_optional(paper.license),
        source=clean_text(paper.source),
        first_type=_optional(paper.first_type),
        sources=_texts(paper.sources),
        upvotes=_in_range(paper.upvotes),
        hf_rank=_in_range(paper.hf_rank),
        comments=_in_range(paper.comments),
        keywords=_texts(paper.keywords),
        ai_summary=_optional(paper.ai_summary),
        github_stars=_in_range(paper.github_stars),
        organization=_optional(paper.organization),
        link=links["link"],
        github=links["github"],
    )


def plausible_year(year: int) -> bool:
    return MIN_YEAR <= year <= MAX_YEAR


def left_out(exc: BaseException) -> str:
    """One item's unexpected failure, for `ParsedFeed.problems` (one line, bounded)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, ValueError) and text:  # our own checks say what is wrong
        return text[:200]
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def collapse(text: str) -> str:
    """`text` with every run of whitespace one space, and none at either end."""
    return " ".join(text.split())


def split_authors(text: str) -> tuple[str, ...]:
    """Split arXiv's one-string author list on commas outside parentheses (affiliations)."""
    parts: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    if depth:  # an unclosed parenthesis would swallow everyone after it
        parts = text.split(",")
    names = [collapse(part) for part in parts]
    names = [name for name in names if name]
    if names:
        # "A, B and C" / "A, B, and C": the last two joined by " and " outside parentheses.
        last = names.pop()
        if last.startswith("and ") and names:
            last = last[4:]
        names.extend(_split_and(last))
    return tuple(name for name in names if name)


def _split_and(name: str) -> list[str]:
    depth = 0
    for index, char in enumerate(name):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth = max(0, depth - 1)
        elif depth == 0 and name.startswith(" and ", index):
            return [name[:index].strip(), name[index + 5 :].strip()]
    return [name]


def arxiv_abstract(description: str) -> str:
    """The abstract in an arXiv listing item's description: after `Abstract:`, else after
    the `arXiv:<id> Announce Type: <type>` opening, else the whole description."""
    marker = description.find("Abstract:")
    if marker >= 0:
        return collapse(description[marker + len("Abstract:") :])
    described = ARXIV_DESCRIPTION_RE.match(description)
    return collapse(description[described.end() :] if described else description)


def _texts(values: tuple[str, ...]) -> tuple[str, ...]:
    cleaned = (clean_text(value) for value in values)
    return tuple(value for value in cleaned if value)


def _optional(value: str | None) -> str | None:
    return clean_text(value) or None if value is not None else None


def _in_range(value: int | None) -> int | None:
    return value if value is not None and 0 <= value <= MAX_COUNT else None


def _plausible(day: date | None) -> date | None:
    return day if day is not None and plausible_year(day.year) else None
