"""The rule language: folding, tokenizing, parsing, formatting and matching (bot.rules).

Table-driven unit cases on hand-built papers, hypothesis properties for the round trip and
the plural folding, and a sanity run over a real arXiv feed (read with plain regexes, so
these tests do not depend on the feed parser).
"""

from __future__ import annotations

import ast
import html
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot import rules
from bot.errors import RuleError
from bot.models import Hit, Paper
from bot.rules import (
    And,
    Category,
    Not,
    PaperText,
    Rule,
    Term,
    Token,
    analyze,
    analyze_text,
    fold,
    format_rule,
    match,
    matches_any,
    parse_rule,
    tokenize,
)

FEED = Path(__file__).parent / "fixtures" / "arxiv_rss" / "rss_all-archives-combined_2024-11-28.xml"


def make_paper(
    title: str = "", abstract: str = "", categories: Sequence[str] = ("cs.LG",)
) -> Paper:
    return Paper(
        id="2411.00001",
        version=1,
        title=title,
        abstract=abstract,
        authors=("A. Author",),
        categories=tuple(categories),
    )


def matches(rule: str, title: str, abstract: str = "", categories: Sequence[str] = ("cs.LG",)):
    return match(parse_rule(rule), analyze(make_paper(title, abstract, categories))) is not None


# --------------------------------------------------------------------------------------------
# fold: the symmetric normaliser

SAME_FOLD = [
    ("policy", "policies"),
    ("model", "models"),
    ("transformer", "Transformers"),
    ("class", "classes"),
    ("box", "boxes"),
    ("study", "studies"),
    ("loss", "losses"),
    ("analysis", "analyses"),
    ("hypothesis", "hypotheses"),
    ("diagnosis", "diagnoses"),
    ("bus", "buses"),
    ("status", "statuses"),
    ("virus", "viruses"),
    ("focus", "focuses"),
    ("gaussian", "Gaussians"),
    ("mesh", "meshes"),
    ("approach", "approaches"),
    ("cache", "caches"),
    ("cause", "causes"),
    ("reuse", "reuses"),
    ("use", "uses"),
    ("echo", "echoes"),
    ("shoe", "shoes"),
    ("tie", "ties"),
    ("fly", "flies"),
    ("movie", "movies"),
    ("bias", "biases"),
    ("GPU", "GPUs"),
    ("LLM", "LLMs"),
    ("API", "APIs"),
    ("axis", "axes"),
    ("matrix", "matrices"),
    ("vertex", "vertices"),
    ("criterion", "criteria"),
    ("nucleus", "nuclei"),
    ("spectrum", "spectra"),
    ("Schrödinger", "Schrodinger"),
    ("Schrödinger", "Schro\u0308dinger"),  # decomposed: o + combining diaeresis
    ("Schrödinger", 'Schr\\"odinger'),
    ("Schrödinger", 'Schr\\"{o}dinger'),
    ("Schrödinger", 'Schr{\\"o}dinger'),
    ("naïve", "naive"),
    ("Rémy", "R\\'emy"),
    ("Łukasiewicz", "{\\L}ukasiewicz"),
    ("Łódź", "Lodz"),
    ("Straße", "strasse"),
    ("Straße", "Stra\\ss e"),
    ("Protušová", "Protu\\v{s}ov\\'a"),
    ("finite", "ﬁnite"),  # ligature
]

DIFFERENT_FOLD = [
    ("loss", "lo"),
    ("loss", "los"),
    ("analysis", "analysi"),
    ("corpus", "corpu"),
    ("gaussian", "gaussia"),
    ("bus", "bu"),
    ("status", "statu"),
    ("news", "new"),
    ("does", "doe"),
    ("thus", "thu"),
    ("pose", "pos"),
    ("dose", "DOS"),
    ("case", "CAS"),
    ("general", "generalization"),
    ("model", "modeling"),
    ("rate", "rat"),
]

FOLD_VALUES = [
    ("loss", "loss"),
    ("analysis", "analysis"),
    ("corpus", "corpus"),
    ("gaussian", "gaussian"),
    ("bus", "bus"),
    ("status", "status"),
    ("series", "series"),
    ("Policies", "policy"),
    ("Transformers", "transformer"),
    ("1990s", "1990s"),
    ("gpt4", "gpt4"),
    ("ΛCDM", "λcdm"),
]


@pytest.mark.parametrize(("a", "b"), SAME_FOLD)
def test_fold_matches_singular_and_plural_and_accents(a: str, b: str) -> None:
    assert fold(a) == fold(b)


