"""Many rules x many papers, fast: an index over the rules, the way a percolator works.

Owns `Matcher`. Built once from every subscriber's parsed rules, it answers "which rules
does each new paper match, and with which hits?" without asking every rule about every
paper (Elasticsearch's percolator and Lucene's Monitor do the same for stored queries):

* identical rule trees are evaluated once per paper and their result shared by every rule
  id that has them (many subscribers write the same rules);
* each distinct tree is indexed under its *trigger*, keys of which every paper it matches
  has at least one (`bot.match.keys`); a tree without one is evaluated on every paper;
* a paper's keys (`bot.match.keys.paper_keys`) pull its candidate trees out of the index;
  a set test (`bot.match.keys.key_filter`) drops those that lack the keys every match
  has, or hold a key that rules them out;
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
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from typing import Any, TypeAlias

from bot.core.models import Hit, Paper
from bot.match.keys import (
    DEFAULT_FREQUENCIES,
    KeyFilter,
    cheapest_trigger,
    exact_keys,
    key_filter,
    needed_keys,
    paper_keys,
)
from bot.rules import LEAVES, And, Leaf, Node, Or, PaperText, Rule, analyze, leaf_hits

__all__ = ["Hits", "MatchStats", "Matcher", "RuleId"]

RuleId: TypeAlias = Hashable
Hits: TypeAlias = tuple[Hit, ...]

_PREFIX_MEMO_SIZE = 200_000  # words whose prefix triggers are remembered between papers

# A distinct rule tree compiled for evaluation: (kind, argument). Leaves are numbered so
# that a paper's memo of leaf results is keyed by a small int, not by hashing a tree.
# _ALL and _ANY are the common flat cases of _AND and _OR: leaves (and, for _ALL, negated
# leaves) only. _TRUE is a negated part the key test has already decided.
_LEAF, _ALL, _ANY, _AND, _OR, _NOT, _TRUE = range(7)
_Code: TypeAlias = tuple[int, Any]
_NO_HITS: Hits = ()
_UNSET: Any = object()


@dataclass(slots=True)
class MatchStats:
    """What a `Matcher` did since it was built, counted in (distinct rule, paper) pairs."""

    papers: int = 0
    candidates: int = 0  # pairs the index proposed
    evaluations: int = 0  # pairs evaluated: candidates that passed the key test
    matches: int = 0  # pairs that matched


class Matcher:
    """Many rules against many papers: the rules indexed once, each paper looked up once.

    `frequencies` (key -> share of papers that have it, see `bot.match.keys.key_frequencies`)
    guides the choice of triggers; the default is a table of one day of arXiv. It changes
    only speed.
    """

    def __init__(
        self,
        rules: Iterable[tuple[RuleId, Rule]],
        *,
        frequencies: Mapping[str, float] | None = None,
    ) -> None:
        self._frequencies = DEFAULT_FREQUENCIES if frequencies is None else frequencies
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
        self._filters: list[KeyFilter | None] = []
        index: dict[str, list[int]] = {}
        prefixes: dict[str, list[int]] = {}
        always: list[int] = []
        for slot, node in enumerate(nodes):
            self._codes.append(self._compile(node, top=True))
            trigger = cheapest_trigger(node, self._frequencies)
            if trigger is None:
                always.append(slot)
            else:
                for key in trigger.keys:
                    index.setdefault(key, []).append(slot)
                for prefix in trigger.prefixes:
                    prefixes.setdefault(prefix, []).append(slot)
            self._filters.append(key_filter(node, trigger))
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
                self._leaf_needs.append(needed_keys(node)[0])
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
        if top and exact_keys(node.node) is not None:
            return (_TRUE, None)
        return (_NOT, self._compile(node.node, top=False))


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
