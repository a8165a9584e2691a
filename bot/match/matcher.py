"""Many rules x many papers, fast: an index over the rules, the way a percolator works.

Owns `Matcher`. Built once from every subscriber's parsed rules, it answers "which rules
does each new paper match, and with which hits?" without asking every rule about every
paper (Elasticsearch's percolator and Lucene's Monitor do the same for stored queries):

* identical rule trees are evaluated once per paper and their result shared by every rule
  id that has them (many subscribers write the same rules);
* each distinct tree gets a *trigger set*: keys of which every paper it matches has at
  least one. A word needs its folded word; a phrase one pair of its adjacent words (the
  rarest, by `frequencies`: "reinforcement learning"); `au:` the surname; `cat:` the
  category (a paper has its categories and their archives); `id:` the id; `src:` the
  source name or kind; `upvotes>=20` and `hf:top10` the key `hf:`, which every paper on
  Hugging Face has; a lone wildcard its prefix (looked up with every prefix of the paper's
  word forms). `And` takes the trigger of its cheapest positive part, `Or` the union of
  its alternatives'. A tree without one (only a rule the parser refuses: all negative) is
  evaluated on every paper;
* a paper's keys (`paper_keys`) pull its candidate trees out of the index; a set test
  drops those that lack the keys every match has, or hold a key that rules them out;
* the rest are evaluated on a compiled copy of the tree, each leaf's hits computed by
  `bot.rules.leaf_hits` at most once per paper and shared by every tree that has it.

Pure: no I/O, no clock, no logging setup. It must not give the rule language a second
meaning: whether a leaf matches, and with which hits, is always `bot.rules`' answer, and
AND/OR/NOT combine them as `bot.rules.evaluate` does, so the result equals asking every
rule about every paper (tests/test_matcher.py checks that on real papers). The index only
decides which rules are worth asking.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, pairwise
from typing import Any, TypeAlias

from bot.core.models import Hit, Paper
from bot.rules import (
    LEAVES,
    And,
    Author,
    Category,
    Id,
    Leaf,
    Node,
    Not,
    Or,
    PaperText,
    Rule,
    Source,
    Term,
    Trending,
    Upvotes,
    analyze,
    leaf_hits,
)

__all__ = [
    "Hits",
    "MatchStats",
    "Matcher",
    "RuleId",
    "key_frequencies",
    "paper_keys",
    "trigger_keys",
]

RuleId: TypeAlias = Hashable
Hits: TypeAlias = tuple[Hit, ...]

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
_DEFAULT_FREQUENCIES: dict[str, float] = {
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
_PREFIX_MEMO_SIZE = 200_000  # words whose prefix triggers are remembered between papers

# A distinct rule tree compiled for evaluation: (kind, argument). Leaves are numbered so
# that a paper's memo of leaf results is keyed by a small int, not by hashing a tree.
# _ALL and _ANY are the common flat cases of _AND and _OR: leaves (and, for _ALL, negated
# leaves) only. _TRUE is a negated part the key test has already decided.
_LEAF, _ALL, _ANY, _AND, _OR, _NOT, _TRUE = range(7)
_Code: TypeAlias = tuple[int, Any]
_NO_HITS: Hits = ()
_UNSET: Any = object()


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


@dataclass(slots=True)
class MatchStats:
    """What a `Matcher` did since it was built, counted in (distinct rule, paper) pairs."""

    papers: int = 0
    candidates: int = 0  # pairs the index proposed
    evaluations: int = 0  # pairs evaluated: candidates that passed the key test
    matches: int = 0  # pairs that matched


@dataclass(frozen=True, slots=True)
class _Trigger:
    """Keys of which any paper a node matches has one: exact keys and word prefixes."""

    cost: float  # expected share of papers with one of them (a sum: an upper bound)
    keys: frozenset[str]
    prefixes: frozenset[str]


# Per slot, the key test a candidate must pass before it is evaluated, or None:
# (keys it must have all of, or None when `alternatives` is given; sets of keys of which it
# must have all of one; keys it must have none of).
_Filter: TypeAlias = tuple[frozenset[str] | None, tuple[frozenset[str], ...], frozenset[str]]


class Matcher:
    """Many rules against many papers: the rules indexed once, each paper looked up once.

    `frequencies` (key -> share of papers that have it, see `key_frequencies`) guides the
    choice of triggers; the default is a table of one day of arXiv. It changes only speed.
    """

    def __init__(
        self,
        rules: Iterable[tuple[RuleId, Rule]],
        *,
        frequencies: Mapping[str, float] | None = None,
    ) -> None:
        self._frequencies = _DEFAULT_FREQUENCIES if frequencies is None else frequencies
        # Rule id -> slot, in the order given; a slot is one distinct rule tree.
        self._slot_of: dict[RuleId, int] = {}
        slot_of_node: dict[Node, int] = {}
        nodes: list[Node] = []
        for rule_id, rule in rules:
            if rule_id in self._slot_of:
                raise ValueError(f"rule id {rule_id!r} is given twice")
            slot = self._slot_of[rule_id] = slot_of_node.setdefault(rule.node, len(nodes))
            if slot == len(nodes):
                nodes.append(rule.node)
        del slot_of_node
        self._position = {rule_id: i for i, rule_id in enumerate(self._slot_of)}
        ids: list[list[RuleId]] = [[] for _ in nodes]
        for rule_id, slot in self._slot_of.items():
            ids[slot].append(rule_id)
        self._ids = [tuple(found) for found in ids]

        self._leaves: list[Leaf] = []
        self._leaf_needs: list[frozenset[str]] = []  # keys a paper a leaf matches has
        self._leaf_numbers: dict[Leaf, int] = {}
        self._codes: list[_Code] = []
        self._filters: list[_Filter | None] = []
        index: dict[str, list[int]] = {}
        prefixes: dict[str, list[int]] = {}
        always: list[int] = []
        for slot, node in enumerate(nodes):
            self._codes.append(self._compile(node, top=True))
            trigger = _trigger(node, self._frequencies)
            if trigger is None:
                always.append(slot)
            else:
                for key in trigger.keys:
                    index.setdefault(key, []).append(slot)
                for prefix in trigger.prefixes:
                    prefixes.setdefault(prefix, []).append(slot)
            self._filters.append(_filter(node, trigger))
        del self._leaf_numbers
        self._index = {key: tuple(slots) for key, slots in index.items()}
        self._keyset = frozenset(self._index)
        self._prefixes = {prefix: tuple(slots) for prefix, slots in prefixes.items()}
        self._prefix_lengths = tuple(sorted({len(prefix) for prefix in self._prefixes}))
        self._prefix_memo: dict[str, tuple[int, ...]] = {}
        self._always = tuple(always)
        self.stats = MatchStats()

    def __len__(self) -> int:
        return len(self._slot_of)

    @property
    def distinct_rules(self) -> int:
        """How many distinct rule trees the rules have."""
        return len(self._codes)

    @property
    def always_evaluated(self) -> int:
        """How many distinct rule trees have no trigger and are evaluated on every paper."""
        return len(self._always)

    def match(
        self, papers: Sequence[Paper], *, texts: Mapping[str, PaperText] | None = None
    ) -> dict[RuleId, list[tuple[Paper, Hits]]]:
        """Per rule id, the papers it matches (in the order given) with their hits.

        `texts` holds papers already analyzed (paper id -> `PaperText`); the others are
        analyzed here, once each. Rules that match nothing are absent.
        """
        # A distinct tree's matches are collected once, then copied to each of its rule ids
        # (a list copy is C; an append per rule id per paper is not).
        by_slot: dict[int, list[tuple[Paper, Hits]]] = {}
        with _collector_paused():
            for paper in papers:
                text = texts.get(paper.id) if texts is not None else None
                if text is None:
                    text = analyze(paper)
                for slot, hits in self._match_slots(text):
                    if (matched := by_slot.get(slot)) is None:
                        by_slot[slot] = [(paper, hits)]
                    else:
                        matched.append((paper, hits))
            return {
                rule_id: matched.copy()
                for rule_id, slot in self._slot_of.items()
                if (matched := by_slot.get(slot)) is not None
            }

    def match_one(self, text: PaperText) -> list[tuple[RuleId, Hits]]:
        """The rules one analyzed paper matches, in the order they were given, with hits."""
        found = [
            (rule_id, hits) for slot, hits in self._match_slots(text) for rule_id in self._ids[slot]
        ]
        found.sort(key=lambda item: self._position[item[0]])
        return found

    # -----------------------------------------------------------------------------------------
    # Per paper

    def _match_slots(self, text: PaperText) -> list[tuple[int, Hits]]:
        """The distinct rule trees (slots) the paper matches, with their hits."""
        keys = paper_keys(text)
        candidates = set(self._always)
        index = self._index
        for key in keys & self._keyset:
            candidates.update(index[key])
        if self._prefixes:
            self._add_prefixed(text, candidates)
        filters, codes, leaves, run = self._filters, self._codes, self._leaves, self._run
        memo: dict[int, Hits | None] = {}
        evaluated = 0
        found: list[tuple[int, Hits]] = []
        for slot in candidates:
            if (test := filters[slot]) is not None:
                required, alternatives, excluded = test
                if required is not None:
                    if not required <= keys:
                        continue
                elif not any(needed <= keys for needed in alternatives):
                    continue
                if excluded and not excluded.isdisjoint(keys):
                    continue
            evaluated += 1
            kind, argument = codes[slot]
            if kind == _LEAF:  # most rules are one word or phrase
                hits = memo.get(argument, _UNSET)
                if hits is _UNSET:
                    hits = memo[argument] = leaf_hits(leaves[argument], text)
            else:
                hits = run(codes[slot], text, keys, memo)
            if hits is not None:
                found.append((slot, hits))
        stats = self.stats
        stats.papers += 1
        stats.candidates += len(candidates)
        stats.evaluations += evaluated
        stats.matches += len(found)
        return found

    def _add_prefixed(self, text: PaperText, candidates: set[int]) -> None:
        """Add the slots a wildcard prefix of one of the paper's word forms triggers."""
        forms = set(text.title_index)
        forms.update(text.abstract_index, text.title_variants, text.abstract_variants)
        memo = self._prefix_memo
        if len(memo) > _PREFIX_MEMO_SIZE:
            memo.clear()
        for form in forms:
            slots = memo.get(form)
            if slots is None:
                found: list[int] = []
                for length in self._prefix_lengths:
                    if length > len(form):
                        break
                    found.extend(self._prefixes.get(form[:length], ()))
                slots = memo[form] = tuple(found)
            if slots:
                candidates.update(slots)

    def _run(
        self, code: _Code, text: PaperText, keys: set[str], memo: dict[int, Hits | None]
    ) -> Hits | None:
        """`bot.rules.evaluate` on a compiled tree: each leaf evaluated once per paper, and
        not at all when the paper lacks a key the leaf needs."""
        kind, argument = code
        # _ANY and _ALL return a leaf's own tuple when it is the only one with hits: equal
        # to the reference's concatenation, and no copy.
        if kind == _ANY:
            parts: list[Hits] = []
            for number in argument:
                hits = memo.get(number, _UNSET)
                if hits is _UNSET:
                    hits = memo[number] = self._leaf(number, text, keys)
                if hits is not None:
                    parts.append(hits)
            if len(parts) < 2:
                return parts[0] if parts else None
            return tuple(chain.from_iterable(parts))
        if kind == _ALL:
            parts = []
            for number, negated in argument:
                hits = memo.get(number, _UNSET)
                if hits is _UNSET:
                    hits = memo[number] = self._leaf(number, text, keys)
                if negated:
                    if hits is not None:
                        return None
                elif hits is None:
                    return None
                elif hits:
                    parts.append(hits)
            if len(parts) < 2:
                return parts[0] if parts else _NO_HITS
            return tuple(chain.from_iterable(parts))
        if kind == _LEAF:
            hits = memo.get(argument, _UNSET)
            if hits is _UNSET:
                hits = memo[argument] = self._leaf(argument, text, keys)
            return hits
        if kind == _AND:
            found: list[Hit] = []
            for child in argument:
                hits = self._run(child, text, keys, memo)
                if hits is None:
                    return None
                found += hits
            return tuple(found)
        if kind == _OR:
            found = []
            matched = False
            for child in argument:
                hits = self._run(child, text, keys, memo)
                if hits is not None:
                    matched = True
                    found += hits
            return tuple(found) if matched else None
        if kind == _NOT:
            return None if self._run(argument, text, keys, memo) is not None else _NO_HITS
        return _NO_HITS  # _TRUE

    def _leaf(self, number: int, text: PaperText, keys: set[str]) -> Hits | None:
        """The hits of a leaf; None at once when the paper lacks a key the leaf needs."""
        if self._leaf_needs[number] <= keys:
            return leaf_hits(self._leaves[number], text)
        return None

    # -----------------------------------------------------------------------------------------
    # Per rule

    def _compile(self, node: Node, *, top: bool) -> _Code:
        """The code of a node. `top`: reached from the root through `And`s only, where the
        key test has already ruled out the papers an exact negated part would exclude."""
        if isinstance(node, LEAVES):
            number = self._leaf_numbers.setdefault(node, len(self._leaves))
            if number == len(self._leaves):
                self._leaves.append(node)
                self._leaf_needs.append(_needs(node)[0])
            return (_LEAF, number)
        if isinstance(node, And):
            children = [self._compile(child, top=top) for child in node.nodes]
            children = [child for child in children if child[0] != _TRUE]
            if len(children) == 1:
                return children[0]  # the hits of an AND of one node are that node's
            flat = [
                (child[1], False) if child[0] == _LEAF else (child[1][1], True)
                for child in children
                if child[0] == _LEAF or (child[0] == _NOT and child[1][0] == _LEAF)
            ]
            if len(flat) == len(children):
                return (_ALL, tuple(flat))
            return (_AND, tuple(children))
        if isinstance(node, Or):
            children = [self._compile(child, top=False) for child in node.nodes]
            if all(child[0] == _LEAF for child in children):
                return (_ANY, tuple(child[1] for child in children))
            return (_OR, tuple(children))
        if top and _exact(node.node) is not None:
            return (_TRUE, None)
        return (_NOT, self._compile(node.node, top=False))


