"""Parse a rule's text into its tree, or raise a `RuleError` a person can act on.

Pure. A hand-written recursive descent parser over a lazy lexer, so the first problem from
the left is the one reported, with its column. The grammar is in `bot.rules`.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from bot.core.errors import RuleError
from bot.core.models import ARXIV_ID_RE
from bot.rules.tree import (
    COMPARISONS,
    MAX_TOP,
    And,
    Author,
    Category,
    Id,
    Leaf,
    Node,
    Not,
    Or,
    Rule,
    Source,
    Term,
    Trending,
    Upvotes,
    format_node,
    is_positive,
)
from bot.rules.words import name_words, prefix_form, scan

__all__ = ["MAX_DEPTH", "MAX_RULE_LENGTH", "MAX_TERMS", "arxiv_id", "parse_rule"]

MAX_RULE_LENGTH = 500
MAX_TERMS = 32  # leaves: words, phrases, authors, categories, ids..., excluded ones too
MAX_DEPTH = 10  # parentheses inside parentheses

ONLY_EXCLUSIONS = "a rule needs at least one term to match; exclusions alone match everything"
NEGATIVE_ALTERNATIVE = (
    "every OR alternative needs a term to match; exclusions alone match almost every paper"
)

_QUOTES = '"“”„'  # typographic quotes too: phones and Slack clients "smarten" quotes
_OPERATORS = frozenset({"OR", "AND", "NOT"})
_FIELD_RE = re.compile(r"([^\W\d_]+):")
_CATEGORY_RE = re.compile(r"[a-z]+(?:-[a-z]+)?(?:\.[a-z]+(?:-[a-z]+)?)?")
# ASCII too: under IGNORECASE alone, [a-z] takes the long s, the dotless i and the Kelvin
# sign, and an id written with one would be kept under a key no paper's equals.
_ID_RE = re.compile(rf"(?:arxiv:)?(?:{ARXIV_ID_RE.pattern})", re.IGNORECASE | re.ASCII)
_OLD_ID_RE = re.compile(
    r"(?P<archive>[a-z][a-z\-]*)(?:\.[a-z]{2})?/(?P<number>[0-9]{7})", re.IGNORECASE | re.ASCII
)

_FIELD_NAMES = ("ti", "abs", "au", "cat", "id", "src", "hf", "upvotes")
# How the fields are shown in the list of fields: hf: and upvotes take one form of value.
_FIELD_SHOWN = {"hf": "hf:topN", "upvotes": "upvotes>=N"}
# Names people try, for "did you mean": the long names map to the short ones.
_FIELD_ALIASES = {
    "title": "ti",
    "abstract": "abs",
    "author": "au",
    "authors": "au",
    "category": "cat",
    "categories": "cat",
    "arxiv": "id",
    "source": "src",
    "sources": "src",
    "huggingface": "hf",
    "trending": "hf",
    "upvote": "upvotes",
    "votes": "upvotes",
} | {name: name for name in _FIELD_NAMES}
_FIELD_NEEDS = {
    "ti": 'ti: needs a word, a "phrase" or a (group), like ti:robot or ti:"diffusion policy"',
    "abs": 'abs: needs a word, a "phrase" or a (group), like abs:robot or abs:"point cloud"',
    "au": 'au: needs a name, like au:lecun or au:"Yann LeCun"',
    "cat": "cat: needs a category, like cat:cs.RO or cat:cs",
    "id": "id: needs an arXiv id, like id:2411.17700 or id:quant-ph/0201082",
    "src": "src: needs a source name or kind, like src:huggingface, src:arxiv or src:hf-daily",
    "hf": (
        f"hf: needs topN, the day's N most upvoted Hugging Face papers (N from 1 to {MAX_TOP}),"
        " like hf:top10"
    ),
    "upvotes": "upvotes needs a comparison and a whole number, like upvotes>=20 (or >, <=, <, =)",
}
_NOT_A_CATEGORY = "is not an arXiv category (like cs, cs.RO, q-bio.NC, astro-ph.CO, math-ph)"
_NOT_AN_ID = "is not an arXiv id (like 2411.17700 or quant-ph/0201082)"
_SOURCE_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
_NOT_A_SOURCE = (
    'is not a source name (letters, digits, "-", "_" and "."; like huggingface, arxiv or hf-daily)'
)
_NUMBER_RE = re.compile(r"[0-9]+")
_TOP_NEEDS = f"hf:top needs a number from 1 to {MAX_TOP} right after it, like hf:top10"
_NOT_HF = (
    f"is not an hf: value; did you mean hf:top10? (hf:topN: the day's N most upvoted"
    f" Hugging Face papers, N from 1 to {MAX_TOP})"
)
# `upvotes>=20` is one word: "upvotes", a comparison, a number. These characters start the
# comparison (the wrong ones too, to say what is wrong rather than search for the word).
_COMPARISON_CHARS = "<>=!≥≤"
_COMPARISON_START = frozenset(_COMPARISON_CHARS)
_NAMED_COMPARISON_RE = re.compile(rf"([^\W\d_]+)([{_COMPARISON_CHARS}].*)", re.S)
# A word that may be (or be a mistyped) comparison; the others are words (one test: fast).
_MAY_COMPARE_RE = re.compile(rf"[{_COMPARISON_CHARS}]|\Aupvotes\Z", re.I)
_UPVOTES = "upvotes"
# Control characters (NUL, escapes, DEL, C1), lone surrogates and the bidirectional overrides
# that reorder what a page shows; tabs and line breaks are spaces to the lexer.
_CONTROL_RE = re.compile(
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]"
)
# Comparisons people write for the ones the language has.
_COMPARISON_FIXES = {"=>": ">=", "=<": "<=", "==": "=", "≥": ">=", "≤": "<="}


def arxiv_id(value: str) -> str | None:
    """The version-less, canonical arXiv id in `value` (`arXiv:2411.17700v2` -> 2411.17700),
    or None. Old-style ids lose their subject class: `math.GT/0309136` -> math/0309136."""
    found = _ID_RE.fullmatch(_ascii_digits(value.strip()))
    if found is None:
        return None
    identifier = found.group("id")
    if old := _OLD_ID_RE.fullmatch(identifier):
        return f"{old['archive'].lower()}/{old['number']}"
    return identifier


def _ascii_digits(value: str) -> str:
    """`value` with every decimal digit written 0-9 (`٢٤١١` -> 2411, `２０` -> 20), one
    character for one, so positions hold. A rule's ids and counts are read as numbers, in
    whatever script a keyboard wrote them; kept as they were, they would match nothing."""
    if value.isascii():
        return value
    return "".join(str(unicodedata.decimal(c)) if c.isdecimal() else c for c in value)


def _category(value: str) -> str:
    """arXiv's spelling: archive in lower case, two-letter subject classes in upper case."""
    archive, dot, subject = value.lower().partition(".")
    return archive + dot + (subject.upper() if len(subject) == 2 else subject)