@pytest.mark.parametrize(("a", "b"), DIFFERENT_FOLD)
def test_fold_keeps_different_words_apart(a: str, b: str) -> None:
    assert fold(a) != fold(b)


@pytest.mark.parametrize(("word", "folded"), FOLD_VALUES)
def test_fold_values(word: str, folded: str) -> None:
    assert fold(word) == folded


_CONSONANT_WORD = st.from_regex(r"\A[bcdfgklmnprt][aeiou][a-z]{1,6}[dklmnprt]\Z")


@given(_CONSONANT_WORD)
def test_fold_regular_plural(word: str) -> None:
    assert fold(word + "s") == fold(word) == word


@given(st.from_regex(r"\A[bcdfgklmnprt][aeiou][a-z]{0,6}[bcdfgklmnprt]\Z"))
def test_fold_consonant_y_plural(stem: str) -> None:
    assert fold(stem + "ies") == fold(stem + "y")


@given(_CONSONANT_WORD, st.sampled_from(["sh", "x", "ss"]))
def test_fold_es_plural(stem: str, ending: str) -> None:
    assert fold(stem + ending + "es") == fold(stem + ending)


# --------------------------------------------------------------------------------------------
# tokenize: words, with spans into the original text


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Multi-Agent RL, for control.", [("multi", "Multi"), ("agent", "Agent"), ("rl", "RL"),
                                          ("for", "for"), ("control", "control")]),
        ("multi–agent", [("multi", "multi"), ("agent", "agent")]),
        ('the Schr\\"odinger equation', [("the", "the"), ("schrodinger", 'Schr\\"odinger'),
                                          ("equation", "equation")]),
        ("{\\L}ukasiewicz logic", [("lukasiewicz", "{\\L}ukasiewicz"), ("logic", "logic")]),
        ("Riemann's hypothesis", [("riemann", "Riemann"), ("hypothesis", "hypothesis")]),
        ("Riemann’s zeros", [("riemann", "Riemann"), ("zero", "zeros")]),
        ("$\\alpha$-stable", [("alpha", "alpha"), ("stable", "stable")]),
        ("\\emph{large} \\mathrm{GeV}", [("large", "large"), ("gev", "GeV")]),
        ("{GPU}s", [("gpu", "{GPU}s")]),
        ("P\\'erez Mart\\'\\i nez", [("perez", "P\\'erez"), ("martinez", "Mart\\'\\i nez")]),
        ("snake_case 3D", [("snake", "snake"), ("case", "case"), ("3d", "3D")]),
        ("... -- !", []),
    ],
)  # fmt: skip
def test_tokenize(text: str, words: list[tuple[str, str]]) -> None:
    tokens = tokenize(text)
    assert [(t.norm, text[t.start : t.end]) for t in tokens] == words


# --------------------------------------------------------------------------------------------
# parse: the tree


@pytest.mark.parametrize(
    ("text", "nodes"),
    [
        ("robot", (Term(("robot",), "robot", False),)),
        ("Robots", (Term(("robot",), "Robots", False),)),
        ('"diffusion policies"', (Term(("diffusion", "policy"), '"diffusion policies"', True),)),
        ("multi-agent", (Term(("multi", "agent"), "multi-agent", False),)),
        ("x -survey", (Term(("x",), "x", False), Not(Term(("survey",), "survey", False)))),
        ('x -"a b"', (Term(("x",), "x", False), Not(Term(("a", "b"), '"a b"', True)))),
        ("cat:cs.RO", (Category("cs.RO"),)),
        ("cat:CS.ro", (Category("cs.RO"),)),
        ("CAT:q-bio.nc", (Category("q-bio.NC"),)),
        ("cat:cond-mat.Stat-Mech", (Category("cond-mat.stat-mech"),)),
        ("cat:math-ph", (Category("math-ph"),)),
        ("cat:cs -cat:cs.LG", (Category("cs"), Not(Category("cs.LG")))),
        ("10:30", (Term(("10", "30"), "10:30", False),)),
        ('"http://arxiv.org"', (Term(("http", "arxiv", "org"), '"http://arxiv.org"', True),)),
        ("“diffusion policy”", (Term(("diffusion", "policy"), '"diffusion policy"', True),)),
        ('a"b c"d', (Term(("a",), "a", False), Term(("b", "c"), '"b c"', True),
                     Term(("d",), "d", False))),
    ],
)  # fmt: skip
def test_parse_tree(text: str, nodes: tuple[object, ...]) -> None:
    rule = parse_rule(text)
    assert rule.node == And(nodes)  # type: ignore[arg-type]
    assert rule.text == text.strip()


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("  robot   arm  ", "robot arm"),
        ('robot "large   language\tmodel"', 'robot "large language model"'),
        ("CAT:CS.ro -cat:Q-BIO", "cat:cs.RO -cat:q-bio"),
        ('“diffusion policy”robot', '"diffusion policy" robot'),
        ("Multi-Agent -Survey", "Multi-Agent -Survey"),
    ],
)  # fmt: skip
def test_format_rule_is_canonical(text: str, canonical: str) -> None:
    rule = parse_rule(text)
    assert format_rule(rule) == canonical
    assert parse_rule(canonical).node == rule.node


