"""Papers like these in a digest run: each subscriber with verdicts gets a `Ranking` of the
run's papers (bot.similar decides; this module reads and writes the store and asks the
embeddings endpoint).

Once per run, the run's papers become vectors (`Day`): the default space (hashed TF-IDF
with LSA, nothing leaves the machine), or, with `[embeddings]`, the endpoint's vectors, each
text embedded once per model and kept (`store.vectors`). Then, per subscriber with verdicts:
their model, refitted only when their verdicts or the space changed (`store.ranking_models`),
and `bot.similar.rank.rank`. A failing endpoint leaves the run to the default space, and every
ranking says so to its reader; a subscriber whose ranking fails gets their digest unranked.
Subscribers without verdicts cost nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from bot.config import Config, EmbeddingsConfig
from bot.core.models import Feedback, Paper, Ranking, Subscriber
from bot.match.digest import RuleMatches, last_sent_day
from bot.rules import Rule
from bot.similar.endpoint import EmbeddingsClient, EmbeddingsFailure, FastembedEmbedder
from bot.similar.model import Model, ModelError, fit
from bot.similar.rank import rank
from bot.similar.space import HASHED, Day, raw_counts
from bot.similar.text import feedback_hash, paper_text, text_hash
from bot.store import RankingModel, Store

log = logging.getLogger(__name__)

# Texts asked of the endpoint between two writes to the store, in batches: a first run
# that cannot embed a whole window in time keeps what it got for the next.
CHUNK_BATCHES = 4
# Similar papers asked of the ranking per one a digest may add: some may not be owed (sent
# before, or outside the subscriber's categories), and the digest takes the first owed ones.
SIMILAR_MARGIN = 3


class Embedder(Protocol):
    model: str

    async def embed(self, texts: Sequence[str], *, deadline: float) -> npt.NDArray[np.float32]: ...


@dataclass
class RankingRun:
    """What one run's rankings came to: by subscriber id, and how they were made."""

    rankings: dict[int, Ranking] = field(default_factory=dict)
    kind: str = HASHED  # the space they were ranked in
    fitted: int = 0  # models fitted (verdicts changed, or none kept)
    reused: int = 0  # models kept from an earlier run
    embedded: int = 0  # texts the endpoint embedded this run (the rest were kept)
    note: str | None = None  # why the run fell back to the default space


def embedder_of(settings: EmbeddingsConfig) -> Embedder:
    """The embeddings client `[embeddings]` describes (EmbeddingsFailure: fastembed is not
    installed, or its model cannot be loaded)."""
    if settings.provider == "fastembed":
        return FastembedEmbedder(settings.model, batch_size=settings.batch_size)
    assert settings.base_url is not None  # checked by the config
    return EmbeddingsClient(
        base_url=settings.base_url,
        model=settings.model,
        api_key=settings.api_key,
        timeout=settings.timeout,
        batch_size=settings.batch_size,
        max_retries=settings.max_retries,
    )


async def rank_subscribers(
    settings: EmbeddingsConfig | None,
    store: Store,
    parsed: Sequence[tuple[Subscriber, Sequence[Rule]]],
    papers: Sequence[Paper],
    matches: RuleMatches,
    *,
    now: datetime,
) -> RankingRun:
    """A ranking for each of the `parsed` subscribers who liked or disliked papers, over
    `papers` (the run's), their rules' matches taken from `matches`; in `[embeddings]`'s
    space (`settings`) when the config has one."""
    ids = [sub.id for sub, _ in parsed if sub.id is not None]
    verdicts = store.feedback.of_all(ids) if ids else {}
    if not verdicts or not papers:
        return RankingRun()
    verdicts = _with_texts(store, verdicts)
    unique = list({paper.id: paper for paper in papers}.values())
    run = RankingRun()
    day, kept = await _space(settings, store, unique, verdicts, run, now=now)
    row_of = {key: n for n, key in enumerate(day.ids)}
    announced = np.array(
        [p.announced.toordinal() if p.announced else 0 for p in unique], dtype=np.int64
    )
    models = store.ranking_models.get(verdicts)
    with threadpool_limits(1):  # one small product per subscriber: threads only cost here
        for sub, rules in parsed:
            given = verdicts.get(sub.id or 0)
            if not given or sub.id is None:
                continue
            try:
                model = _model(store, day, sub.id, given, kept, models.get(sub.id), run, now=now)
                matched = {key for rule in rules for key in matches.get(rule.node, {})}
                ranking = rank(
                    day,
                    model,
                    matched=matched,
                    similar_max=sub.similar_max * SIMILAR_MARGIN,
                    similar_min=sub.similar_min,
                    row_of=row_of,
                    eligible=_eligible(store, sub, unique, announced),
                )
            except Exception as exc:  # one subscriber's ranking never stops the others
                log.warning("%s: not ranked by their verdicts this run: %s", sub.name, exc)
                continue
            run.rankings[sub.id] = replace(ranking, note=run.note) if run.note else ranking
    if run.rankings:
        log.info(
            "ranked %d digests by their readers' verdicts (%s; %d models fitted, %d kept)",
            len(run.rankings),
            run.kind,
            run.fitted,
            run.reused,
        )
    return run


