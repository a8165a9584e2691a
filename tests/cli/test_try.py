"""`paperbell try`: a rule's matches among the stored (or bundled) papers, before subscribing."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from support.cli import invoke, outcome, run
from support.config import local_feed_config

from bot.core.models import Hit, Paper
from bot.demo import bundled_papers, demo_papers
from bot.match.digest import absent_facts, try_rule
from bot.pipeline.likes import paper_keys
from bot.render.terminal import abstract_snippet, render_trial
from bot.rules import analyze, leaf_hits, leaf_text, match, parse_rule
from bot.similar.refs import REF_FORMS
from bot.store import Store


def listed_ids(output: str) -> list[str]:
    return re.findall(r"^ *\d+\. (\S+)  ", output, re.M)


def test_the_installed_command_tries_a_rule_on_the_bundled_listing(tmp_path: Path) -> None:
    done = run("try", '"diffusion policy"', "--demo", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    flat = " ".join(out.split())  # long lines wrap
    assert 'rule: "diffusion policy"' in out
    assert "*diffusion policy*" in flat and "*diffusion policies*" in flat  # hits, plural folded
    assert "\x1b[" not in out  # no colour in a pipe
    assert "  2024-11-28 Thu       2 of 1,504 papers" in out
    assert "  2026-08-21 Fri       0 of 17 papers" in out  # the Hugging Face day
    assert out.rstrip().endswith(
        "2 of 1,521 papers matched (0.1%) over 2 announcement days: about 1.0 a day"
    )


def test_try_lists_exactly_what_the_reference_evaluator_matches() -> None:
    text = 'cat:cs.RO (robot* OR "reinforcement learning") -survey'
    code, out = outcome("try", text, "--demo", "--limit", "0")
    assert code == 0, out
    rule = parse_rule(text)
    expected = {p.id for p in demo_papers() if match(rule, analyze(p)) is not None}
    assert len(expected) > 20
    assert sorted(listed_ids(out)) == sorted(expected)
    assert "... and" not in out
    code, out = outcome("try", text, "--demo", "--limit", "5")
    assert len(listed_ids(out)) == 5
    assert f"... and {len(expected) - 5} more (--limit 0 shows them all)" in out
    assert f"{len(expected)} of 1,521 papers matched" in out


def test_demo_tries_the_hugging_face_day_too() -> None:
    code, out = outcome("try", "hf:top5", "--demo", "--limit", "0")
    assert code == 0, out
    assert (
        "tried on the bundled arXiv listing of 2024-11-28 and Hugging Face day of 2026-08-21" in out
    )
    assert len(listed_ids(out)) == 5 and "note:" not in out
    assert "  2026-08-21 Fri       5 of 17 papers" in out


@pytest.mark.parametrize(
    ("rule", "count"),
    [
        ("src:huggingface", 17),
        ("src:hf-daily", 17),
        ("src:arxiv-all", 1504),
        ("src:arxiv upvotes>=1", 0),  # the two days share no paper
        ("upvotes>=100", None),  # None: as many as the demo papers have
    ],
)
def test_demo_tries_every_bundled_source(rule: str, count: int | None) -> None:
    if count is None:
        count = sum(1 for p in demo_papers() if (p.upvotes or 0) >= 100)
    code, out = outcome("try", rule, "--demo")
    assert code == 0 and f"\n{count:,} of 1,521 papers matched" in out, (rule, out)
    assert "note:" not in out


def test_a_part_that_nothing_tried_has_is_named() -> None:
    code, out = outcome("try", "src:biorxiv OR cat:cs.XX OR id:2411.00000 OR robot", "--demo")
    assert code == 0
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: src:biorxiv matches nothing here: no paper came from a source named or of kind "
        "'biorxiv' (they came from arxiv, arxiv-all, hf-daily, huggingface)",
        "note: cat:cs.XX matches nothing here: no paper is listed in cs.XX",
        "note: id:2411.00000 matches nothing here: no paper has this id",
    ]
    # Only the Hugging Face day is left: no paper in any arXiv category of the listing.
    code, out = outcome("try", "hf:top3 -cat:cs", "--demo", "--since", "2025-01-01")
    assert code == 0 and "note: cat:cs matches nothing here: no paper is listed in cs" in out
    assert "3 of 17 papers matched" in out


def test_titles_rank_first_and_authors_and_categories_are_marked() -> None:
    code, out = outcome("try", "au:wang cat:cs.CV", "--demo", "--limit", "0")
    assert code == 0
    first = out.split("\n\n")[1]
    assert "*cs.CV*" in first and re.search(r"\*[^*]*Wang\*", first)
    # At the width `try` takes when it cannot ask the terminal (the tests' own may be set).
    code, out = outcome("try", "quantum", "--demo", "--limit", "0", env={"COLUMNS": "100"})
    blocks = out.split("\n\n")[1:-1]
    title_lines = [b.splitlines()[1] for b in blocks if re.match(r" *\d+\. ", b)]
    with_title = ["*" in line for line in title_lines]
    # Every paper with "quantum" in its title comes before every paper with it only in
    # the abstract (titles can wrap: the first title line may lack the mark; allow that).
    assert with_title[0] and not with_title[-1]
    assert with_title.index(False) > 10


def test_a_bad_rule_gets_the_error_with_a_caret() -> None:
    code, out = outcome("try", 'ti:(robot OR "language model"', "--demo")
    assert code == 2
    lines = out.splitlines()
    assert lines[0] == 'error: bad rule: expected ")" at column 30'
    assert lines[1] == '  ti:(robot OR "language model"'
    assert lines[2] == "  " + " " * 29 + "^"
    code, out = outcome("try", "tit:robot", "--demo")
    assert code == 2 and 'unknown field "tit:" (did you mean ti:?)' in out


def test_colour_on_request_and_never_with_no_color() -> None:
    code, out = outcome("try", "robot", "--demo", "--color", "--limit", "1")
    assert code == 0 and "\x1b[" in out and "*robot*" not in out.lower()
    code, out = outcome("try", "robot", "--demo", "--limit", "1", env={"NO_COLOR": "1"})
    assert "\x1b[" not in out and "*robot" in out.lower()


@pytest.mark.database
def test_try_on_the_stored_papers_of_a_config(tmp_path: Path, database_url: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(local_feed_config(database_url))
    code, out = outcome("try", "robot", config=config)
    assert code == 1 and "there is no database yet" in out and "--demo" in out
    assert invoke("poll", config=config).exit_code == 0

    code, out = outcome("try", "robot", "--limit", "0", config=config)
    assert code == 0, out
    assert "tried on stored papers announced 2024-10-30 to 2024-11-28" in out
    stored = bundled_papers()  # a source's categories choose the feed; its URL is set here
    rule = parse_rule("robot")
    expected = {p.id for p in stored if match(rule, analyze(p)) is not None}
    assert sorted(listed_ids(out)) == sorted(expected)
    assert f"{len(expected)} of {len(stored):,} papers matched" in out

    code, out = outcome("try", "robot", "--since", "2024-11-29", config=config)
    assert code == 0 and "0 of 0 papers matched" in out
    # A store without a Hugging Face source: a rule that asks for its facts is told so.
    code, out = outcome("try", "hf:top10 OR src:huggingface", config=config)
    assert code == 0 and "\n0 of 1,504 papers matched" in out
    assert (
        "note: hf:top10 matches nothing here: no paper is on Hugging Face Daily Papers "
        "(a huggingface source brings them)"
    ) in out
    assert (
        "note: src:huggingface matches nothing here: no paper came from a source named or "
        "of kind 'huggingface' (they came from arxiv)"
    ) in out


def _day(papers: list[Paper], day: date, suffix: str) -> list[Paper]:
    return [replace(p, id=p.id + suffix, announced=day) for p in papers]


def test_counts_per_day_include_days_without_a_match() -> None:
    papers = bundled_papers()[:300]
    monday = date(2024, 11, 25)
    days = [*_day(papers, monday, ""), *_day(papers[:100], monday + timedelta(days=1), "b")]
    rule = parse_rule("au:zzzunknown OR id:" + papers[0].id)
    trial = try_rule(rule, days)
    assert trial.days == ((monday + timedelta(days=1), 0, 100), (monday, 1, 300))
    lines = render_trial(trial)
    assert "  2024-11-26 Tue       0 of 100 papers" in lines
    assert "  2024-11-25 Mon       1 of 300 papers" in lines
    assert lines[-1] == "1 of 400 papers matched (0.2%) over 2 announcement days: about 0.5 a day"


def test_abstract_snippets_keep_whole_words_and_mark_every_hit() -> None:
    abstract = " ".join(f"word{i}" for i in range(100))
    start = abstract.index("word50")
    far = abstract.index("word90")
    hits = [
        Hit("abstract", start, start + 6, "word50"),
        Hit("abstract", start + 7, start + 13, "word51"),
        Hit("abstract", far, far + 6, "word90"),
    ]
    snippet = abstract_snippet(abstract, hits, lambda s: f"[{s}]")
    assert snippet.startswith("… word") and snippet.endswith("… ") is False
    assert "[word50] [word51]" in snippet and "[word90]" in snippet
    assert " … " in snippet  # two windows, apart
    assert all(re.fullmatch(r"\[?word\d+\]?|…", piece) for piece in snippet.split())
    assert abstract_snippet(abstract, [Hit("title", 0, 3, "x")], str) == ""


@pytest.mark.parametrize("formula_chars", [20, 400])
def test_abstract_snippets_never_start_or_end_inside_tex_left_as_written(
    formula_chars: int,
) -> None:
    # \\weird is not understood: the formula stays as written, dollars and all. A snippet
    # takes a short one whole and leaves a long one out, never half of it.
    formula = "$\\weird{" + " + ".join(["x"] * (formula_chars // 4)) + "}$"
    abstract = " ".join(["filler"] * 30) + f" let {formula} be the hit we want " + "end " * 30
    at = abstract.index("hit")
    snippet = abstract_snippet(abstract, [Hit("abstract", at, at + 3, "hit")], str)
    assert snippet.count("$") in (0, 2), snippet
    assert (formula in snippet) == (formula_chars == 20)


_SOME = [*demo_papers()[:40], *demo_papers()[-5:]]  # the listing's and Hugging Face's
_ANALYZED = [analyze(p) for p in _SOME]
_CATEGORIES = sorted({c for p in _SOME for c in p.categories})


@given(
    leaf=st.one_of(
        st.sampled_from(_CATEGORIES).map(lambda c: f"cat:{c}"),
        st.sampled_from(["cs", "math", "q-bio", "cs.XX", "zz", "CS.lg"]).map(lambda c: f"cat:{c}"),
        st.sampled_from([p.id for p in _SOME] + ["2411.00000", "2608.99999"]).map(
            lambda i: f"id:{i}"
        ),
        st.sampled_from(["arxiv", "arxiv-all", "huggingface", "HF-daily", "feed", "x"]).map(
            lambda s: f"src:{s}"
        ),
        st.integers(0, 500).map(lambda n: f"upvotes>={n}"),
        st.integers(1, 100).map(lambda n: f"hf:top{n}"),
    ),
    hugging_face=st.booleans(),
)
@example(leaf="cat:cs", hugging_face=False)
@example(leaf="hf:top5", hugging_face=False)
def test_a_part_named_absent_matches_none_of_the_papers(leaf: str, hugging_face: bool) -> None:
    papers, analyzed = (_SOME, _ANALYZED) if hugging_face else (_SOME[:40], _ANALYZED[:40])
    rule = parse_rule(f"robot OR {leaf}")
    node = parse_rule(leaf).node
    named = [line for line in absent_facts(rule, papers) if line.startswith(leaf_text(node))]
    matched = any(leaf_hits(node, text) is not None for text in analyzed)  # type: ignore[arg-type]
    if named:
        assert not matched, named
    elif not leaf.startswith(("upvotes", "hf:")):  # a threshold no paper reaches is no news
        assert matched, leaf


def test_try_like_ranks_the_bundled_papers_by_closeness() -> None:
    code, out = outcome("try", "--like", "2411.18040", "--demo", "--limit", "5")
    assert code == 0, out
    ids = listed_ids(out)
    assert len(ids) == 5 and "2411.18040" not in ids
    assert "ranked by closeness to 2411.18040" in out
    assert out.count("closest to 2411.18040: A New Rarity Assessment") == 5
    assert re.search(r"^  1\. \S+  2024-11-28  astro-ph\.", out, re.M)  # a galaxy paper first


def test_try_like_with_a_rule_ranks_the_rules_matches() -> None:
    code, out = outcome("try", "robot", "--like", "2411.18040", "--demo", "--limit", "0")
    assert code == 0 and len(listed_ids(out)) == 30  # the rule's matches, ranked


def test_try_like_five_papers_ranks_papers_like_them_first() -> None:
    # Five PDE papers: PDE papers first, titles with TeX shown as letters.
    seeds = ["2411.17730", "2411.17929", "2411.17951", "2411.17974", "2411.17979"]
    code, out = outcome("try", *(f"--like={key}" for key in seeds), "--demo", "--limit", "5")
    assert code == 0 and out.count("  2024-11-28  math.AP") == 5, out
    assert "Schrödinger" in out and '\\"o' not in out and "$" not in out


def test_try_like_names_the_unknown_ids() -> None:
    code, out = outcome("try", "--like", "2411.18040", "--like", "2411.99999", "--demo")
    assert code == 2 and "Invalid value for '--like': 2411.99999: not among the bundled" in out
    code, out = outcome("try", "--like", "1234.56789", "--demo")  # no month 34: no arXiv id
    assert code == 2 and "'1234.56789' is not an arXiv id (2411.18179)" in out
    code, out = outcome("try", "--demo")
    assert code == 2 and "give a RULE, or --like ID" in out


@pytest.mark.parametrize(
    "hostile",
    ["\x1b[31mRED\x1b]0;pwned\x07", "\x9b31m" + "x" * 100, "x" * 100_000, "2411.18040\u202e"],
)
def test_try_like_shows_a_hostile_id_as_like_does(hostile: str) -> None:
    code, out = outcome("try", "--like", hostile, "--demo")
    assert code == 2 and "is not an arXiv id (2411.18179)" in out
    assert all(c.isprintable() or c == "\n" for c in out), out  # no escape reaches a terminal
    assert len(out) < 600  # cut as `paperbell like` cuts it
    # `like` says the same of the same value: one way to show it.
    shown = out.split("Invalid value for '--like': ", 1)[1].split(" is not", 1)[0]
    assert paper_keys([hostile])[1] == [f"{shown} is not {REF_FORMS}"]


@given(st.lists(st.text(max_size=40), min_size=1, max_size=3))
@example(["\x1b]0;pwned\x07", "2411.18040v2"])
def test_fuzz_try_like_any_id_is_a_ranking_or_a_usage_error(ids: list[str]) -> None:
    code, out = outcome("try", *(f"--like={i}" for i in ids), "--demo", "--limit", "1")
    assert code in (0, 2), out
    assert all(c.isprintable() or c == "\n" for c in out)
    if code == 2:
        assert "Invalid value for '--like'" in out


@pytest.fixture
def stored_config(tmp_path: Path, database_url: str, full_feed_papers: tuple[Paper, ...]) -> Path:
    """A config whose store holds the day of 28 Nov 2024 and one paper of 2017."""
    config = tmp_path / "config.toml"
    config.write_text(local_feed_config(database_url))
    old = Paper(
        id="1706.03762",
        version=7,
        title="Attention Is All You Need",
        abstract="The dominant sequence transduction models are based on complex recurrent "
        "or convolutional neural networks in an encoder-decoder configuration.",
        authors=("Ashish Vaswani",),
        categories=("cs.CL", "cs.LG"),
        announced=date(2017, 6, 13),
    )
    store = Store.open(database_url)
    try:
        store.papers.upsert([*full_feed_papers, old], now=datetime(2024, 11, 29, tzinfo=UTC))
    finally:
        store.close()
    return config


@pytest.mark.database
@pytest.mark.parametrize(
    "named",
    [
        "2411.18179v1",
        "arXiv:2411.18179",
        "https://arxiv.org/abs/2411.18179",
        "doi:10.48550/arXiv.2411.18179",
    ],
)
def test_try_like_takes_what_like_takes(stored_config: Path, named: str) -> None:
    code, out = outcome("try", "--like", named, "--limit", "1", config=stored_config)
    assert code == 0, out
    assert "ranked by closeness to 2411.18179\n" in out and "closest to 2411.18179: " in out


@pytest.mark.database
def test_try_like_looks_in_the_store(stored_config: Path) -> None:
    config = stored_config
    # A journal's DOI of a stored arXiv paper names it too.
    code, out = outcome("try", "--like", "doi:10.1016/J.SEGAN.2024.101477", config=config)
    assert code == 0 and "closest to 2411.17758: PP-LEM" in out, out
    # An older paper, stored but outside the days tried, ranks the days tried.
    code, out = outcome("try", "--like", "1706.03762", "--limit", "3", config=config)
    assert code == 0, out
    assert "tried on stored papers announced 2024-10-30 to 2024-11-28" in out
    assert out.count("closest to 1706.03762: Attention Is All You Need") == 3
    assert "1706.03762  2017" not in out  # the liked paper is not ranked
    # A paper the store does not have: said so, bad usage.
    code, out = outcome("try", "--like", "2411.18179", "--like", "1810.04805", config=config)
    assert code == 2 and "1810.04805: not in the store" in out and "backfill" in out


@pytest.mark.database
def test_try_like_with_a_rule_says_what_the_rule_matched(stored_config: Path) -> None:
    config = stored_config
    # A rule that matches nothing: said, as `try` without --like says it.
    code, out = outcome("try", "nomatchwordxyz", "--like", "2411.18179", config=config)
    assert code == 0 and "no paper matched the rule: 0 of 1,504 papers" in out
    code, out = outcome("try", "id:2411.18179", "--like", "2411.18179", config=config)
    assert code == 0 and "the rule matched only the liked papers (1 of 1,504" in out
    code, out = outcome("try", "robot", "--like", "2411.18179", "--limit", "1", config=config)
    assert code == 0 and re.search(r"^\d+ of 1,504 papers matched the rule$", out, re.M)
