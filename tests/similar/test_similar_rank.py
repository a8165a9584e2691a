"""bot.similar's pure parts on the real day: the space, a subscriber's model and its bytes,
the ranking (order, dislikes that push down and drop, similar papers with their closest
liked paper), and stored bytes that are no model (ModelError, never a crash)."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.models import Paper
from bot.similar.model import MAGIC, Model, ModelError, fit
from bot.similar.rank import DROP_AFTER, default_min, rank, scores
from bot.similar.space import HASHED, Day, raw_counts
from bot.similar.text import feedback_hash, paper_text, readable, text_hash


@cache
def day_of(papers: tuple[Paper, ...]) -> Day:
    return Day.hashed([p.id for p in papers], [paper_text(p) for p in papers])


def model_for(
    day: Day, papers: tuple[Paper, ...], liked: list[int], disliked: tuple[int, ...] = ()
) -> Model:
    return fit(
        day,
        liked=raw_counts([paper_text(papers[n]) for n in liked]),
        liked_keys=[papers[n].id for n in liked],
        liked_titles=[papers[n].title for n in liked],
        disliked=raw_counts([paper_text(papers[n]) for n in disliked]),
        disliked_keys=[papers[n].id for n in disliked],
    )


def of_category(papers: tuple[Paper, ...], category: str) -> list[int]:
    return [n for n, p in enumerate(papers) if p.primary_category == category]


def test_readable_turns_tex_into_words() -> None:
    assert readable(r"$\mathcal{L}$-smooth \alpha-stable Schr\"odinger").split() == [
        "L",
        "-smooth",
        "alpha",
        "-stable",
        "Schrodinger",
    ]
    assert len(readable("\\" * 100_000)) <= 20_000


def test_five_liked_papers_rank_their_category_first(full_feed_papers: tuple[Paper, ...]) -> None:
    papers = full_feed_papers
    day = day_of(papers)
    robots = of_category(papers, "cs.RO")
    model = model_for(day, papers, robots[:5])
    score = scores(day, model).score
    score[robots[:5]] = -np.inf
    best = np.argsort(-score)[:10]
    assert sum(papers[n].primary_category == "cs.RO" for n in best) >= 4  # 2.6% of the day


def test_rank_orders_the_matched_and_adds_similar_with_their_closest(
    full_feed_papers: tuple[Paper, ...],
) -> None:
    papers = full_feed_papers
    day = day_of(papers)
    astro = of_category(papers, "astro-ph.GA")
    model = model_for(day, papers, astro[:5])
    matched = [papers[n].id for n in range(0, 1500, 50)] + [papers[astro[6]].id]
    ranking = rank(day, model, matched=matched, similar_max=4, similar_min=0.0)
    assert set(ranking.scores) == set(matched)
    by_id = {p.id: p for p in papers}
    best = sorted(ranking.scores, key=ranking.scores.__getitem__, reverse=True)[:2]
    assert all(by_id[k].primary_category.startswith("astro-ph") for k in best)  # type: ignore[union-attr]
    assert len(ranking.similar) == 4
    assert [c.score for c in ranking.similar] == sorted(
        (c.score for c in ranking.similar), reverse=True
    )
    liked = {papers[n].id: papers[n].title for n in astro[:5]}
    for close in ranking.similar:
        assert close.paper_id not in matched and close.paper_id not in liked
        assert liked[close.closest_key] == close.closest_title
    assert len({c.paper_id for c in ranking.similar}) == 4
    assert rank(day, model, matched=matched, similar_max=0).similar == ()
    assert rank(day, model, matched=matched, similar_max=5, similar_min=2.0).similar == ()
    assert default_min(HASHED) > 0


def test_dislikes_push_down_then_drop(full_feed_papers: tuple[Paper, ...]) -> None:
    papers = full_feed_papers
    day = day_of(papers)
    robots, quantum = of_category(papers, "cs.RO"), of_category(papers, "quant-ph")
    matched = [papers[n].id for n in robots[10:20] + quantum[10:20]]
    plain = rank(day, model_for(day, papers, robots[:5]), matched=matched, similar_max=0)
    two = model_for(day, papers, robots[:5], tuple(quantum[: DROP_AFTER - 1]))
    pushed = rank(day, two, matched=matched, similar_max=0)
    assert pushed.dropped == frozenset()  # too few dislikes to drop anything
    q = [papers[n].id for n in quantum[10:20]]
    assert np.mean([pushed.scores[k] for k in q]) < np.mean([plain.scores[k] for k in q])
    # A dislike of the very paper (and a few like it): that paper is dropped.
    target = quantum[10]
    many = model_for(day, papers, robots[:5], (target, *quantum[:DROP_AFTER]))
    dropped = rank(day, many, matched=matched, similar_max=0).dropped
    assert papers[target].id in dropped
    assert not dropped & {papers[n].id for n in robots[10:20]}


def test_only_dislikes_rank_and_add_nothing(full_feed_papers: tuple[Paper, ...]) -> None:
    papers = full_feed_papers
    day = day_of(papers)
    model = model_for(day, papers, [], (0, 1, 2))
    ranking = rank(day, model, matched=[papers[5].id], similar_max=5)
    assert ranking.similar == () and set(ranking.scores) == {papers[5].id}


def test_a_model_goes_through_bytes_unchanged(full_feed_papers: tuple[Paper, ...]) -> None:
    papers = full_feed_papers
    day = day_of(papers)
    model = model_for(day, papers, [3, 4, 5], (6,))
    data = model.to_bytes()
    assert data.startswith(MAGIC) and b"pickle" not in data
    back = Model.from_bytes(data)
    assert back.liked_keys == model.liked_keys and back.disliked_keys == model.disliked_keys
    assert np.array_equal(back.weights, model.weights) and back.intercept == model.intercept
    assert np.allclose(scores(day, back).score, scores(day, model).score)
    assert back.to_bytes() == data


def test_a_small_day_ranks_without_lsa() -> None:
    texts = ["robot grasping policy", "quantum error correction codes", "robot arm control"]
    day = Day.hashed(["a", "b", "c"], texts)
    assert day.dense is None
    model = fit(
        day,
        liked=raw_counts(["robot hands"]),
        liked_keys=["x"],
        liked_titles=["X"],
        disliked=raw_counts([]),
        disliked_keys=[],
    )
    ranking = rank(day, model, matched=["a", "b", "c"], similar_max=3, similar_min=0.1)
    assert ranking.scores["b"] < min(ranking.scores["a"], ranking.scores["c"])


def test_hashes_name_texts_and_feedback() -> None:
    from bot.core.models import Feedback

    a = Feedback(key="1", verdict="like", via="config", text="t")
    b = Feedback(key="2", verdict="dislike", via="email", text="u")
    assert feedback_hash([a, b], HASHED) == feedback_hash([b, a], HASHED)
    assert feedback_hash([a], HASHED) != feedback_hash([a], "other")
    assert text_hash("x") != text_hash("y") and len(text_hash("x")) == 64


@pytest.fixture(scope="module")
def stored() -> bytes:
    day = Day.hashed(["a", "b", "c"], ["robot grasping", "quantum codes", "robot arms"])
    return fit(
        day,
        liked=raw_counts(["robot"]),
        liked_keys=["x"],
        liked_titles=["X"],
        disliked=raw_counts(["quantum"]),
        disliked_keys=["y"],
    ).to_bytes()


@settings(max_examples=300)
@given(data=st.data())
def test_corrupted_bytes_are_no_model_never_a_crash(stored: bytes, data: st.DataObject) -> None:
    how = data.draw(st.sampled_from(["flip", "cut", "append", "random"]))
    blob = bytearray(stored)
    if how == "flip":
        at = data.draw(st.integers(0, len(blob) - 1))
        blob[at] ^= data.draw(st.integers(1, 255))
    elif how == "cut":
        blob = blob[: data.draw(st.integers(0, len(blob) - 1))]
    elif how == "append":
        blob += data.draw(st.binary(min_size=1, max_size=64))
    else:
        blob = bytearray(MAGIC + data.draw(st.binary(max_size=512)))
    try:
        model = Model.from_bytes(bytes(blob))
    except ModelError:
        return
    assert np.all(np.isfinite(model.weights))  # a flip that still reads: a well-formed model
    assert model.liked.shape[0] == len(model.liked_keys)
