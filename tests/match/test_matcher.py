"""The rule index (bot.match.matcher): it must give exactly the reference evaluator's answer.

Unit cases for the triggers (the keys a rule is indexed under), the property that the
matcher equals `bot.rules.match` on every rule x every paper (random rules written from the
words, phrases, authors, categories and ids of real arXiv papers, and sources, upvotes and
Hugging Face ranks, which some of those papers are given), and checks that it does much
less work than the naive product.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import FULL_FEED

from bot.core.errors import RuleError
from bot.core.models import Hit, Paper
from bot.match.keys import key_frequencies, paper_keys, trigger_keys
from bot.match.matcher import Matcher
from bot.rules import (
    And,
    Not,
    Or,
    PaperText,
    Rule,
    Term,
    analyze,
    analyze_text,
    match,
    parse_rule,
    tokenize,
)
from bot.sources.arxiv import parse_listing

SAMPLE = 200  # papers of the real feed the property runs on


@dataclass(frozen=True)
class Corpus:
    papers: tuple[Paper, ...]
    texts: dict[str, PaperText]
    words: tuple[str, ...]
    phrases: tuple[str, ...]
    surnames: tuple[str, ...]
    names: tuple[str, ...]
    categories: tuple[str, ...]
    ids: tuple[str, ...]
    prefixes: tuple[str, ...]
    sources: tuple[str, ...]


def with_sources(papers: Sequence[Paper]) -> tuple[Paper, ...]:
    """The papers as several sources bring them: a quarter also on Hugging Face (upvotes
    and a rank; a few with one but not the other), some from a journal feed too."""
    found = []
    for i, paper in enumerate(papers):
        if i % 4 == 0:
            paper = replace(
                paper,
                sources=("hf-daily", "huggingface", "arxiv-all", "arxiv"),
                upvotes=None if i % 36 == 0 else (i * 13) % 70,
                hf_rank=None if i % 20 == 0 else i // 4 % 30 + 1,
            )
        elif i % 4 == 1:
            paper = replace(paper, sources=("arxiv-all", "arxiv", "nature.physics", "feed"))
        elif i % 4 == 2:
            paper = replace(paper, sources=("arxiv-all", "arxiv"))
        found.append(paper)  # the last quarter: only `source` ("arxiv"), as stored before
    return tuple(found)


@cache
def corpus() -> Corpus:
    """Every 7th paper of the real feed (all archives), analyzed, and a vocabulary of rules
    from them. Read once per session (the strategies need it before any fixture runs)."""
    papers = parse_listing(FULL_FEED.read_bytes(), source="arxiv").papers
    sample = with_sources(papers[::7][:SAMPLE])
    words: set[str] = set()
    phrases: set[str] = set()
    for paper in sample:
        for text in (paper.title, paper.abstract):
            spelled = [text[t.start : t.end] for t in tokenize(text)]
            plain = [w for w in spelled if w.isascii() and w.isalnum()]
            words.update(w.lower() for w in plain)
        spelled = [paper.title[t.start : t.end] for t in tokenize(paper.title)]
        for size in (2, 3):
            for i in range(len(spelled) - size + 1):
                phrase = spelled[i : i + size]
                if all(w.isascii() and w.isalnum() for w in phrase):
                    phrases.add(" ".join(phrase))
    names = {a for p in sample for a in p.authors if a.isascii() and '"' not in a}
    surnames = {name.split()[-1] for name in names if name.split()[-1].isalpha()}
    categories = {c for p in sample for c in p.categories}
    categories |= {c.partition(".")[0] for c in categories} | {"cs.*", "math.*", "cs.RO"}
    prefixes = {w[:n] for w in words if w.isalpha() for n in (3, 5) if len(w) > n}
    return Corpus(
        papers=sample,
        texts={p.id: analyze(p) for p in sample},
        words=tuple(sorted(words)),
        phrases=tuple(sorted(phrases)),
        surnames=tuple(sorted(surnames)),
        names=tuple(sorted(names)),
        categories=tuple(sorted(categories)),
        ids=(*sorted({p.id for p in sample}), "2411.00001", "quant-ph/0201082"),
        prefixes=tuple(sorted(prefixes)),
        sources=(*sorted({s for p in sample for s in p.sources}), "biorxiv", "HF-Daily"),
    )


@pytest.fixture(scope="session")
def real() -> Corpus:
    return corpus()


def reference(
    rules: Sequence[tuple[object, Rule]], papers: Sequence[Paper], texts: dict[str, PaperText]
) -> dict[object, list[tuple[Paper, tuple[Hit, ...]]]]:
    """Every rule x every paper through the reference evaluator."""
    found: dict[object, list[tuple[Paper, tuple[Hit, ...]]]] = {}
    for rule_id, rule in rules:
        matched = [(p, hits) for p in papers if (hits := match(rule, texts[p.id])) is not None]
        if matched:
            found[rule_id] = matched
    return found


def keys_of(text: str) -> frozenset[str] | None:
    return trigger_keys(parse_rule(text).node)


# --------------------------------------------------------------------------------------------
# Triggers: the keys a rule is indexed under


@pytest.mark.parametrize(
    ("rule", "keys"),
    [
        ("robot", {"robot"}),
        ("Robots", {"robot"}),  # folded, as the paper's words are
        ('"reinforcement learning"', {"reinforcement learning"}),  # a pair of adjacent words
        ("multi-agent", {"multi agent"}),
        ("robot OR grasping", {"robot", "grasping"}),
        ('robot OR "point cloud" OR cat:cs.RO', {"robot", "point cloud", "cat:cs.ro"}),
        ("cat:cs.RO", {"cat:cs.ro"}),
        ("cat:cs", {"cat:cs"}),
        ("cat:cs.*", {"cat:cs"}),
        ("au:lecun", {"au:lecun"}),
        ('au:"Yann LeCun"', {"au:lecun"}),
        ("transform*", {"transform*"}),
        ("Transformers*", {"transformers*"}),  # a prefix is not plural folded
        ('"deep reinforc*"', {"deep"}),  # the prefix is the last resort
        ("id:2411.17700v2", {"id:2411.17700"}),
        ("ti:robot", {"robot"}),  # fields share the word keys; the evaluator checks the field
        ("robot -survey", {"robot"}),  # an excluded word is no trigger
        ("NOT survey robot", {"robot"}),
        ("the robot", {"robot"}),  # the rarer word of an AND
        ("model graphene", {"graphene"}),
        ("cat:cs.RO grasping", {"cat:cs.ro"}),
        ("(robot OR drone) quadrotor", {"quadrotor"}),
        ("(robot OR drone) cat:cs", {"robot", "drone"}),  # cat:cs is half of arXiv
        ("src:huggingface", {"src:huggingface"}),
        ("SRC:HF-Daily", {"src:hf-daily"}),
        ("src:(hf-daily OR biorxiv)", {"src:hf-daily", "src:biorxiv"}),
        ("upvotes>=20", {"hf:"}),  # every paper on Hugging Face has hf:
        ("upvotes<5", {"hf:"}),
        ("hf:top10", {"hf:"}),
        ("hf:top10 OR src:biorxiv", {"hf:", "src:biorxiv"}),
        ("robot src:arxiv", {"robot"}),  # a source may bring every paper: the last resort
        ("robot -src:huggingface", {"robot"}),
        ("graphene upvotes>=10", {"graphene"}),  # a rare word before the Hugging Face papers
        ("model upvotes>=10", {"hf:"}),  # a common word after them
        ("upvotes>=10 cat:cs.RO", {"cat:cs.ro"}),
    ],
)
def test_trigger_keys(rule: str, keys: set[str] | None) -> None:
    assert keys_of(rule) == keys


def test_three_word_phrase_is_indexed_under_one_of_its_pairs() -> None:
    assert keys_of('"large language models"') in ({"large language"}, {"language model"})


def test_rules_without_a_positive_requirement_are_evaluated_on_every_paper() -> None:
    survey = Term(("survey",), "survey", False)
    robot = Term(("robot",), "robot", False)
    alone = Rule("-survey", Not(survey))  # the parser refuses these; the matcher copes
    either = Rule("robot OR -survey", Or((robot, Not(survey))))
    both = Rule("-survey -robot", And((Not(survey), Not(robot))))
    for rule in (alone, either, both):
        assert trigger_keys(rule.node) is None
    matcher = Matcher([(1, alone), (2, either), (3, both), (4, parse_rule("robot"))])
    assert matcher.always_evaluated == 3
    papers = [
        Paper("2411.00001", 1, "A robot", "We build it.", ("A. B",), ("cs.RO",)),
        Paper("2411.00002", 1, "A survey", "Of robots.", ("A. B",), ("cs.RO",)),
        Paper("2411.00003", 1, "Graphene", "It conducts.", ("A. B",), ("cond-mat",)),
    ]
    texts = {p.id: analyze(p) for p in papers}
    rules = [(1, alone), (2, either), (3, both), (4, parse_rule("robot"))]
    assert matcher.match(papers) == reference(rules, papers, texts)
    assert [p.id for p, _ in matcher.match(papers)[1]] == ["2411.00001", "2411.00003"]


def test_frequencies_choose_the_trigger() -> None:
    rule = parse_rule("graphene transistor").node
    assert trigger_keys(rule, frequencies={"graphene": 0.5, "transistor": 0.1}) == {"transistor"}
    assert trigger_keys(rule, frequencies={"graphene": 0.1, "transistor": 0.5}) == {"graphene"}


def test_paper_keys() -> None:
    text = analyze_text(
        "Robots Grasping",
        "We study policies.",
        ("cs.RO", "cs.LG"),
        id="arXiv:2411.17700v2",
        authors=("Yann LeCun", "Ada Lovelace (Analytical Engines Ltd)"),
    )
    assert paper_keys(text) == {
        "robot", "grasping", "robot grasping",
        "we", "study", "policy", "we study", "study policy",
        "cat:cs.ro", "cat:cs.lg", "cat:cs",
        "au:lecun", "au:lovelace",
        "id:2411.17700",
    }  # fmt: skip
    on_hugging_face = analyze_text(
        "Robots", "", (), sources=("HF-Daily", "huggingface"), upvotes=0, hf_rank=None
    )
    assert paper_keys(on_hugging_face) == {"robot", "src:hf-daily", "src:huggingface", "hf:"}
    ranked = analyze_text("Robots", "", (), upvotes=None, hf_rank=4)
    assert paper_keys(ranked) == {"robot", "hf:"}


def test_key_frequencies() -> None:
    texts = [analyze_text("Robots", "", ("cs.RO",)), analyze_text("Graphene", "", ("cond-mat",))]
    shares = key_frequencies(texts)
    assert shares["robot"] == shares["cat:cs.ro"] == shares["graphene"] == 0.5
    assert key_frequencies([]) == {}


# --------------------------------------------------------------------------------------------
# The property: the matcher is the reference evaluator, faster


def text_leaves(c: Corpus) -> st.SearchStrategy[str]:
    """A word, a phrase or a wildcard, as people write them."""
    word = st.sampled_from(c.words)
    return st.one_of(
        word,
        word,
        st.sampled_from(c.phrases).map(lambda p: f'"{p}"'),
        st.sampled_from(c.prefixes).map(lambda v: f"{v}*"),
        st.tuples(word, st.sampled_from(c.prefixes)).map(lambda t: f'"{t[0]} {t[1]}*"'),
    )


def leaves(c: Corpus) -> st.SearchStrategy[str]:
    text = text_leaves(c)
    return st.one_of(
        text,
        text,
        text,
        st.tuples(st.sampled_from(("ti:", "abs:")), text).map("".join),
        st.sampled_from(c.surnames).map(lambda s: f"au:{s}"),
        st.sampled_from(c.names).map(lambda n: f'au:"{n}"'),
        st.sampled_from(c.categories).map(lambda v: f"cat:{v}"),
        st.sampled_from(c.ids).map(lambda v: f"id:{v}"),
        st.sampled_from(c.sources).map(lambda v: f"src:{v}"),
        st.tuples(st.sampled_from((">=", ">", "<=", "<", "=")), st.integers(0, 75)).map(
            lambda t: f"upvotes{t[0]}{t[1]}"
        ),
        st.integers(1, 40).map(lambda n: f"hf:top{n}"),
    )


@st.composite
def expressions(draw: st.DrawFn, c: Corpus, depth: int = 3) -> str:
    """A rule's text: leaves under AND (implicit or written), OR, NOT/-, parentheses and
    field groups, nested up to `depth`."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(leaves(c))
    kind = draw(st.sampled_from(("and", "AND", "OR", "OR", "field")))
    if kind == "field":
        inner = draw(st.lists(text_leaves(c), min_size=1, max_size=3))
        return f"{draw(st.sampled_from(('ti', 'abs')))}:({' OR '.join(inner)})"
    parts = []
    for _ in range(draw(st.integers(2, 3))):
        child = draw(expressions(c, depth - 1))
        grouped = " " in child and not child.startswith(("ti:(", "abs:("))
        if grouped and (kind != "OR" or draw(st.booleans())):
            child = f"({child})"  # an OR inside an AND needs them; inside an OR, optional
        if kind != "OR" and draw(st.integers(0, 3)) == 0:
            if grouped and not child.startswith("("):
                child = f"({child})"
            child = draw(st.sampled_from(("-", "NOT "))) + child
        parts.append(child)
    return (" " if kind == "and" else f" {kind} ").join(parts)


