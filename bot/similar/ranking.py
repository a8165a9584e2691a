"""One run's rankings of papers like these, start to end: the run's papers become vectors
once (`Day`), then each reader's model is taken or fitted and their papers ranked.

The space is the default (hashed TF-IDF with LSA, nothing leaves the machine) or, given an
`EmbeddingsEndpoint`, the endpoint's vectors: each text embedded once per model and kept on
the `VectorShelf` (the store's vectors) as it comes. A failing endpoint leaves the run to the
default space, and every ranking says so to its reader. A reader's model is refitted only
when their verdicts or the space changed; those fitted are handed back (`RankingRun.fitted`)
for the caller to keep. One reader's failure never stops the others.

The caller reads the store and plans (`bot.pipeline.similar`); this module decides.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from bot.core.models import Feedback, Paper, Ranking
from bot.similar.embeddings import EmbeddingsEndpoint
from bot.similar.endpoint import Embedder, EmbeddingsClient, EmbeddingsFailure
from bot.similar.model import Model, ModelError, fit
from bot.similar.rank import Scored, rank, scores
from bot.similar.space import HASHED, Day, raw_counts
from bot.similar.text import feedback_hash, paper_text, text_hash

__all__ = [
    "FittedModel",
    "KeptModel",
    "LikedRanking",
    "RankingRun",
    "Reader",
    "VectorShelf",
    "rank_liked",
    "rank_readers",
]

log = logging.getLogger(__name__)

# Texts asked of the endpoint between two writes to the shelf, in batches: a first run
# that cannot embed a whole window in time keeps what it got for the next.
CHUNK_BATCHES = 4

Vectors = dict[str, npt.NDArray[np.float32]]  # by text hash


class VectorShelf(Protocol):
    """Where embeddings are kept between runs, by model and text hash (`store.vectors`)."""

    def get(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]: ...

    def put(self, model: str, vectors: Mapping[str, bytes], *, now: datetime) -> None: ...

    def forget(self, model: str) -> None: ...


class KeptModel(Protocol):
    """A reader's model as an earlier run kept it (`bot.store.RankingModel`)."""

    @property
    def kind(self) -> str: ...

    @property
    def feedback_hash(self) -> str: ...

    @property
    def data(self) -> bytes: ...


@dataclass(frozen=True)
class Reader:
    """One reader to rank for, as the caller planned them: their verdicts (each with a
    text), the model kept for them, the papers their rules matched, how many similar papers
    are wanted and which papers may be added as similar ones (`eligible`, by paper)."""

    subscriber_id: int
    name: str
    verdicts: Sequence[Feedback]
    kept: KeptModel | None
    matched: set[str]
    similar_max: int
    similar_min: float | None
    eligible: npt.NDArray[np.bool_]


@dataclass(frozen=True)
class FittedModel:
    """A model fitted this run, for the caller to keep: whose, in which space, on which
    verdicts (`feedback_hash`), and its bytes."""

    subscriber_id: int
    kind: str
    feedback_hash: str
    data: bytes


@dataclass
class RankingRun:
    """What one run's rankings came to: by subscriber id, and how they were made."""

    rankings: dict[int, Ranking] = field(default_factory=dict)
    kind: str = HASHED  # the space they were ranked in
    fitted: list[FittedModel] = field(default_factory=list)  # verdicts changed, or none kept
    reused: int = 0  # models kept from an earlier run
    embedded: int = 0  # texts the endpoint embedded this run (the rest were kept)
    note: str | None = None  # why the run fell back to the default space