# --------------------------------------------------------------------------------------------
# parse: errors, for people

NOT_A_CATEGORY = "is not an arXiv category (like cs, cs.RO, q-bio.NC, astro-ph.CO, math-ph)"
ONLY_EXCLUSIONS = "a rule needs at least one term to match; exclusions alone match everything"
ERRORS = [
    ("", 'a rule is empty; write a word, a "phrase" or cat:cs.RO', 0),
    ("   ", 'a rule is empty; write a word, a "phrase" or cat:cs.RO', 0),
    ('robot "arm', 'missing closing " for the phrase that starts', 6),
    ('"robot', 'missing closing " for the phrase that starts', 0),
    ('robot ""', 'empty phrase ""', 6),
    ('robot "  "', 'empty phrase ""', 6),
    ("robot - arm", 'a bare "-" excludes nothing; write -word or -"a phrase"', 6),
    ("robot -", 'a bare "-" excludes nothing; write -word or -"a phrase"', 6),
    ("cat:", "cat: needs a category, like cat:cs.RO or cat:cs", 4),
    ("robot -cat:", "cat: needs a category, like cat:cs.RO or cat:cs", 11),
    ("cat:cs.", f'"cs." {NOT_A_CATEGORY}', 4),
    ("x cat:cs/RO", f'"cs/RO" {NOT_A_CATEGORY}', 6),
    ("cat:cs.RO.x", f'"cs.RO.x" {NOT_A_CATEGORY}', 4),
    ("tit:foo", 'unknown field "tit:" (fields: cat:)', 0),
    ("robot au:Smith", 'unknown field "au:" (fields: cat:)', 6),
    ("ti:robot", 'unknown field "ti:" (fields: cat:)', 0),
    ("robot -abs:arm", 'unknown field "abs:" (fields: cat:)', 7),
    ("see https://arxiv.org", 'unknown field "https:" (fields: cat:)', 4),
    ("x" * 501, "a rule can be at most 500 characters long (this one has 501)", 500),
    (" ".join(["w"] * 33), "a rule can have at most 32 terms", 64),
    ('"..."', '"..." has no word in it (letters or digits) to match', 0),
    ("robot ...", '"..." has no word in it (letters or digits) to match', 6),
    ("-robot", ONLY_EXCLUSIONS, 0),
    ('-robot -"a b" -cat:cs', ONLY_EXCLUSIONS, 0),
    ("robot OR drone", '"OR" is reserved as an operator; write "or" to search the word', 6),
    ("(robot)", '"(" is reserved for the next version of the rule language; quote it', 0),
    ("robot*", '"*" is reserved for the next version of the rule language; quote it', 5),
    ("a|b", '"|" is reserved for the next version of the rule language; quote it', 1),
    ("  robot \"arm", 'missing closing " for the phrase that starts', 6),  # stripped
]  # fmt: skip


@pytest.mark.parametrize(("text", "reason", "position"), ERRORS)
def test_errors(text: str, reason: str, position: int) -> None:
    with pytest.raises(RuleError) as caught:
        parse_rule(text)
    assert caught.value.reason == reason
    assert caught.value.position == position
    assert caught.value.text == text.strip()
    assert str(caught.value) == f"{reason} at column {position + 1}"


def test_error_caret_points_at_the_column() -> None:
    with pytest.raises(RuleError) as caught:
        parse_rule('robot "arm')
    assert caught.value.caret() == 'robot "arm\n      ^'
    assert str(caught.value) == 'missing closing " for the phrase that starts at column 7'
    with pytest.raises(RuleError) as caught:
        parse_rule("grasping tit:robot")
    assert caught.value.caret() == "grasping tit:robot\n         ^"