def parsed(texts: Sequence[str]) -> list[Rule]:
    found = []
    for text in texts:
        try:
            found.append(parse_rule(text))
        except RuleError:
            continue
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(st.deferred(lambda: expressions(corpus())), min_size=5, max_size=25),
    repeats=st.lists(st.integers(0, 100), max_size=5),
)
def test_matcher_equals_the_reference_evaluator(texts: list[str], repeats: list[int]) -> None:
    real = corpus()
    rules = parsed(texts)
    # Subscribers share rules: repeat some under other ids (ints and strings both).
    numbered: list[tuple[object, Rule]] = list(enumerate(rules))
    if rules:
        numbered += [(f"copy-{i}", rules[n % len(rules)]) for i, n in enumerate(repeats)]
    matcher = Matcher(numbered)
    expected = reference(numbered, real.papers, real.texts)
    assert matcher.match(real.papers, texts=real.texts) == expected
    assert matcher.stats.evaluations <= matcher.distinct_rules * len(real.papers)


def test_matcher_equals_the_reference_on_everyday_rules(real: Corpus) -> None:
    texts = [
        '"language models"',
        "quantum",
        "graph* -cat:math",
        "cat:cs.LG (robot OR agent*)",
        'ti:(learning OR "neural network") -survey',
        "cat:astro-ph galaxy* OR cat:gr-qc",
        'abs:"dark matter"',
        f"au:{real.surnames[0]} OR au:{real.surnames[-1]}",
        f"id:{real.ids[0]} OR id:{real.ids[1]}",
        "NOT cat:cs model",
        "src:huggingface",
        "src:feed model",
        "model -src:hf-daily",
        "upvotes>=30",
        "upvotes<10 -hf:top5",
        "hf:top10 OR cat:cs.LG upvotes>50",
        "cat:cs -upvotes<20",
    ]
    rules = [(text, parse_rule(text)) for text in texts]
    expected = reference(rules, real.papers, real.texts)
    assert len(expected) >= 8  # the rules do match real papers
    matcher = Matcher(rules)
    assert matcher.match(real.papers, texts=real.texts) == expected
    assert matcher.match(real.papers) == expected  # analyzing the papers itself