async def rank_readers(
    endpoint: EmbeddingsEndpoint | None,
    shelf: VectorShelf | None,
    papers: Sequence[Paper],
    readers: Sequence[Reader],
    *,
    now: datetime,
) -> RankingRun:
    """A ranking of `papers` (distinct) for each reader: in `endpoint`'s space when there is
    one (vectors kept on `shelf`), else the default's."""
    run = RankingRun()
    verdicts = {reader.subscriber_id: reader.verdicts for reader in readers}
    day, vectors = await _space(endpoint, shelf, papers, verdicts, run, now=now)
    row_of = {key: n for n, key in enumerate(day.ids)}
    with threadpool_limits(1):  # one small product per reader: threads only cost here
        for reader in readers:
            try:
                model = _model(day, reader, vectors, run)
                ranking = rank(
                    day,
                    model,
                    matched=reader.matched,
                    similar_max=reader.similar_max,
                    similar_min=reader.similar_min,
                    row_of=row_of,
                    eligible=reader.eligible,
                )
            except Exception as exc:  # one reader's ranking never stops the others
                log.warning("%s: not ranked by their verdicts this run: %s", reader.name, exc)
                continue
            run.rankings[reader.subscriber_id] = (
                replace(ranking, note=run.note) if run.note else ranking
            )
    return run


@dataclass
class LikedRanking:
    """Papers scored by closeness to some liked papers (`paperbell try --like`)."""

    day: Day
    scores: Scored
    note: str | None  # why the default space stood in for the endpoint


async def rank_liked(
    endpoint: EmbeddingsEndpoint | None,
    shelf: VectorShelf | None,
    papers: Sequence[Paper],
    liked: Sequence[Paper],
    *,
    now: datetime,
) -> LikedRanking:
    """`papers` (distinct) scored by closeness to `liked` (among them), in the space a
    digest run would use; nothing is kept of the model."""
    given = [
        Feedback(p.id, "like", "command", title=p.title, text=paper_text(p), created=now)
        for p in liked
    ]
    run = RankingRun()
    day, vectors = await _space(endpoint, shelf, papers, {0: given}, run, now=now)
    model = fit(
        day,
        liked=_rows(day, given, vectors),
        liked_keys=[p.id for p in liked],
        liked_titles=[p.title for p in liked],
        disliked=_rows(day, [], vectors),
        disliked_keys=[],
    )
    with threadpool_limits(1):
        return LikedRanking(day, scores(day, model), run.note)


async def _space(
    endpoint: EmbeddingsEndpoint | None,
    shelf: VectorShelf | None,
    papers: Sequence[Paper],
    verdicts: Mapping[int, Sequence[Feedback]],
    run: RankingRun,
    *,
    now: datetime,
) -> tuple[Day, Vectors]:
    """The run's papers as a `Day`, and the vectors of the verdicts' texts by text hash
    (embeddings; empty for the default space, whose kept rows are word counts)."""
    ids = [paper.id for paper in papers]
    texts = [paper_text(paper) for paper in papers]
    if endpoint is not None:
        wanted = {text_hash(t): t for t in texts}
        for given in verdicts.values():
            wanted.update({text_hash(f.text): f.text for f in given if f.text})
        own: EmbeddingsClient | None = None
        try:
            client = endpoint.open()
            own = client if isinstance(client, EmbeddingsClient) else None
            kind = endpoint.kind
            vectors = await _vectors(
                shelf, client, kind, wanted, run, deadline=endpoint.deadline_seconds, now=now
            )
            run.kind = kind
            day = Day.embedded(kind, ids, np.vstack([vectors[text_hash(t)] for t in texts]))
            return day, vectors
        except Exception as exc:  # the endpoint, its answers, the shelf: this run falls back
            failure = (
                exc
                if isinstance(exc, EmbeddingsFailure)
                else EmbeddingsFailure("error", f"{type(exc).__name__}: {exc}")
            )
            run.note = (
                "Papers like the ones you liked were ranked by their words today: the "
                f"embeddings service failed ({failure.reason})."
            )
            log.warning(
                "embeddings: %s%s; ranking by the default (TF-IDF) for this run",
                failure.reason,
                f": {failure.detail}" if failure.detail else "",
            )
        finally:
            if own is not None:
                await own.close()
    run.kind = HASHED
    return Day.hashed(ids, texts), {}