def _eligible(
    store: Store, sub: Subscriber, papers: Sequence[Paper], announced: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """The papers that may be added to the subscriber's digest as similar ones: in their
    categories, and announced after every paper they were sent (so that the best of the
    digest's own days are picked, not the runners-up of days already sent)."""
    mask = np.ones(len(papers), dtype=bool)
    if sub.categories:
        mask &= np.array([sub.takes_categories_of(p) for p in papers], dtype=bool)
    assert sub.id is not None
    sent = set(store.outbox.delivered_versions(sub.id, None))  # on any channel
    last = last_sent_day(papers, sent)
    if last is not None:
        mask &= announced > last.toordinal()
    return mask


def _with_texts(store: Store, verdicts: dict[int, list[Feedback]]) -> dict[int, list[Feedback]]:
    """The verdicts, each with a text to rank by: a verdict given before its paper was stored
    (a button on a paper that has gone since, `/papers like` on an id the store lacked)
    takes the stored paper's title and abstract once it is there; one with no text at all
    ranks by its title."""
    missing = {f.key for given in verdicts.values() for f in given if not f.text}
    found = store.papers.by_id(sorted(missing)) if missing else {}
    result: dict[int, list[Feedback]] = {}
    for sid, given in verdicts.items():
        result[sid] = [
            f
            if f.text
            else replace(f, title=f.title or p.title, text=paper_text(p))
            if (p := found.get(f.key)) is not None
            else replace(f, text=f.title)
            for f in given
        ]
    return result


async def _space(
    settings: EmbeddingsConfig | None,
    store: Store | None,
    papers: Sequence[Paper],
    verdicts: Mapping[int, Sequence[Feedback]],
    run: RankingRun,
    *,
    now: datetime,
) -> tuple[Day, dict[str, npt.NDArray[np.float32]]]:
    """The run's papers as a `Day`, and the vectors of the verdicts' texts by text hash
    (embeddings; empty for the default space, whose kept rows are word counts)."""
    ids = [paper.id for paper in papers]
    texts = [paper_text(paper) for paper in papers]
    if settings is not None:
        wanted = {text_hash(t): t for t in texts}
        for given in verdicts.values():
            wanted.update({text_hash(f.text): f.text for f in given if f.text})
        own: EmbeddingsClient | None = None
        try:
            client = embedder_of(settings)
            own = client if isinstance(client, EmbeddingsClient) else None
            kind = settings.kind
            vectors = await _vectors(
                store, client, kind, wanted, run, deadline=settings.deadline_seconds, now=now
            )
            run.kind = kind
            day = Day.embedded(kind, ids, np.vstack([vectors[text_hash(t)] for t in texts]))
            return day, vectors
        except Exception as exc:  # the endpoint, its answers, the store: this run falls back
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
    store: Store | None,
    client: Embedder,
    kind: str,
    wanted: Mapping[str, str],
    run: RankingRun,
    *,
    deadline: float,
    now: datetime,
    retried: bool = False,
) -> dict[str, npt.NDArray[np.float32]]:
    """Every wanted text's vector (by text hash): those kept in the store, the rest asked of
    the endpoint (and kept). One dimension for all, else EmbeddingsFailure."""
    stored = store.vectors.get(kind, wanted) if store is not None else {}
    vectors = {h: np.frombuffer(data, dtype="<f4").astype(np.float32) for h, data in stored.items()}
    widths = {len(v) for v in vectors.values()}
    if len(widths) > 1:  # two models behind the name: ask again for all
        vectors = {}
    missing = [h for h in wanted if h not in vectors]
    started = time.monotonic()
    width = next(iter(widths)) if len(widths) == 1 else None
    step = max(getattr(client, "batch_size", 64), 1) * CHUNK_BATCHES
    for start in range(0, len(missing), step):
        left = deadline - (time.monotonic() - started)
        if left <= 0:
            raise EmbeddingsFailure("timeout", f"not done within {deadline:g} s")
        chunk = missing[start : start + step]
        found = await client.embed([wanted[h] for h in chunk], deadline=left)
        if width is not None and found.shape[1] != width:
            if retried or store is None:
                raise EmbeddingsFailure(
                    "bad answer", f"vectors of {found.shape[1]} numbers, then {width}"
                )
            # The model behind the name changed (its vectors have another size): what was
            # kept is of the old one, and everything is asked again, once.
            log.warning("embeddings: %s now gives %d numbers, not %d", kind, found.shape[1], width)
            store.vectors.forget(kind)
            spent = time.monotonic() - started
            return await _vectors(
                store, client, kind, wanted, run, deadline=deadline - spent, now=now, retried=True
            )
        width = found.shape[1]
        fresh = {h: row.astype("<f4") for h, row in zip(chunk, found, strict=True)}
        if store is not None:  # kept as it comes: a slow first run is not lost
            store.vectors.put(kind, {h: row.tobytes() for h, row in fresh.items()}, now=now)
        vectors.update(fresh)
        run.embedded += len(fresh)
    return vectors