def test_match_one_gives_the_rules_of_one_paper_in_order(real: Corpus) -> None:
    rules = [(i, parse_rule(t)) for i, t in enumerate(["model", "cat:cs", "model", "quantum"])]
    matcher = Matcher(rules)
    expected = reference(rules, real.papers, real.texts)
    for paper in real.papers[:40]:
        assert matcher.match_one(real.texts[paper.id]) == [
            (rule_id, hits)
            for rule_id, found in expected.items()
            for matched, hits in found
            if matched is paper
        ]


def test_the_matcher_does_far_less_work_than_every_rule_x_every_paper(real: Corpus) -> None:
    words = real.words[::25]
    phrases = [f'"{p}"' for p in real.phrases[::25]]
    texts = [*words, *phrases, *(f"{w} {p}" for w, p in zip(words, phrases, strict=False))]
    rules = [(i, parse_rule(t)) for i, t in enumerate(texts)]
    matcher = Matcher(rules)
    found = matcher.match(real.papers, texts=real.texts)
    assert found == reference(rules, real.papers, real.texts)
    pairs = matcher.distinct_rules * len(real.papers)
    assert matcher.stats.papers == len(real.papers)
    assert matcher.stats.candidates < pairs / 10
    assert matcher.stats.evaluations < pairs / 10
    # Nearly every evaluation is a match: the key test drops the candidates that cannot be.
    assert matcher.stats.matches >= 0.8 * matcher.stats.evaluations


