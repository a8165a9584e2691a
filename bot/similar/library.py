"""A reference library exported from Zotero, Mendeley or a BibTeX manager, read into the
papers it names: each entry's arXiv id, DOI, title and abstract.

Owns reading the three export formats, told apart by their content (not their name):
BibTeX (`bibtexparser` 2), RIS (`rispy`, one record at a time) and CSL-JSON. An entry
names its paper by arXiv id (an `eprint` of arXiv's, `arxivId`, an arXiv link, `arXiv:`
in a note, extra or journal field, arXiv's DOI 10.48550/arXiv.…), by DOI (lower case, a
link's `https://doi.org/` taken off), or by its title alone. One entry that cannot be read
is skipped and counted with why (its number and key); the file is never lost for it. A
file over MAX_LIBRARY_BYTES is refused whole; entries past MAX_ENTRIES are left out and
counted. An empty file (blank, or BibTeX comments only) is an empty library, no error.

Pure: the bytes come in, the entries go out; reading the file is the caller's. Each
format's library is imported when a file of that format is read: a process that reads
none (a sender) never loads them.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from bot.core.plurals import plural
from bot.similar.refs import (
    _ID,
    DOI_PREFIX,
    arxiv_key,
    arxiv_of_doi,
    doi_key,
    plain_title,
    title_key,
    valid_arxiv_id,
)
from bot.similar.text import joined_text

if TYPE_CHECKING:
    from bibtexparser import model as bib

# bibtexparser logs each block it cannot read; here each is a skipped entry, counted and
# named with the others (its warnings would repeat them, in its words, on every read).
logging.getLogger("bibtexparser").setLevel(logging.ERROR)

LibraryFormat = Literal["bibtex", "ris", "csl-json"]
FORMAT_NAMES: dict[str, str] = {"bibtex": "BibTeX", "ris": "RIS", "csl-json": "CSL-JSON"}

MAX_LIBRARY_BYTES = 20 * 1024 * 1024  # a larger export: refused, export a collection
MAX_ENTRIES = 50_000  # entries past this many are left out (and counted)
MAX_TITLE = 1000  # characters of a title kept
MAX_ABSTRACT = 10_000  # characters of an abstract kept (arXiv's are under 2,000)
MAX_FIELD = 100_000  # characters of any one field read
MAX_SKIPS_SHOWN = 10  # skipped entries named one by one in a summary

# An arXiv id mentioned in a field: `arXiv:2411.18179`, `arXiv 2411.18179`, an abs/pdf
# link, arXiv's DOI (10.48550/arXiv.2411.18179).
_ARXIV_MENTION_RE = re.compile(
    rf"(?i:arxiv)(?:(?i:\.org/(?:abs|pdf|html)/)|[ \t]{{0,3}}:[ \t]{{0,3}}|[ \t]{{1,3}}|\.)"
    rf"(?P<id>{_ID})(?!\d)",
    re.ASCII,
)
_DOI_MENTION_RE = re.compile(r"(?<![\w.])10\.\d{4,9}/[^\s\"<>{}]+", re.ASCII)
_RIS_START_RE = re.compile(r"^TY  -", re.MULTILINE)
_BIBTEX_START_RE = re.compile(r"^[ \t]*@[ \t]*[A-Za-z]{1,40}[ \t]*[{(]", re.MULTILINE)
_BIBTEX_KEY_RE = re.compile(r"@[ \t]*[A-Za-z]{1,40}[ \t]*[{(][ \t\r\n]*([^,\s{}()]{1,200})")

# Field names (lower case) by what they hold, across the three formats.
_TITLE_FIELDS = ("title", "primary_title", "title_short", "short_title")
_ABSTRACT_FIELDS = ("abstract", "notes_abstract")
_DOI_FIELDS = ("doi",)
_ARXIV_FIELDS = ("arxivid", "arxiv_id", "arxiv")  # Mendeley's `arxivId`
_EPRINT_FIELDS = ("eprint",)
_URL_FIELDS = ("url", "urls", "link", "file_attachments1", "file_attachments2", "link_to_pdf")
# Where `arXiv:…` is written: notes, Zotero's extra, a journal or series named "arXiv".
_MENTION_FIELDS = (
    "note",
    "notes",
    "annote",
    "annotation",
    "extra",
    "journal",
    "journaltitle",
    "journal_name",
    "alternate_title3",
    "secondary_title",
    "container-title",
    "number",
    "howpublished",
    "publisher",
    "archive_location",
    "type_of_work",
    "eprint",
    "pages",
    "accession_number",
    *_URL_FIELDS,
)


class LibraryError(ValueError):
    """A library file that cannot be read at all: too large, or in no format known. The
    message says what and what to do."""


@dataclass(frozen=True, slots=True)
class LibraryEntry:
    """One entry of a library: what names its paper, and its text."""

    number: int  # its place in the file, from 1
    key: str  # its key in the file (BibTeX's citation key, RIS's ID, CSL's id); may be ""
    arxiv: str | None  # a version-less arXiv id
    doi: str | None  # lower case, without "doi:"
    title: str  # plain letters, one line
    abstract: str

    @property
    def feedback_key(self) -> str:
        """The key its verdict is kept under: the arXiv id, else "doi:…", else "title:…"."""
        if self.arxiv:
            return self.arxiv
        if self.doi:
            return DOI_PREFIX + self.doi
        return title_key(self.title) or ""

    @property
    def text(self) -> str:
        """Title and abstract, as the ranking reads them ("" parts left out)."""
        return joined_text(self.title, self.abstract)


@dataclass(frozen=True, slots=True)
class SkippedEntry:
    number: int
    key: str
    why: str

    def line(self) -> str:
        named = f" ({self.key})" if self.key else ""
        return f"entry {self.number}{named}: {self.why}"


@dataclass(frozen=True, slots=True)
class Library:
    """What a library file gave: its entries, those skipped and why, those left out."""

    format: LibraryFormat
    entries: tuple[LibraryEntry, ...]
    skipped: tuple[SkippedEntry, ...] = ()
    left_out: int = 0  # entries past MAX_ENTRIES
    empty: bool = False  # the file holds nothing at all (an empty collection's export)

    def summary(self) -> str:
        """One line: how many entries, found how, and what was skipped or left out."""
        if self.empty:
            return "an empty file: 0 entries (nothing liked from it yet)"
        by_arxiv = sum(1 for e in self.entries if e.arxiv)
        by_doi = sum(1 for e in self.entries if not e.arxiv and e.doi)
        by_title = len(self.entries) - by_arxiv - by_doi
        line = (
            f"{FORMAT_NAMES[self.format]}, {plural(len(self.entries), 'entry', 'entries')} "
            f"({by_arxiv:,} by arXiv id, {by_doi:,} by DOI, {by_title:,} by title only)"
        )
        if self.skipped:
            line += f"; {plural(len(self.skipped), 'entry', 'entries')} skipped"
        if self.left_out:
            line += (
                f"; {plural(self.left_out, 'entry', 'entries')} past the first "
                f"{MAX_ENTRIES:,} left out"
            )
        return line

    def skipped_lines(self, limit: int = MAX_SKIPS_SHOWN) -> list[str]:
        """The skipped entries, one line each, at most `limit` and a count of the rest."""
        lines = [s.line() for s in self.skipped[:limit]]
        if len(self.skipped) > limit:
            lines.append(f"and {plural(len(self.skipped) - limit, 'more entry', 'more entries')}")
        return lines


def read_library(data: bytes, *, name: str = "") -> Library:
    """The entries of a library file's bytes (`name`, its file name, only for messages).
    Raises LibraryError for a file too large or in no known format; an entry that cannot
    be read is skipped, never the file."""
    where = f"{name}: " if name else ""
    if len(data) > MAX_LIBRARY_BYTES:
        raise LibraryError(
            f"{where}the file is larger than {MAX_LIBRARY_BYTES // (1024 * 1024)} MB: export "
            "one collection (the papers you want more like) rather than the whole library"
        )
    text = decode(data)
    if _is_empty(text):  # an empty library is no error: it likes nothing yet
        return Library(_format_by_name(name), (), empty=True)
    form = detect_format(text)
    if form is None:
        raise LibraryError(
            f"{where}not a BibTeX, RIS or CSL-JSON export: in Zotero use File > Export "
            "Library (BibTeX, RIS or CSL JSON); in Mendeley, File > Export (BibTeX or RIS)"
        )
    if form == "csl-json":
        records = _csl_records(text, where)
    elif form == "ris":
        records = _ris_records(text)
    else:
        records = _bibtex_records(text)
    return _library(form, records)


def _is_empty(text: str) -> bool:
    """Nothing but blank lines and BibTeX's `%` comments (an empty collection's export)."""
    return all(not line.strip() or line.lstrip().startswith("%") for line in text.splitlines())


def _format_by_name(name: str) -> LibraryFormat:
    """An empty file's format, as its name says (BibTeX when it says none)."""
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return "ris" if suffix == "ris" else "csl-json" if suffix == "json" else "bibtex"