def test_a_rule_of_only_categories_is_valid() -> None:
    assert parse_rule("cat:cs.RO").node == And((Category("cs.RO"),))
    assert parse_rule("cat:cs -cat:cs.LG").node.nodes[0] == Category("cs")


def test_32_terms_and_500_characters_are_allowed() -> None:
    assert len(parse_rule(" ".join(["w"] * 32)).node.nodes) == 32
    assert parse_rule("x" * 500).text == "x" * 500


# --------------------------------------------------------------------------------------------
# format: the round trip, over generated rules

_WORD = st.text("abcxyzéöSTß019-'.", min_size=1, max_size=8).filter(
    lambda w: any(c.isalnum() for c in w) and not w.startswith("-")
)
_PHRASE = st.lists(_WORD, min_size=1, max_size=4).map(lambda ws: '"' + "  ".join(ws) + '"')
_CATEGORY = st.sampled_from(
    ["cs", "cs.RO", "CS.ro", "q-bio.NC", "astro-ph.CO", "math-ph", "cond-mat.stat-mech"]
).map(lambda c: "cat:" + c)
_ATOM = st.one_of(_WORD, _PHRASE, _CATEGORY)
_TERM = st.tuples(st.booleans(), _ATOM).map(lambda t: ("-" if t[0] else "") + t[1])


@st.composite
def rule_texts(draw: st.DrawFn) -> str:
    terms = draw(st.lists(_TERM, max_size=8))
    terms.insert(draw(st.integers(0, len(terms))), draw(_ATOM))
    spaces = draw(st.lists(st.sampled_from([" ", "  ", "\t"]), min_size=len(terms) + 1))
    return "".join(space + term for space, term in zip(spaces, terms, strict=False)) + spaces[-1]


@given(rule_texts())
def test_round_trip(text: str) -> None:
    rule = parse_rule(text)
    canonical = format_rule(rule)
    again = parse_rule(canonical)
    assert again.node == rule.node
    assert format_rule(again) == canonical


@given(st.text('ab é-":.()*|“ ', max_size=30).map(lambda t: t.replace("a", "cat:", 1)))
def test_any_text_either_round_trips_or_raises_a_rule_error(text: str) -> None:
    try:
        rule = parse_rule(text)
    except RuleError as error:
        assert error.text == text.strip()
        assert 0 <= error.position <= len(error.text)
        return
    assert parse_rule(format_rule(rule)).node == rule.node


# --------------------------------------------------------------------------------------------
# match

MATCH_CASES = [
    # words, phrases, whole words
    ("robot", "A Robot for Kitchens", "", True),
    ("robot", "", "we build robots", True),
    ("robot", "Robotics", "", False),
    ("rl", "Optimal control", "", False),
    ("rl", "Offline RL at scale", "", True),
    ("gan", "Organ segmentation", "", False),
    ("gan", "GANs for faces", "", True),
    ('"large language model"', "Large Language Models as judges", "", True),
    ('"large language model"', "Large models of language", "", False),
    ("robot grasping", "Robot arms", "for grasping", True),  # AND across title and abstract
    ("robot grasping", "Robot arms", "for pushing", False),
    # hyphen as phrase, both sides
    ("multi-agent", "Multi-Agent systems", "", True),
    ("multi-agent", "Multi Agent systems", "", True),
    ("multi-agent", "multi–agent systems", "", True),
    ("multi-agent", "multiagent systems", "", False),
    ("multi-agent", "multi-task agent", "", False),
    ('"multi agent"', "multi-agent", "", True),
    # plural both ways
    ("policies", "A Diffusion Policy", "", True),
    ("policy", "", "learned policies", True),
    ("transformer", "Vision Transformers", "", True),
    ("boxes", "bounding box regression", "", True),
    ("class", "", "imbalanced classes", True),
    ("studies", "A case study", "", True),
    ("loss", "", "the los angeles dataset", False),
    ("corpus", "", "a corpu", False),
    # exclusions
    ("robot -survey", "Robots: a survey", "", False),
    ("robot -survey", "Robots in kitchens", "", True),
    ('robot -"systematic review"', "Robots", "a systematic review of robots", False),
    ('robot -"systematic review"', "Robots", "a review, systematic", True),
    ("robot -surveys", "A Survey of Robots", "", False),  # plural folding in exclusions too
    # accents and TeX
    ("Schrödinger", 'The Schr\\"odinger equation', "", True),
    ("Schrodinger", "", 'the Schr\\"{o}dinger operator', True),
    ("schrodinger", "Schrödinger bridges", "", True),
    ('"Schrödinger bridge"', "", 'Schr{\\"o}dinger bridges', True),
    ("Lukasiewicz", "{\\L}ukasiewicz logic", "", True),
    ("Cramer-Rao", "Limite de Cram\\'er-Rao", "", True),
]


