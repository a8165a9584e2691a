"""Papers like these in a digest run: each subscriber with verdicts gets a `Ranking` of the
run's papers. This module reads the store and plans; `bot.similar.ranking` decides.

The plan, per subscriber with verdicts: their verdicts (each with a text to rank by), the
model an earlier run kept for them (`store.ranking_models`), the papers their rules matched
and those that may be added as similar ones. Then one call ranks them all, in the space the
wired `EmbeddingsEndpoint` gives (vectors kept in `store.vectors`), or the default one; the
models it fitted are kept for the next run. Subscribers without verdicts cost nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np
import numpy.typing as npt

from bot.config import Config
from bot.core.models import Feedback, Paper, Subscriber
from bot.match.digest import RuleMatches, last_sent_day
from bot.rules import Rule
from bot.similar.embeddings import EmbeddingsEndpoint
from bot.similar.ranking import LikedRanking, RankingRun, Reader, rank_liked, rank_readers
from bot.similar.text import paper_text
from bot.store import RankingModel, Store

__all__ = ["LikedRanking", "RankingRun", "liked_ranking", "rank_subscribers"]

log = logging.getLogger(__name__)

# Similar papers asked of the ranking per one a digest may add: some may not be owed (sent
# before, or outside the subscriber's categories), and the digest takes the first owed ones.
SIMILAR_MARGIN = 3


async def rank_subscribers(
    endpoint: EmbeddingsEndpoint | None,
    store: Store,
    parsed: Sequence[tuple[Subscriber, Sequence[Rule]]],
    papers: Sequence[Paper],
    matches: RuleMatches,
    *,
    now: datetime,
) -> RankingRun:
    """A ranking for each of the `parsed` subscribers who liked or disliked papers, over
    `papers` (the run's), their rules' matches taken from `matches`; in `endpoint`'s space
    when the config has [embeddings]."""
    ids = [sub.id for sub, _ in parsed if sub.id is not None]
    verdicts = store.feedback.of_all(ids) if ids else {}
    if not verdicts or not papers:
        return RankingRun()
    unique = list({paper.id: paper for paper in papers}.values())
    readers = _readers(store, parsed, _with_texts(store, verdicts), unique, matches)
    run = await rank_readers(endpoint, store.vectors, unique, readers, now=now)
    _keep_models(store, run, {r.subscriber_id: r.name for r in readers}, now=now)
    if run.rankings:
        log.info(
            "ranked %d digests by their readers' verdicts (%s; %d models fitted, %d kept)",
            len(run.rankings),
            run.kind,
            len(run.fitted),
            run.reused,
        )
    return run


def _readers(
    store: Store,
    parsed: Sequence[tuple[Subscriber, Sequence[Rule]]],
    verdicts: dict[int, list[Feedback]],
    papers: Sequence[Paper],
    matches: RuleMatches,
) -> list[Reader]:
    """The subscribers with verdicts, each as the ranking takes them."""
    announced = np.array(
        [p.announced.toordinal() if p.announced else 0 for p in papers], dtype=np.int64
    )
    kept = store.ranking_models.get(verdicts)
    readers = []
    for sub, rules in parsed:
        given = verdicts.get(sub.id or 0)
        if not given or sub.id is None:
            continue
        try:
            eligible = _eligible(store, sub, papers, announced)
        except Exception as exc:  # one subscriber's ranking never stops the others
            log.warning("%s: not ranked by their verdicts this run: %s", sub.name, exc)
            continue
        readers.append(
            Reader(
                subscriber_id=sub.id,
                name=sub.name,
                verdicts=given,
                kept=kept.get(sub.id),
                matched={key for rule in rules for key in matches.get(rule.node, {})},
                similar_max=sub.similar_max * SIMILAR_MARGIN,
                similar_min=sub.similar_min,
                eligible=eligible,
            )
        )
    return readers


def _keep_models(store: Store, run: RankingRun, names: dict[int, str], *, now: datetime) -> None:
    """The models fitted this run, kept for the next; a subscriber whose model cannot be
    kept goes unranked this run, as when their ranking fails."""
    for fitted in run.fitted:
        try:
            store.ranking_models.put(
                RankingModel(
                    fitted.subscriber_id, fitted.kind, fitted.feedback_hash, fitted.data, now
                )
            )
        except Exception as exc:
            log.warning(
                "%s: not ranked by their verdicts this run: %s", names[fitted.subscriber_id], exc
            )
            run.rankings.pop(fitted.subscriber_id, None)


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
    from bot.pipeline.wiring import embeddings_endpoint

    endpoint = embeddings_endpoint(config) if config is not None else None
    unique = list({paper.id: paper for paper in papers}.values())
    shelf = store.vectors if store is not None else None
    return await rank_liked(endpoint, shelf, unique, liked, now=now)
