"""Evaluate a rule's tree on a paper: the reference evaluator, and the paper's indexes.

Pure. `analyze` reads a paper once into a `PaperText` (its words, folded and indexed, its
authors' names, categories and id, its sources and Hugging Face upvotes and rank);
`evaluate` walks a tree over it and returns the hits of the positive leaves (None: no
match). An index over many rules (`bot.match.matcher`) must agree with `match`, which is this
evaluator.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from bot.core.models import Hit, Paper
from bot.rules.parser import arxiv_id
from bot.rules.tree import (
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
    leaf_text,
)
from bot.rules.words import Token, name_words, scan

__all__ = [
    "PaperText",
    "analyze",
    "analyze_text",
    "evaluate",
    "holds",
    "leaf_hits",
    "match",
    "matches_any",
]

Index = Mapping[str, tuple[int, ...]]
Span = tuple[int, int]


@dataclass(frozen=True, slots=True)
class PaperText:
    """A paper's words, tokenized once and indexed, for matching any number of rules."""

    title: tuple[Token, ...]
    abstract: tuple[Token, ...]
    categories: tuple[str, ...]  # case-folded
    title_index: Index = field(repr=False, compare=False)  # folded word -> token positions
    abstract_index: Index = field(repr=False, compare=False)
    category_keys: frozenset[str] = field(repr=False, compare=False)  # categories + archives
    id: str = ""  # version-less arXiv id, canonical (`arxiv_id`)
    # Per author, in the order of Paper.authors: `name_words` (folded, surname last;
    # affiliations dropped). An author without a name word has ().
    authors: tuple[tuple[str, ...], ...] = ()
    # Unfolded form (lower case and accent folded, NOT plural folded) -> token positions,
    # only where it differs from the folded form ("studies" for the token "study"). A
    # wildcard prefix is compared with the keys of title_index and of title_variants.
    title_variants: Index = field(default_factory=dict, repr=False, compare=False)
    abstract_variants: Index = field(default_factory=dict, repr=False, compare=False)
    # Surname (an author's last name word) -> indexes into `authors`.
    surname_index: Index = field(default_factory=dict, repr=False, compare=False)
    # The keys of title_index and title_variants together, sorted: a wildcard prefix finds
    # the words it starts by bisection instead of a scan.
    title_forms: tuple[str, ...] = field(default=(), repr=False, compare=False)
    abstract_forms: tuple[str, ...] = field(default=(), repr=False, compare=False)
    # The names and kinds of the sources that brought the paper, lower case (`src:`).
    sources: frozenset[str] = frozenset()
    # Hugging Face Daily Papers (None: not there): upvotes, and the rank among the day's
    # papers by upvotes, 1 the most upvoted (`upvotes>=20`, `hf:top10`).
    upvotes: int | None = None
    hf_rank: int | None = None


def _words(text: str) -> tuple[tuple[Token, ...], Index, Index]:
    """The tokens of a text, the index of their folded forms, and the index of their
    unfolded forms where those differ."""
    scanned = scan(text)
    positions: dict[str, list[int]] = {}
    variants: dict[str, list[int]] = {}
    for i, (norm, form, _, _) in enumerate(scanned):
        found = positions.get(norm)
        if found is None:
            positions[norm] = [i]
        else:
            found.append(i)
        if form != norm:
            variants.setdefault(form, []).append(i)
    return (
        tuple([Token(norm, start, end) for norm, _, start, end in scanned]),
        {norm: tuple(found) for norm, found in positions.items()},
        {form: tuple(found) for form, found in variants.items()},
    )


def _surnames(authors: Sequence[tuple[str, ...]]) -> dict[str, tuple[int, ...]]:
    """Surname -> the indexes of the authors who have it. Lists first, then tuples: a tuple
    grown at each author copies it, quadratic in a collaboration's thousands."""
    found: dict[str, list[int]] = {}
    for i, words in enumerate(authors):
        if words:
            found.setdefault(words[-1], []).append(i)
    return {surname: tuple(indexes) for surname, indexes in found.items()}


