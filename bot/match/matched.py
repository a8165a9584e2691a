"""What a batch of papers matched: which papers each rule matched, their hits on demand.

Owns `Matched` (rule id -> that rule's `PaperMatches`), the answer of
`bot.match.matcher.Matcher.match(papers, hits=False)`, and `indexes` (the members of a bit
set). A rule's matches are a bit set over the batch (bit i: the i-th paper), shared by
every rule id with the same tree; nothing is made per (rule, paper) match until someone
asks for its hits: a digest asks for those of the papers it ranks and shows.

The first time a paper's hits are asked for, its text is read again (kept by the caller,
or analyzed anew) and `bot.rules.leaf_hits` asked about every leaf it matched; those leaf
hits are kept (one small tuple per leaf and paper, shared by every tree that has the
leaf) and the text let go. A tree's hits on the paper are then put together from them
(`bot.match.code.hits_of`), each time they are asked for.

Both classes are read-only `Mapping`s: `Matched[rule_id]` (KeyError for a rule id that
matched nothing), `PaperMatches[paper_id]` -> hits; iterating, `in` and `len` on either
make no hits. Reading fills caches, each made whole before it is stored: threads may
share one (a race only repeats work). Pure: no I/O.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from bot.core.models import Paper
from bot.match.code import Hits, TreeCode, hits_of
from bot.rules import Leaf, PaperText, leaf_hits

__all__ = ["Hits", "Matched", "PaperMatches", "indexes"]

_DENSE = 40  # members from which `indexes` reads the binary digits instead of peeling bits


def indexes(bits: int) -> list[int]:
    """The members of a bit set (the positions of its 1 bits), in increasing order."""
    if bits.bit_count() > _DENSE:
        digits = bin(bits)[:1:-1]  # lowest bit first
        found = []
        at = digits.find("1")
        while at >= 0:
            found.append(at)
            at = digits.find("1", at + 1)
        return found
    found = []
    while bits:
        low = bits & -bits
        found.append(low.bit_length() - 1)
        bits ^= low
    return found


class Matched(Mapping[Hashable, "PaperMatches"]):
    """Which papers of a batch each rule id matched (in the order the rules were given;
    those that matched none are absent), with each match's hits on demand."""

    __slots__ = (
        "_codes",
        "_index_of",
        "_leaf_bits",
        "_leaves",
        "_leaves_at",
        "_memos",
        "_slot_bits",
        "_slot_of",
        "_text_of",
        "papers",
    )

    def __init__(
        self,
        papers: Sequence[Paper | None],
        slot_of: Mapping[Hashable, int],
        slot_bits: Mapping[int, int],
        codes: Sequence[TreeCode],
        leaves: Sequence[Leaf],
        leaf_bits: Sequence[int],
        text_of: Callable[[int], PaperText],
    ) -> None:
        self.papers = papers  # the batch, in the order read
        self._slot_of = slot_of  # rule id -> its distinct tree
        self._slot_bits = slot_bits  # distinct tree -> the papers it matched
        self._codes = codes  # distinct tree -> its code
        self._leaves = leaves
        self._leaf_bits = leaf_bits  # leaf -> the papers it matched
        self._text_of = text_of  # position -> the paper's text (analyzed again, or kept)
        self._index_of: dict[str, int] | None = None
        # Per paper, once its hits are first asked for: leaf -> hits, for every leaf it
        # matched; and, made then, the leaves each paper matched.
        self._memos: list[dict[int, Hits] | None] = [None] * len(papers)
        self._leaves_at: list[list[int]] | None = None

    def __getitem__(self, rule_id: Hashable) -> PaperMatches:
        slot = self._slot_of.get(rule_id)
        bits = self._slot_bits.get(slot, 0) if slot is not None else 0
        if not bits:
            raise KeyError(rule_id)
        assert slot is not None
        return PaperMatches(self, self._positions(), self._codes[slot], bits)

    def __iter__(self) -> Iterator[Hashable]:
        bits = self._slot_bits
        return (rule_id for rule_id, slot in self._slot_of.items() if slot in bits)

    def __len__(self) -> int:
        bits = self._slot_bits
        return sum(1 for slot in self._slot_of.values() if slot in bits)

    def __contains__(self, rule_id: object) -> bool:
        slot = self._slot_of.get(rule_id)  # type: ignore[call-overload]
        return slot is not None and slot in self._slot_bits

    def bits(self, rule_id: Hashable) -> int:
        """The papers the rule matched, as a bit set over `papers` (0: none)."""
        slot = self._slot_of.get(rule_id)
        return self._slot_bits.get(slot, 0) if slot is not None else 0

    def indexes(self, rule_id: Hashable) -> list[int]:
        """The positions in `papers` of the papers the rule matched, in order."""
        return indexes(self.bits(rule_id))

    def hits(self, rule_id: Hashable, index: int) -> Hits:
        """The rule's hits on the paper at `index` of `papers`, which it must have matched."""
        slot = self._slot_of.get(rule_id)
        if slot is None or not (self._slot_bits.get(slot, 0) >> index) & 1:
            raise KeyError((rule_id, index))
        return self.hits_of(self._codes[slot], index)

    def with_hits(self) -> dict[Hashable, list[tuple[Paper, Hits]]]:
        """Every match with its hits, at once: rule id -> [(paper, hits)] in the order of
        the papers, for the rule ids that matched something."""
        papers, codes = self.papers, self._codes
        by_slot: dict[int, list[tuple[Paper, Hits]]] = {}
        with collector_paused():
            for slot, bits in self._slot_bits.items():
                code = codes[slot]
                by_slot[slot] = [(papers[i], self.hits_of(code, i)) for i in indexes(bits)]  # type: ignore[misc]
            # A list copy per rule id is C; the hits are shared by the rule ids of a tree.
            return {
                rule_id: matched.copy()
                for rule_id, slot in self._slot_of.items()
                if (matched := by_slot.get(slot)) is not None
            }

    def index_of(self, paper_id: str) -> int | None:
        """The position of the paper with this id in `papers` (the last, if several)."""
        return self._positions().get(paper_id)

    def position(self, paper_id: str) -> int:
        """The position of the paper with this id in `papers`; KeyError if none has it."""
        return self._positions()[paper_id]

    def hits_of(self, code: TreeCode, index: int) -> Hits:
        """The hits of a tree (`code`) on the paper at `index`, which it matched."""
        memo = self._memos[index]
        if memo is None:
            memo = self._memos[index] = self._leaf_hits(index)
        hits = hits_of(code, memo)
        assert hits is not None, "a tree's papers and its leaves' hits disagree"
        return hits

    def _leaf_hits(self, index: int) -> dict[int, Hits]:
        """The hits of every leaf the paper at `index` matched, its text read once."""
        if self._leaves_at is None:
            at: list[list[int]] = [[] for _ in self.papers]
            for number, bits in enumerate(self._leaf_bits):
                if bits:
                    for i in indexes(bits):
                        at[i].append(number)
            self._leaves_at = at
        text, leaves = self._text_of(index), self._leaves
        memo = {}
        for number in self._leaves_at[index]:
            hits = leaf_hits(leaves[number], text)
            assert hits is not None, "a leaf's papers and its hits disagree"
            memo[number] = hits
        return memo

    def _positions(self) -> dict[str, int]:
        if self._index_of is None:
            self._index_of = {
                paper.id: i for i, paper in enumerate(self.papers) if paper is not None
            }
        return self._index_of