def _model(
    store: Store,
    day: Day,
    subscriber_id: int,
    given: Sequence[Feedback],
    kept: Mapping[str, npt.NDArray[np.float32]],
    stored: RankingModel | None,
    run: RankingRun,
    *,
    now: datetime,
) -> Model:
    """The subscriber's model for this space: the one kept, if fitted on these verdicts in
    this space; else a new one, kept for the next run."""
    usable = [f for f in given if f.text]
    wanted = feedback_hash(usable, day.kind)
    if stored is not None and stored.kind == day.kind and stored.feedback_hash == wanted:
        try:
            model = Model.from_bytes(stored.data)
            if model.kind == day.kind and model.width == day.width:
                run.reused += 1
                return model
        except ModelError as exc:  # damaged, or an older format: fitted again
            log.info("ranking model of subscriber %d refitted: %s", subscriber_id, exc)
    liked = [f for f in usable if f.liked]
    disliked = [f for f in usable if not f.liked]
    model = fit(
        day,
        liked=_rows(day, liked, kept),
        liked_keys=[f.key for f in liked],
        liked_titles=[f.title or f.key for f in liked],
        disliked=_rows(day, disliked, kept),
        disliked_keys=[f.key for f in disliked],
        seed=subscriber_id,
    )
    store.ranking_models.put(
        RankingModel(subscriber_id, day.kind, wanted, model.to_bytes(), fitted=now)
    )
    run.fitted += 1
    return model


def _rows(day: Day, given: Sequence[Feedback], kept: Mapping[str, npt.NDArray[np.float32]]) -> Any:
    """The verdicts' texts as kept rows of this space: word counts, or their embeddings."""
    if day.kind == HASHED:
        return raw_counts([f.text for f in given])
    width = day.width
    if not given:
        return np.zeros((0, width), dtype=np.float32)
    return np.vstack([kept[text_hash(f.text)] for f in given])


@dataclass
class LikedRanking:
    """Papers scored by closeness to some liked papers (`paperbell try --like`)."""

    day: Day
    scores: Any  # bot.similar.rank.Scored
    note: str | None  # why the default space stood in for [embeddings]


async def liked_ranking(
    config: Config | None,
    store: Store | None,
    papers: Sequence[Paper],
    liked: Sequence[Paper],
    *,
    now: datetime,
) -> LikedRanking:
    """`papers` scored by closeness to `liked` (among them), in the space a digest run would
    use: `[embeddings]`'s when the config has one (vectors kept in `store`, if given), else
    the default; nothing is stored of the model."""
    from bot.similar.rank import scores

    unique = list({paper.id: paper for paper in papers}.values())
    verdicts = {
        0: [
            Feedback(p.id, "like", "command", title=p.title, text=paper_text(p), created=now)
            for p in liked
        ]
    }
    run = RankingRun()
    day, kept = await _space(
        config.embeddings if config is not None else None, store, unique, verdicts, run, now=now
    )
    model = fit(
        day,
        liked=_rows(day, verdicts[0], kept),
        liked_keys=[p.id for p in liked],
        liked_titles=[p.title for p in liked],
        disliked=_rows(day, [], kept),
        disliked_keys=[],
    )
    with threadpool_limits(1):
        return LikedRanking(day, scores(day, model), run.note)