EDGE_PAPERS = (
    Paper(
        "2411.00001",
        3,
        "Case studies of mice and robots",
        'A robot. Arm motions of the Schr{\\"o}dinger robot arm; multi-agent grasping.',
        ("Yann LeCun", "Ada Lovelace"),
        ("cs.RO", "q-bio.NC"),
    ),
    Paper(
        "quant-ph/0201082",
        1,
        "Grippers",
        "A robot arm grasps; cases were studied.",
        ("J. Smith",),
        ("quant-ph",),
        sources=("arxiv-quant", "arxiv"),
    ),
    Paper(
        "2411.00003",
        1,
        "Robot arms on Hugging Face",
        "A robot arm, upvoted.",
        ("A. Turing",),
        ("cs.RO",),
        source="hf-daily",
        sources=("hf-daily", "huggingface", "arxiv"),
        upvotes=0,
        hf_rank=12,
    ),
    Paper(
        "2411.00004",
        1,
        "Ranked robots",
        "A robot with a rank and no upvotes.",
        ("A. Turing",),
        ("cs.RO",),
        sources=("HF-Daily",),
        hf_rank=1,
    ),
    Paper(
        "doi:10.1038/s41567-024-0001-x",
        1,
        "A robot in a journal",
        "Published in a journal feed.",
        ("B. Curie",),
        ("physics",),
        source="nature.physics",
    ),
)