class PaperMatches(Mapping[str, Hits]):
    """One rule's matches in a batch: paper id -> its hits (put together when asked for),
    in the order of the papers. Iterating, `in` and `len` make no hits."""

    __slots__ = ("_bits", "_code", "_found", "_positions")

    def __init__(
        self, found: Matched, positions: Mapping[str, int], code: TreeCode, bits: int
    ) -> None:
        self._found = found
        self._positions = positions  # paper id -> its position in the batch
        self._code = code
        self._bits = bits

    def __getitem__(self, paper_id: str) -> Hits:
        index = self._positions.get(paper_id)
        if index is None or not (self._bits >> index) & 1:
            raise KeyError(paper_id)
        return self._found.hits_of(self._code, index)

    def __contains__(self, paper_id: object) -> bool:
        index = self._positions.get(paper_id) if isinstance(paper_id, str) else None
        return index is not None and bool((self._bits >> index) & 1)

    def __iter__(self) -> Iterator[str]:
        papers = self._found.papers
        return (papers[i].id for i in indexes(self._bits))  # type: ignore[union-attr]

    def __len__(self) -> int:
        return self._bits.bit_count()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while many objects that live on are made (every
    match's hits, a delivery's plan): millions of small objects, no cycles; each
    young-generation overflow would otherwise trigger a pass over a heap that holds every
    rule and paper (it halves the time). Left as it is when already paused."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
