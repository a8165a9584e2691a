"""TeX in a paper's text as the letters it means, with a map back to the text as written.

arXiv titles, author names and abstracts are written in TeX: `Schr\\"odinger`, `R\\'emy`,
`Vavry\\v{c}uk`, `Przemys{\\l}aw`, `\\textbf{R}easoning`, `$\\alpha$-stable`. `pieces` cuts a
text into pieces, each a stretch of the text as written and what is shown for it; what it
understands (accents, TeX letters, symbols, font commands, grouping braces, dash and quote
ligatures, simple math) becomes Unicode, and everything else stays exactly as written. The
pieces keep the way back to the written text, so the matcher's spans (offsets into the text
as written) land on the shown text: a converted piece is highlighted whole or not at all.

What each construct means comes from pylatexenc's latex-to-text, asked one small construct
at a time (`\\v{c}`, `\\l`): run over a whole text it would take `%` for a comment and drop
the rest of the line, and drop every command it does not know. Math goes to
`bot.render.tex.math.tex_math`.

Pure, and linear in the length of the text: one pass finds the math and pairs the braces,
one pass converts; nothing recurses on the text's nesting, so a hostile text (deep,
unbalanced, huge) costs time in proportion to its length and never raises.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from itertools import accumulate
from typing import NamedTuple

from bot.render.tex.math import MATH_RE, symbol, tex_math

Segment = tuple[str, bool]  # a run of text, and whether it is highlighted


class Piece(NamedTuple):
    """A stretch `text[start:end]` of the text as written and what is shown for it.

    `whole`: a conversion, highlighted whole or not at all (an empty one shows nothing: a
    font command, a grouping brace); otherwise `shown` is the text as written, and a
    highlight may cover any part of it."""

    start: int
    end: int
    shown: str
    whole: bool


# Accents written with a symbol (\"o \'{e} \^{\i}) or a letter (\v{c} \c c \H{o}), on one
# letter (or a dotless \i, \j). \t (a tie over two letters) is left as written.
_ACCENT_RE = re.compile(
    r"""\\(?P<accent>["'`^~=.])(?:(?P<bare>[A-Za-z])|\{ *(?P<braced>[A-Za-z]|\\[ij]) *\}"""
    r"""|(?P<dotless>\\[ij])(?![A-Za-z]))"""
    r"|\\(?P<word>[uvHcdbkr])(?: *\{ *(?P<wbraced>[A-Za-z]|\\[ij]) *\}| +(?P<wbare>[A-Za-z]))"
)
_CONTROL_RE = re.compile(r"\\(?:[A-Za-z]+|.)", re.DOTALL)
# Where something may need converting: a backslash, a brace, a dash or quote ligature.
# A tie (~) counts only before a command (MEGNet~\\cite{...}): "~10%" is an approximation.
_SPECIAL_RE = re.compile(r"[\\{}]|-{2,}|``|''|~(?=\\)")
_SPACES_RE = re.compile(r"[ \t\n\r]*")
_DELIMITER_RE = re.compile(
    r"\\(?P<delim>[()\[\]])"
    r"|\\(?:begin|(?P<end>end))\{(?P<env>equation|align|gather|multline|eqnarray|displaymath|math)"
    r"(?P<star>\*?)\}"
)
_BRACE_RE = re.compile(r"\\.|[{}]", re.DOTALL)

# Letters TeX writes as commands: Przemys{\l}aw, Sj{\o}rup, Holb{\ae}k, Gu{\dh}mundur.
_LETTERS = frozenset({
    "l", "L", "o", "O", "i", "j", "ss", "aa", "AA", "ae", "AE", "oe", "OE",
    "dh", "DH", "th", "TH", "ng", "NG", "dj", "DJ",
})  # fmt: skip
# Commands whose one argument is shown as plain text: the font is lost, the letters kept.
_FONT_COMMANDS = frozenset(
    {f"text{font}" for font in ("bf", "it", "sl", "sc", "rm", "sf", "tt", "up", "md", "normal")}
    | {"emph", "underline", "mbox", "hbox", "text"}
)
# Old-style switches ({\it et al}, {\bf 146}) and sizes: dropped, with the spaces after them.
_SWITCHES = frozenset(
    {"bf", "it", "em", "rm", "sc", "sf", "tt", "sl", "normalfont"}
    | {f"{name}shape" for name in ("it", "sc", "up", "sl")}
    | {"bfseries", "mdseries", "rmfamily", "sffamily", "ttfamily"}
    | {"tiny", "scriptsize", "footnotesize", "small", "normalsize", "large", "Large", "LARGE"}
    | {"huge", "Huge"}
)
# Commands whose argument is shown as written, not read as TeX: a URL keeps its _ and %.
_VERBATIM_COMMANDS = frozenset(["url"])
# Citations, shown as their keys in brackets (\\cite{BCPR} -> [BCPR]): a key is what the
# abstract refers to, and dropping it would leave "the results in ." behind.
_CITATIONS = frozenset(["cite", "citep", "citet", "citealp", "citealt", "parencite", "textcite"])
# Escaped characters and spacing commands in text: \& \% \_ \$ \{ \} "\ " \, and the
# invisible ones (\- a hyphenation point, \/ italic correction, \@ a sentence's end).
_TEXT_ESCAPES = {
    "&": "&",
    "%": "%",
    "#": "#",
    "_": "_",
    "$": "$",
    "{": "{",
    "}": "}",
    " ": " ",
    "\n": " ",
    ",": " ",
    ";": " ",
    "-": "",
    "/": "",
    "@": "",
}
# Symbols that read otherwise in text than in math (360{\deg}: degrees, not "deg"), and
# the abbreviations authors define for themselves.
_TEXT_SYMBOLS = {
    "deg": "°",
    "eg": "e.g.",
    "ie": "i.e.",
    "etc": "etc.",
    "cf": "cf.",
    "etal": "et al.",
}


@functools.cache
def _latex_to_text(construct: str) -> str | None:
    """One small construct (`\\v{c}`, `\\l`) as pylatexenc's latex-to-text shows it; None
    when that is nothing, or not letters."""
    from pylatexenc.latex2text import LatexNodes2Text

    shown = unicodedata.normalize("NFC", LatexNodes2Text().latex_to_text(construct))
    if not shown or not all(c.isalpha() or unicodedata.combining(c) for c in shown):
        return None
    return shown


def _accented(match: re.Match[str]) -> str | None:
    accent = match["accent"] or match["word"]
    bases = ("bare", "braced", "dotless", "wbraced", "wbare")
    base = next(match[group] for group in bases if match[group])
    return _latex_to_text(f"\\{accent}{{{base}}}")


def _math_regions(text: str) -> list[tuple[int, int, int, int]]:
    """Each formula: (start, end, start and end of its inside), in order, not overlapping:
    `$...$`, `$$...$$`, `\\(...\\)`, `\\[...\\]` and the display environments
    (`\\begin{equation}...\\end{equation}`), each opening paired with the next closing."""
    regions = [(m.start(), m.end(), m.start("tex"), m.end("tex")) for m in MATH_RE.finditer(text)]
    if "\\" in text:
        opened: tuple[str, int, int] | None = None  # what opened, where, where its inside starts
        for m in _DELIMITER_RE.finditer(text):
            if text[m.start() - 1 : m.start()] == "\\":
                continue  # \\[2pt] is a line break; \\( a line break, then a parenthesis
            if m["env"]:
                kind = m["env"] + m["star"]
                closing = m["end"] is not None
            else:
                kind = "()" if m["delim"] in "()" else "[]"
                closing = m["delim"] in ")]"
            if not closing:
                opened = (kind, m.start(), m.end())
            elif opened is not None and opened[0] == kind:
                regions.append((opened[1], m.end(), opened[2], m.start()))
                opened = None
        regions.sort()
        kept: list[tuple[int, int, int, int]] = []
        for region in regions:
            if not kept or region[0] >= kept[-1][1]:
                kept.append(region)
        regions = kept
    return regions


def formulas(text: str) -> list[tuple[int, int]]:
    """Where the formulas of a text are (`$...$` and the others `pieces` reads as math)."""
    return [(start, end) for start, end, _, _ in _math_regions(text)]


def _pair_braces(text: str, math: list[tuple[int, int, int, int]]) -> dict[int, int]:
    """The balanced braces outside math: where each `{` closes. Escaped braces do not count."""
    closing: dict[int, int] = {}
    opened: list[int] = []
    regions = iter(math)
    region = next(regions, None)
    for m in _BRACE_RE.finditer(text):
        at = m.start()
        while region is not None and region[1] <= at:
            region = next(regions, None)
        if (region is not None and region[0] <= at) or len(m.group()) == 2:
            continue  # inside math, or escaped
        if m.group() == "{":
            opened.append(at)
        elif opened:
            closing[opened.pop()] = at
    return closing


class _Reader:
    """One pass over a text, appending its pieces."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pieces: list[Piece] = []
        self.math = _math_regions(text)
        self.closing = _pair_braces(text, self.math)
        self.closers: dict[int, str] = {}  # closing braces shown otherwise: as nothing, ")"
        # The groups open where reading is, innermost last: where each closes, and the index
        # of its opening brace's piece (-1: a font command's). A bare group holding a
        # command not understood keeps its braces ({\foo x} stays as written).
        self.groups: list[tuple[int, int]] = []
        self.kept: set[int] = set()
        # Prefix counts, so that a group's content is judged in constant time: of
        # backslashes, and of characters that are not words, spaces, hyphens or braces.
        self.backslashes: list[int] = []
        self.others: list[int] = []
        if self.closing:
            self.backslashes = list(accumulate((c == "\\" for c in text), initial=0))
            self.others = list(
                accumulate((not (c.isalnum() or c in " -{}") for c in text), initial=0)
            )

    def literal(self, start: int, end: int) -> None:
        if end > start:
            self.pieces.append(Piece(start, end, self.text[start:end], False))

    def convert(self, start: int, end: int, shown: str) -> None:
        self.pieces.append(Piece(start, end, shown, True))

    def read(self) -> list[Piece]:
        text = self.text
        position = 0
        regions = iter(self.math)
        region = next(regions, None)
        special = _SPECIAL_RE.search(text)
        while position < len(text):
            while region is not None and region[0] < position:
                region = next(regions, None)  # read already: an argument shown as written
            if special is not None and special.start() < position:
                # Searched again only when passed: a search from every formula of a text
                # with none after them ("$a$a$a...") would take quadratic time.
                special = _SPECIAL_RE.search(text, position)
            at = special.start() if special else len(text)
            if region is not None and region[0] <= at:
                self.literal(position, region[0])
                self.formula(*region)
                position = region[1]
                region = next(regions, None)
                continue
            self.literal(position, at)
            if special is None:
                break
            position = self.special(at, special.group())
        return self.pieces

    def formula(self, start: int, end: int, inner_start: int, inner_end: int) -> None:
        shown = tex_math(self.text[inner_start:inner_end])
        if shown is None:
            self.literal(start, end)
        else:
            self.convert(start, end, shown)

    def special(self, at: int, token: str) -> int:
        """Read what starts at `at`; return where reading goes on."""
        text = self.text
        if token == "``":
            self.convert(at, at + 2, "\u201c")
        elif token == "''":
            # After a digit it is seconds (of arc, of time): 0.5'' stays as written.
            if at and text[at - 1].isdigit():
                self.literal(at, at + 2)
            else:
                self.convert(at, at + 2, "\u201d")
        elif token[0] == "-":
            self.dashes(at, at + len(token))
        elif token == "~":
            self.convert(at, at + 1, " ")
        elif token == "}":
            if at in self.kept:
                while self.groups and self.groups[-1][0] != at:
                    self.groups.pop()
                opening = self.groups.pop()[1]
                start = self.pieces[opening].start
                self.pieces[opening] = Piece(start, start + 1, "{", False)
                self.literal(at, at + 1)
            elif at in self.closers:
                while self.groups and self.groups[-1][0] > at:
                    self.groups.pop()
                if self.groups and self.groups[-1][0] == at:
                    self.groups.pop()
                self.convert(at, at + 1, self.closers[at])
            else:
                self.literal(at, at + 1)
        elif token == "{":
            close = self.closing.get(at)
            if close is not None and self.grouping(at, close):
                self.groups.append((close, len(self.pieces)))
                self.convert(at, at + 1, "")
                self.closers[close] = ""
            else:
                self.literal(at, at + 1)
        else:
            return self.command(at)
        return at + len(token)

    def dashes(self, start: int, end: int) -> None:
        """`--` and `---` between words or numbers (Young--Fibonacci, 207--212) or spaces
        (a pause -- like this) as dashes; `--flag` and longer runs stay as written."""
        text = self.text
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        words = before.isalnum() and after.isalnum()
        spaced = before.isspace() and after.isspace()
        if end - start in (2, 3) and (words or spaced):
            self.convert(start, end, "\u2013" if end - start == 2 else "\u2014")
        else:
            self.literal(start, end)

    def grouping(self, start: int, close: int) -> bool:
        """Whether the braces `{...}` at start and close are TeX grouping, shown as nothing:
        TeX inside ({\\l}, {\\it et al}), glued to a word ({B}ayes), or only words inside
        ({MNIST}); `{"a": 1}` and an empty `{}` between spaces stay as written."""
        text = self.text
        if self.backslashes[close] > self.backslashes[start]:
            return True
        before = text[start - 1] if start else " "
        after = text[close + 1] if close + 1 < len(text) else " "
        if before.isalnum() or after.isalnum():
            return True
        return close > start + 1 and self.others[close] == self.others[start + 1]

    def command(self, at: int) -> int:
        """A control sequence at `at`: converted when understood, else as written (with
        the arguments that follow it)."""
        text = self.text
        accent = _ACCENT_RE.match(text, at)
        if accent:
            shown = _accented(accent)
            if shown is not None:
                self.convert(at, accent.end(), shown)
                return accent.end()
        control = _CONTROL_RE.match(text, at)
        if control is None:  # a backslash that ends the text
            self.literal(at, at + 1)
            return at + 1
        end = control.end()
        name = control.group()[1:]
        if not name[0].isalpha():
            if name in _TEXT_ESCAPES:
                self.convert(at, end, _TEXT_ESCAPES[name])
            else:
                self.literal(at, end)
            return end
        if name in _LETTERS and (shown := symbol(name)):
            # A control word ends at the first non-letter: Sj\o rup, Sj\o{}rup are Sjørup.
            if text.startswith("{}", end):
                end += 2
            elif text.startswith(" ", end) and text[end + 1 : end + 2].isalpha():
                end += 1
            self.convert(at, end, shown)
            return end
        if name in _SWITCHES:
            end = _SPACES_RE.match(text, end).end()  # type: ignore[union-attr]
            self.convert(at, end, "")
            return end
        if name in _FONT_COMMANDS or name in _VERBATIM_COMMANDS:
            brace = _SPACES_RE.match(text, end).end()  # type: ignore[union-attr]
            close = self.closing.get(brace)
            if close is not None:
                self.convert(at, brace + 1, "")
                if name in _VERBATIM_COMMANDS:
                    self.literal(brace + 1, close)
                    self.convert(close, close + 1, "")
                    return close + 1
                self.closers[close] = ""
                self.groups.append((close, -1))
                return brace + 1
        elif name in _CITATIONS and (close := self.closing.get(end)) is not None:
            self.convert(at, end + 1, "[")  # the keys as written: they are names, not TeX
            self.literal(end + 1, close)
            self.convert(close, close + 1, "]")
            return close + 1
        elif name == "footnote" and (close := self.closing.get(end)) is not None:
            self.convert(at, end + 1, " (")  # a footnote in an abstract: said in passing
            self.closers[close] = ")"
            self.groups.append((close, -1))
            return end + 1
        elif name == "href" and (link := self.closing.get(end)) is not None:
            label = self.closing.get(link + 1)
            if label is not None:  # \href{URL}{text}: "URL (text)", in the order written
                self.convert(at, end + 1, "")
                self.literal(end + 1, link)
                self.convert(link, link + 2, " (")
                self.closers[label] = ")"
                self.groups.append((label, -1))
                return link + 2
        elif shown := _TEXT_SYMBOLS.get(name) or symbol(name):
            self.convert(at, end, shown)
            return end
        # Not understood: as written, and so are the arguments in braces right after it,
        # and the braces of the group it is in.
        while (close := self.closing.get(end)) is not None:
            end = close + 1
        self.literal(at, end)
        if self.groups and self.groups[-1][1] >= 0:
            self.kept.add(self.groups[-1][0])
        return end


def pieces(text: str) -> list[Piece]:
    """The text as pieces, in order, covering it whole: what is shown for each stretch."""
    if not any(c in text for c in "\\{}$-`'"):
        return [Piece(0, len(text), text, False)] if text else []
    return _Reader(text).read()


def letters(text: str) -> str:
    """The text with its TeX as the letters it means: `Schr\\"odinger` -> Schrödinger,
    `$\\alpha$-stable` -> α-stable; what is not understood stays as written."""
    return "".join(piece.shown for piece in pieces(text))


def letters_segments(text: str, spans: Iterable[tuple[int, int]]) -> list[Segment]:
    """`letters(text)` cut into (segment, highlighted) parts, `spans` being offsets into the
    text as written (the matcher's): a converted piece a span touches is highlighted
    whole, so a highlight never splits TeX (`\\textbf{Hi}gh` is *High*)."""
    marks: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if marks and start <= marks[-1][1]:
            marks[-1] = (marks[-1][0], max(marks[-1][1], end))
        else:
            marks.append((start, end))
    out: list[Segment] = []

    def add(shown: str, marked: bool) -> None:
        if not shown:
            return
        if out and out[-1][1] == marked:
            out[-1] = (out[-1][0] + shown, marked)
        else:
            out.append((shown, marked))

    first = 0  # the first span that may still touch a piece: pieces and spans are in order
    for piece in pieces(text):
        while first < len(marks) and marks[first][1] <= piece.start:
            first += 1
        touching: list[tuple[int, int]] = []
        index = first
        while index < len(marks) and marks[index][0] < piece.end:
            start, end = marks[index]
            touching.append((max(start, piece.start), min(end, piece.end)))
            index += 1
        if piece.whole or not touching:
            add(piece.shown, bool(touching))
            continue
        position = piece.start
        for start, end in touching:
            add(text[position:start], False)
            add(text[start:end], True)
            position = end
        add(text[position : piece.end], False)
    return out