@pytest.mark.parametrize(
    "rule",
    [
        "studie*",  # "studies" folds to "study": the prefix meets the unfolded form
        "mic*",  # "mice" folds to "mouse"
        "stud* OR grip*",
        "ti:robot",
        "abs:robot -ti:robot",
        '"robot arm"',
        '"arm motions"',  # punctuation between words does not count; a sentence end does not
        '-"robot arm" grippers',
        "schrodinger",
        '"multi agent" grasping',
        "cat:cs",
        "cat:q-bio.NC -cat:cs.LG",
        "id:2411.00001v3",
        "id:quant-ph/0201082 OR au:lecun",
        'au:"Y. LeCun"',
        'au:"J. Smith" robot',
        "NOT cat:cs robot",
        "(robot OR gripper*) -(mice OR ti:case*)",
        "src:arxiv",
        "src:hf-daily",  # the name in any case on the paper's side; `source` alone counts
        "src:nature.physics robot",
        "robot -src:huggingface",
        "src:(arxiv-quant OR feed) robot",
        "upvotes>=0",  # only papers with upvotes, even 0
        "upvotes=0",
        "upvotes<1 OR hf:top1",
        "robot -upvotes<5",
        "hf:top12",
        "hf:top11",
        "robot -hf:top5",
        "(src:huggingface OR upvotes>=0) -hf:top1",
    ],
)
def test_edge_cases_agree_with_the_reference(rule: str) -> None:
    rules = [(rule, parse_rule(rule))]
    texts = {p.id: analyze(p) for p in EDGE_PAPERS}
    expected = reference(rules, EDGE_PAPERS, texts)
    assert Matcher(rules).match(EDGE_PAPERS) == expected


