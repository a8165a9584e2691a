"""TeX math (the inside of `$...$`) as Unicode text: `\\alpha_1` -> α₁.

Pure: text in, text out. A formula this converter does not fully understand is refused
(None), and `bot.render.tex.letters` then shows it as the TeX the authors wrote, dollars and
all, so nothing is ever lost.
"""

from __future__ import annotations

import functools
import re
from typing import Any

_WHITESPACE = re.compile(r"\s+")

# -- TeX math as Unicode ------------------------------------------------------------------
#
# arXiv titles and abstracts carry TeX math between dollars ($\alpha$-stable, $O(n^2)$).
# Simple math reads better as Unicode (α-stable, O(n²)); anything this converter does not
# fully understand stays as the TeX the authors wrote, dollars and all, so nothing is lost.
# pylatexenc supplies the symbol table; the structure (scripts, groups, fractions) is
# handled here, because its own text conversion drops braces (x^{n+1} -> x^n+1).

# $...$ (inline) or $$...$$ (display); a \$ is a dollar sign, not a delimiter.
MATH_RE = re.compile(r"(?<!\\)(?P<open>\$\$?)(?P<tex>(?:[^$\\]|\\.)+?)(?<!\\)(?P=open)", re.DOTALL)
# Words of plain prose: math between two dollar signs that were not meant as delimiters
# (not a command's argument: `$-\text{div}(A) $` is math).
_PROSE_RE = re.compile(r"(?<![\\A-Za-z{])[a-z]{3,}")
_CONTROL_WORD_RE = re.compile(r"\\[A-Za-z]+\*?")
_MATH_TOKEN_RE = re.compile(r"\\[A-Za-z]+\*?|\\.|[{}^_]|\s+|.", re.DOTALL)
_SUPERSCRIPTS = dict(
    zip(
        "0123456789+-−=()ni′'*†∘abcdefghjklmoprstuvwxyz",
        "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻⁼⁽⁾ⁿⁱ′′*†°ᵃᵇᶜᵈᵉᶠᵍʰʲᵏˡᵐᵒᵖʳˢᵗᵘᵛʷˣʸᶻ",
        strict=True,
    )
)
_SUBSCRIPTS = dict(
    zip("0123456789+-−=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ", strict=True)
)
# Macros that only set the size or spacing of what follows: dropped.
_SIZING = frozenset(
    {"left", "right", "middle", "limits", "nolimits", "displaystyle", "textstyle"}
    | {"scriptstyle", "scriptscriptstyle", "tiny", "scriptsize", "footnotesize", "small"}
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
    # The number sets as authors define them for short: $\Z^d$, $\R^n$.
    **dict(zip(("N", "Z", "Q", "R", "C"), "ℕℤℚℝℂ", strict=True)),
    "Im": "ℑ",
    "Bbbk": "𝕜",
    "bmod": "mod",
    **{name: name for name in ("dim", "ker", "deg", "det", "gcd", "lcm", "mod", "arg", "hom")},
    **{name: name for name in ("coth", "sech", "csch", "arccot", "arsinh", "arcosh", "artanh")},
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


def symbol(name: str) -> str | None:
    """A command that takes no argument, as Unicode text (`alpha` -> α, `l` -> ł); None
    when unknown, when it takes arguments, or when it shows as nothing or as control
    characters."""
    try:
        shown = _symbol(name)
    except _TexError:
        return None
    if not shown.strip() or any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in shown):
        return None
    return shown


@functools.lru_cache(maxsize=4096)  # bounded: the letters come from the feeds
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
        operator = False  # the last part is a named operator (log, sin): set apart by spaces
        while (token := self.peek()) is not None and token != until:
            if token == "}":
                raise _TexError("unbalanced }")
            if token in ("^", "_"):
                self.take()
                if parts:
                    parts[-1] = parts[-1].rstrip()
                parts.append(_script(self.argument(), superscript=token == "^"))
                continue
            part = self.atom()
            named = token.startswith("\\") and len(part) > 1 and part.isascii() and part.isalpha()
            if part and (named or operator):
                # O(n\log n) is O(n log n), not O(nlogn); \sin x is sin x.
                before = next((p for p in reversed(parts) if p), "")
                if before[-1:].isalnum() and part[0].isalnum():
                    part = " " + part
            if part.strip():
                operator = named
            parts.append(part)
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
            if name in ("left", "right", "middle") and self.argument_token() == ".":
                self.take()  # \right. : no delimiter at all
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
            # One mark over each letter of a short word (\overline{TO}: T̅O̅), as the
            # combining characters can: a longer argument is more than an accent.
            if not 1 <= len(base) <= 4 or not base.isalnum():
                raise _TexError(name)
            return "".join(letter + _ACCENTS[name] for letter in base)
        if name == "unicode":
            return _code_point(self.argument())
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


def _code_point(argument: str) -> str:
    """MathJax's `\\unicode{x2013}` (or `{8211}`) as the character it names: a printable one."""
    digits, base = (argument[1:], 16) if argument[:1] in ("x", "X") else (argument, 10)
    try:
        code = int(digits, base) if 0 < len(digits) <= 6 and digits.isalnum() else -1
    except ValueError:
        code = -1
    if not 0x20 <= code <= 0x10FFFF or not chr(code).isprintable():
        raise _TexError("unicode")
    return chr(code)


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