def analyze_text(
    title: str,
    abstract: str,
    categories: Iterable[str] = (),
    *,
    id: str = "",
    authors: Iterable[str] = (),
    sources: Iterable[str] = (),
    upvotes: int | None = None,
    hf_rank: int | None = None,
) -> PaperText:
    """A `PaperText` from the parts of a paper (`authors` as written, one string each;
    `sources` its sources' names and kinds, in any case)."""
    title_tokens, title_index, title_variants = _words(title)
    abstract_tokens, abstract_index, abstract_variants = _words(abstract)
    folded = tuple(c.casefold() for c in categories)
    names = tuple(name_words(author) for author in authors)
    return PaperText(
        title=title_tokens,
        abstract=abstract_tokens,
        categories=folded,
        title_index=title_index,
        abstract_index=abstract_index,
        category_keys=frozenset(folded) | {c.partition(".")[0] for c in folded},
        id=(arxiv_id(id) or id.strip()) if id else "",
        authors=names,
        title_variants=title_variants,
        abstract_variants=abstract_variants,
        surname_index=_surnames(names),
        title_forms=tuple(sorted(title_index.keys() | title_variants.keys())),
        abstract_forms=tuple(sorted(abstract_index.keys() | abstract_variants.keys())),
        sources=frozenset(name.strip().lower() for name in sources if name.strip()),
        upvotes=upvotes,
        hf_rank=hf_rank,
    )


def analyze(paper: Paper) -> PaperText:
    """Tokenize a paper once, to match it against every rule. Its sources are `sources`
    and `source` (the first of them, the only one a paper stored before `sources` has)."""
    return analyze_text(
        paper.title,
        paper.abstract,
        paper.categories,
        id=paper.id,
        authors=paper.authors,
        sources=(*paper.sources, paper.source),
        upvotes=paper.upvotes,
        hf_rank=paper.hf_rank,
    )


# ---------------------------------------------------------------------------------------------
# Leaves


def _spans(
    term: Term, tokens: Sequence[Token], index: Index, variants: Index, forms: Sequence[str]
) -> list[Span]:
    """The spans of every occurrence of the term's words in `tokens`, in text order.
    `forms`: the keys of `index` and `variants`, sorted."""
    words = term.words
    last = len(words) - 1
    ends: set[int] = set()  # for a prefix: the positions of the words it starts
    if term.prefix:
        stem = words[-1]
        at = bisect_left(forms, stem)
        while at < len(forms) and forms[at].startswith(stem):
            ends.update(index.get(forms[at], ()))
            ends.update(variants.get(forms[at], ()))
            at += 1
        if last == 0:
            return [(tokens[i].start, tokens[i].end) for i in sorted(ends)]
    elif last == 0:
        return [(tokens[i].start, tokens[i].end) for i in index.get(words[0], ())]
    return [
        (tokens[first].start, tokens[first + last].end)
        for first in index.get(words[0], ())
        if first + last < len(tokens)
        and all(tokens[first + i].norm == words[i] for i in range(1, last))
        and (first + last in ends if term.prefix else tokens[first + last].norm == words[last])
    ]


def _word_hits(term: Term, text: PaperText) -> tuple[Hit, ...] | None:
    """`_term_hits` of a one-word term without a wildcard (most terms): its positions are
    those of the indexes."""
    word = term.words[0]
    title = text.title_index.get(word, ()) if term.field != "abs" else ()
    abstract = text.abstract_index.get(word, ()) if term.field != "ti" else ()
    if not title and not abstract:
        return None
    label = leaf_text(term)
    tokens = text.title
    found = [Hit("title", tokens[i].start, tokens[i].end, label) for i in title]
    if abstract:
        tokens = text.abstract
        found += [Hit("abstract", tokens[i].start, tokens[i].end, label) for i in abstract]
    return tuple(found)


