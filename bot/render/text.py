"""Small pure text helpers the renderers use as Jinja filters.

This module owns the string shaping shared by every renderer: highlighting matched spans,
shortening author lists, wrapping and tidying plain text. It must stay pure: no I/O, no
HTML escaping (Jinja's autoescape does that), and it never marks text as safe markup.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence

Segment = tuple[str, bool]

_WHITESPACE = re.compile(r"\s+")
_LEADING_WS = re.compile(r"^\s*")
_TRAILING_WS = re.compile(r"\s*$")


def tidy(text: str) -> str:
    """Collapse every run of whitespace (line breaks included) to one space and strip."""
    return _WHITESPACE.sub(" ", text).strip()


def merge_spans(spans: Iterable[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    """Clamp spans to `[0, length]`, drop empty ones, merge overlapping and adjacent ones."""
    clamped = sorted(
        (max(0, start), min(length, end))
        for start, end in spans
        if min(length, end) > max(0, start)
    )
    merged: list[tuple[int, int]] = []
    for start, end in clamped:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def highlight_segments(text: str, spans: Iterable[tuple[int, int]]) -> list[Segment]:
    """Split `text` into `(segment, highlighted)` parts; spans are character offsets."""
    segments: list[Segment] = []
    position = 0
    for start, end in merge_spans(spans, len(text)):
        if start > position:
            segments.append((text[position:start], False))
        segments.append((text[start:end], True))
        position = end
    if position < len(text):
        segments.append((text[position:], False))
    return segments


def tidy_segments(segments: Iterable[Segment]) -> list[Segment]:
    """Collapse whitespace across segments, keeping spaces outside highlighted parts."""
    pieces: list[Segment] = []
    for text, marked in segments:
        if not marked:
            pieces.append((text, False))
            continue
        lead = _LEADING_WS.match(text)
        core_start = lead.end() if lead else 0
        trail = _TRAILING_WS.search(text, core_start)
        core_end = trail.start() if trail else len(text)
        pieces.append((text[:core_start], False))
        pieces.append((text[core_start:core_end], True))
        pieces.append((text[core_end:], False))
    merged: list[Segment] = []
    for text, marked in pieces:
        if not text:
            continue
        if merged and merged[-1][1] == marked:
            merged[-1] = (merged[-1][0] + text, marked)
        else:
            merged.append((text, marked))
    tidied = [(_WHITESPACE.sub(" ", text), marked) for text, marked in merged]
    if tidied:
        tidied[0] = (tidied[0][0].lstrip(), tidied[0][1])
        tidied[-1] = (tidied[-1][0].rstrip(), tidied[-1][1])
    return [(text, marked) for text, marked in tidied if text]


def highlight(text: str, spans: Iterable[tuple[int, int]]) -> list[Segment]:
    """Highlight spans in `text`, then tidy its whitespace: what templates loop over."""
    return tidy_segments(highlight_segments(text, spans))


def star_marks(segments: Iterable[Segment], marker: str = "*") -> str:
    """Join segments into plain text, wrapping highlighted parts in `marker` (`*word*`)."""
    return "".join(f"{marker}{text}{marker}" if marked else text for text, marked in segments)


def tidy_author(author: str) -> str:
    """One author name as printed: whitespace collapsed (affiliations kept as given)."""
    return tidy(author)


def shorten_authors(authors: Sequence[str], limit: int = 10, *, keep: int = 3) -> str:
    """`A, B, C` in full up to `limit` names; beyond, `A, B, C et al. (40 authors)`."""
    names = [name for name in (tidy_author(a) for a in authors) if name]
    if len(names) <= limit:
        return ", ".join(names)
    shown = names[: max(1, min(keep, limit))]
    return f"{', '.join(shown)} et al. ({len(names)} authors)"


def wrap(text: str, width: int = 72, indent: str = "", first_indent: str | None = None) -> str:
    """Fill plain text to `width` columns; blank lines separate paragraphs; URLs never break."""
    first = indent if first_indent is None else first_indent
    paragraphs = [tidy(p) for p in re.split(r"\n\s*\n", text)]
    wrapper = textwrap.TextWrapper(
        width=width,
        initial_indent=first,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    filled = []
    for number, paragraph in enumerate(p for p in paragraphs if p):
        wrapper.initial_indent = first if number == 0 else indent
        filled.append(wrapper.fill(paragraph))
    return "\n\n".join(filled)


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """`1 paper`, `3 papers`."""
    word = singular if count == 1 else (plural_form or singular + "s")
    return f"{count} {word}"


FILTERS = {
    "highlight": highlight,
    "highlight_segments": highlight_segments,
    "star_marks": star_marks,
    "shorten_authors": shorten_authors,
    "wrap": wrap,
    "tidy": tidy,
    "plural": plural,
}