def trigger_keys(
    node: Node, *, frequencies: Mapping[str, float] | None = None
) -> frozenset[str] | None:
    """The keys a rule tree is indexed under (a wildcard prefix written `transform*`): every
    paper it matches has one of them. None: it is evaluated on every paper."""
    trigger = _trigger(node, _DEFAULT_FREQUENCIES if frequencies is None else frequencies)
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


def _trigger(node: Node, frequencies: Mapping[str, float]) -> _Trigger | None:
    """The cheapest trigger of a node; None if a match may have none of its keys."""
    if isinstance(node, Term):
        keys = _term_keys(node)
        if not keys:  # a lone wildcard
            share = _PREFIX_SHARE.get(len(node.words[0]), 0.03)
            return _Trigger(share, frozenset(), frozenset(node.words))
        cost, key = min((_share(key, frequencies), key) for key in keys)
        return _Trigger(cost, frozenset({key}), frozenset())
    if isinstance(node, _KEYED):
        key = _key(node)
        return _Trigger(_share(key, frequencies), frozenset({key}), frozenset())
    if isinstance(node, And):
        triggers = [t for child in node.nodes if (t := _trigger(child, frequencies)) is not None]
        return min(triggers, key=lambda t: t.cost, default=None)
    if isinstance(node, Or):
        alternatives = [_trigger(child, frequencies) for child in node.nodes]
        found = [t for t in alternatives if t is not None]
        if len(found) < len(alternatives):
            return None
        return _Trigger(
            sum(t.cost for t in found),
            frozenset().union(*(t.keys for t in found)),
            frozenset().union(*(t.prefixes for t in found)),
        )
    return None  # a Not


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: matching makes millions of small objects (hits)
    that live on, no cycles, and each young-generation overflow would otherwise trigger
    passes over a heap that holds every rule and paper (it halves the time, measured)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


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


