"""The matcher's answer without hits (bot.match.matched): which papers each rule matched,
and each match's hits made only when asked for, equal to the reference evaluator's.

Real papers (every 7th of the real feed of 28 Nov 2024), rules written from their words,
phrases and word prefixes; `bot.rules.holds` (what the matcher asks about the leaves no
key decides) against the hits it stands for; and the count of the leaf hits made, to show
that a digest makes those of the papers it ranks, not of every match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import FULL_FEED

import bot.match.matched
from bot.core.errors import RuleError
from bot.core.models import Hit, Paper, Subscriber
from bot.match.digest import build_digest, count_matches, is_pending, match_rules
from bot.match.matched import indexes
from bot.match.matcher import Matcher
from bot.rules import (
    PaperText,
    Rule,
    Term,
    analyze,
    holds,
    leaf_hits,
    match,
    parse_rule,
    tokenize,
)
from bot.sources.arxiv import parse_listing

NOW = datetime(2024, 11, 28, 12, tzinfo=UTC)


@cache
def papers() -> tuple[Paper, ...]:
    return tuple(parse_listing(FULL_FEED.read_bytes(), source="arxiv").papers[::7][:200])


@cache
def texts() -> dict[str, PaperText]:
    return {paper.id: analyze(paper) for paper in papers()}


@cache
def vocabulary() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Words, title phrases of 2-3 words, and word prefixes of the papers."""
    words: set[str] = set()
    phrases: set[str] = set()
    for paper in papers():
        for text in (paper.title, paper.abstract):
            spelled = [text[t.start : t.end] for t in tokenize(text)]
            words.update(w.lower() for w in spelled if w.isascii() and w.isalpha())
        spelled = [paper.title[t.start : t.end] for t in tokenize(paper.title)]
        for size in (2, 3):
            for i in range(len(spelled) - size + 1):
                if all(w.isascii() and w.isalpha() for w in spelled[i : i + size]):
                    phrases.add(" ".join(spelled[i : i + size]))
    prefixes = {w[:n] for w in words for n in (3, 4, 6) if len(w) > n}
    return tuple(sorted(words)), tuple(sorted(phrases)), tuple(sorted(prefixes))


def terms() -> st.SearchStrategy[str]:
    """A word, a phrase, a wildcard or a phrase ending in one, maybe in one field."""
    words, phrases, prefixes = vocabulary()
    word = st.sampled_from(words)
    term = st.one_of(
        word,
        st.sampled_from(phrases).map(lambda p: f'"{p}"'),
        st.sampled_from(prefixes).map(lambda p: f"{p}*"),
        st.tuples(word, st.sampled_from(prefixes)).map(lambda t: f'"{t[0]} {t[1]}*"'),
    )
    field = st.sampled_from(("", "", "ti:", "abs:"))
    return st.tuples(field, term).map("".join)


def rules() -> st.SearchStrategy[str]:
    """A term, two, an OR, an exclusion, a category."""
    term = terms()
    return st.one_of(
        term,
        st.tuples(term, term).map(" ".join),
        st.tuples(term, term).map(" OR ".join),
        st.tuples(term, term).map(lambda t: f"{t[0]} -{t[1]}"),
        st.tuples(st.sampled_from(("cs", "math", "cs.LG", "astro-ph")), term).map(
            lambda t: f"cat:{t[0]} {t[1]}"
        ),
    )


def parsed(written: Sequence[str]) -> list[tuple[object, Rule]]:
    found: list[tuple[object, Rule]] = []
    for text in written:
        try:
            found.append((len(found), parse_rule(text)))
        except RuleError:
            continue
    return found


def reference(numbered: Sequence[tuple[object, Rule]]) -> dict[object, list[tuple[int, Any]]]:
    """Rule id -> [(position of the paper, hits)] through the reference evaluator."""
    found: dict[object, list[tuple[int, Any]]] = {}
    for rule_id, rule in numbered:
        for i, paper in enumerate(papers()):
            if (hits := match(rule, texts()[paper.id])) is not None:
                found.setdefault(rule_id, []).append((i, hits))
    return found


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written=st.lists(rules(), min_size=3, max_size=15), kept=st.booleans())
def test_which_papers_and_hits_on_demand_equal_the_reference(
    written: list[str], kept: bool
) -> None:
    numbered = parsed(written)
    expected = reference(numbered)
    # With the callers' texts, or analyzing each paper again for its hits.
    found = Matcher(numbered).match(papers(), texts=texts() if kept else None, hits=False)
    assert list(found) == [rule_id for rule_id, _ in numbered if rule_id in expected]
    assert len(found) == len(expected)
    for rule_id, _ in numbered:
        matched = expected.get(rule_id, [])
        assert found.indexes(rule_id) == [i for i, _ in matched]
        assert found.bits(rule_id) == sum(1 << i for i, _ in matched)
        assert (rule_id in found) == bool(matched)
        for i, hits in reversed(matched):  # in any order
            assert found.hits(rule_id, i) == hits
        if matched:
            by_id = found[rule_id]
            assert list(by_id) == [papers()[i].id for i, _ in matched]
            assert dict(by_id.items()) == {papers()[i].id: hits for i, hits in matched}
            assert len(by_id) == len(matched)
        else:
            with pytest.raises(KeyError):
                found[rule_id]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written=terms())
def test_holds_is_whether_a_term_has_hits(written: str) -> None:
    """The matcher asks `holds` about a phrase, a wildcard or a field; it must be
    `leaf_hits(...) is not None`, on the papers that have the term and those that do not."""
    node = parse_rule(written).node
    assert isinstance(node, Term)
    for text in texts().values():
        assert holds(node, text) == (leaf_hits(node, text) is not None)


