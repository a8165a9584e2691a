"""A rule in words, for a reader: what a digest shows where it names a rule that has no label.

`describe_rule` writes a parsed rule without its syntax: no operators, quotes, fields or
wildcards. `"reinforcement learning" -survey` is "reinforcement learning, not survey",
`robot grasping` stays "robot grasping", `"large language models" reasoning` is "large
language models and reasoning",
`hf:top10` is "Top 10 on Hugging Face", `cat:cs.LG` is "Machine Learning (cs.LG)" (arXiv's
taxonomy, `bot.core.categories`), `au:lecun OR au:bengio` is "by lecun or by bengio", and
the word `or` (an operator only in upper case) is quoted: `robot or drone` is "robot ‘or’
drone". It is a name, not a definition: `ti:` and `abs:` are left out. `describe` does the
same for a rule's text, and strips what it can of a text that does not parse (one stored
under an older grammar), so it never fails.

Pure: no I/O but the taxonomy's one read, no clock. Linear in the rule's length.
"""

from __future__ import annotations

import functools

from bot.core.categories import category_words
from bot.core.errors import RuleError
from bot.rules.parser import parse_rule
from bot.rules.tree import (
    And,
    Author,
    Category,
    Id,
    Node,
    Not,
    Or,
    Rule,
    Source,
    Term,
    Trending,
    Upvotes,
)

__all__ = ["describe", "describe_rule"]

# The sources a rule names by kind, in words; a configured name is shown as it is.
SOURCE_WORDS = {
    "huggingface": "Hugging Face",
    "arxiv": "arXiv",
    "arxiv_query": "arXiv searches",
    "feed": "feeds",
}
UPVOTE_WORDS = {
    ">=": "at least",
    ">": "more than",
    "<=": "at most",
    "<": "fewer than",
    "=": "exactly",
}
_QUOTES = '"“”„'
_OPERATORS = frozenset({"OR", "AND", "NOT"})
# The operators' names as words (`robot or drone` asks for the word "or"): shown in quotes,
# or "robot or drone" would read as the OR it is not.
_OPERATOR_WORDS = frozenset({"or", "and", "not"})
ELLIPSIS = "…"


def describe_rule(rule: Rule) -> str:
    """The rule in words: `"reinforcement learning" -survey` -> `reinforcement learning,
    not survey`; `hf:top10` -> `Top 10 on Hugging Face`."""
    return _words(rule.node)


@functools.lru_cache(maxsize=4096)
def describe(text: str) -> str:
    """A rule's text in words (`describe_rule`); a text that does not parse, with its
    quotes and operators left out; empty for a blank one."""
    try:
        return describe_rule(parse_rule(text))
    except RuleError:
        return _stripped(text)


def _words(node: Node) -> str:
    if isinstance(node, Term):
        words = node.raw.strip(_QUOTES)
        if words.casefold() in _OPERATOR_WORDS:
            return f"‘{words}’"
        return words.removesuffix("*") + ELLIPSIS if node.prefix else words
    if isinstance(node, Author):
        return "by " + node.raw.strip(_QUOTES)
    if isinstance(node, Category):
        return category_words(node.value)
    if isinstance(node, Id):
        return f"arXiv {node.value}"
    if isinstance(node, Source):
        return "from " + SOURCE_WORDS.get(node.value, node.value)
    if isinstance(node, Upvotes):
        noun = "upvote" if node.value == 1 else "upvotes"
        return f"{UPVOTE_WORDS[node.op]} {node.value} {noun}"
    if isinstance(node, Trending):
        return f"Top {node.n} on Hugging Face"
    if isinstance(node, Not):
        inner = _words(node.node)
        return f"not ({inner})" if isinstance(node.node, (And, Or)) else f"not {inner}"
    if isinstance(node, And):
        return _all_of(node)
    joint = ", or " if any(isinstance(child, And) for child in node.nodes) else " or "
    return joint.join(_words(child) for child in node.nodes)


def _all_of(node: And) -> str:
    """An AND in words: unquoted words side by side as written (`robot grasping`), the
    other parts joined by "and", the exclusions after them: `large language models and
    reasoning, not survey`."""
    wanted: list[str] = []
    unwanted: list[str] = []
    loose = False  # whether the last part is unquoted words, which the next may join
    for child in node.nodes:
        if isinstance(child, Not):
            unwanted.append(_words(child))
            continue
        word = isinstance(child, Term) and not child.quoted
        if word and loose:
            wanted[-1] += " " + _words(child)
        else:
            wanted.append(_grouped(child))
        loose = word
    return ", ".join(part for part in (" and ".join(wanted), *unwanted) if part)


def _grouped(node: Node) -> str:
    """A part of an AND: an OR in parentheses, so that its "or" is not read as the AND's."""
    return f"({_words(node)})" if isinstance(node, Or) else _words(node)


def _stripped(text: str) -> str:
    """A text that is no rule, without quotes and operators, its spaces tidied."""
    for quote in _QUOTES:
        text = text.replace(quote, "")
    return " ".join(word for word in text.split() if word not in _OPERATORS)