@dataclass(frozen=True, slots=True)
class _Token:
    """A piece of rule syntax: kind is "(", ")", "OR", "AND", "NOT", "-", "field" (value is
    the name), "word" (value as written) or "phrase" (value is the inner text, collapsed)."""

    kind: str
    start: int
    end: int
    value: str


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.offset = 0  # where the lexer goes on
        self.ahead: _Token | None = None
        self.pending: _Token | None = None  # a field's value, lexed with the field
        self.leaves = 0
        self.depth = 0
        # id(node) -> (node, start): where each node starts, to blame an OR alternative.
        # The node is kept so that its id is not reused while parsing.
        self.starts: dict[int, tuple[Node, int]] = {}

    # -- the lexer -------------------------------------------------------------------------

    def peek(self) -> _Token | None:
        if self.ahead is None:
            self.ahead = self._lex()
        return self.ahead

    def take(self) -> _Token:
        token = self.peek()
        assert token is not None  # the grammar only takes a token it has seen
        self.ahead = None
        return token

    def _lex(self) -> _Token | None:
        if self.pending is not None:
            token, self.pending = self.pending, None
            self.offset = token.end
            return token
        text, i = self.text, self.offset
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            self.offset = i
            return None
        char = text[i]
        if char in "()-":
            token = _Token(char, i, i + 1, char)
        elif char in _QUOTES:
            close = next((j for j in range(i + 1, len(text)) if text[j] in _QUOTES), -1)
            if close < 0:
                raise self.error('missing closing " for the phrase that starts', i)
            inner = " ".join(text[i + 1 : close].split())
            if not inner:
                raise self.error('empty phrase ""', i)
            token = _Token("phrase", i, close + 1, inner)
        else:
            end = i
            while end < len(text) and not (
                text[end].isspace() or text[end] in _QUOTES or text[end] in "()"
            ):
                end += 1
            chunk = text[i:end]
            if (bar := chunk.find("|")) >= 0:
                raise self.error('"|" is not an operator; write OR between alternatives', i + bar)
            if chunk in _OPERATORS:
                token = _Token(chunk, i, end, chunk)
            elif field := _FIELD_RE.match(chunk):
                token = _Token("field", i, i + field.end(), field[1])
                if field.end() < len(chunk):
                    # The rest of the chunk is the value, a word whatever it looks like
                    # (ti:OR, ti:-x), so that the field can say what is wrong with it.
                    self.pending = _Token("word", token.end, end, chunk[field.end() :])
            else:
                token = _Token("word", i, end, chunk)
        self.offset = token.end
        return token

    def error(self, message: str, position: int) -> RuleError:
        return RuleError(message, text=self.text, position=position)

    # -- the grammar -----------------------------------------------------------------------

    def rule(self) -> Node:
        node = self.alternatives(field=None, after=None)
        extra = self.peek()
        if extra is not None:  # alternatives() stops only at the end or at a ")"
            raise self.error('")" without a matching "("', extra.start)
        if not is_positive(node):
            raise self._blame(node)
        return node

    def alternatives(self, *, field: str | None, after: _Token | None) -> Node:
        """alternative { "OR" alternative }"""
        nodes = [self.conjunction(field=field, after=after)]
        while (token := self.peek()) is not None and token.kind == "OR":
            self.take()
            nodes.append(self.conjunction(field=field, after=token))
        return self._joined(Or, nodes)

    def conjunction(self, *, field: str | None, after: _Token | None) -> Node:
        """unary { [ "AND" ] unary }"""
        nodes = [self.unary(field=field, after=after)]
        while (token := self.peek()) is not None and token.kind not in ("OR", ")"):
            if token.kind == "AND":
                self.take()
                nodes.append(self.unary(field=field, after=token))
            else:
                nodes.append(self.unary(field=field, after=None))
        return self._joined(And, nodes)

    def unary(self, *, field: str | None, after: _Token | None) -> Node:
        """[ "NOT" | "-" ] primary"""
        token = self.peek()
        if token is None or token.kind not in ("NOT", "-"):
            return self.primary(field=field, after=after)
        self.take()
        following = self.peek()
        if token.kind == "-" and (following is None or following.start != token.end):
            raise self.error('a bare "-" excludes nothing; write -word or -"a phrase"', token.start)
        if following is not None and following.kind in ("NOT", "-"):
            raise self.error("two negations cancel out; remove both", following.start)
        node = self.primary(field=field, after=token)
        if isinstance(node, Not):
            assert following is not None
            raise self.error("two negations cancel out; remove both", following.start)
        return self._at(Not(node), token.start)

    def primary(self, *, field: str | None, after: _Token | None) -> Node:
        """ "(" rule ")" | field | phrase | word"""
        token = self.peek()
        if token is None or token.kind in ("OR", "AND", ")"):
            raise self._missing_term(after, token)
        self.take()
        if token.kind == "(":
            return self.group(token, field=field)
        if token.kind == "field":
            if field == "id" and token.value.lower() == "arxiv":
                return self.leaf(self._arxiv_value(token), field=field)  # id:(arXiv:2411.17700)
            if field is not None:
                message = (
                    f"{token.value.lower()}: cannot be used inside {field}:( ); "
                    "write it outside the parentheses"
                )
                raise self.error(message, token.start)
            return self.field(token)
        if token.kind == "word" and _MAY_COMPARE_RE.search(token.value):
            if _is_upvotes(token.value):
                if field is not None:
                    message = (
                        f"{token.value} cannot be used inside {field}:( ); "
                        "write it outside the parentheses"
                    )
                    raise self.error(message, token.start)
                return self.leaf(token, field="upvotes")
            if field is None:
                self._check_comparison_word(token)
        return self.leaf(token, field=field or "any")

    def group(self, opening: _Token, *, field: str | None) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"parentheses can nest at most {MAX_DEPTH} deep", opening.start)
        node = self.alternatives(field=field, after=opening)
        if self.peek() is None:
            raise self.error('expected ")"', len(self.text))
        self.take()  # the ")": alternatives() stops only at the end or at a ")"
        self.depth -= 1
        return self._at(node, opening.start)

    def field(self, token: _Token) -> Node:
        name = token.value.lower()
        if name not in _FIELD_NEEDS:
            raise self.error(_unknown_field(token.value), token.start)
        value = self.peek()
        if value is None or value.start != token.end or value.kind not in ("word", "phrase", "("):
            raise self.error(_FIELD_NEEDS[name], token.end)
        if value.kind == "(" and name in ("hf", "upvotes"):
            raise self.error(_FIELD_NEEDS[name], value.start)
        self.take()
        if value.kind == "(":
            return self.group(value, field=name)
        return self.leaf(value, field=name)

    def leaf(self, token: _Token, *, field: str) -> Leaf:
        self.leaves += 1
        if self.leaves > MAX_TERMS:
            raise self.error(f"a rule can have at most {MAX_TERMS} terms", token.start)
        quoted = token.kind == "phrase"
        value = token.value
        start = token.start + 1 if quoted else token.start  # where `value` starts in the rule
        if not quoted and value.startswith("-") and field != "upvotes":
            message = f'to exclude, put "-" before the field: -{field}:{value[1:]}'
            raise self.error(message, token.start)
        build = _LEAVES[field]
        leaf = build(self, value, quoted=quoted, field=field, start=start)
        self._at(leaf, token.start)
        return leaf

    def _arxiv_value(self, token: _Token) -> _Token:
        """The word `arXiv:...` inside `id:( )`, which the lexer took for a field."""
        value = self.peek()
        if value is None or value.start != token.end or value.kind != "word":
            raise self.error(_FIELD_NEEDS["id"], token.end)
        self.take()
        return _Token("word", token.start, value.end, f"{token.value}:{value.value}")

    def _check_comparison_word(self, token: _Token) -> None:
        """Refuse what looks like a mistyped `upvotes>=20` rather than search its words:
        `upvotes >= 20` (spaces), `upvote>=20`, `votes>=20`."""
        if token.value.lower() == _UPVOTES:
            following = self.peek()
            if (
                following is not None
                and following.kind == "word"
                and following.value[0] in _COMPARISON_START
            ):
                message = "write the comparison as one word, without spaces, like upvotes>=20"
                raise self.error(message, token.end)
        elif (found := _NAMED_COMPARISON_RE.fullmatch(token.value)) is not None:
            name, compared = found.groups()
            if _FIELD_ALIASES.get(name.lower()) == _UPVOTES:
                message = f'unknown name "{name}" (did you mean {_UPVOTES}{compared}?)'
                raise self.error(message, token.start)

    # -- helpers ---------------------------------------------------------------------------

    def _at(self, node: Node, start: int) -> Node:
        self.starts[id(node)] = (node, start)
        return node

    def _joined(self, kind: type[And] | type[Or], nodes: list[Node]) -> Node:
        if len(nodes) == 1:
            return nodes[0]
        flat: list[Node] = []
        for node in nodes:
            flat.extend(node.nodes if isinstance(node, kind) else (node,))
        return self._at(kind(tuple(flat)), self.starts[id(nodes[0])][1])

    def _missing_term(self, after: _Token | None, token: _Token | None) -> RuleError:
        """The error for a place that needs a term but has `token` (None: the end)."""
        if after is not None and after.kind in ("OR", "AND"):
            return self.error(f'"{after.kind}" needs a term on both sides', after.start)
        if after is not None and after.kind == "NOT":
            return self.error('"NOT" needs a term after it', after.start)
        if after is not None and after.kind == "-":
            message = 'a bare "-" excludes nothing; write -word or -"a phrase"'
            return self.error(message, after.start)
        if token is not None and token.kind in ("OR", "AND"):
            return self.error(f'"{token.kind}" needs a term on both sides', token.start)
        if after is not None:  # after a "("
            if token is None:
                return self.error('expected ")"', len(self.text))
            return self.error('empty parentheses "()"', after.start)
        assert token is not None  # the rule is not empty
        return self.error('")" without a matching "("', token.start)

    def _blame(self, node: Node) -> RuleError:
        """The error for a rule that is not positive, pointing at the culprit."""
        culprit = _negative_alternative(node)
        if culprit is None:
            return self.error(ONLY_EXCLUSIONS, 0)
        return self.error(NEGATIVE_ALTERNATIVE, self.starts[id(culprit)][1])

    # -- leaves ----------------------------------------------------------------------------

    def term(self, value: str, *, quoted: bool, field: str, start: int) -> Leaf:
        raw = f'"{value}"' if quoted else value
        prefix = False
        star = value.find("*")
        if quoted:
            prefix = value.endswith("*") and len(value) > 1 and value[-2].isalnum()
        elif star >= 0:
            if star != len(value) - 1 or star == 0 or not value[star - 1].isalnum():
                message = '"*" works only at the end of a word, like transform*'
                raise self.error(message, start + star)
            prefix = True
        body = value[:-1] if prefix else value
        words = scan(body)
        if not words:
            shown = raw if quoted else f'"{raw}"'
            message = f"{shown} has no word in it (letters or digits) to match"
            raise self.error(message, start - 1 if quoted else start)
        folded = [norm for norm, _, _, _ in words]
        if prefix:
            _, _, last_start, last_end = words[-1]
            stem = prefix_form(body[last_start:last_end])
            if last_end != len(body) or len(stem) < 3:
                message = 'a wildcard needs at least 3 letters before "*", like transform*'
                raise self.error(message, start - 1 if quoted else start)
            folded[-1] = stem
        return Term(tuple(folded), raw, quoted, field, prefix)

    def author(self, value: str, *, quoted: bool, field: str, start: int) -> Leaf:
        raw = f'"{value}"' if quoted else value
        if (star := value.find("*")) >= 0:
            message = 'au: takes a name without "*": write the surname, like au:lecun'
            # A phrase's spaces are collapsed: point at its quote, not into it.
            raise self.error(message, start - 1 if quoted else start + star)
        words = name_words(value)
        if not words:
            message = f"au:{raw} has no name in it to match"
            raise self.error(message, start - 1 if quoted else start)
        return Author(words, raw)

    def category(self, value: str, *, quoted: bool, field: str, start: int) -> Leaf:
        if value.endswith(".*") and "." not in value[:-2]:
            value = value[:-2]  # cat:cs.* is the archive
        if not _CATEGORY_RE.fullmatch(value.lower()):
            raise self.error(f'"{value}" {_NOT_A_CATEGORY}', start)
        return Category(_category(value))

    def identifier(self, value: str, *, quoted: bool, field: str, start: int) -> Leaf:
        identifier = arxiv_id(value)
        if identifier is None:
            raise self.error(f'"{value}" {_NOT_AN_ID}', start)
        return Id(identifier)

    def source(self, value: str, *, quoted: bool, field: str, start: int) -> Leaf:
        name = value.lower()
        if not _SOURCE_RE.fullmatch(name):
            raise self.error(f'"{value}" {_NOT_A_SOURCE}', start)
        return Source(name)

    def trending(self, value: str, *, quoted: bool, field: str, start: int) -> Leaf:
        if value[:3].lower() != "top":
            raise self.error(f'"{value}" {_NOT_HF}', start)
        number = _ascii_digits(value[3:])
        if not _NUMBER_RE.fullmatch(number) or not 1 <= int(number) <= MAX_TOP:
            raise self.error(_TOP_NEEDS, start + 3)
        return Trending(int(number))

    def upvotes(self, value: str, *, quoted: bool, field: str, start: int) -> Leaf:
        """`upvotes>=20` (the word, `value` with its name) or `upvotes:>=20` (the field's
        value: the comparison only)."""
        if quoted:
            raise self.error(_FIELD_NEEDS["upvotes"], start - 1)
        if value[: len(_UPVOTES)].lower() == _UPVOTES:
            value, start = value[len(_UPVOTES) :], start + len(_UPVOTES)
        op = value[: len(value) - len(value.lstrip(_COMPARISON_CHARS))]
        number = _ascii_digits(value[len(op) :])
        if not op:
            if _NUMBER_RE.fullmatch(number):
                count = int(number)
                message = (
                    f"write a comparison: upvotes>={count} (at least {count} upvotes)"
                    f" or upvotes={count} (exactly {count})"
                )
                raise self.error(message, start)
            raise self.error(_FIELD_NEEDS["upvotes"], start)
        if op not in COMPARISONS:
            if (fixed := _COMPARISON_FIXES.get(op)) is not None:
                message = f'"{op}" is not a comparison; did you mean {_UPVOTES}{fixed}{number}?'
            else:
                message = f'"{op}" is not a comparison; use >=, >, <=, < or =, like upvotes>=20'
            raise self.error(message, start)
        if not _NUMBER_RE.fullmatch(number):
            message = f"{_UPVOTES}{op} needs a whole number right after it, like {_UPVOTES}{op}20"
            raise self.error(message, start + len(op))
        return Upvotes(op, int(number))


