"""The rule language: parse a subscriber's rule, format it back, evaluate it on a paper.

Pure: no I/O, no clock, no logging setup. Parsing (`parse_rule`) turns text into an explicit
tree (`Rule` > `And` > `Term` | `Category` | `Not`); evaluating (`match`) walks that tree over
a `PaperText`, the words of one paper tokenized once by `analyze` and reused for every rule.
Errors are `RuleError`s a person can act on, pointing at a column of the (stripped) rule.

Grammar (version 1)::

    rule      = term { term }                 at most 32 terms and 500 characters
    term      = [ "-" ] atom                  "-" (only at the start of a term) excludes
    atom      = field | phrase | word
    field     = name ":" value                name = letters; the only field is "cat"
    value     = archive [ "." subject ]       cs | cs.RO | q-bio.NC | astro-ph.CO | math-ph
    phrase    = quote { any character but a quote } quote       quote = '"' | '“' | '”' | '„'
    word      = { any character but white space and quotes }

Terms are separated by white space (a quote also ends a word). A paper matches when it has
every term (implicit AND) and none of the excluded ones:

* a word or phrase matches in the title or the abstract (either), case-insensitively, on
  whole words. Hyphens and punctuation break words on both sides, so the word
  `multi-agent` is the phrase `multi agent` and matches "multi-agent", "Multi Agent" and
  "multi–agent" (not "multiagent"); `rl` does not match "control".
* singular and plural forms match each other (`fold`): `policy` ~ "policies",
  `box` ~ "boxes"; accents fold in the rule and in the text, TeX accents in the text too:
  `Schrödinger` ~ "Schrodinger" ~ `Schr\\"odinger` ~ `Schr{\\"o}dinger`.
* `cat:cs.RO` needs a paper listed in cs.RO (primary or cross-list); `cat:cs` any cs.*
  category. Case does not matter (`cat:CS.ro`); the canonical spelling is arXiv's.
* `-word`, `-"a phrase"` and `-cat:cs.RO` exclude. A rule needs one term that is not
  excluded; a rule of `cat:` terms alone selects every paper of those categories.
* a term `name:...` whose name is letters is a field (`tit:x` is an error, not a word);
  put it in quotes to search the words: `"http://x"`. The characters `( ) | *` and the words
  `OR`, `AND`, `NOT` (upper case) are reserved for the next version of the language.

Words (`tokenize`, the same for rules and papers): a word is a run of letters and digits;
TeX accent commands (`\\"o`, `\\'{e}`, `{\\l}`, `\\ss`) and grouping braces stay inside it;
any other TeX command is a word of its own (`$\\alpha$` -> alpha) unless it takes an
argument (`\\emph{`). A possessive 's is dropped. Each word is folded by `fold`: lower case,
accents dropped, and a small symmetric plural table (not a stemmer: `general` does not match
`generalization`). Phrase words must be adjacent; punctuation between them does not count.

Examples::

    "diffusion policy" manipulation             both, in title or abstract
    multi-agent "reinforcement learning" -survey
    cat:cs.RO grasping                          grasping, in papers listed in cs.RO
    cat:astro-ph.CO -cat:hep-th                 every cosmology paper not also in hep-th
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from bot.errors import RuleError
from bot.models import Hit, Paper

MAX_RULE_LENGTH = 500
MAX_TERMS = 32

# ---------------------------------------------------------------------------------------------
# Words: tokenize and fold


@dataclass(frozen=True, slots=True)
class Token:
    """A folded word of a text and its character span in the original text."""

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
# (`\emph{`, `\mathrm{`): formatting, not text.
_WORD_RE = re.compile(
    rf"(?:{_SYMBOL_ACCENT}|{_LETTER_ACCENT}|{_TEX_LETTER}|[^\W_]|[{_COMBINING}{{}}])+"
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
_SINGULAR_US = re.compile(r".*[aeiouy].*us")
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


def _singular(word: str) -> str:
    if len(word) < 4 or word[-1] != "s" or word in _NOT_PLURAL:
        return word
    if word.endswith(_SINGULAR_ENDINGS) or _SINGULAR_US.fullmatch(word):
        return word
    for pattern, replacement, shortest in _PLURAL_RULES:
        if len(word) >= shortest:
            folded, count = pattern.subn(replacement, word)
            if count:
                return folded
    return word  # pragma: no cover - the last rule takes every word ending in s


@lru_cache(maxsize=1 << 16)
def fold(word: str) -> str:
    """One token, folded: lower case, accents dropped, plural to singular (see the table)."""
    word = _letters(word)
    if not (word.isascii() and word.isalpha()):
        return word  # 1990s, 3d, gpt4, Greek: English plurals only
    word = _singular(_IRREGULAR.get(word, word))
    if len(word) >= 4 and word.endswith("ie"):
        word = word[:-2] + "y"  # movie ~ movies -> "movy", as study ~ studies -> "study"
    return word


def tokenize(text: str) -> tuple[Token, ...]:
    """The words of a text, folded, with their spans in the original text."""
    tokens: list[Token] = []
    for m in _WORD_RE.finditer(text):
        word = m.group()
        start, end = m.span()
        if word[0] == "\\" and (macro := m.group("macro")) is not None:
            if m.group("arg") is None:
                tokens.append(Token(fold(macro), start + 1, end))
            continue
        if "{" in word or "}" in word:
            # Drop unpaired braces at the ends ("large}" of \emph{large}); keep {\L}ukasiewicz.
            opened = word.count("{") - word.count("}")
            while opened > 0 and text[start] == "{":
                start, opened = start + 1, opened - 1
            while opened < 0 and text[end - 1] == "}":
                end, opened = end - 1, opened + 1
            word = text[start:end]
        norm = fold(word)
        if not norm:
            continue
        # Possessive 's: "Riemann's hypothesis" is the phrase "riemann hypothesis".
        possessive = norm == "s" and tokens and tokens[-1].end == start - 1
        if possessive and text[start - 1] in _APOSTROPHES:
            continue
        tokens.append(Token(norm, start, end))
    return tuple(tokens)


# ---------------------------------------------------------------------------------------------
# The tree


@dataclass(frozen=True, slots=True)
class Term:
    """A word (one folded word) or a phrase (several), matched in title and abstract."""

    words: tuple[str, ...]
    raw: str  # as written, without a leading "-"; phrases with their quotes
    quoted: bool


@dataclass(frozen=True, slots=True)
class Category:
    """An arXiv category (`cs.RO`) or a whole archive (`cs`), in arXiv's spelling."""

    value: str


