"""Small pure text helpers the renderers use as Jinja filters.

This module owns the string shaping shared by every renderer: highlighting matched spans,
shortening author lists and abstracts, wrapping and tidying plain text. A paper's title,
abstract and author names are shown with their TeX as letters (`bot.render.tex`): here,
where they are highlighted (`highlight`) and where a name is shown (`tidy_author`). It must
stay pure: no I/O, no HTML escaping (Jinja's autoescape does that), and it never marks text
as safe markup. Every helper that changes text works on highlighted segments, so a
highlight always covers exactly the words it covered before.
"""

from __future__ import annotations

import functools
import re
import textwrap
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from bot.core.plurals import plural
from bot.render.tex import Segment, formulas, letters, letters_segments, tex_math

__all__ = ["Segment", "letters", "plural", "tex_math"]

_WHITESPACE = re.compile(r"\s+")
_LEADING_WS = re.compile(r"^\s*")


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
    """Split `text` into `(segment, highlighted)` parts; spans are character offsets. The
    text as it is: `highlight` shows its TeX as letters."""
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
        # rstrip, not `\s*$`: that search is quadratic on a long run of spaces.
        core_end = max(core_start, len(text.rstrip()))
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
    """A paper's text as shown: its TeX as letters, the spans (offsets into the text as
    written, the matcher's) highlighted, its whitespace tidied. What templates loop over."""
    return tidy_segments(letters_segments(text, spans))


def star_marks(segments: Iterable[Segment], marker: str = "*") -> str:
    """Join segments into plain text, wrapping highlighted parts in `marker` (`*word*`)."""
    return "".join(f"{marker}{text}{marker}" if marked else text for text, marked in segments)


def mark_hits(segments: Iterable[Segment]) -> Markup:
    """Join segments into HTML, each highlighted part in `<mark>`, all text escaped."""
    return Markup("").join(
        Markup("<mark>%s</mark>") % text if hit else escape(text) for text, hit in segments
    )


# Remembered: a day's digests print the same authors for many subscribers.
@functools.lru_cache(maxsize=16384)
def tidy_author(author: str) -> str:
    """One author name as printed: TeX as letters (`R\\'emy` -> Rémy), whitespace
    collapsed (affiliations kept as given)."""
    return tidy(letters(author))


def shorten_authors(authors: Sequence[str], limit: int = 10, *, keep: int = 3) -> str:
    """`A, B, C` in full up to `limit` names; beyond, `A, B, C et al. (40 authors)`."""
    names = [name for name in (tidy_author(a) for a in authors) if name]
    if len(names) <= limit:
        return ", ".join(names)
    shown = names[: max(1, min(keep, limit))]
    return f"{', '.join(shown)} et al. ({len(names)} authors)"


# Remembered: a day's digests wrap the same titles and abstracts for many subscribers.
@functools.lru_cache(maxsize=16384)
def wrap(text: str, width: int = 72, indent: str = "", first_indent: str | None = None) -> str:
    """Fill plain text to `width` columns; blank lines separate paragraphs; URLs never break.
    Chinese, Japanese and Korean text (no spaces between words, each character two columns
    wide) may break between any two of its characters (`_fill_wide`)."""
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
        if not paragraph.isascii() and any(_wide(char) for char in paragraph):
            filled.append(_fill_wide(paragraph, width, wrapper.initial_indent, indent))
        else:
            filled.append(wrapper.fill(paragraph))
    return "\n\n".join(filled)


def numbered(text: str, number: int, width: int = 72) -> str:
    """`text` as the `number`th entry of a list: "  12. " then the text, wrapped to `width`
    under itself."""
    return wrap(text, width, " " * 6, f"{number}.".rjust(5) + " ")


# What may not start a line (closing marks) and what may not end one (opening marks), in
# CJK text (a light form of Japanese kinsoku shori).
_NO_LINE_START = frozenset("、。，．,.:;：；!?！？)）]］}｝〕〉》」』】〙〗’”%％…‥ー・")
_NO_LINE_END = frozenset("(（[［{｛〔〈《「『【〘〖‘“")


