"""The tree of a parsed rule, and its canonical text.

Pure data. `parse_rule` (in `bot.rules.parser`) builds these nodes; `format_rule` writes
them back. Trees from `parse_rule` are canonical:

* `And` and `Or` have at least two children; an `And` never has an `And` child and an `Or`
  never an `Or` child (nested groups are flattened, in the order written);
* a `Not` never holds a `Not`;
* every rule `is_positive`: a paper can match it only by matching some positive leaf.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "COMPARISONS",
    "LEAVES",
    "MAX_TOP",
    "And",
    "Author",
    "Category",
    "Id",
    "Leaf",
    "Node",
    "Not",
    "Or",
    "Rule",
    "Source",
    "Term",
    "Trending",
    "Upvotes",
    "format_node",
    "format_rule",
    "is_positive",
    "leaf_text",
]


@dataclass(frozen=True, slots=True)
class Term:
    """A word (one folded word) or a phrase (several), matched in the title or abstract."""

    words: tuple[str, ...]
    raw: str  # as written, without a leading "-" or field; phrases with their quotes
    quoted: bool
    field: str = "any"  # "any" (title or abstract) | "ti" | "abs"
    # The last word is a prefix (`transform*`): words[-1] is then lower case and accent
    # folded but not plural folded ("transformers*" keeps its s).
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Author:
    """`au:`: an author by surname (`au:lecun`) or full name (`au:"Yann LeCun"`)."""

    words: tuple[str, ...]  # `name_words` of the value: folded, surname last
    raw: str  # as written after "au:"; a quoted name with its quotes


@dataclass(frozen=True, slots=True)
class Category:
    """An arXiv category (`cs.RO`) or a whole archive (`cs`), in arXiv's spelling."""

    value: str


@dataclass(frozen=True, slots=True)
class Id:
    """`id:`: one paper, by its version-less arXiv id (`2411.17700`, `quant-ph/0201082`)."""

    value: str


@dataclass(frozen=True, slots=True)
class Source:
    """`src:`: the paper came from a source with this configured name or kind (`hf-daily`,
    `huggingface`, `arxiv`), in lower case."""

    value: str


COMPARISONS = (">=", ">", "<=", "<", "=")
MAX_TOP = 100  # hf:topN takes N from 1 to MAX_TOP


@dataclass(frozen=True, slots=True)
class Upvotes:
    """`upvotes>=20`: the paper's Hugging Face upvotes compared with `value` (`op` is one
    of COMPARISONS). A paper that is not on Hugging Face never matches."""

    op: str
    value: int


@dataclass(frozen=True, slots=True)
class Trending:
    """`hf:top10`: among the `n` most upvoted papers of its Hugging Face day (rank <= n)."""

    n: int


@dataclass(frozen=True, slots=True)
class Not:
    """The paper must not match `node`."""

    node: Node


@dataclass(frozen=True, slots=True)
class And:
    """The paper must match every node."""

    nodes: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    """The paper must match at least one node."""

    nodes: tuple[Node, ...]


Leaf = Term | Author | Category | Id | Source | Upvotes | Trending
Node = Term | Author | Category | Id | Source | Upvotes | Trending | Not | And | Or
LEAVES = (Term, Author, Category, Id, Source, Upvotes, Trending)


@dataclass(frozen=True, slots=True)
class Rule:
    """A parsed rule: the text as given (stripped) and its tree."""

    text: str
    node: Node


def leaf_text(leaf: Leaf) -> str:
    """The canonical text of one leaf, field included: `robot`, `ti:"a b"`, `cat:cs.RO`,
    `src:huggingface`, `upvotes>=20`, `hf:top10`.

    This is also the `term` of the leaf's hits."""
    if isinstance(leaf, Term):
        return leaf.raw if leaf.field == "any" else f"{leaf.field}:{leaf.raw}"
    if isinstance(leaf, Author):
        return f"au:{leaf.raw}"
    if isinstance(leaf, Category):
        return f"cat:{leaf.value}"
    if isinstance(leaf, Id):
        return f"id:{leaf.value}"
    if isinstance(leaf, Source):
        return f"src:{leaf.value}"
    if isinstance(leaf, Upvotes):
        return f"upvotes{leaf.op}{leaf.value}"
    return f"hf:top{leaf.n}"


def format_node(node: Node) -> str:
    """The canonical text of a node, with the fewest parentheses that keep its meaning."""
    if isinstance(node, LEAVES):
        return leaf_text(node)
    if isinstance(node, Not):
        inner = format_node(node.node)
        return f"-({inner})" if isinstance(node.node, (And, Or)) else f"-{inner}"
    if isinstance(node, And):
        # AND binds tighter than OR: only an OR inside an AND needs parentheses.
        return " ".join(
            f"({format_node(child)})" if isinstance(child, (Or, And)) else format_node(child)
            for child in node.nodes
        )
    return " OR ".join(
        f"({format_node(child)})" if isinstance(child, Or) else format_node(child)
        for child in node.nodes
    )


def format_rule(rule: Rule) -> str:
    """The canonical text of a rule: `parse_rule(format_rule(r)).node == r.node`.

    Single spaces, operators in upper case, `-` for NOT, the fewest parentheses, each
    leaf with its field (`ti:(a OR b)` is written `ti:a OR ti:b`), `cat:` in arXiv's
    spelling, `src:`, `upvotes` and `hf:top` in lower case and numbers without leading
    zeros (`UPVOTES:>=020` is `upvotes>=20`)."""
    return format_node(rule.node)


def is_positive(node: Node) -> bool:
    """Whether every way to match `node` needs some positive leaf to match.

    False for a `Not`, for an `And` of such nodes only, and for an `Or` with any such
    alternative: a rule like `-survey` or `robot OR -survey` matches almost every paper."""
    if isinstance(node, LEAVES):
        return True
    if isinstance(node, Not):
        return False
    if isinstance(node, And):
        return any(is_positive(child) for child in node.nodes)
    return all(is_positive(child) for child in node.nodes)