_LEAVES: dict[str, Callable[..., Leaf]] = {
    "any": _Parser.term,
    "ti": _Parser.term,
    "abs": _Parser.term,
    "au": _Parser.author,
    "cat": _Parser.category,
    "id": _Parser.identifier,
    "src": _Parser.source,
    "hf": _Parser.trending,
    "upvotes": _Parser.upvotes,
}


def _is_upvotes(word: str) -> bool:
    """Whether a word is an upvotes comparison (`upvotes>=20`, or a mistyped one)."""
    size = len(_UPVOTES)
    return len(word) > size and word[size] in _COMPARISON_START and word[:size].lower() == _UPVOTES


def _unknown_field(name: str) -> str:
    close = difflib.get_close_matches(name.lower(), _FIELD_ALIASES, n=1, cutoff=0.6)
    if close:
        meant = _FIELD_ALIASES[close[0]]
        shown = f"{meant}, as in upvotes>=20" if meant == _UPVOTES else f"{meant}:"
        return f'unknown field "{name}:" (did you mean {shown}?)'
    known = ", ".join(_FIELD_SHOWN.get(f, f"{f}:") for f in _FIELD_NAMES)
    return f'unknown field "{name}:" (fields: {known}; quote text with a colon to search it)'


def _negative_alternative(node: Node) -> Node | None:
    """In a rule that is not positive, the first OR alternative that is purely negative;
    None if the rule is not positive without any OR (it is all exclusions)."""
    if isinstance(node, Or):
        for child in node.nodes:
            if not is_positive(child):
                return _negative_alternative(child) or child
    if isinstance(node, And):
        for child in node.nodes:
            if isinstance(child, Or):  # every child is negative: an OR child holds the culprit
                return _negative_alternative(child)
    return None


