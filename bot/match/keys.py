"""The rule index's keys: which keys a paper has, which keys a rule tree is indexed under,
and the key test a candidate must pass before it is evaluated.

Owns the key algebra behind `bot.match.matcher.Matcher`:

* a paper's keys (`paper_keys`): its folded words and pairs of adjacent words, `cat:` for
  its categories and their archives, `au:` for its authors' surnames, `id:`, `src:`, and
  `hf:` if it is on Hugging Face;
* a rule tree's *trigger* (`cheapest_trigger`; `trigger_keys` shows it): keys of which every
  paper it matches has at least one. A word needs its folded word; a phrase one pair of its
  adjacent words (the rarest, by `frequencies`: "reinforcement learning"); `au:` the
  surname; `cat:` the category; `id:` the id; `src:` the source name or kind;
  `upvotes>=20` and `hf:top10` the key `hf:`, which every paper on Hugging Face has; a lone
  wildcard its prefix (looked up with every prefix of the paper's word forms). `And` takes
  the trigger of its cheapest positive part, `Or` the union of its alternatives'. A tree
  without one (only a rule the parser refuses: all negative) is evaluated on every paper;
* a rule tree's key test (`key_filter`): the keys of which a paper must have all, or all of
  one set (`needed_keys`), and those it must have none of (the keys of an exact negated
  part, `exact_keys`);
* the table of key frequencies that picks the cheapest trigger (`DEFAULT_FREQUENCIES`, one
  day of arXiv; `key_frequencies` computes one, `bench/match.py --frequencies` prints it).

Pure: no I/O, no clock. It decides only which rules are worth asking about a paper, never
whether one matches: that is `bot.rules`' answer, which the matcher asks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import TypeAlias

from bot.rules import (
    And,
    Author,
    Category,
    Id,
    Node,
    Not,
    Or,
    PaperText,
    Source,
    Term,
    Trending,
    Upvotes,
)

__all__ = [
    "DEFAULT_FREQUENCIES",
    "KeyFilter",
    "Trigger",
    "cheapest_trigger",
    "exact_keys",
    "key_filter",
    "key_frequencies",
    "needed_keys",
    "paper_keys",
    "trigger_keys",
]

_COMMON_PERCENT: dict[int, str] = {
    98: "of the",
    96: "and",
    95: "a",
    93: "in",
    91: "to",
    86: "we",
    84: "for",
    75: "that thi",
    74: "with",
    71: "is",
    70: "on",
    61: "by",
    55: "as",
    51: "an",
    49: "model",
    48: "are cat:cs",
    47: "from",
    43: "our",
    38: "which",
    37: "these",
    35: "can method result",
    34: "be",
    32: "based using",
    29: "at",
    28: "approach paper study",
    27: "data it",
    26: "show such",
    25: "two",
    24: "also system their time",
    23: "or state",
    22: "between cat:math demonstrate have however large present while",
    21: "2 has its propose",
    20: "1 both high introduce performance work",
    19: "into provide",
    18: "learning more not novel",
    17: "analysis first framework new one",
    16: "application dataset field task through",
    15: "cat:cs.cv due experiment problem use where",
    14: "but cat:cs.lg challenge different function non only parameter potential proposed well",
    13: "3 all existing information network real significant space various when",
    12: (
        "across address been cat:cs.ai image low over process scale solution structure "
        "technique than used within"
    ),
    11: (
        "0 achieve au:wang case compared dynamic feature further language number often order "
        "other set training"
    ),
    10: (
        "accuracy algorithm art complex e each effect efficient energy find improve including "
        "investigate multi property recent significantly single specific then theory they under "
        "without"
    ),
    9: (
        "additionally au:li cat:astro-ph cat:cond-mat current distribution effective enhance "
        "experimental finding interaction level like most multiple prediction quantum range "
        "rate remain research simulation term three type up via"
    ),
    8: (
        "au:zhang benchmark capability cat:eess cat:physics condition critical design domain "
        "efficiency enable evaluation furthermore how key many may neural open point scenario "
        "source understanding value"
    ),
    7: (
        "4 5 allow au:chen available behavior code computational context deep density detection "
        "dimensional effectively effectiveness equation even explore extensive finally g "
        "general generation given here higher i impact improvement issue linear mass mechanism "
        "n optimization phase quality representation require robust several size small some "
        "specifically standard strategy them trained world"
    ),
    6: (
        "about accurate any associated au:liu capture cat:cs.cl challenging class component "
        "comprehensive consider cost driven during environment error example finite focus form "
        "future generate generated human if important input insight knowledge lead leverage "
        "limit limited llm local long machine metric moreover need observation observed offer "
        "outperform particular power previous prove region sample second self setting strong "
        "thus tool way"
    ),
    5: (
        "10 ability aim applied apply architecture become beyond cat:quant-ph constraint "
        "control correlation crucial d designed develop development diffusion diverse enabling "
        "evaluate evolution exhibit factor fine found gap github global graph group http "
        "identify increase inference known leading limitation loss lower m make making measure "
        "measurement modeling natural no noise numerical object obtain obtained particularly "
        "possible prior processing reduce related reveal s same shown signal simple spatial "
        "spin surface test theoretical there toward traditional transition user was will x"
    ),
}
DEFAULT_FREQUENCIES: dict[str, float] = {
    key: percent / 100 for percent, keys in _COMMON_PERCENT.items() for key in keys.split()
}
# Guesses for keys no table lists: rarer than the table's floor, except `src:` (a source
# may bring most papers: any other trigger is better) and `hf:` (the papers on Hugging
# Face: a few dozen a day).
_UNLISTED = {"cat": 0.003, "au": 0.001, "id": 0.0001, "src": 0.5, "hf": 0.05}
_HF_KEY = "hf:"  # the key of every paper on Hugging Face (with upvotes or a rank)
# The leaves that are not terms: each has one key (`_key`).
_KEYED = (Author, Category, Id, Source, Upvotes, Trending)
_UNLISTED_WORD = 0.01
_PREFIX_SHARE = {3: 0.2, 4: 0.08}  # by length (the parser wants 3 letters); longer: 0.03


def paper_keys(text: PaperText) -> set[str]:
    """The index keys of an analyzed paper: its folded words, its pairs of adjacent words
    ("reinforcement learning", within the title or the abstract), `cat:` for its
    categories and their archives, `au:` for its authors' surnames, `id:` for its id,
    `src:` for its sources, and `hf:` if it is on Hugging Face."""
    keys = set(text.title_index)
    keys.update(text.abstract_index)
    for tokens in (text.title, text.abstract):
        words = [token.norm for token in tokens]
        keys.update([first + " " + second for first, second in pairwise(words)])
    keys.update(["cat:" + category for category in text.category_keys])
    keys.update(["au:" + name[-1] for name in text.authors if name])
    if text.id:
        keys.add("id:" + text.id)
    if text.sources:
        keys.update(["src:" + source for source in text.sources])
    if text.upvotes is not None or text.hf_rank is not None:
        keys.add(_HF_KEY)
    return keys


def key_frequencies(texts: Iterable[PaperText]) -> dict[str, float]:
    """The share of the papers that have each key: a `frequencies` table for `Matcher`."""
    counts: Counter[str] = Counter()
    total = 0
    for text in texts:
        counts.update(paper_keys(text))
        total += 1
    return {key: count / total for key, count in counts.items()} if total else {}


@dataclass(frozen=True, slots=True)
class Trigger:
    """Keys of which any paper a node matches has one: exact keys and word prefixes."""

    cost: float  # expected share of papers with one of them (a sum: an upper bound)
    keys: frozenset[str]
    prefixes: frozenset[str]


# Per slot, the key test a candidate must pass before it is evaluated, or None:
# (keys it must have all of, or None when `alternatives` is given; sets of keys of which it
# must have all of one; keys it must have none of).
KeyFilter: TypeAlias = tuple[frozenset[str] | None, tuple[frozenset[str], ...], frozenset[str]]


def trigger_keys(
    node: Node, *, frequencies: Mapping[str, float] | None = None
) -> frozenset[str] | None:
    """The keys a rule tree is indexed under (a wildcard prefix written `transform*`): every
    paper it matches has one of them. None: it is evaluated on every paper."""
    trigger = cheapest_trigger(node, DEFAULT_FREQUENCIES if frequencies is None else frequencies)
    if trigger is None:
        return None
    return trigger.keys | {prefix + "*" for prefix in trigger.prefixes}


def _share(key: str, frequencies: Mapping[str, float]) -> float:
    """The expected share of papers that have `key` (a guess when the table lacks it)."""
    share = frequencies.get(key)
    if share is not None:
        return share
    if " " in key:  # a pair of words: rarer than either
        first, _, second = key.partition(" ")
        return min(_share(first, frequencies), _share(second, frequencies)) / 4
    kind, colon, _ = key.partition(":")
    return _UNLISTED.get(kind, _UNLISTED_WORD) if colon else _UNLISTED_WORD


def cheapest_trigger(node: Node, frequencies: Mapping[str, float]) -> Trigger | None:
    """The cheapest trigger of a node; None if a match may have none of its keys."""
    if isinstance(node, Term):
        keys = _term_keys(node)
        if not keys:  # a lone wildcard
            share = _PREFIX_SHARE.get(len(node.words[0]), 0.03)
            return Trigger(share, frozenset(), frozenset(node.words))
        cost, key = min((_share(key, frequencies), key) for key in keys)
        return Trigger(cost, frozenset({key}), frozenset())
    if isinstance(node, _KEYED):
        key = _key(node)
        return Trigger(_share(key, frequencies), frozenset({key}), frozenset())
    if isinstance(node, And):
        triggers = [
            t for child in node.nodes if (t := cheapest_trigger(child, frequencies)) is not None
        ]
        return min(triggers, key=lambda t: t.cost, default=None)
    if isinstance(node, Or):
        alternatives = [cheapest_trigger(child, frequencies) for child in node.nodes]
        found = [t for t in alternatives if t is not None]
        if len(found) < len(alternatives):
            return None
        return Trigger(
            sum(t.cost for t in found),
            frozenset().union(*(t.keys for t in found)),
            frozenset().union(*(t.prefixes for t in found)),
        )
    return None  # a Not


def _term_keys(term: Term) -> frozenset[str]:
    """The keys a term's matches all have: its words and pairs of adjacent words (not its
    wildcard prefix)."""
    words = term.words[:-1] if term.prefix else term.words
    return frozenset(words).union([a + " " + b for a, b in pairwise(words)])


def _key(node: Author | Category | Id | Source | Upvotes | Trending) -> str:
    """The index key of a leaf that is not a term (for `upvotes` and `hf:`, a key every
    paper they match has, and others too)."""
    if isinstance(node, Category):
        return "cat:" + node.value.casefold()
    if isinstance(node, Author):
        return "au:" + node.words[-1]
    if isinstance(node, Id):
        return "id:" + node.value
    if isinstance(node, Source):
        return "src:" + node.value
    return _HF_KEY


_MAX_ALTERNATIVES = 16


def needed_keys(node: Node) -> list[frozenset[str]]:
    """Sets of keys such that every paper the node matches has all keys of one of them (a
    loose disjunctive normal form: an empty set means no requirement)."""
    if isinstance(node, Term):
        return [_term_keys(node)]
    if isinstance(node, _KEYED):
        return [frozenset({_key(node)})]
    if isinstance(node, Or):
        found = [needed for child in node.nodes for needed in needed_keys(child)]
        if len(found) > _MAX_ALTERNATIVES:
            return [frozenset.intersection(*found)]
        return found
    if isinstance(node, And):
        product = [frozenset[str]()]
        for child in node.nodes:
            child_needs = needed_keys(child)
            if len(product) * len(child_needs) > _MAX_ALTERNATIVES:
                child_needs = [frozenset.intersection(*child_needs)]
            product = [a | b for a in product for b in child_needs]
        return product
    return [frozenset()]  # a Not


def _excluded(node: Node) -> frozenset[str]:
    """Keys that no paper the node matches has: those of its exact negated parts."""
    if isinstance(node, Not):
        return exact_keys(node.node) or frozenset()
    if isinstance(node, And):
        return frozenset().union(*(_excluded(child) for child in node.nodes))
    return frozenset()


def exact_keys(node: Node) -> frozenset[str] | None:
    """Keys such that the node matches exactly the papers with one of them, if there are:
    a word or a two-word phrase in title or abstract, a category, an id, a source, an OR of
    those."""
    if isinstance(node, Term):
        plain = len(node.words) <= 2 and not node.prefix and node.field == "any"
        return frozenset({" ".join(node.words)}) if plain else None
    if isinstance(node, Category | Id | Source):
        return frozenset({_key(node)})
    if isinstance(node, Or):
        found = [exact for child in node.nodes if (exact := exact_keys(child)) is not None]
        return frozenset().union(*found) if len(found) == len(node.nodes) else None
    return None


def key_filter(node: Node, trigger: Trigger | None) -> KeyFilter | None:
    """The key test of a rule tree, for candidates found through `trigger`'s keys."""
    # An alternative that holds another is implied by it: keep the smallest ones.
    needs = set(needed_keys(node))
    alternatives = sorted(
        (a for a in needs if not any(b < a for b in needs)), key=lambda a: (len(a), sorted(a))
    )
    excluded = _excluded(node)
    if trigger is not None and not trigger.prefixes:
        if len(trigger.keys) == 1:
            # Every candidate has the key (and, for a pair of words, both words).
            known = _implied(trigger.keys)
            alternatives = [needed - known for needed in alternatives]
        elif all(any(a <= _implied({key}) for a in alternatives) for key in trigger.keys):
            alternatives = []  # whichever key found the candidate meets an alternative
    if not alternatives or frozenset() in alternatives:
        if not excluded:
            return None
        alternatives = []
    if len(alternatives) <= 1:
        return (alternatives[0] if alternatives else frozenset(), (), excluded)
    return (None, tuple(alternatives), excluded)


def _implied(keys: Iterable[str]) -> frozenset[str]:
    """The keys a paper with `keys` has for sure: a pair of words implies both words."""
    return frozenset(keys).union(*(key.split(" ") for key in keys if " " in key))
