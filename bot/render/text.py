"""Small pure text helpers the renderers use as Jinja filters.

This module owns the string shaping shared by every renderer: highlighting matched spans,
shortening author lists and abstracts, simple TeX math as Unicode, wrapping and tidying
plain text. It must stay pure: no I/O, no HTML escaping (Jinja's autoescape does that), and
it never marks text as safe markup. Every helper that changes text works on highlighted
segments, so a highlight always covers exactly the words it covered before.
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

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


# -- TeX math as Unicode ------------------------------------------------------------------
#
# arXiv titles and abstracts carry TeX math between dollars ($\alpha$-stable, $O(n^2)$).
# Simple math reads better as Unicode (α-stable, O(n²)); anything this converter does not
# fully understand stays as the TeX the authors wrote, dollars and all, so nothing is lost.
# pylatexenc supplies the symbol table; the structure (scripts, groups, fractions) is
# handled here, because its own text conversion drops braces (x^{n+1} -> x^n+1).

# $...$ (inline) or $$...$$ (display); a \$ is a dollar sign, not a delimiter.
_MATH_RE = re.compile(r"(?<!\\)(?P<open>\$\$?)(?P<tex>(?:[^$\\]|\\.)+?)(?<!\\)(?P=open)", re.DOTALL)
# Words of plain prose: math between two dollar signs that were not meant as delimiters.
_PROSE_RE = re.compile(r"(?<![\\A-Za-z])[a-z]{3,}")
_CONTROL_WORD_RE = re.compile(r"\\[A-Za-z]+\*?")
_MATH_TOKEN_RE = re.compile(r"\\[A-Za-z]+\*?|\\.|[{}^_]|\s+|.", re.DOTALL)
_SUPERSCRIPTS = dict(zip("0123456789+-−=()ni′'*†∘", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻⁼⁽⁾ⁿⁱ′′*†°", strict=True))
_SUBSCRIPTS = dict(
    zip("0123456789+-−=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ", strict=True)
)
# Macros that only set the size or spacing of what follows: dropped.
_SIZING = frozenset(
    {"left", "right", "middle", "limits", "nolimits", "displaystyle", "textstyle"}
    | {size + side for size in ("big", "Big", "bigg", "Bigg") for side in ("", "l", "r", "m")}
)
# Macros whose argument is shown as plain text (the font is lost, the letters are kept).
_PLAIN_FONTS = frozenset(
    {"text", "textnormal", "operatorname", "mbox", "hbox", "emph", "boldsymbol", "bm"}
    | {f"{kind}{font}" for kind in ("math", "text") for font in ("rm", "it", "bf", "sf", "tt")}
)
# Old-style font switches ({\rm d}): dropped, the letters kept.
_FONT_SWITCHES = frozenset(["rm", "it", "bf", "sf", "tt", "cal"])
# Math alphabets with their own Unicode letters (ℝ, 𝒪, 𝔤), for arguments of letters only.
_UNICODE_FONTS = frozenset(["mathbb", "mathcal", "mathfrak", "mathscr"])
_ACCENTS = {
    "bar": "\u0304",
    "overline": "\u0305",
    "tilde": "\u0303",
    "widetilde": "\u0303",
    "hat": "\u0302",
    "widehat": "\u0302",
    "vec": "\u20d7",
    "dot": "\u0307",
    "ddot": "\u0308",
    "underline": "\u0332",
}
# Escaped characters and spacing commands: \, \; \! \% \{ ...
_ESCAPES = {
    ",": " ",
    ";": " ",
    ":": " ",
    ">": " ",
    "!": "",
    " ": " ",
    "%": "%",
    "{": "{",
    "}": "}",
    "|": "‖",
    "_": "_",
    "&": "&",
    "#": "#",
    "$": "$",
}
# Symbols pylatexenc's table lacks (or shows otherwise), and the named operators.
_SYMBOL_FIXES = {
    "lbrace": "{",
    "rbrace": "}",
    "vert": "|",
    "Vert": "‖",
    "ne": "≠",
    "colon": ":",
    "imath": "ı",
    "jmath": "ȷ",
    "neg": "¬",
    "bot": "⊥",
    "models": "⊨",
    "iff": "⟺",
    "implies": "⟹",
    "Re": "ℜ",
    "Im": "ℑ",
    "bmod": "mod",
    **{name: name for name in ("dim", "ker", "deg", "det", "gcd", "lcm", "mod", "arg", "hom")},
    "Pr": "Pr",
}


class _TexError(ValueError):
    """Math this converter does not fully understand: left as TeX."""


@functools.cache
def _latex_symbols() -> tuple[Any, Any]:
    from pylatexenc import latex2text, latexwalker

    return latex2text.get_default_latex_context_db(), latexwalker.get_default_latex_context_db()


@functools.cache
def _symbol(name: str) -> str:
    """A macro that takes no argument, as Unicode (`alpha` -> α); _TexError if unknown."""
    if name in _SYMBOL_FIXES:
        return _SYMBOL_FIXES[name]
    text_db, walker_db = _latex_symbols()
    spec = text_db.get_macro_spec(name)
    repl = getattr(spec, "simplify_repl", None)
    walker_spec = walker_db.get_macro_spec(name)
    argspec = getattr(getattr(walker_spec, "args_parser", None), "argspec", None)
    if not isinstance(repl, str) or "%" in repl or argspec:
        raise _TexError(name)
    return repl


@functools.cache
def _unicode_font(name: str, letters: str) -> str:
    from pylatexenc.latex2text import LatexNodes2Text

    converted: str = LatexNodes2Text(math_mode="text").latex_to_text(f"\\{name}{{{letters}}}")
    if len(converted) != len(letters):
        raise _TexError(name)
    return converted


class _MathReader:
    """A small recursive reader over the tokens of one $...$ region."""

    def __init__(self, tex: str) -> None:
        self.tokens = _MATH_TOKEN_RE.findall(tex)
        self.position = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise _TexError("unexpected end")
        self.position += 1
        return token

    def read_all(self) -> str:
        out = self.sequence(until=None)
        if self.peek() is not None:
            raise _TexError("unbalanced }")
        return out

    def sequence(self, until: str | None) -> str:
        parts: list[str] = []
        while (token := self.peek()) is not None and token != until:
            if token == "}":
                raise _TexError("unbalanced }")
            if token in ("^", "_"):
                self.take()
                if parts:
                    parts[-1] = parts[-1].rstrip()
                parts.append(_script(self.argument(), superscript=token == "^"))
            else:
                parts.append(self.atom())
        return "".join(parts)

    def argument(self) -> str:
        """What a script, accent or command applies to: a group, or one token."""
        while (token := self.peek()) is not None and token.isspace():
            self.take()
        return self.atom()

    def argument_token(self) -> str | None:
        while (token := self.peek()) is not None and token.isspace():
            self.take()
        return token

    def atom(self) -> str:
        index = self.position
        token = self.take()
        if token == "{":
            inside = self.sequence(until="}")
            self.take()
            return inside
        if token.isspace():
            # The space that only ends a control word (`b\to s`) is not shown; a space
            # the author put on both sides (`p \geq 1`) is.
            ends_word = index >= 1 and _CONTROL_WORD_RE.fullmatch(self.tokens[index - 1])
            spaced = index >= 2 and self.tokens[index - 2].isspace()
            return "" if ends_word and not spaced else " "
        if token in ("&", "#", "$", "%"):
            raise _TexError(token)
        if token == "~":
            return "\u00a0"
        if not token.startswith("\\"):
            return token
        if len(token) == 2 and not token[1].isalpha():
            if token[1] not in _ESCAPES:
                raise _TexError(token)
            return _ESCAPES[token[1]]
        name = token[1:].rstrip("*")
        if name in _SIZING or name in _FONT_SWITCHES:
            return ""
        if name in _PLAIN_FONTS:
            return self.argument()
        if name in _UNICODE_FONTS:
            letters = self.argument()
            if not letters.isascii() or not letters.isalpha():
                raise _TexError(name)
            return _unicode_font(name, letters)
        if name in _ACCENTS:
            base = self.argument()
            if len(base) != 1:
                raise _TexError(name)
            return base + _ACCENTS[name]
        if name == "sqrt":
            if self.argument_token() == "[":
                raise _TexError("sqrt[n]")
            radicand = self.argument()
            return "√" + (radicand if _atomic(radicand) else f"({radicand})")
        if name in ("frac", "tfrac", "dfrac"):
            top, bottom = self.argument(), self.argument()
            top = top if _atomic(top) else f"({top})"
            bottom = bottom if _atomic(bottom) else f"({bottom})"
            return f"{top}/{bottom}"
        return _symbol(name)


def _simple(text: str) -> bool:
    """A script that needs no braces: `x_1`, `x_max`."""
    return len(text) == 1 or text.isalnum()


def _atomic(text: str) -> bool:
    """A root or fraction part that needs no parentheses: `√2`, `1/12`, `π/n`."""
    return len(text) == 1 or text.isdecimal()


def _script(text: str, *, superscript: bool) -> str:
    table = _SUPERSCRIPTS if superscript else _SUBSCRIPTS
    text = text.strip()
    if text and all(c in table for c in text):
        return "".join(table[c] for c in text)
    mark = "^" if superscript else "_"
    return f"{mark}{text}" if _simple(text) else f"{mark}{{{text}}}"


def tex_math(tex: str) -> str | None:
    """The inside of one `$...$` as Unicode (`\\alpha_1` -> α₁), or None when it is more
    than simple math (then it stays TeX)."""
    if not tex.strip():
        return None
    if (tex[0].isspace() or tex[-1].isspace()) and _PROSE_RE.search(tex):
        return None  # "costs $5 and $10": dollar signs, not math
    try:
        converted = _MathReader(tex).read_all()
    except (_TexError, RecursionError):
        return None
    converted = _WHITESPACE.sub(" ", converted).strip()
    return converted or None


def unicode_math(segments: Iterable[Segment]) -> list[Segment]:
    """Convert each simple `$...$` to Unicode, when it lies inside one segment: math that
    crosses a highlight's edge, or that `tex_math` refuses, is left as written."""
    segments = list(segments)
    text = "".join(part for part, _ in segments)
    regions = list(_MATH_RE.finditer(text))
    out: list[Segment] = []
    start = 0
    for part, marked in segments:
        end = start + len(part)
        pieces: list[str] = []
        cursor = start
        for region in regions:
            if region.start() < start or region.end() > end:
                continue
            converted = tex_math(region.group("tex"))
            if converted is not None:
                pieces += [text[cursor : region.start()], converted]
                cursor = region.end()
        pieces.append(text[cursor:end])
        out.append(("".join(pieces), marked))
        start = end
    return out


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
    spans += [(m.start(), m.end()) for m in _MATH_RE.finditer(text)]
    return spans


def _boundaries(text: str, protected: Sequence[tuple[int, int]]) -> list[int]:
    """Offsets of the spaces between words where text may be cut."""
    return [
        m.start()
        for m in re.finditer(r"\s", text)
        if not any(start < m.start() < end for start, end in protected)
    ]


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
    "shorten_authors": shorten_authors,
    "wrap": wrap,
    "tidy": tidy,
    "plural": plural,
    "unicode_math": unicode_math,
}