@dataclass(frozen=True, slots=True)
class Not:
    """The paper must not match `node`."""

    node: Node


@dataclass(frozen=True, slots=True)
class And:
    """The paper must match every node."""

    nodes: tuple[Node, ...]


Node = Term | Category | Not | And


@dataclass(frozen=True, slots=True)
class Rule:
    """A parsed rule: the text as given (stripped) and its tree."""

    text: str
    node: And


# ---------------------------------------------------------------------------------------------
# Parse and format

_FIELD_RE = re.compile(r"([^\W\d_]+):")
_CATEGORY_RE = re.compile(r"[a-z]+(?:-[a-z]+)?(?:\.[a-z]+(?:-[a-z]+)?)?")
_QUOTES = '"“”„'  # typographic quotes too: phones and Slack clients "smarten" quotes
_RESERVED_CHARS = "()|*"
_RESERVED_WORDS = frozenset({"OR", "AND", "NOT"})


def _category(value: str) -> str:
    """arXiv's spelling: archive in lower case, two-letter subject classes in upper case."""
    archive, dot, subject = value.lower().partition(".")
    return archive + dot + (subject.upper() if len(subject) == 2 else subject)


def _field(name: str, value: str, *, text: str, start: int) -> Node:
    """The node of `name:value`; `start` is the offset of the name in `text`."""
    if name.lower() not in _FIELDS:
        known = ", ".join(f"{f}:" for f in _FIELDS)
        raise RuleError(f'unknown field "{name}:" (fields: {known})', text=text, position=start)
    return _FIELDS[name.lower()](value, text=text, start=start + len(name) + 1)