def test_a_wildcard_is_not_the_word_it_starts_with() -> None:
    """`match*` is looked up by the papers with a word starting with "match", `match` by
    those with the word: the two must not share their papers."""
    with_word = Paper("2411.00001", 1, "Score match", "A match.", ("A. B",), ("cs.LG",))
    with_longer = Paper("2411.00002", 1, "Score matching", "Matching.", ("A. B",), ("cs.LG",))
    numbered = [(1, parse_rule("match")), (2, parse_rule("match*")), (3, parse_rule("matc*"))]
    found = Matcher(numbered).match([with_word, with_longer], hits=False)
    assert found.indexes(1) == [0]
    assert found.indexes(2) == found.indexes(3) == [0, 1]


def test_match_rules_answers_as_a_mapping_of_mappings() -> None:
    written = ["learning", '"neural network"', "quantum -cat:quant-ph", "zzzunmatched"]
    rules_ = [parse_rule(text) for text in written]
    matches = match_rules(rules_, papers())
    for rule in rules_:
        expected = {
            paper.id: hits
            for paper in papers()
            if (hits := match(rule, texts()[paper.id])) is not None
        }
        if not expected:
            assert rule.node not in matches and matches.get(rule.node) is None
            continue
        found = matches[rule.node]
        assert list(found) == list(expected) and len(found) == len(expected)
        assert all(paper_id in found for paper_id in expected)
        assert papers()[-1].id in found or papers()[-1].id not in expected
        assert "2411.99999" not in found and 17 not in found
        assert {paper_id: found[paper_id] for paper_id in found} == expected
        with pytest.raises(KeyError):
            found["2411.99999"]
    assert set(matches) == {r.node for r in rules_[:3]}


def test_a_paper_id_given_twice_keeps_the_last_as_before() -> None:
    paper = Paper("2411.00001", 1, "A robot", "", (), ())
    again = replace(paper, title="A drone")
    matches = match_rules([parse_rule("robot"), parse_rule("drone")], [paper, again])
    assert isinstance(matches, dict)  # the former answer, whole
    terms = [hit.term for found in matches.values() for hits in found.values() for hit in hits]
    assert terms == ["robot", "drone"]


def test_hits_are_made_only_for_the_papers_asked_about(monkeypatch: pytest.MonkeyPatch) -> None:
    """Matching makes no hits; a digest makes those of the papers still owed, each paper's
    leaves once, whoever asks."""
    made: list[str] = []
    real = leaf_hits

    def counted(leaf: Any, text: PaperText) -> Any:
        made.append(text.id)
        return real(leaf, text)

    monkeypatch.setattr(bot.match.matched, "leaf_hits", counted)
    rules_ = [parse_rule(text) for text in ("learning", "model", '"neural network"')]
    matches = match_rules(rules_, papers())
    assert made == []
    matched = {paper_id for rule in rules_ for paper_id in matches[rule.node]}
    sent = set(list(matched)[: len(matched) // 2])  # half of them went out already
    reader = Subscriber("ada", "ada@example.org", tuple(r.text for r in rules_), max_papers=500)
    delivered = {paper_id: 1 for paper_id in sent}
    owed = {p.id for p in papers() if p.id in matched and is_pending(reader, p, delivered)}
    assert 0 < len(owed) < len(matched) - len(sent)  # and some not owed: replacements
    digest = build_digest(reader, rules_, papers(), delivered=delivered, now=NOW, matches=matches)
    assert digest is not None and digest.count == len(owed)
    assert set(made) == owed
    asked = len(made)
    again = build_digest(reader, rules_, papers(), delivered=delivered, now=NOW, matches=matches)
    assert again == digest and len(made) == asked  # each paper's leaves once
    alone = build_digest(reader, rules_, papers(), delivered=delivered, now=NOW)
    assert alone == digest


def test_indexes_of_sparse_and_dense_bit_sets() -> None:
    assert indexes(0) == []
    assert indexes(0b1011) == [0, 1, 3]
    members = list(range(0, 3000, 7))
    assert indexes(sum(1 << i for i in members)) == members  # dense: read from the digits
    assert indexes(1 << 5000) == [5000]


def test_hits_of_a_rule_that_did_not_match_are_refused() -> None:
    paper = Paper("2411.00001", 1, "A robot", "", (), ())
    found = Matcher([(1, parse_rule("robot")), (2, parse_rule("drone"))]).match([paper], hits=False)
    assert found.hits(1, 0) == (Hit("title", 2, 7, "robot"),)
    for rule_id, index in ((2, 0), (1, 1), (3, 0)):
        with pytest.raises(KeyError):
            found.hits(rule_id, index)


def test_counting_a_rules_matches_takes_its_matches_not_every_paper() -> None:
    """`count_matches` (the manage page's counts) reads each rule's matches among some of
    the papers: the same counts and examples from the answer with hits on demand as from
    one with every hit, over a window of the papers, and with a paper id twice."""
    written = ["learning", '"neural network"', "quantum -cat:quant-ph", "zzzunmatched"]
    rules_ = [parse_rule(text) for text in written]
    window = papers()[20:150]
    on_demand = match_rules(rules_, papers())
    found = Matcher([(rule.node, rule) for rule in rules_]).match(papers())
    at_once = {node: {paper.id: hits for paper, hits in found[node]} for node in found}
    counts = count_matches(rules_, window, on_demand, examples=3)
    assert counts == count_matches(rules_, window, at_once, examples=3)
    assert counts["learning"][0] == sum(
        1 for paper in window if match(rules_[0], texts()[paper.id]) is not None
    )
    assert counts["zzzunmatched"] == (0, ())
    twice = [*window, window[0]]
    again = count_matches(rules_, twice, on_demand, examples=3)
    assert again == count_matches(rules_, twice, at_once, examples=3)