def decode(data: bytes) -> str:
    """The file's text: UTF-8 (a byte-order mark dropped), UTF-16 with its mark, else
    Windows-1252 (older Mendeley exports); NUL characters dropped."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = data.decode("utf-16", errors="replace")
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            text = data.decode("cp1252", errors="replace")
    return text.replace("\x00", "")


def detect_format(text: str) -> LibraryFormat | None:
    """The format of a library's text by its content: JSON (CSL-JSON) starts with `[` or
    `{`; RIS has `TY  - ` records; BibTeX has `@type{` entries. None: none of them."""
    start = text.lstrip()[:1]
    if start in ("[", "{"):
        return "csl-json"
    if _RIS_START_RE.search(text):
        return "ris"
    if _BIBTEX_START_RE.search(text):
        return "bibtex"
    return None


# A record as read from any format: its key, and its fields (lower-case name -> values);
# or the reason it could not be read.
_Record = tuple[str, dict[str, list[str]] | str]


def _library(form: LibraryFormat, records: Iterable[_Record]) -> Library:
    entries: list[LibraryEntry] = []
    skipped: list[SkippedEntry] = []
    left_out = 0
    for number, (key, fields) in enumerate(records, start=1):
        if number > MAX_ENTRIES:
            left_out += 1
            continue
        shown = _shown_key(key)
        if isinstance(fields, str):
            skipped.append(SkippedEntry(number, shown, fields))
            continue
        entry = _entry(number, shown, fields)
        if entry is None:
            skipped.append(SkippedEntry(number, shown, "no arXiv id, DOI or title"))
        else:
            entries.append(entry)
    return Library(form, tuple(entries), tuple(skipped), left_out)


def _shown_key(key: str) -> str:
    key = "".join(c if c.isprintable() else "?" for c in key.strip()[:80])
    return key if len(key) <= 60 else key[:59] + "…"


def _entry(number: int, key: str, fields: Mapping[str, list[str]]) -> LibraryEntry | None:
    def first(names: Sequence[str]) -> str:
        for name in names:
            for value in fields.get(name, ()):
                if value.strip():
                    return value[:MAX_FIELD]
        return ""

    doi = _doi(fields)
    arxiv = _arxiv(fields) or (arxiv_of_doi(doi) if doi else None)
    title = _cut(plain_title(first(_TITLE_FIELDS)), MAX_TITLE)
    abstract = _cut(plain_title(first(_ABSTRACT_FIELDS)), MAX_ABSTRACT)
    if not (arxiv or doi or title_key(title)):
        return None
    return LibraryEntry(number, key, arxiv, doi, title, abstract)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _values(fields: Mapping[str, list[str]], names: Sequence[str]) -> Iterable[str]:
    for name in names:
        for value in fields.get(name, ()):
            yield value[:MAX_FIELD]


def _arxiv(fields: Mapping[str, list[str]]) -> str | None:
    """The arXiv id an entry names: Mendeley's arxivId, an eprint (of arXiv's: BibLaTeX's
    eprinttype or archivePrefix, or one that is an arXiv id), else one mentioned."""
    for value in _values(fields, _ARXIV_FIELDS + _EPRINT_FIELDS):
        if found := arxiv_key(value):
            return found
    # An old-style id split in two: eprint = {9711200}, primaryClass = {hep-th}.
    for number in _values(fields, _EPRINT_FIELDS):
        for archive in _values(fields, ("primaryclass",)):
            if found := arxiv_key(f"{archive.strip()}/{number.strip()}"):
                return found
    for value in _values(fields, _MENTION_FIELDS):
        for match in _ARXIV_MENTION_RE.finditer(value):
            if valid_arxiv_id(match.group("id")):
                return match.group("id")
    return None


def _doi(fields: Mapping[str, list[str]]) -> str | None:
    """An entry's DOI (lower case): its DOI field, else a doi.org link."""
    for value in _values(fields, _DOI_FIELDS):
        if found := doi_key(value.strip()):
            return found[len(DOI_PREFIX) :]
        if (match := _DOI_MENTION_RE.search(value)) and (found := doi_key(match.group())):
            return found[len(DOI_PREFIX) :]
    for value in _values(fields, _URL_FIELDS):
        lowered = value.lower()
        match = _DOI_MENTION_RE.search(value) if "doi.org/" in lowered else None
        if match and (found := doi_key(match.group())):
            return found[len(DOI_PREFIX) :]
    return None