def _category_field(value: str, *, text: str, start: int) -> Node:
    if not value:
        message = "cat: needs a category, like cat:cs.RO or cat:cs"
        raise RuleError(message, text=text, position=start)
    if not _CATEGORY_RE.fullmatch(value.lower()):
        message = (
            f'"{value}" is not an arXiv category (like cs, cs.RO, q-bio.NC, astro-ph.CO, math-ph)'
        )
        raise RuleError(message, text=text, position=start)
    return Category(_category(value))


# Field name -> builder of its node. The next version adds ti:, abs:, au: here.
_FIELDS = {"cat": _category_field}


def _term(raw: str, *, quoted: bool, text: str, start: int) -> Term:
    words = tuple(token.norm for token in tokenize(raw))
    if not words:
        shown = raw if quoted else f'"{raw}"'
        message = f"{shown} has no word in it (letters or digits) to match"
        raise RuleError(message, text=text, position=start)
    return Term(words=words, raw=raw, quoted=quoted)


def _atom(text: str, start: int) -> tuple[Node, int]:
    """The atom at `start` (a phrase, field or word) and the offset just after it."""
    if text[start] in _QUOTES:
        close = next((i for i in range(start + 1, len(text)) if text[i] in _QUOTES), -1)
        if close < 0:
            message = 'missing closing " for the phrase that starts'
            raise RuleError(message, text=text, position=start)
        inner = " ".join(text[start + 1 : close].split())
        if not inner:
            raise RuleError('empty phrase ""', text=text, position=start)
        return _term(f'"{inner}"', quoted=True, text=text, start=start), close + 1
    end = start
    while end < len(text) and not text[end].isspace() and text[end] not in _QUOTES:
        end += 1
    raw = text[start:end]
    if field_match := _FIELD_RE.match(raw):
        return _field(field_match[1], raw[field_match.end() :], text=text, start=start), end
    for offset, char in enumerate(raw):
        if char in _RESERVED_CHARS:
            message = f'"{char}" is reserved for the next version of the rule language; quote it'
            raise RuleError(message, text=text, position=start + offset)
    if raw in _RESERVED_WORDS:
        message = f'"{raw}" is reserved as an operator; write "{raw.lower()}" to search the word'
        raise RuleError(message, text=text, position=start)
    return _term(raw, quoted=False, text=text, start=start), end


def parse_rule(text: str) -> Rule:
    """Parse one rule; raise `RuleError` pointing at the column of the first problem."""
    text = text.strip()
    if not text:
        message = 'a rule is empty; write a word, a "phrase" or cat:cs.RO'
        raise RuleError(message, text=text, position=0)
    if len(text) > MAX_RULE_LENGTH:
        count = len(text)
        message = f"a rule can be at most {MAX_RULE_LENGTH} characters long (this one has {count})"
        raise RuleError(message, text=text, position=MAX_RULE_LENGTH)
    nodes: list[Node] = []
    position = 0
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        if len(nodes) == MAX_TERMS:
            message = f"a rule can have at most {MAX_TERMS} terms"
            raise RuleError(message, text=text, position=position)
        if text[position] == "-":
            if position + 1 == len(text) or text[position + 1].isspace():
                message = 'a bare "-" excludes nothing; write -word or -"a phrase"'
                raise RuleError(message, text=text, position=position)
            node, position = _atom(text, position + 1)
            nodes.append(Not(node))
        else:
            node, position = _atom(text, position)
            nodes.append(node)
    if all(isinstance(node, Not) for node in nodes):
        message = "a rule needs at least one term to match; exclusions alone match everything"
        raise RuleError(message, text=text, position=0)
    return Rule(text=text, node=And(tuple(nodes)))