def parse_rule(text: str) -> Rule:
    """Parse one rule; raise `RuleError` pointing at the column of the first problem."""
    text = text.strip()
    if bad := _CONTROL_RE.search(text):
        message = f"a rule cannot hold the control character U+{ord(bad[0]):04X}"
        raise RuleError(message, text=text, position=bad.start())
    if not text:
        message = 'a rule is empty; write a word, a "phrase" or cat:cs.RO'
        raise RuleError(message, text=text, position=0)
    if len(text) > MAX_RULE_LENGTH:
        count = len(text)
        message = f"a rule can be at most {MAX_RULE_LENGTH} characters long (this one has {count})"
        raise RuleError(message, text=text, position=MAX_RULE_LENGTH)
    node = _Parser(text).rule()
    # The limit holds for the rule written out in full too (`ti:(a OR b)` is `ti:a OR
    # ti:b`, a few characters longer): what paperbell writes back always parses again.
    written = len(format_node(node))
    if written > MAX_RULE_LENGTH:
        message = (
            f"a rule can be at most {MAX_RULE_LENGTH} characters long written out in full "
            f"(this one has {written}: a field applies to each word of its group, "
            "ti:(a OR b) is ti:a OR ti:b)"
        )
        raise RuleError(message, text=text, position=len(text))
    return Rule(text=text, node=node)