# -- BibTeX ---------------------------------------------------------------------------------


def _bibtex_records(text: str) -> list[_Record]:
    """Each entry of a BibTeX file; `@string`s resolved, `@comment`s and `@preamble`s not
    entries. If the parser fails on the file as a whole, each entry is read on its own."""
    import bibtexparser

    try:
        return _bibtex_blocks(bibtexparser.parse_string(text).blocks)
    except Exception:
        records: list[_Record] = []
        for chunk in _bibtex_chunks(text):
            try:
                records.extend(_bibtex_blocks(bibtexparser.parse_string(chunk).blocks))
            except Exception as exc:
                key = _BIBTEX_KEY_RE.match(chunk.lstrip())
                records.append((key.group(1) if key else "", _unreadable(exc)))
        return records


def _bibtex_chunks(text: str) -> list[str]:
    starts = [m.start() for m in _BIBTEX_START_RE.finditer(text)]
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


def _bibtex_blocks(blocks: Iterable[bib.Block]) -> list[_Record]:
    from bibtexparser import model as bib

    records: list[_Record] = []
    for block in blocks:
        if isinstance(block, bib.DuplicateBlockKeyBlock):
            records.append((block.key, "its key is used by an earlier entry"))
        elif isinstance(block, bib.DuplicateFieldKeyBlock):
            key = _BIBTEX_KEY_RE.match((block.raw or "").lstrip())
            twice = ", ".join(sorted(block.duplicate_keys)[:3])
            records.append((key.group(1) if key else "", f"a field given twice ({twice})"))
        elif isinstance(block, bib.ParsingFailedBlock):
            raw = block.raw or ""
            if not _BIBTEX_START_RE.match(raw) or raw.lstrip()[1:8].lower().startswith(
                ("comment", "string", "preambl")
            ):
                continue  # not an entry
            key = _BIBTEX_KEY_RE.match(raw.lstrip())
            where = f"line {block.start_line + 1}: " if block.start_line is not None else ""
            records.append((key.group(1) if key else "", f"{where}not valid BibTeX"))
        elif isinstance(block, bib.Entry):
            values: dict[str, list[str]] = {}
            for field in block.fields:
                if isinstance(field.value, str):
                    values.setdefault(field.key.lower(), []).append(field.value)
            records.append((block.key, values))
    return records


