"""A rule in words (`bot.rules.describe`): what a reader sees where a rule has no label.

Table-driven on the grammar's parts, then fuzzed: whatever a subscriber writes, the words
carry none of the rule's syntax (quotes, operators, fields, wildcards, `hf:top`), and a
text that does not parse is still shown, never an error."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from test_rules import parse_or_skip_limits, rule_texts

from bot.rules import describe, describe_rule, parse_rule

CASES = [
    # the three
    ('"reinforcement learning"', "reinforcement learning"),
    ("hf:top10", "Top 10 on Hugging Face"),
    ("cat:cs.LG", "Machine Learning (cs.LG)"),
    # words and phrases
    ("robot", "robot"),
    ("robot grasping", "robot grasping"),
    ("“typographic phrase”", "typographic phrase"),
    ('"large language models" reasoning', "large language models and reasoning"),
    (
        'multi-agent "reinforcement learning" -survey',
        "multi-agent and reinforcement learning, not survey",
    ),
    ("transform*", "transform…"),
    ('"language model*"', "language model…"),
    ("ti:robot abs:grasping", "robot grasping"),
    ("ti:(diffusion OR flow) robot*", "(diffusion or flow) and robot…"),
    ("robot OR drone", "robot or drone"),
    ("robot AND drone", "robot drone"),
    # the words or, and, not that a rule searches for: quoted, not read as operators
    ("robot or drone", "robot ‘or’ drone"),
    ("robot not drone", "robot ‘not’ drone"),
    ('robot "and" drone', "robot and ‘and’ and drone"),
    ("ti:OR drone", "‘OR’ drone"),
    ("NOT survey robot", "robot, not survey"),
    ("robot -(survey OR review)", "robot, not (survey or review)"),
    ("a b OR c -d", "a b, or c, not d"),
    # the other fields
    ('au:lecun OR au:"Yoshua Bengio"', "by lecun or by Yoshua Bengio"),
    ("cat:cs", "Computer Science (cs)"),
    ("cat:astro-ph.CO", "Cosmology and Nongalactic Astrophysics (astro-ph.CO)"),
    ("cat:CS.ro", "Robotics (cs.RO)"),
    ("robot cat:cs.RO", "robot and Robotics (cs.RO)"),
    ("id:arXiv:2411.17700v2", "arXiv 2411.17700"),
    ("src:huggingface", "from Hugging Face"),
    ("src:hf-daily", "from hf-daily"),
    ("upvotes>=20", "at least 20 upvotes"),
    ("upvotes>1", "more than 1 upvote"),
    ("upvotes<=5", "at most 5 upvotes"),
    ("upvotes<5", "fewer than 5 upvotes"),
    ("upvotes=3", "exactly 3 upvotes"),
    (
        "hf:top5 OR (cat:cs.RO src:huggingface)",
        "Top 5 on Hugging Face, or Robotics (cs.RO) and from Hugging Face",
    ),
]


@pytest.mark.parametrize(("rule", "words"), CASES, ids=[rule for rule, _ in CASES])
def test_a_rule_in_words(rule: str, words: str) -> None:
    assert describe_rule(parse_rule(rule)) == words
    assert describe(rule) == words


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('"unclosed phrase', "unclosed phrase"),
        ("robot OR", "robot"),
        ("", ""),
        ("   ", ""),
        ('ti: "x"', "ti: x"),
    ],
)
def test_a_text_that_does_not_parse_is_shown_without_its_quotes_and_operators(
    text: str, words: str
) -> None:
    assert describe(text) == words


# What no rule in words may hold: quotes, upper-case operators, a field before a value,
# a wildcard, a comparison, hf:top.
SYNTAX = re.compile(
    r'["“”„]|\b(?:OR|AND|NOT)\b|\b(?:ti|abs|au|cat|id|src|hf):|\*|[<>]=?|upvotes=|hf:top',
    re.IGNORECASE,
)


@given(rule_texts())
@example('multi-agent "reinforcement learning" -survey')
@example("hf:top10 OR upvotes>=20")
@example("robot or drone")  # operators' names in lower case are words, and stay words
def test_no_rule_in_words_shows_its_syntax(text: str) -> None:
    rule = parse_or_skip_limits(text)
    words = describe_rule(rule)
    operators = {"or", "and", "not"}  # words a rule may search for, shown as words
    shown = " ".join(w for w in words.split() if w.strip("‘’").casefold() not in operators)
    assert not SYNTAX.search(shown.replace("(", " ").replace(")", " ")), (text, words)
    assert words == describe(text)


@given(st.text(max_size=600))
@example('"a" OR "b"')
@example("\x00robot")
def test_describe_takes_any_text(text: str) -> None:
    words = describe(text)
    assert isinstance(words, str)
    assert not set(words) & set('"“”„')
    assert words == words.strip()