def _term_hits(term: Term, text: PaperText) -> tuple[Hit, ...] | None:
    if len(term.words) == 1 and not term.prefix:
        return _word_hits(term, text)
    title: list[Span] = []
    abstract: list[Span] = []
    if term.field != "abs":
        title = _spans(term, text.title, text.title_index, text.title_variants, text.title_forms)
    if term.field != "ti":
        abstract = _spans(
            term, text.abstract, text.abstract_index, text.abstract_variants, text.abstract_forms
        )
    if not title and not abstract:
        return None
    label = leaf_text(term)
    return (
        *(Hit("title", start, end, label) for start, end in title),
        *(Hit("abstract", start, end, label) for start, end in abstract),
    )


def _occurs(
    term: Term, tokens: Sequence[Token], index: Index, variants: Index, forms: Sequence[str]
) -> bool:
    """Whether `_spans` would find any span (for a multi-word or wildcard term): the same
    tests, stopping at the first occurrence, making no spans."""
    words = term.words
    last = len(words) - 1
    if term.prefix:
        stem = words[-1]
        at = bisect_left(forms, stem)
        if last == 0:  # every form of `forms` has positions in `index` or `variants`
            return at < len(forms) and forms[at].startswith(stem)
        ends: set[int] = set()
        while at < len(forms) and forms[at].startswith(stem):
            ends.update(index.get(forms[at], ()))
            ends.update(variants.get(forms[at], ()))
            at += 1
        return any(
            first + last in ends and all(tokens[first + i].norm == words[i] for i in range(1, last))
            for first in index.get(words[0], ())
        )
    return any(
        first + last < len(tokens)
        and all(tokens[first + i].norm == words[i] for i in range(1, last + 1))
        for first in index.get(words[0], ())
    )


def _term_holds(term: Term, text: PaperText) -> bool:
    """`_term_hits(term, text) is not None`, without the hits."""
    if not term.prefix and len(term.words) == 1:
        word = term.words[0]
        return (term.field != "abs" and word in text.title_index) or (
            term.field != "ti" and word in text.abstract_index
        )
    return (
        term.field != "abs"
        and _occurs(term, text.title, text.title_index, text.title_variants, text.title_forms)
    ) or (
        term.field != "ti"
        and _occurs(
            term, text.abstract, text.abstract_index, text.abstract_variants, text.abstract_forms
        )
    )


def _given_names_agree(wanted: Sequence[str], names: Sequence[str]) -> bool:
    """Whether the rule's given names (and initials, particles) are found, in order, among
    an author's: equal, or one is an initial of the other (y ~ yann)."""
    j = 0
    for want in wanted:
        while j < len(names) and not (
            names[j] == want
            or (len(want) == 1 and names[j][0] == want)
            or (len(names[j]) == 1 and want[0] == names[j])
        ):
            j += 1
        if j == len(names):
            return False
        j += 1
    return True


def _authors_of(author: Author, text: PaperText) -> list[int]:
    surname = author.words[-1]
    if text.surname_index or not text.authors:
        candidates: Iterable[int] = text.surname_index.get(surname, ())
    else:  # a PaperText built by hand
        candidates = (i for i, words in enumerate(text.authors) if words[-1:] == (surname,))
    given = author.words[:-1]
    return [i for i in candidates if _given_names_agree(given, text.authors[i][:-1])]


def _author_hits(author: Author, text: PaperText) -> tuple[Hit, ...] | None:
    found = _authors_of(author, text)
    if not found:
        return None
    label = leaf_text(author)
    return tuple(Hit("author", i, i, label) for i in found)


def _category_hits(category: Category, text: PaperText) -> tuple[Hit, ...] | None:
    if category.value.casefold() in text.category_keys:
        return (Hit("category", 0, 0, f"cat:{category.value}"),)
    return None


def _id_hits(identifier: Id, text: PaperText) -> tuple[Hit, ...] | None:
    if identifier.value == text.id:
        return (Hit("id", 0, 0, f"id:{identifier.value}"),)
    return None