async def _vectors(
    shelf: VectorShelf | None,
    client: Embedder,
    kind: str,
    wanted: Mapping[str, str],
    run: RankingRun,
    *,
    deadline: float,
    now: datetime,
    retried: bool = False,
) -> Vectors:
    """Every wanted text's vector (by text hash): those kept on the shelf, the rest asked of
    the endpoint (and kept). One dimension for all, else EmbeddingsFailure."""
    stored = shelf.get(kind, wanted) if shelf is not None else {}
    vectors = {h: np.frombuffer(data, dtype="<f4").astype(np.float32) for h, data in stored.items()}
    widths = {len(v) for v in vectors.values()}
    if len(widths) > 1:  # two models behind the name: ask again for all
        vectors = {}
    missing = [h for h in wanted if h not in vectors]
    started = time.monotonic()
    width = next(iter(widths)) if len(widths) == 1 else None
    step = max(client.batch_size, 1) * CHUNK_BATCHES
    for start in range(0, len(missing), step):
        left = deadline - (time.monotonic() - started)
        if left <= 0:
            raise EmbeddingsFailure("timeout", f"not done within {deadline:g} s")
        chunk = missing[start : start + step]
        found = await client.embed([wanted[h] for h in chunk], deadline=left)
        if width is not None and found.shape[1] != width:
            if retried or shelf is None:
                raise EmbeddingsFailure(
                    "bad answer", f"vectors of {found.shape[1]} numbers, then {width}"
                )
            # The model behind the name changed (its vectors have another size): what was
            # kept is of the old one, and everything is asked again, once.
            log.warning("embeddings: %s now gives %d numbers, not %d", kind, found.shape[1], width)
            shelf.forget(kind)
            spent = time.monotonic() - started
            return await _vectors(
                shelf, client, kind, wanted, run, deadline=deadline - spent, now=now, retried=True
            )
        width = found.shape[1]
        fresh = {h: row.astype("<f4") for h, row in zip(chunk, found, strict=True)}
        if shelf is not None:  # kept as it comes: a slow first run is not lost
            shelf.put(kind, {h: row.tobytes() for h, row in fresh.items()}, now=now)
        vectors.update(fresh)
        run.embedded += len(fresh)
    return vectors


def _model(day: Day, reader: Reader, vectors: Vectors, run: RankingRun) -> Model:
    """The reader's model for this space: the one kept, if fitted on these verdicts in this
    space; else a new one, handed back in `run.fitted` to be kept for the next run."""
    usable = [f for f in reader.verdicts if f.text]
    wanted = feedback_hash(usable, day.kind)
    kept = reader.kept
    if kept is not None and kept.kind == day.kind and kept.feedback_hash == wanted:
        try:
            model = Model.from_bytes(kept.data)
            if model.kind == day.kind and model.width == day.width:
                run.reused += 1
                return model
        except ModelError as exc:  # damaged, or an older format: fitted again
            log.info("ranking model of subscriber %d refitted: %s", reader.subscriber_id, exc)
    liked = [f for f in usable if f.liked]
    disliked = [f for f in usable if not f.liked]
    model = fit(
        day,
        liked=_rows(day, liked, vectors),
        liked_keys=[f.key for f in liked],
        liked_titles=[f.title or f.key for f in liked],
        disliked=_rows(day, disliked, vectors),
        disliked_keys=[f.key for f in disliked],
        seed=reader.subscriber_id,
    )
    run.fitted.append(FittedModel(reader.subscriber_id, day.kind, wanted, model.to_bytes()))
    return model


def _rows(day: Day, given: Sequence[Feedback], vectors: Vectors) -> Any:
    """The verdicts' texts as kept rows of this space: word counts, or their embeddings."""
    if day.kind == HASHED:
        return raw_counts([f.text for f in given])
    if not given:
        return np.zeros((0, day.width), dtype=np.float32)
    return np.vstack([vectors[text_hash(f.text)] for f in given])
