"""Rule trees compiled for the matcher: numbered leaves, and two ways to run a tree.

Owns the compiled form of a distinct rule tree (`TreeCode`: (kind, argument) tuples whose
leaves are small ints, so that a paper's leaf results are keyed by an int, not by hashing
a tree), `bits_of` (the tree on a whole batch at once: the papers it matches as a bit set,
from its leaves' bit sets) and `hits_of` (its hits on one paper it matches, from that
paper's leaf hits). Both combine leaves exactly as `bot.rules.evaluate` does: AND needs
every part, OR any, NOT none; the hits are those of the positive leaves, in the order of
the tree, OR giving those of every alternative that matched.

Pure: no I/O. Whether a leaf matches, and its hits, are not decided here (`bot.rules`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any, TypeAlias

from bot.core.models import Hit
from bot.match.keys import exact_keys
from bot.rules import LEAVES, And, Leaf, Node, Or

__all__ = ["ALL", "ANY", "LEAF", "Code", "TreeCode", "bits_of", "hits_of"]

Hits: TypeAlias = tuple[Hit, ...]

# Kinds. ALL and ANY are the common flat cases of AND and OR: leaves only (and, for ALL,
# negated leaves). TRUE is a negated part the key test has already decided: the matcher
# evaluates a tree only on papers that passed its key test (`bot.match.keys.key_filter`),
# which excludes those with a key of an exact negated part reached through ANDs only.
LEAF, ALL, ANY, AND, OR, NOT, TRUE = range(7)
TreeCode: TypeAlias = tuple[int, Any]
_NO_HITS: Hits = ()


class Code:
    """Compiles rule trees, numbering their distinct leaves as it goes (`leaves`)."""

    def __init__(self) -> None:
        self.leaves: list[Leaf] = []
        self._numbers: dict[Leaf, int] = {}

    def tree(self, node: Node) -> TreeCode:
        """The code of a rule's tree (its root)."""
        return self._compile(node, top=True)

    def _compile(self, node: Node, *, top: bool) -> TreeCode:
        """`top`: reached from the root through `And`s only, where the key test has already
        ruled out the papers an exact negated part would exclude."""
        if isinstance(node, LEAVES):
            number = self._numbers.setdefault(node, len(self.leaves))
            if number == len(self.leaves):
                self.leaves.append(node)
            return (LEAF, number)
        if isinstance(node, And):
            children = [self._compile(child, top=top) for child in node.nodes]
            children = [child for child in children if child[0] != TRUE]
            if len(children) == 1:
                return children[0]  # the hits of an AND of one node are that node's
            flat = [
                (child[1], False) if child[0] == LEAF else (child[1][1], True)
                for child in children
                if child[0] == LEAF or (child[0] == NOT and child[1][0] == LEAF)
            ]
            if len(flat) == len(children):
                return (ALL, tuple(flat))
            return (AND, tuple(children))
        if isinstance(node, Or):
            children = [self._compile(child, top=False) for child in node.nodes]
            if all(child[0] == LEAF for child in children):
                return (ANY, tuple(child[1] for child in children))
            return (OR, tuple(children))
        if top and exact_keys(node.node) is not None:
            return (TRUE, None)
        return (NOT, self._compile(node.node, top=False))


def bits_of(code: TreeCode, leaf_bits: Sequence[int], within: int) -> int:
    """The papers of `within` (a bit set over a batch) that the tree matches, from the bit
    sets of the papers each leaf matches."""
    kind, argument = code
    if kind == LEAF:
        return within & leaf_bits[argument]
    if kind == ALL:
        for number, negated in argument:
            within = within & ~leaf_bits[number] if negated else within & leaf_bits[number]
            if not within:
                break
        return within
    if kind == ANY:
        some = 0
        for number in argument:
            some |= leaf_bits[number]
        return within & some
    if kind == AND:
        for child in argument:
            within = bits_of(child, leaf_bits, within)
            if not within:
                break
        return within
    if kind == OR:
        some = 0
        for child in argument:
            some |= bits_of(child, leaf_bits, within)
        return some
    if kind == NOT:
        return within & ~bits_of(argument, leaf_bits, within)
    return within  # TRUE


def hits_of(code: TreeCode, memo: Mapping[int, Hits]) -> Hits | None:
    """The tree's hits on one paper (None: no match), from `memo`: leaf -> hits for every
    leaf the paper matches (a leaf absent from it does not match).

    ANY and ALL return a leaf's own tuple when it is the only one with hits: equal to the
    reference's concatenation, and no copy."""
    kind, argument = code
    if kind == LEAF:
        return memo.get(argument)
    if kind == ANY:
        parts = [hits for number in argument if (hits := memo.get(number)) is not None]
        if len(parts) < 2:
            return parts[0] if parts else None
        return tuple(chain.from_iterable(parts))
    if kind == ALL:
        parts = []
        for number, negated in argument:
            hits = memo.get(number)
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
    if kind == AND:
        found: list[Hit] = []
        for child in argument:
            hits = hits_of(child, memo)
            if hits is None:
                return None
            found += hits
        return tuple(found)
    if kind == OR:
        found = []
        matched = False
        for child in argument:
            hits = hits_of(child, memo)
            if hits is not None:
                matched = True
                found += hits
        return tuple(found) if matched else None
    if kind == NOT:
        return None if hits_of(argument, memo) is not None else _NO_HITS
    return _NO_HITS  # TRUE