def _compares(leaf: Upvotes, upvotes: int | None) -> bool:
    if upvotes is None:  # not on Hugging Face: no comparison holds
        return False
    if leaf.op == ">=":
        return upvotes >= leaf.value
    if leaf.op == ">":
        return upvotes > leaf.value
    if leaf.op == "<=":
        return upvotes <= leaf.value
    if leaf.op == "<":
        return upvotes < leaf.value
    return upvotes == leaf.value


def _in_top(leaf: Trending, rank: int | None) -> bool:
    return rank is not None and rank <= leaf.n


def _hit(field: Literal["source", "upvotes", "trending"], leaf: Leaf) -> tuple[Hit, ...]:
    """The one hit of a leaf that is about the whole paper: `Hit(field, 0, 0, term)`."""
    return (Hit(field, 0, 0, leaf_text(leaf)),)


def leaf_hits(leaf: Leaf, text: PaperText) -> tuple[Hit, ...] | None:
    """The hits of one leaf (never empty), or None when it does not match."""
    if isinstance(leaf, Term):
        return _term_hits(leaf, text)
    if isinstance(leaf, Author):
        return _author_hits(leaf, text)
    if isinstance(leaf, Category):
        return _category_hits(leaf, text)
    if isinstance(leaf, Id):
        return _id_hits(leaf, text)
    if isinstance(leaf, Source):
        return _hit("source", leaf) if leaf.value in text.sources else None
    if isinstance(leaf, Upvotes):
        return _hit("upvotes", leaf) if _compares(leaf, text.upvotes) else None
    return _hit("trending", leaf) if _in_top(leaf, text.hf_rank) else None


# ---------------------------------------------------------------------------------------------
# Trees


def evaluate(node: Node, text: PaperText) -> tuple[Hit, ...] | None:
    """None if the paper does not match `node`; else the hits of its positive leaves.

    Deterministic: children in order; for a term, title hits then abstract hits, each in
    text order; for OR, the hits of every alternative that matches; none under a NOT."""
    if isinstance(node, And):
        found: list[Hit] = []
        for child in node.nodes:
            hits = evaluate(child, text)
            if hits is None:
                return None
            found += hits
        return tuple(found)
    if isinstance(node, Or):
        found = []
        matched = False
        for child in node.nodes:
            hits = evaluate(child, text)
            if hits is not None:
                matched = True
                found += hits
        return tuple(found) if matched else None
    if isinstance(node, Not):
        return None if holds(node.node, text) else ()
    return leaf_hits(node, text)


def holds(node: Node, text: PaperText) -> bool:
    """Whether the paper matches `node` (`evaluate(...) is not None`, without the hits)."""
    if isinstance(node, Term):
        return _term_holds(node, text)
    if isinstance(node, And):
        return all(holds(child, text) for child in node.nodes)
    if isinstance(node, Or):
        return any(holds(child, text) for child in node.nodes)
    if isinstance(node, Not):
        return not holds(node.node, text)
    if isinstance(node, Author):
        return bool(_authors_of(node, text))
    if isinstance(node, Category):
        return node.value.casefold() in text.category_keys
    if isinstance(node, Id):
        return node.value == text.id
    if isinstance(node, Source):
        return node.value in text.sources
    if isinstance(node, Upvotes):
        return _compares(node, text.upvotes)
    return _in_top(node, text.hf_rank)


def match(rule: Rule, text: PaperText) -> tuple[Hit, ...] | None:
    """None if the paper does not match; else every occurrence of the rule's positive terms.

    The reference evaluator: `evaluate(rule.node, text)`."""
    return evaluate(rule.node, text)


def matches_any(rules: Sequence[Rule], text: PaperText) -> list[tuple[Rule, tuple[Hit, ...]]]:
    """The rules the paper matches, each with its hits, in the order given."""
    found = []
    for rule in rules:
        hits = match(rule, text)
        if hits is not None:
            found.append((rule, hits))
    return found