@pytest.mark.parametrize(("rule", "title", "abstract", "expected"), MATCH_CASES)
def test_match(rule: str, title: str, abstract: str, expected: bool) -> None:
    assert matches(rule, title, abstract) is expected


CATEGORY_CASES = [
    ("cat:cs.RO", ("cs.RO",), True),
    ("cat:cs.RO", ("cs.LG", "cs.RO"), True),  # any position, not only primary
    ("cat:cs.RO", ("cs.LG",), False),
    ("cat:CS.ro", ("cs.RO",), True),
    ("cat:cs", ("cs.RO",), True),
    ("cat:cs", ("math.OC", "cs.SY"), True),
    ("cat:cs", ("eess.SY",), False),
    ("cat:math", ("math-ph",), False),
    ("cat:math-ph", ("math-ph",), True),
    ("cat:physics", ("physics.gen-ph",), True),
    ("cat:q-bio.NC", ("q-bio.NC",), True),
    ("robot -cat:cs.RO", ("cs.RO",), False),
    ("robot -cat:cs.RO", ("cs.LG",), True),
    ("robot -cat:cs", ("cs.LG",), False),
    ("cat:cs -cat:cs.LG", ("cs.LG",), False),
    ("cat:cs -cat:cs.LG", ("cs.AI",), True),
]


@pytest.mark.parametrize(("rule", "categories", "expected"), CATEGORY_CASES)
def test_match_categories(rule: str, categories: tuple[str, ...], expected: bool) -> None:
    assert matches(rule, "Robots", "", categories) is expected


HIT_CASES = [
    ('"diffusion policies"', "Diffusion Policy for Robots", "",
     [("title", "Diffusion Policy", '"diffusion policies"')]),
    ("robot", "Robots and robot arms", "A robot.",
     [("title", "Robots", "robot"), ("title", "robot", "robot"), ("abstract", "robot", "robot")]),
    ("multi-agent -survey", "", "Multi–Agent RL; multi agent",
     [("abstract", "Multi–Agent", "multi-agent"), ("abstract", "multi agent", "multi-agent")]),
    ("schrodinger", 'On Schr\\"{o}dinger', "", [("title", 'Schr\\"{o}dinger', "schrodinger")]),
    ('"riemann hypothesis"', "", "Riemann's hypothesis",
     [("abstract", "Riemann's hypothesis", '"riemann hypothesis"')]),
]  # fmt: skip


@pytest.mark.parametrize(("rule", "title", "abstract", "expected"), HIT_CASES)
def test_hits_slice_the_original_text(
    rule: str, title: str, abstract: str, expected: list[tuple[str, str, str]]
) -> None:
    hits = match(parse_rule(rule), analyze(make_paper(title, abstract)))
    assert hits is not None
    source = {"title": title, "abstract": abstract}
    assert [(h.field, source[h.field][h.start : h.end], h.term) for h in hits] == expected


def test_category_hits_and_order_of_hits() -> None:
    text = analyze(make_paper("Robot grasping", "", ("cs.LG", "cs.RO")))
    hits = match(parse_rule("cat:CS.ro grasping robot"), text)
    assert hits == (
        Hit("category", 0, 0, "cat:cs.RO"),
        Hit("title", 6, 14, "grasping"),
        Hit("title", 0, 5, "robot"),
    )
    assert match(parse_rule("cat:cs.RO -grasping"), text) is None


def test_matches_any_keeps_the_rules_that_match_in_order() -> None:
    found = [parse_rule(t) for t in ("grasping", "drone", "cat:cs", "robot -grasping")]
    text = analyze(make_paper("Robot grasping", "", ("cs.RO",)))
    result = matches_any(found, text)
    assert [rule.text for rule, _ in result] == ["grasping", "cat:cs"]
    assert result[1][1] == (Hit("category", 0, 0, "cat:cs"),)
    assert matches_any([], text) == []


