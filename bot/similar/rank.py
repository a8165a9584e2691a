"""How one subscriber's verdicts rank the day's papers: the digest's order, the papers pushed
out by dislikes, and the papers no rule matched that are close to liked ones.

The score of a paper (about -1 to 1, higher first) is
`CENTROID * cos(paper, centroid of the liked)` in the day's dense view (LSA or embeddings)
`+ (1 - CENTROID) * P(like)` from the subscriber's linear model,
`- DISLIKED * cos(paper, closest disliked)` (dense view, only the part above zero).
A paper is *dropped* (not sent, even if a rule matched it) when the subscriber has at least
`DROP_AFTER` dislikes and the paper is at least `DROP_COSINE` close to a disliked paper and
closer to it than to any liked one. A paper no rule matched is *similar* when its score is
at least the subscriber's `similar_min` (default `SIMILAR_MIN[kind]`); each says the liked
paper it is closest to (dense view). The weights were chosen on bench/similar.py.

Per subscriber and day: a few matrix-vector products over the day's vectors (`Day`, made
once per run). Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from bot.core.models import Closeness, Ranking
from bot.similar.model import Model
from bot.similar.space import HASHED, Day, similarity

__all__ = ["CENTROID", "DROP_AFTER", "DROP_COSINE", "SIMILAR_MIN", "default_min", "rank", "scores"]

CENTROID = 0.7  # the centroid's share of the score; the rest is the linear model's
DISLIKED = 0.5  # how hard the closest disliked paper pushes down
DROP_AFTER = 3  # dislikes before a paper close to them is dropped
DROP_COSINE = {HASHED: 0.75}  # dense-view cosine to a disliked paper that drops (by kind)
DROP_COSINE_EMBEDDED = 0.8
# The default threshold for a similar paper: among the day's best SIMILAR_SHARE of scores,
# and at least SIMILAR_MIN (by space). Scores are not probabilities and their scale moves
# with the liked set (five PDE papers: the day's best at 0.69; five cs.RO papers: 0.44), so
# a fixed threshold alone adds nothing for some and too much for others; the floor keeps a
# day with nothing close from adding its "best" anyway (measured on the bundled day,
# bench/similar.py).
SIMILAR_SHARE = 0.02
SIMILAR_MIN = {HASHED: 0.35}
SIMILAR_MIN_EMBEDDED = 0.45


def default_min(kind: str) -> float:
    """The score a paper no rule matched needs to be added, in a space of this kind."""
    return SIMILAR_MIN.get(kind, SIMILAR_MIN_EMBEDDED)


def _drop_cosine(kind: str) -> float:
    return DROP_COSINE.get(kind, DROP_COSINE_EMBEDDED)


class Scored:
    """A subscriber's scores over the day (row order of `Day.ids`) and what goes with them."""

    def __init__(self, day: Day, model: Model) -> None:
        n = len(day.ids)
        self.score = np.zeros(n, dtype=np.float32)
        self.closest = np.zeros(n, dtype=np.int64)  # index into model.liked_keys
        self.liked_cosine = np.full(n, -1.0, dtype=np.float32)
        self.disliked_cosine = np.full(n, -1.0, dtype=np.float32)
        if model.liked.shape[0]:
            _, liked = day.weigh(model.liked)
            cosines = similarity(day.view, liked)
            self.closest = np.argmax(cosines, axis=1)
            self.liked_cosine = cosines[np.arange(n), self.closest]
            centroid = np.asarray(liked.mean(axis=0)).ravel()
            norm = float(np.linalg.norm(centroid))
            if norm > 0:
                centroid /= norm
            toward = np.asarray(day.view @ centroid, dtype=np.float32).ravel()
            self.score = CENTROID * toward + (1 - CENTROID) * _likelihood(day, model)
        if model.disliked.shape[0]:
            _, disliked = day.weigh(model.disliked)
            self.disliked_cosine = similarity(day.view, disliked).max(axis=1)
            self.score = self.score - DISLIKED * np.clip(self.disliked_cosine, 0, None)
        self.dropped = np.zeros(n, dtype=bool)
        if model.disliked.shape[0] >= DROP_AFTER:
            self.dropped = (self.disliked_cosine >= _drop_cosine(day.kind)) & (
                self.disliked_cosine > self.liked_cosine
            )