def _wide(char: str) -> bool:
    """Whether a character takes two columns in a terminal (CJK ideographs, kana, hangul)."""
    return unicodedata.east_asian_width(char) in ("W", "F")


def _columns(text: str) -> int:
    return sum(2 if _wide(char) else 1 for char in text)


def _fill_wide(paragraph: str, width: int, first: str, indent: str) -> str:
    """Fill a paragraph holding wide characters: a line may break at a space, before or
    after a wide character, and never before a closing mark or after an opening one; a
    run of narrow characters (a word, a number, a URL) is never broken."""
    tokens: list[str] = []  # " " or an unbreakable run
    for char in paragraph:
        last = tokens[-1] if tokens else " "
        if char.isspace():
            if last != " ":
                tokens.append(" ")
        elif last != " " and (
            char in _NO_LINE_START
            or all(c in _NO_LINE_END for c in last)
            or not (_wide(char) or _wide(last[-1]))
        ):
            tokens[-1] = last + char
        else:
            tokens.append(char)
    lines: list[str] = []
    line, used, space = first, _columns(first), False
    start = used
    for token in tokens:
        if token == " ":
            space = True
            continue
        need = _columns(token) + (1 if space and used > start else 0)
        if used > start and used + need > width:
            lines.append(line)
            line, used, start, space = indent, _columns(indent), _columns(indent), False
            need = _columns(token)
        if space and used > start:
            line += " "
        line += token
        used += need
        space = False
    lines.append(line)
    return "\n".join(lines)


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters with an ellipsis: at a space when one is in
    the second half, else (text without spaces: Chinese, Japanese) after a punctuation mark
    in the last third, else anywhere between characters."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return "…"[:limit]
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    else:
        marks = [at for at, char in enumerate(cut) if char in _CLAUSE_ENDS]
        if marks and marks[-1] >= (2 * limit) // 3:
            cut = cut[: marks[-1]]
    return _TRAILING.sub("", cut) + "…"


_CLAUSE_ENDS = frozenset("。，、；：！？")
_TRAILING = re.compile(r"[\s,;:.(\[{\-\u2013\u2014。，、；：（「『]+$")

# Characters a model's text never keeps: C0 and C1 controls (NUL, ESC ...) and the
# bidirectional embeddings, overrides and isolates, which would reorder what follows them
# (a plain-text part has no element to contain them). Whitespace among them is tidied.
_UNSHOWN = {
    c: " " if chr(c) in "\t\n\r\f\v" else None
    for c in (*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))
}


def plain_text(text: str) -> str:
    """Untrusted text (a model's) as plain text to show: control and bidi-override
    characters dropped, whitespace tidied. Still to be escaped by each renderer."""
    return tidy(text.translate(_UNSHOWN))


def first_authors(authors: Sequence[str], keep: int = 2) -> str:
    """`A, B` for up to three names, beyond `A, B et al.`: the short byline of a summary."""
    names = [name for name in (tidy_author(a) for a in authors) if name]
    if len(names) <= keep + 1:
        return ", ".join(names)
    return f"{', '.join(names[:keep])} et al."


# -- short abstracts ----------------------------------------------------------------------

SHORT_ABSTRACT = 320  # characters shown of a short abstract, cut at a word boundary
SHORT_SLACK = 80  # an abstract at most this much longer is shown whole
SNIPPET_CONTEXT = 60  # characters of context either side of a hit beyond the cut


@dataclass(frozen=True)
class Excerpt:
    """A short abstract: its first lines, and a snippet around a hit the cut hides."""

    head: tuple[Segment, ...]
    clipped: bool = False  # the head is not the whole abstract
    snippet: tuple[Segment, ...] = ()  # "… context …" around the first unseen hit
    snippet_more: bool = False  # the abstract goes on after the snippet