def test_paper_text_is_reusable_and_indexed() -> None:
    text = analyze_text("Robots, robots", "A robot arm.", ["CS.RO"])
    assert isinstance(text, PaperText)
    assert text.categories == ("cs.ro",)
    assert text.title_index["robot"] == (0, 1)
    assert text.abstract[1] == Token("robot", 2, 7)
    assert analyze(make_paper("Robots, robots", "A robot arm.", ["CS.RO"])) == text


def test_rule_is_data() -> None:
    rule = parse_rule("robot")
    assert rule == Rule(text="robot", node=And((Term(("robot",), "robot", False),)))
    assert hash(rule) == hash(parse_rule(" robot "))


# --------------------------------------------------------------------------------------------
# a sanity run over a real feed (2024-11-28, every archive: 1504 items)


@cache
def feed() -> tuple[tuple[Paper, PaperText], ...]:
    body = FEED.read_text(encoding="utf-8")
    papers = []
    for item in re.findall(r"<item>(.*?)</item>", body, re.S):
        title = html.unescape(re.search(r"<title>(.*?)</title>", item, re.S)[1])  # type: ignore[index]
        description = re.search(r"<description>(.*?)</description>", item, re.S)[1]  # type: ignore[index]
        abstract = re.sub(r"\A.*?Abstract:\s*", "", html.unescape(description), flags=re.S)
        arxiv_id = re.search(r"<link>https://arxiv.org/abs/(.*?)</link>", item)[1]  # type: ignore[index]
        categories = tuple(re.findall(r"<category>(.*?)</category>", item))
        paper = Paper(
            id=arxiv_id,
            version=1,
            title=title,
            abstract=abstract,
            authors=(),
            categories=categories,
        )
        papers.append((paper, analyze(paper)))
    return tuple(papers)


@pytest.mark.parametrize(
    "rule",
    [
        '"large language model"',
        "multi-agent",
        "Schrödinger",
        "transformer",
        '"reinforcement learning" -survey',
        "quantum cat:quant-ph",
        "cat:cs.RO robot",
        "diffusion policies",
    ],
)
def test_feed_hits_fold_to_the_rule_words(rule: str) -> None:
    parsed = parse_rule(rule)
    words = {
        node.raw: node.words
        for node in parsed.node.nodes
        if isinstance(node, Term)
    }  # fmt: skip
    matched = 0
    for paper, text in feed():
        hits = match(parsed, text)
        if hits is None:
            continue
        matched += 1
        for hit in hits:
            if hit.field == "category":
                assert hit.term.startswith("cat:")
                continue
            source = paper.title if hit.field == "title" else paper.abstract
            found = tuple(token.norm for token in tokenize(source[hit.start : hit.end]))
            assert found == words[hit.term], (paper.id, source[hit.start : hit.end])
    assert 0 < matched < len(feed()) // 2


def test_feed_large_language_model_agrees_with_a_plain_regex() -> None:
    rule = parse_rule('"large language model"')
    # Punctuation breaks words: "Retrofitting (Large) Language Models" matches too.
    pattern = re.compile(r"\blarge\W+language\W+models?\b", re.I)
    by_rule = {p.id for p, text in feed() if match(rule, text) is not None}
    by_regex = {p.id for p, _ in feed() if pattern.search(p.title + "\n" + p.abstract)}
    assert by_rule == by_regex
    assert len(by_rule) > 20


def test_feed_categories_agree_with_the_listing() -> None:
    robotics = parse_rule("cat:cs.RO")
    cs = parse_rule("cat:cs")
    for paper, text in feed():
        assert (match(robotics, text) is not None) == ("cs.RO" in paper.categories)
        assert (match(cs, text) is not None) == any(c.startswith("cs.") for c in paper.categories)


def test_feed_token_spans_refold_to_the_token() -> None:
    for paper, text in feed()[:300]:
        for source, tokens in ((paper.title, text.title), (paper.abstract, text.abstract)):
            for token in tokens:
                assert tokenize(source[token.start : token.end]) == (
                    Token(token.norm, 0, token.end - token.start),
                ), (paper.id, source[token.start : token.end])


# --------------------------------------------------------------------------------------------
# the module stays pure

PURE_IMPORTS = {
    "__future__",
    "re",
    "unicodedata",
    "collections.abc",
    "dataclasses",
    "functools",
    "typing",
    "bot.errors",
    "bot.models",
}


def test_rules_module_imports_no_io() -> None:
    tree = ast.parse(Path(rules.__file__).read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert imported <= PURE_IMPORTS