def _needs(node: Node) -> list[frozenset[str]]:
    """Sets of keys such that every paper the node matches has all keys of one of them (a
    loose disjunctive normal form: an empty set means no requirement)."""
    if isinstance(node, Term):
        return [_term_keys(node)]
    if isinstance(node, _KEYED):
        return [frozenset({_key(node)})]
    if isinstance(node, Or):
        found = [needed for child in node.nodes for needed in _needs(child)]
        if len(found) > _MAX_ALTERNATIVES:
            return [frozenset.intersection(*found)]
        return found
    if isinstance(node, And):
        product = [frozenset[str]()]
        for child in node.nodes:
            child_needs = _needs(child)
            if len(product) * len(child_needs) > _MAX_ALTERNATIVES:
                child_needs = [frozenset.intersection(*child_needs)]
            product = [a | b for a in product for b in child_needs]
        return product
    return [frozenset()]  # a Not


def _excluded(node: Node) -> frozenset[str]:
    """Keys that no paper the node matches has: those of its exact negated parts."""
    if isinstance(node, Not):
        return _exact(node.node) or frozenset()
    if isinstance(node, And):
        return frozenset().union(*(_excluded(child) for child in node.nodes))
    return frozenset()


def _exact(node: Node) -> frozenset[str] | None:
    """Keys such that the node matches exactly the papers with one of them, if there are:
    a word or a two-word phrase in title or abstract, a category, an id, a source, an OR of
    those."""
    if isinstance(node, Term):
        plain = len(node.words) <= 2 and not node.prefix and node.field == "any"
        return frozenset({" ".join(node.words)}) if plain else None
    if isinstance(node, Category | Id | Source):
        return frozenset({_key(node)})
    if isinstance(node, Or):
        found = [exact for child in node.nodes if (exact := _exact(child)) is not None]
        return frozenset().union(*found) if len(found) == len(node.nodes) else None
    return None


def _filter(node: Node, trigger: _Trigger | None) -> _Filter | None:
    """The key test of a rule tree, for candidates found through `trigger`'s keys."""
    # An alternative that holds another is implied by it: keep the smallest ones.
    needs = set(_needs(node))
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