def _likelihood(day: Day, model: Model) -> npt.NDArray[np.float32]:
    """P(like) from the linear model (0.5 everywhere without one)."""
    if not len(model.weights):
        return np.full(len(day.ids), 0.5, dtype=np.float32)
    if model.width != day.width:
        raise ValueError(f"a model of width {model.width} for a space of width {day.width}")
    rows = day.sparse
    if sp.issparse(rows):
        weights = sp.csr_matrix(
            (model.weights, (model.indices, np.zeros(len(model.indices), dtype=np.int32))),
            shape=(day.width, 1),
        )
        logits = np.asarray((rows @ weights).todense()).ravel()
    else:
        full = np.zeros(day.width, dtype=np.float32)
        full[model.indices] = model.weights
        logits = np.asarray(rows @ full).ravel()
    logits = np.clip(logits + model.intercept, -50, 50)
    return (1.0 / (1.0 + np.exp(-logits))).astype(np.float32)


def scores(day: Day, model: Model) -> Scored:
    """Every paper of the day scored for one subscriber."""
    if model.kind != day.kind:
        raise ValueError(f"a model for {model.kind} scored in {day.kind}")
    return Scored(day, model)


def rank(
    day: Day,
    model: Model,
    *,
    matched: Collection[str],
    similar_max: int,
    similar_min: float | None = None,
    exclude: Collection[str] = (),
    row_of: Mapping[str, int] | None = None,
    eligible: npt.NDArray[np.bool_] | None = None,
) -> Ranking:
    """A subscriber's ranking of the day: the scores of the `matched` papers (the ids their
    rules matched among `day.ids`), those dropped by dislikes, and up to `similar_max` papers
    no rule matched (nor in `exclude`: delivered already, or the liked papers themselves)
    with a score of at least `similar_min` (None: among the day's best SIMILAR_SHARE, and at
    least `default_min`), best first, each with the
    liked paper it is closest to. `row_of`: the day's id -> row (made once per run);
    `eligible`: the rows that may be added at all (a mask over `day.ids`: papers the
    subscriber may still be sent), over which "the day's best" is also taken."""
    row_of = row_of if row_of is not None else {key: n for n, key in enumerate(day.ids)}
    scored = scores(day, model)
    rows = [row_of[key] for key in matched if key in row_of]
    found_scores = {day.ids[r]: round(float(scored.score[r]), 4) for r in rows}
    dropped = frozenset(day.ids[r] for r in rows if scored.dropped[r])
    similar: list[Closeness] = []
    if similar_max > 0 and model.liked.shape[0]:
        pool = np.ones(len(day.ids), dtype=bool) if eligible is None else eligible
        threshold = similar_min
        if threshold is None:
            among = scored.score[pool]
            best = float(np.quantile(among, 1 - SIMILAR_SHARE)) if len(among) else 0.0
            threshold = max(default_min(day.kind), best)
        skip = set(matched) | set(exclude) | set(model.liked_keys) | set(model.disliked_keys)
        candidates = np.flatnonzero(pool & (scored.score >= threshold) & ~scored.dropped)
        order = candidates[np.argsort(-scored.score[candidates], kind="stable")]
        for r in order:
            key = day.ids[r]
            if key in skip:
                continue
            closest = int(scored.closest[r])
            similar.append(
                Closeness(
                    paper_id=key,
                    score=round(float(scored.score[r]), 4),
                    closest_key=model.liked_keys[closest],
                    closest_title=model.liked_titles[closest],
                )
            )
            if len(similar) >= similar_max:
                break
    return Ranking(scores=found_scores, dropped=dropped, similar=tuple(similar))


def ordered(ranking: Ranking, ids: Sequence[str]) -> list[str]:
    """`ids` best first by the ranking's scores (ties and unscored ones keep their order)."""
    position = {key: n for n, key in enumerate(ids)}
    return sorted(ids, key=lambda k: (-ranking.scores.get(k, float("-inf")), position[k]))
