"""Words: how rules and papers are cut into words and folded, the same way on both sides.

Pure. `tokenize` gives the folded words of a text with their spans; `fold` folds one word
(case, accents, plural); `name_words` gives the words of an author's name (case and accents
folded, never plurals: `Williams` is not `William`).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import NamedTuple

__all__ = ["Token", "fold", "name_words", "prefix_form", "scan", "tokenize"]


class Token(NamedTuple):
    """A folded word of a text and its character span in the original text.

    A named tuple rather than a dataclass: a day's feed has a quarter of a million of them,
    and a tuple is built in a third of the time."""

    norm: str
    start: int
    end: int


# TeX accents and letters, as arXiv titles and abstracts write them: \"o \"{o} {\"o} \'e
# \v{s} \c{c} \l \o \ss \aa \ae \oe \i. Braces are TeX grouping, invisible when typeset,
# so they do not break words: Schr{\"o}dinger is one word.
_DOTLESS = r"\\[ij](?![A-Za-z])(?: (?=[A-Za-z]))?"  # \i, \j; a control word eats one space
_SYMBOL_ACCENT = rf"""\\["'`^~=.](?:\{{\s*(?:[A-Za-z]|\\[ij])\s*\}}|[A-Za-z]|{_DOTLESS})"""
_LETTER_ACCENT = r"\\[uvHcdbkr]\s*\{\s*(?:[A-Za-z]|\\[ij])\s*\}"
_TEX_LETTER = r"\\(?:ss|SS|aa|AA|ae|AE|oe|OE|[lLoOij])(?![A-Za-z])(?:\{\}| (?=[A-Za-z]))?"
_TEX_RE = re.compile(f"{_SYMBOL_ACCENT}|{_LETTER_ACCENT}|{_TEX_LETTER}")
_COMBINING = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
# A word is a run of letters, digits, TeX letters, combining marks and braces. Any other TeX
# command is a word of its own (`$\alpha$` has the word alpha) unless it takes an argument
# (`\emph{`, `\mathrm{`): formatting, not text. Runs of plain letters come first in the
# alternation, so most words take one step (the alternatives start with different characters,
# so their order does not change what matches).
_WORD_RE = re.compile(
    rf"(?:[^\W_]+|[{_COMBINING}{{}}]+|{_SYMBOL_ACCENT}|{_LETTER_ACCENT}|{_TEX_LETTER})+"
    r"|\\(?P<macro>[A-Za-z]+)(?P<arg>\{)?"
)
_APOSTROPHES = "'’ʼ"
# Letters NFKD leaves alone.
_LETTERS = str.maketrans(
    {"ł": "l", "ø": "o", "đ": "d", "ð": "d", "ħ": "h", "ı": "i", "þ": "th", "æ": "ae", "œ": "oe"}
)
_ACCENT_COMMANDS = "\"'`^~=.uvHcdbkr"
_TEX_LETTER_NAMES = {"ss": "ss", "aa": "a", "ae": "ae", "oe": "oe"}

# The plural folding table. fold(singular) == fold(plural): each rule turns a plural back
# into its singular; singulars pass through unchanged (or change the same way their plural
# does: `bias` and `biases` both fold to "bia"). Conservative on purpose: a missed plural
# is better than a false match. Not a stemmer: `general` never matches `generalization`.
_IRREGULAR = {
    "appendices": "appendix", "automata": "automaton", "axes": "axis", "bacteria": "bacterium",
    "children": "child", "corpora": "corpus", "cortices": "cortex", "criteria": "criterion",
    "curricula": "curriculum", "extrema": "extremum", "foci": "focus", "formulae": "formula",
    "fungi": "fungus", "gases": "gas", "genera": "genus", "halves": "half", "indices": "index",
    "larvae": "larva", "lemmata": "lemma", "lenses": "lens", "loci": "locus",
    "matrices": "matrix", "maxima": "maximum", "mice": "mouse", "minima": "minimum",
    "moduli": "modulus", "nebulae": "nebula", "nuclei": "nucleus", "optima": "optimum",
    "phenomena": "phenomenon", "polyhedra": "polyhedron", "quanta": "quantum", "radii": "radius",
    "schemata": "schema", "simplices": "simplex", "spectra": "spectrum", "stimuli": "stimulus",
    "strata": "stratum", "tori": "torus", "vertices": "vertex",
}  # fmt: skip
# Words whose final s is not a plural ("news" is not two "new"s; "does" is not two DoEs).
_NOT_PLURAL = frozenset({"does", "lens", "news", "plus", "series", "species", "thus"})
_SINGULAR_ENDINGS = ("ss", "sis", "xis")  # loss, class, analysis, basis, axis
# corpus, status, virus, famous: a vowel before "us"; but GPUs, CPUs, GRUs are plurals.
_VOWELS = frozenset("aeiouy")
# (pattern, replacement, shortest word it applies to); the first that applies wins.
_PLURAL_RULES: tuple[tuple[re.Pattern[str], str, int], ...] = tuple(
    (re.compile(pattern), replacement, shortest)
    for pattern, replacement, shortest in (
        (r"gnoses$", "gnosis", 0),  # diagnoses -> diagnosis
        (r"iases$", "ia", 0),  # biases -> bia, as bias -> bia
        (r"yses$", "ysis", 0),  # analyses -> analysis
        (r"eses$", "esis", 0),  # hypotheses -> hypothesis
        (r"sses$", "ss", 0),  # classes -> class
        (r"(?<![aeiout])aches$", "ache", 0),  # caches -> cache (approaches, attaches below)
        (r"ches$", "ch", 0),  # approaches -> approach
        (r"shes$", "sh", 0),  # meshes -> mesh
        (r"xes$", "x", 0),  # boxes -> box
        (r"(?<=[aefmo])uses$", "use", 0),  # causes, reuses, fuses, amuses, houses
        (r"uses$", "us", 5),  # buses -> bus, statuses -> status (but uses -> use)
        (r"ies$", "y", 5),  # studies -> study (but ties -> tie)
        (r"oes$", "o", 6),  # echoes -> echo (but shoes -> shoe)
        (r"s$", "", 4),  # models -> model (but gas, its, has stay)
    )
)


def _letters(word: str) -> str:
    """Lower case, TeX and Unicode accents folded, braces and non-word characters dropped."""
    if "\\" in word:
        word = _TEX_RE.sub(_tex_letter, word)
    word = word.casefold()
    if not word.isascii():
        word = unicodedata.normalize("NFKD", word)
        word = "".join(c for c in word if not unicodedata.combining(c)).translate(_LETTERS)
    return word if word.isalnum() else "".join(c for c in word if c.isalnum())


def _tex_letter(match: re.Match[str]) -> str:
    """The letters a TeX accent or letter command stands for: \\"{o} -> o, \\ss -> ss."""
    text = match.group()
    if text[1] in _ACCENT_COMMANDS:
        return "".join(c for c in text[2:].replace("\\i", "i").replace("\\j", "j") if c.isalpha())
    name = text[1:3] if text[1:3].lower() in _TEX_LETTER_NAMES else text[1]
    return _TEX_LETTER_NAMES.get(name.lower(), name)


def _singular_us(word: str) -> bool:
    """Whether `word` ends in "us" after a vowel (status, not GPUs). Not a regex: a
    backtracking `.*[aeiouy].*us` is quadratic on a long word from a feed."""
    return word.endswith("us") and not _VOWELS.isdisjoint(word[:-2])


def _singular(word: str) -> str:
    if len(word) < 4 or word[-1] != "s" or word in _NOT_PLURAL:
        return word
    if word.endswith(_SINGULAR_ENDINGS) or _singular_us(word):
        return word
    for pattern, replacement, shortest in _PLURAL_RULES:
        if len(word) >= shortest:
            folded, count = pattern.subn(replacement, word)
            if count:
                return folded
    return word  # pragma: no cover - the last rule takes every word ending in s


@lru_cache(maxsize=1 << 16)
def _forms(word: str) -> tuple[str, str]:
    """(letters, folded): the word with case and accents folded, and also plural-folded."""
    letters = _letters(word)
    if not (letters.isascii() and letters.isalpha()):
        return letters, letters  # 1990s, 3d, gpt4, Greek: English plurals only
    folded = _singular(_IRREGULAR.get(letters, letters))
    if len(folded) >= 4 and folded.endswith("ie"):
        folded = folded[:-2] + "y"  # movie ~ movies -> "movy", as study ~ studies -> "study"
    return letters, folded


def fold(word: str) -> str:
    """One token, folded: lower case, accents dropped, plural to singular (see the table)."""
    return _forms(word)[1]


def prefix_form(word: str) -> str:
    """A word as a wildcard prefix sees it: lower case and accents folded, plurals kept."""
    return _forms(word)[0]


def scan(text: str) -> list[tuple[str, str, int, int]]:
    """Every word of a text as (folded, letters, start, end); `tokenize` without the Tokens."""
    words: list[tuple[str, str, int, int]] = []
    last_end = -2
    for m in _WORD_RE.finditer(text):
        word = m.group()
        start, end = m.span()
        if word[0] == "\\" and (macro := m.group("macro")) is not None:
            if m.group("arg") is None:
                letters, norm = _forms(macro)
                words.append((norm, letters, start + 1, end))
                last_end = end
            continue
        if "{" in word or "}" in word:
            # Drop unpaired braces at the ends ("large}" of \emph{large}); keep {\L}ukasiewicz.
            opened = word.count("{") - word.count("}")
            while opened > 0 and text[start] == "{":
                start, opened = start + 1, opened - 1
            while opened < 0 and text[end - 1] == "}":
                end, opened = end - 1, opened + 1
            word = text[start:end]
        letters, norm = _forms(word)
        if not norm:
            continue
        # Possessive 's: "Riemann's hypothesis" is the phrase "riemann hypothesis".
        if norm == "s" and last_end == start - 1 and text[start - 1] in _APOSTROPHES:
            continue
        words.append((norm, letters, start, end))
        last_end = end
    return words


def tokenize(text: str) -> tuple[Token, ...]:
    """The words of a text, folded, with their spans in the original text."""
    return tuple(Token(norm, start, end) for norm, _, start, end in scan(text))


# ---------------------------------------------------------------------------------------------
# Names

# Affiliations and notes in an author string: "Jane Doe (MIT)", "A. B. Smith [for the X team]".
_PARENTHESES_RE = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
# An apostrophe between letters is part of a name: O'Brien ~ OBrien, d'Aquin ~ dAquin. (A TeX
# accent \'e has a backslash before its apostrophe, not a letter.)
_NAME_APOSTROPHE_RE = re.compile(r"(?<=[^\W\d_])['’ʼ](?=[^\W\d_])")
_NAME_SUFFIXES = frozenset({"jr", "sr", "ii", "iii", "iv"})
# Affiliations nest a level or two: "(Univ. X (Lab Y))". Each pass drops the innermost level
# and reads the whole name, so passes without a bound made an author nested 20,000 deep (a
# feed's) take seconds; deeper levels are cut off as an unclosed parenthesis is.
_MAX_NESTING = 8


@lru_cache(maxsize=1 << 16)
def name_words(name: str) -> tuple[str, ...]:
    """The words of a person's name, surname last, case and accents folded (not plurals).

    Affiliations in parentheses or brackets are dropped (from an unclosed one, or one
    nested more than 8 deep, to the end); "Surname, Given" is turned around;
    a final Jr, Sr, II, III or IV is dropped; hyphens and dots break words, as everywhere
    ("Jean-Pierre" -> jean pierre, "J.-P." -> j p); an apostrophe between letters does not
    ("O'Brien" -> obrien)."""
    for _ in range(_MAX_NESTING):
        stripped = _PARENTHESES_RE.sub(" ", name)
        if stripped == name:
            break
        name = stripped
    # An unclosed parenthesis (or one nested too deep): drop from it to the end; a stray
    # closing one is just punctuation.
    name = name.split("(", 1)[0].split("[", 1)[0]
    if "," in name:
        surname, _, given = name.partition(",")
        if _words_of(given) and not set(_words_of(given)) <= _NAME_SUFFIXES:
            name = f"{given} {surname}"
        else:
            name = surname
    words = _words_of(name)
    if len(words) >= 2 and words[-1] in _NAME_SUFFIXES:
        words = words[:-1]
    return words


def _words_of(name: str) -> tuple[str, ...]:
    if "'" in name or "’" in name or "ʼ" in name:
        name = _NAME_APOSTROPHE_RE.sub("", name)
    return tuple(letters for _, letters, _, _ in scan(name))