def slice_segments(segments: Sequence[Segment], start: int, end: int) -> list[Segment]:
    """The segments' text between two offsets of their joined text, highlights kept."""
    out: list[Segment] = []
    position = 0
    for text, marked in segments:
        low, high = max(start, position), min(end, position + len(text))
        if high > low:
            out.append((text[low - position : high - position], marked))
        position += len(text)
    return out


def _protected(segments: Sequence[Segment], text: str) -> list[tuple[int, int]]:
    """Where a cut must not fall: inside a highlight or inside TeX math left as written."""
    spans: list[tuple[int, int]] = []
    position = 0
    for part, marked in segments:
        if marked:
            spans.append((position, position + len(part)))
        position += len(part)
    spans += formulas(text)
    return spans


def _boundaries(text: str, protected: Sequence[tuple[int, int]]) -> list[int]:
    """Offsets of the spaces between words where text may be cut: not inside a protected
    span. One sweep over the spans in order: testing each space against every span took
    quadratic time on a long abstract with many hits or formulas."""
    spans: list[tuple[int, int]] = []
    for start, end in sorted(protected):
        if spans and start < spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    cuts: list[int] = []
    index = 0
    for m in re.finditer(r"\s", text):
        at = m.start()
        while index < len(spans) and spans[index][1] <= at:
            index += 1
        if index < len(spans) and spans[index][0] < at:
            continue
        cuts.append(at)
    return cuts


def _hit_key(text: str) -> str:
    """A highlighted word as compared with others: `Large Language Models` is `large
    language model`."""
    return re.sub(r"\W+", " ", text.casefold()).strip().removesuffix("s")


def excerpt(
    segments: Sequence[Segment],
    limit: int = SHORT_ABSTRACT,
    *,
    seen: Iterable[str] = (),
    slack: int = SHORT_SLACK,
    context: int = SNIPPET_CONTEXT,
) -> Excerpt:
    """Shorten highlighted text to about `limit` characters, cut between words (never
    inside a highlight or a formula). When a highlighted word beyond the cut shows
    nowhere above it (nor in `seen`, the title's highlights), add a snippet around its
    first occurrence, so the reader sees why the paper matched."""
    text = "".join(part for part, _ in segments)
    if len(text) <= limit + slack:
        return Excerpt(head=tuple(segments))
    protected = _protected(segments, text)
    cuts = _boundaries(text, protected)
    before = [c for c in cuts if limit // 2 <= c <= limit]
    after = [c for c in cuts if c > limit]
    cut = before[-1] if before else after[0] if after else len(text)
    if len(text) - cut < slack:
        return Excerpt(head=tuple(segments))
    head = slice_segments(segments, 0, cut)
    if head and not head[-1][1]:
        head[-1] = (head[-1][0].rstrip(" ,;:"), False)
    shown = {_hit_key(part) for part, marked in head if marked}
    shown |= {_hit_key(word) for word in seen}
    position = 0
    hit: tuple[int, int] | None = None
    for part, marked in segments:
        if marked and position >= cut and _hit_key(part) not in shown:
            hit = (position, position + len(part))
            break
        position += len(part)
    if hit is None:
        return Excerpt(head=tuple(head), clipped=True)
    starts = [c + 1 for c in cuts if cut <= c <= hit[0] - context]
    ends = [c for c in cuts if c >= hit[1] + context]
    start = starts[-1] if starts else cut + 1
    end = ends[0] if ends else len(text)
    snippet = slice_segments(segments, start, end)
    return Excerpt(
        head=tuple(head), clipped=True, snippet=tuple(snippet), snippet_more=end < len(text)
    )


FILTERS = {
    "highlight": highlight,
    "highlight_segments": highlight_segments,
    "star_marks": star_marks,
    "mark_hits": mark_hits,
    "shorten_authors": shorten_authors,
    "first_authors": first_authors,
    "wrap": wrap,
    "numbered": numbered,
    "tidy": tidy,
    "plural": plural,
    "letters": letters,
}