def _format(node: Node) -> str:
    if isinstance(node, Term):
        return node.raw
    if isinstance(node, Category):
        return f"cat:{node.value}"
    if isinstance(node, Not):
        return f"-{_format(node.node)}"
    return " ".join(_format(child) for child in node.nodes)


def format_rule(rule: Rule) -> str:
    """The canonical text of a rule: single spaces, `cat:` in arXiv's spelling."""
    return _format(rule.node)


# ---------------------------------------------------------------------------------------------
# Evaluate


def _index(tokens: Sequence[Token]) -> dict[str, tuple[int, ...]]:
    positions: dict[str, list[int]] = {}
    for i, token in enumerate(tokens):
        positions.setdefault(token.norm, []).append(i)
    return {norm: tuple(found) for norm, found in positions.items()}


@dataclass(frozen=True, slots=True)
class PaperText:
    """A paper's words, tokenized once and indexed, for matching any number of rules."""

    title: tuple[Token, ...]
    abstract: tuple[Token, ...]
    categories: tuple[str, ...]  # case-folded
    title_index: Mapping[str, tuple[int, ...]] = field(repr=False, compare=False)
    abstract_index: Mapping[str, tuple[int, ...]] = field(repr=False, compare=False)
    category_keys: frozenset[str] = field(repr=False, compare=False)  # categories + archives


def analyze_text(title: str, abstract: str, categories: Iterable[str] = ()) -> PaperText:
    """A `PaperText` from the parts of a paper."""
    title_tokens, abstract_tokens = tokenize(title), tokenize(abstract)
    folded = tuple(c.casefold() for c in categories)
    return PaperText(
        title=title_tokens,
        abstract=abstract_tokens,
        categories=folded,
        title_index=_index(title_tokens),
        abstract_index=_index(abstract_tokens),
        category_keys=frozenset(folded) | {c.partition(".")[0] for c in folded},
    )


def analyze(paper: Paper) -> PaperText:
    """Tokenize a paper once, to match it against every rule."""
    return analyze_text(paper.title, paper.abstract, paper.categories)


def _spans(
    term: Term, tokens: Sequence[Token], index: Mapping[str, tuple[int, ...]]
) -> Iterator[tuple[int, int]]:
    """The spans of every occurrence of the term's words, in order, in `tokens`."""
    words = term.words
    last = len(words) - 1
    for first in index.get(words[0], ()):
        if first + last < len(tokens) and all(
            tokens[first + i].norm == words[i] for i in range(1, last + 1)
        ):
            yield tokens[first].start, tokens[first + last].end


def _evaluate(node: Node, text: PaperText) -> tuple[Hit, ...] | None:
    """The hits of `node` (positive terms only), or None when it does not match."""
    if isinstance(node, Term):
        hits = [
            Hit("title", start, end, node.raw)
            for start, end in _spans(node, text.title, text.title_index)
        ]
        hits += [
            Hit("abstract", start, end, node.raw)
            for start, end in _spans(node, text.abstract, text.abstract_index)
        ]
        return tuple(hits) or None
    if isinstance(node, Category):
        if node.value.casefold() in text.category_keys:
            return (Hit("category", 0, 0, f"cat:{node.value}"),)
        return None
    if isinstance(node, Not):
        return () if _evaluate(node.node, text) is None else None
    found: list[Hit] = []
    for child in node.nodes:
        child_hits = _evaluate(child, text)
        if child_hits is None:
            return None
        found.extend(child_hits)
    return tuple(found)


def match(rule: Rule, text: PaperText) -> tuple[Hit, ...] | None:
    """None if the paper does not match; else every occurrence of the rule's positive terms."""
    return _evaluate(rule.node, text)


def matches_any(rules: Sequence[Rule], text: PaperText) -> list[tuple[Rule, tuple[Hit, ...]]]:
    """The rules the paper matches, each with its hits, in the order given."""
    found = []
    for rule in rules:
        hits = match(rule, text)
        if hits is not None:
            found.append((rule, hits))
    return found