# -- RIS ------------------------------------------------------------------------------------


def _ris_records(text: str) -> list[_Record]:
    """Each `TY  - ` record of a RIS file, read by rispy on its own (a record without its
    `ER  - ` ends where the next begins)."""
    import rispy

    starts = [m.start() for m in _RIS_START_RE.finditer(text)]
    records: list[_Record] = []
    for a, b in zip(starts, [*starts[1:], len(text)], strict=True):
        chunk = text[a:b]
        key = ""
        try:
            if not re.search(r"^ER  -", chunk, re.MULTILINE):
                chunk = chunk.rstrip("\r\n") + "\nER  - \n"
            found = rispy.loads(chunk)
            if len(found) != 1 or not isinstance(found[0], dict):
                records.append(("", "not a RIS record"))
                continue
            record = found[0]
            key = str(record.get("id") or "")
            records.append((key, _ris_fields(record)))
        except Exception as exc:
            records.append((key, _unreadable(exc)))
    return records


def _ris_fields(record: Mapping[str, Any]) -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    for name, value in record.items():
        if name == "unknown_tag" and isinstance(value, Mapping):
            for tag, values in value.items():
                fields[str(tag).lower()] = [str(v) for v in values]
            continue
        values = value if isinstance(value, list) else [value]
        fields[str(name).lower()] = [v for v in values if isinstance(v, str)]
    return fields


# -- CSL-JSON -------------------------------------------------------------------------------


def _csl_records(text: str, where: str) -> list[_Record]:
    """Each item of a CSL-JSON export: a list of items (Zotero, citeproc), an object with
    `items`, or one item (an object with an item's fields); any other JSON is refused."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise LibraryError(f"{where}not CSL-JSON: nested too deep") from None
    except ValueError as exc:
        raise LibraryError(f"{where}not valid JSON: {_short(str(exc))}") from None
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        data = data["items"]
    elif isinstance(data, dict) and _CSL_ITEM_KEYS & {str(k).lower() for k in data}:
        data = [data]
    if not isinstance(data, list):
        raise LibraryError(  # an object that is no item: some other JSON file
            f"{where}not a CSL-JSON export: a JSON object with none of an item's fields (id, "
            "type, title, DOI); a CSL-JSON export is a list of items"
        )
    records: list[_Record] = []
    for item in data:
        if not isinstance(item, dict):
            records.append(("", f"not an item but {_json_kind(item)}"))
            continue
        key = item.get("id")
        key = str(key) if isinstance(key, str | int) and not isinstance(key, bool) else ""
        fields: dict[str, list[str]] = {}
        for name, value in item.items():
            values = value if isinstance(value, list) else [value]
            strings = [v for v in values if isinstance(v, str)]
            if strings:
                fields[str(name).lower()] = strings
        records.append((key, fields))
    return records


# The fields that make a lone JSON object one CSL item (an export of a single paper).
_CSL_ITEM_KEYS = frozenset({"id", "type", "title", "doi", "url"})


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a boolean" if isinstance(value, bool) else "a number"


def _unreadable(exc: BaseException) -> str:
    return f"could not be read ({type(exc).__name__}: {_short(str(exc))})"


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
