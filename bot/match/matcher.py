"""Many rules x many papers, fast: each paper read once, each distinct rule tree evaluated
once for the whole batch, on bit sets of papers.

Owns `Matcher`. Built once from every subscriber's parsed rules, it answers "which papers
does each rule match?" for a batch of papers (a day, a week) without asking every rule
about every paper:

* identical rule trees are evaluated once and their result shared by every rule id that
  has them (many subscribers write the same rules), and so are identical leaves (a word, a
  phrase, `au:`, `cat:` ...): 100,000 rules of a day have ~47,000 distinct trees over
  ~8,000 distinct leaves;
* one pass over the papers records which papers have each key some rule is looked up by
  (`bot.match.keys.paper_keys`: words, word pairs, `cat:` ...), as a bit set over the batch
  (bit i: the i-th paper). A leaf that one key decides (a word, a two-word phrase, a
  category: `bot.match.keys.exact_keys`) matches the papers with that key; any other leaf
  (a longer phrase, `ti:`, `au:`, a wildcard ...) is asked (`bot.rules.holds`) about the
  papers that have the key it is looked up by and every key it needs;
* each distinct tree is then evaluated once for the whole batch with AND/OR/NOT on its
  leaves' bit sets, within the papers its *trigger* (`bot.match.keys.cheapest_trigger`) and
  *key test* (`bot.match.keys.key_filter`) let through.

The answer (`Matched`, from `bot.match.matched`) says which papers each rule id matched.
No hits are made meanwhile: the hits of one rule on one paper (which words where, for
ranking and highlighting) are made when they are first asked for, so that a run pays for
the hits of the papers its digests rank and show, not for every match of every rule (1.5
million a day for 100,000 rules), and no per-match object is made or collected.
`match(papers)` gives every rule's matches with their hits at once, as it always did.

Pure: no I/O, no clock, no logging setup. It must not give the rule language a second
meaning: whether a leaf matches, and with which hits, is always `bot.rules`' answer, and
AND/OR/NOT combine them as `bot.rules.evaluate` does, so the result equals asking every
rule about every paper (tests/match/test_matcher.py checks that on real papers). The keys only
decide which leaves are worth asking and which papers a tree is worth evaluating on.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias, overload

from bot.core.models import Paper
from bot.match.code import LEAF, Code, TreeCode, bits_of
from bot.match.keys import (
    DEFAULT_FREQUENCIES,
    KeyFilter,
    cheapest_trigger,
    exact_keys,
    key_filter,
    needed_keys,
    paper_keys,
)
from bot.match.matched import Hits, Matched
from bot.rules import Node, PaperText, Rule, analyze, holds

__all__ = ["Hits", "MatchStats", "Matched", "Matcher", "RuleId"]

RuleId: TypeAlias = Hashable

_PREFIX_MEMO_SIZE = 200_000  # word forms whose wildcard prefixes are remembered between papers


@dataclass(slots=True)
class MatchStats:
    """What a `Matcher` did since it was built, counted in (distinct rule, paper) pairs."""

    papers: int = 0
    candidates: int = 0  # pairs the index proposed: the paper has one of the tree's triggers
    evaluations: int = 0  # candidates that passed the key test, on which the tree was evaluated
    matches: int = 0  # pairs that matched


# What the batch evaluation needs of one distinct tree: its trigger's keys and wildcards
# (`transfor*`; None: no trigger, every paper is a candidate), its key test, its code.
_Plan: TypeAlias = tuple[tuple[str, ...] | None, tuple[str, ...], KeyFilter | None, TreeCode]


class Matcher:
    """Many rules against many papers: the rules compiled once, each batch read once.

    `frequencies` (key -> share of papers that have it, see `bot.match.keys.key_frequencies`)
    guides the choice of triggers and of the key each leaf is looked up by; the default is
    a table of one day of arXiv. It changes only speed.
    """

    def __init__(
        self,
        rules: Iterable[tuple[RuleId, Rule]],
        *,
        frequencies: Mapping[str, float] | None = None,
    ) -> None:
        frequencies = DEFAULT_FREQUENCIES if frequencies is None else frequencies
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

        code = Code()
        plans: list[_Plan] = []
        keys: set[str] = set()  # the keys whose papers the batch records (`_scan`)
        prefixes: set[str] = set()  # the wildcard prefixes likewise
        always = 0
        for node in nodes:
            trigger = cheapest_trigger(node, frequencies)
            test = key_filter(node, trigger)
            if trigger is None:
                always += 1
                plans.append((None, (), test, code.tree(node)))
            else:
                keys.update(trigger.keys)
                prefixes.update(trigger.prefixes)
                wildcards = tuple(prefix + "*" for prefix in trigger.prefixes)
                plans.append((tuple(trigger.keys), wildcards, test, code.tree(node)))
            if test is not None:
                required, alternatives, excluded = test
                keys.update(required or (), *alternatives, excluded)
        self._plans = plans
        self._codes = [plan[3] for plan in plans]
        self._always = always
        self._leaves = code.leaves

        # A leaf that one key decides (a word, a two-word phrase, a category, an id, a
        # source: `exact_keys`) matches the papers that have the key. Any other is asked
        # about the papers that have the one key it is looked up by (or its wildcard
        # prefix) and every key it needs (`_needs`).
        self._exact: list[tuple[int, str]] = []  # (leaf, its key)
        by_key: dict[str, list[int]] = {}
        by_prefix: dict[str, list[int]] = {}
        self._needs: dict[int, frozenset[str]] = {}
        for number, leaf in enumerate(code.leaves):
            exact = exact_keys(leaf)
            if exact is not None and len(exact) == 1:
                (key,) = exact
                self._exact.append((number, key))
                keys.add(key)
                continue
            self._needs[number] = needs = needed_keys(leaf)[0]
            keys.update(needs)
            trigger = cheapest_trigger(leaf, frequencies)
            assert trigger is not None and len(trigger.keys) + len(trigger.prefixes) == 1
            for key in trigger.keys:
                by_key.setdefault(key, []).append(number)
            for prefix in trigger.prefixes:
                by_prefix.setdefault(prefix, []).append(number)
        keys.update(by_key)
        prefixes.update(by_prefix)
        self._by_key = {key: tuple(numbers) for key, numbers in by_key.items()}
        self._by_prefix = {prefix: tuple(numbers) for prefix, numbers in by_prefix.items()}
        self._keyset = frozenset(keys)
        self._prefixes = frozenset(prefixes)
        self._prefix_lengths = tuple(sorted({len(prefix) for prefix in prefixes}))
        self._prefix_memo: dict[str, tuple[str, ...]] = {}
        self.stats = MatchStats()

    def __len__(self) -> int:
        return len(self._slot_of)

    @property
    def distinct_rules(self) -> int:
        """How many distinct rule trees the rules have."""
        return len(self._plans)

    @property
    def distinct_leaves(self) -> int:
        """How many distinct leaves (words, phrases, `au:` ...) the rule trees have."""
        return len(self._leaves)

    @property
    def exact_leaves(self) -> int:
        """How many of those one key decides (a word, a two-word phrase, a category ...)."""
        return len(self._exact)

    @property
    def always_evaluated(self) -> int:
        """How many distinct rule trees have no trigger and are evaluated on every paper."""
        return self._always

    @overload
    def match(
        self,
        papers: Sequence[Paper],
        *,
        texts: Mapping[str, PaperText] | None = None,
        hits: Literal[True] = True,
    ) -> dict[RuleId, list[tuple[Paper, Hits]]]: ...

    @overload
    def match(
        self,
        papers: Sequence[Paper],
        *,
        texts: Mapping[str, PaperText] | None = None,
        hits: Literal[False],
    ) -> Matched: ...

    def match(
        self,
        papers: Sequence[Paper],
        *,
        texts: Mapping[str, PaperText] | None = None,
        hits: bool = True,
    ) -> dict[RuleId, list[tuple[Paper, Hits]]] | Matched:
        """Per rule id, the papers it matches (in the order given) with their hits; rules
        that match nothing are absent.

        `hits=False`: a `Matched` instead, which says which papers each rule id matched and
        makes a match's hits when they are asked for. `texts` holds papers already analyzed
        (paper id -> `PaperText`); the others are analyzed here, and analyzed again for
        their hits (one paper's text at a time is kept, not the batch's)."""

        def text_of(i: int) -> PaperText:
            paper = papers[i]
            text = texts.get(paper.id) if texts is not None else None
            return analyze(paper) if text is None else text

        found = self._scan(map(text_of, range(len(papers))), papers, text_of)
        return found.with_hits() if hits else found

    def match_one(self, text: PaperText) -> list[tuple[RuleId, Hits]]:
        """The rules one analyzed paper matches, in the order they were given, with hits."""
        found = self._scan([text], (None,), [text].__getitem__)
        return [(rule_id, found.hits(rule_id, 0)) for rule_id in found]

    # -----------------------------------------------------------------------------------------

    def _scan(
        self,
        texts: Iterable[PaperText],
        papers: Sequence[Paper | None],
        text_of: Callable[[int], PaperText],
    ) -> Matched:
        """Read each paper once (its keys; the leaves no key decides, asked about the papers
        that have their keys), then evaluate each distinct tree on the whole batch.
        `text_of(i)`: the i-th paper's text again, for its hits (`Matched`)."""
        leaves, needs, by_key, by_prefix = self._leaves, self._needs, self._by_key, self._by_prefix
        keyset = self._keyset
        papers_with: dict[str, int] = {}  # key or prefix -> bit set of the papers that have it
        leaf_bits = [0] * len(leaves)
        count = 0
        for i, text in enumerate(texts):
            bit = 1 << i
            keys = paper_keys(text)
            for key in keys & keyset:
                papers_with[key] = papers_with.get(key, 0) | bit
                for number in by_key.get(key, ()):
                    if needs[number] <= keys and holds(leaves[number], text):
                        leaf_bits[number] |= bit
            if self._prefixes:
                for prefix in self._prefixes_of(text):
                    wildcard = prefix + "*"  # not a key: `transfor*` is not `transfor`
                    papers_with[wildcard] = papers_with.get(wildcard, 0) | bit
                    for number in by_prefix.get(prefix, ()):
                        if needs[number] <= keys and holds(leaves[number], text):
                            leaf_bits[number] |= bit
            count += 1
        for number, key in self._exact:
            leaf_bits[number] = papers_with.get(key, 0)
        by_slot = self._evaluate(leaf_bits, papers_with, (1 << count) - 1)
        self.stats.papers += count
        return Matched(papers, self._slot_of, by_slot, self._codes, leaves, leaf_bits, text_of)

    def _evaluate(
        self, leaf_bits: list[int], papers_with: dict[str, int], everyone: int
    ) -> dict[int, int]:
        """Each distinct tree on the whole batch: slot -> bit set of the papers it matches
        (slots that match none are absent)."""
        found: dict[int, int] = {}
        candidates = evaluations = matches = 0
        get = papers_with.get
        for slot, (trigger, wildcards, test, code) in enumerate(self._plans):
            if trigger is None:
                within = everyone
            else:
                within = 0
                for key in trigger:
                    within |= get(key, 0)
                for wildcard in wildcards:
                    within |= get(wildcard, 0)
                if not within:
                    continue
            candidates += within.bit_count()
            if test is not None:
                required, alternatives, excluded = test
                if required is not None:
                    for key in required:
                        within &= get(key, 0)
                else:
                    some = 0
                    for needed in alternatives:
                        one = within
                        for key in needed:
                            one &= get(key, 0)
                        some |= one
                    within = some
                for key in excluded:
                    within &= ~get(key, 0)
                if not within:
                    continue
            evaluations += within.bit_count()
            if code[0] == LEAF:  # most rules are one word or phrase
                bits = within & leaf_bits[code[1]]
            else:
                bits = bits_of(code, leaf_bits, within)
            if bits:
                found[slot] = bits
                matches += bits.bit_count()
        stats = self.stats
        stats.candidates += candidates
        stats.evaluations += evaluations
        stats.matches += matches
        return found

    def _prefixes_of(self, text: PaperText) -> set[str]:
        """The wildcard prefixes (of triggers and leaves) one of the paper's word forms
        starts with."""
        forms = set(text.title_index)
        forms.update(text.abstract_index, text.title_variants, text.abstract_variants)
        memo = self._prefix_memo
        if len(memo) > _PREFIX_MEMO_SIZE:
            memo.clear()
        found: set[str] = set()
        for form in forms:
            known = memo.get(form)
            if known is None:
                known = memo[form] = tuple(
                    form[:length]
                    for length in self._prefix_lengths
                    if length <= len(form) and form[:length] in self._prefixes
                )
            if known:
                found.update(known)
        return found