@pytest.mark.parametrize(
    ("rule", "ids"),
    [
        ("src:arxiv", {"quant-ph/0201082", "2411.00003"}),  # not the paper of "arxiv-quant" only
        ("src:hf-daily", {"2411.00003", "2411.00004"}),
        ("src:nature.physics robot", {"doi:10.1038/s41567-024-0001-x"}),
        ("upvotes>=0", {"2411.00003"}),
        ("upvotes<1 OR hf:top1", {"2411.00003", "2411.00004"}),
        ("robot -upvotes<5",
         {"2411.00001", "quant-ph/0201082", "2411.00004", "doi:10.1038/s41567-024-0001-x"}),
        ("hf:top12", {"2411.00003", "2411.00004"}),
        ("hf:top11", {"2411.00004"}),
    ],
)  # fmt: skip
def test_sources_upvotes_and_ranks_match_the_papers_that_have_them(
    rule: str, ids: set[str]
) -> None:
    rules = [(rule, parse_rule(rule))]
    found = Matcher(rules).match(EDGE_PAPERS)
    assert {paper.id for paper, _ in found.get(rule, [])} == ids
    texts = {p.id: analyze(p) for p in EDGE_PAPERS}
    assert found == reference(rules, EDGE_PAPERS, texts)


def test_hugging_face_rules_evaluate_only_papers_on_hugging_face(real: Corpus) -> None:
    rules = [(1, parse_rule("upvotes>=10")), (2, parse_rule("hf:top5 -cat:cs"))]
    matcher = Matcher(rules)
    assert matcher.match(real.papers, texts=real.texts) == reference(rules, real.papers, real.texts)
    on_hugging_face = [p for p in real.papers if p.upvotes is not None or p.hf_rank is not None]
    assert 0 < len(on_hugging_face) < len(real.papers) / 2
    assert matcher.stats.candidates == 2 * len(on_hugging_face)


def test_identical_rules_are_evaluated_once_and_shared() -> None:
    rules = [(1, parse_rule("robot")), ("b", parse_rule("robot")), (3, parse_rule("robots"))]
    matcher = Matcher(rules)
    assert len(matcher) == 3
    assert matcher.distinct_rules == 2  # "robots" has other hits: its term is "robots"
    paper = Paper("2411.00001", 1, "A robot", "Robots.", ("A. B",), ("cs.RO",))
    found = matcher.match([paper])
    assert found[1] == found["b"] and found[1] is not found["b"]
    assert found[3][0][1][0].term == "robots"
    assert matcher.stats.evaluations == 2


def test_a_rule_id_given_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="given twice"):
        Matcher([(1, parse_rule("robot")), (1, parse_rule("drone"))])


def test_no_rules_no_papers() -> None:
    assert Matcher([]).match([]) == {}
    paper = Paper("2411.00001", 1, "A robot", "", (), ())
    assert Matcher([]).match([paper]) == {}
    assert Matcher([(1, parse_rule("robot"))]).match([]) == {}


def test_the_garbage_collector_is_left_as_found() -> None:
    matcher = Matcher([(1, parse_rule("robot"))])
    paper = Paper("2411.00001", 1, "A robot", "", (), ())
    assert gc.isenabled()
    matcher.match([paper])
    assert gc.isenabled()
    gc.disable()
    try:
        matcher.match([paper])
        assert not gc.isenabled()
    finally:
        gc.enable()
