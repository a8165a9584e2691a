"""What goes wrong around papers like these never stops a digest, and is not lost: an
embeddings endpoint's hostile answer (through the real protocol, on loopback), a slow first
run (what was embedded is kept), a model that changed behind its name, a paper moved from
the library file to the config's list, and similar papers picked among the days not sent."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from support.cli import outcome
from support.config import local_feed_config, sink_email, toml_table
from support.embeddings import EmbeddingsStandIn, Fault

from bot.config import parse_config
from bot.core.models import Feedback, Paper, Subscriber
from bot.match.digest import match_rules
from bot.pipeline.similar import RankingRun, rank_subscribers
from bot.pipeline.wiring import embeddings_endpoint
from bot.rules import parse_rule
from bot.store import Store

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)


def setup(store: Store, papers: tuple[Paper, ...]) -> tuple[Subscriber, list[object]]:
    store.papers.upsert(papers, now=NOW)
    sub, _ = store.subscribers.add("ada", email="ada@example.org", rules=["robot"], now=NOW)
    assert sub.id is not None
    seeds = [p for p in papers if p.primary_category == "math.AP"][:5]
    for p in seeds:
        store.feedback.set(
            sub.id, Feedback(p.id, "like", "command", p.title, f"{p.title}\n\n{p.abstract}", NOW)
        )
    return sub, [parse_rule("robot")]


def ranked(
    store: Store, sub: Subscriber, rules: list[object], settings: dict[str, object]
) -> RankingRun:
    config = parse_config(
        {
            "version": 1,
            "sources": [{"kind": "arxiv", "categories": ["cs"]}],
            "embeddings": settings,
        },
        environ={},
    )
    papers = store.papers.announced_since(NOW.date() - timedelta(days=7))
    matches = match_rules(rules, papers)  # type: ignore[arg-type]
    return asyncio.run(
        rank_subscribers(
            embeddings_endpoint(config),
            store,
            [(sub, rules)],  # type: ignore[list-item]
            papers,
            matches,
            now=NOW,
        )
    )


def test_a_hostile_answer_falls_back_and_says_so(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    sub, rules = setup(store, full_feed_papers)
    huge = b'{"object":"list","data":[{"index":0,"embedding":[' + b"9" * 400 + b"]}]}"
    with EmbeddingsStandIn(script=[Fault(body=huge)]) as standin:
        run = ranked(store, sub, rules, {"base_url": standin.base_url, "model": "m"})
    assert run.note is not None and "ranked by their words today" in run.note
    assert sub.id in run.rankings and run.rankings[sub.id].note == run.note
    assert len(run.rankings[sub.id].similar) > 0  # the default ranking stood in


def test_a_slow_first_run_keeps_what_it_embedded(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    sub, rules = setup(store, full_feed_papers)
    settings = {"model": "m", "batch_size": 8, "deadline_seconds": 1.5, "max_retries": 0}
    with EmbeddingsStandIn(script=[Fault()] * 4 + [Fault(delay=3)]) as standin:
        run = ranked(store, sub, rules, {**settings, "base_url": standin.base_url})
        assert run.note is not None and "(timeout)" in run.note
        assert store.vectors.count("openai:m") == 32  # four batches of eight, kept
        standin.script.clear()
        second = ranked(
            store, sub, rules, {**settings, "base_url": standin.base_url, "deadline_seconds": 120}
        )
    assert second.note is None and second.kind == "openai:m"
    assert second.embedded == store.vectors.count("openai:m") - 32  # the rest only


def test_a_model_that_changed_behind_its_name_is_asked_again(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    sub, rules = setup(store, full_feed_papers)
    with EmbeddingsStandIn() as standin:
        first = ranked(store, sub, rules, {"base_url": standin.base_url, "model": "m"})
        assert first.note is None
        kept = store.vectors.count("openai:m")
        new_paper = full_feed_papers[0]
        store.papers.upsert([replace_abstract(new_paper)], now=NOW)
        standin.embed = lambda texts: [[1.0] * 16 for _ in texts]  # another model: 16 numbers
        second = ranked(store, sub, rules, {"base_url": standin.base_url, "model": "m"})
    assert second.note is None and second.kind == "openai:m"
    assert store.vectors.count("openai:m") >= kept
    widths = {len(v) for v in store.vectors.get("openai:m", _all_hashes(store)).values()}
    assert widths == {16 * 4}  # bytes of float32: every vector now the new model's


def replace_abstract(paper: Paper) -> Paper:
    from dataclasses import replace

    return replace(paper, abstract=paper.abstract + " A new sentence.", version=paper.version + 1)


def _all_hashes(store: Store) -> list[str]:
    from sqlmodel import select

    from bot.store.tables import TextVectorRow

    with store.database.session() as session:
        return list(session.exec(select(TextVectorRow.text_hash)))


def test_a_paper_moved_from_the_library_file_to_the_list_keeps_its_verdict(store: Store) -> None:
    sub, _ = store.subscribers.add("bob", email="bob@example.org", rules=["x"], now=NOW)
    assert sub.id is not None
    liked = Feedback("2411.00001", "like", "file")
    store.feedback.replace_via(sub.id, "file", [liked], now=NOW)
    # The config's list now names it (and the file no longer does): written list first.
    store.feedback.replace_via(
        sub.id, "config", [Feedback("2411.00001", "like", "config")], now=NOW
    )
    store.feedback.replace_via(sub.id, "file", [], now=NOW)
    assert [(f.key, f.via) for f in store.feedback.of(sub.id)] == [("2411.00001", "config")]


def test_similar_papers_come_from_days_not_sent(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """An eligible mask over the day: papers of a day already sent are never candidates,
    and the threshold is taken among the eligible ones."""
    from bot.similar.model import fit
    from bot.similar.rank import rank
    from bot.similar.space import Day, raw_counts
    from bot.similar.text import paper_text

    papers = list({p.id: p for p in full_feed_papers}.values())
    day = Day.hashed([p.id for p in papers], [paper_text(p) for p in papers])
    seeds = [p for p in papers if p.primary_category == "math.AP"][:5]
    model = fit(
        day,
        liked=raw_counts([paper_text(p) for p in seeds]),
        liked_keys=[p.id for p in seeds],
        liked_titles=[p.title for p in seeds],
        disliked=raw_counts([]),
        disliked_keys=[],
    )
    everything = rank(day, model, matched=(), similar_max=5)
    best = {c.paper_id for c in everything.similar}
    eligible = np.array([p.id not in best for p in papers])  # the best ones: sent already
    later = rank(day, model, matched=(), similar_max=5, eligible=eligible)
    assert later.similar and not {c.paper_id for c in later.similar} & best


def test_numbers_out_of_range_are_a_bad_answer() -> None:
    import json

    from bot.similar.endpoint import EmbeddingsFailure, check_vectors

    answer = json.loads('{"data": [{"index": 0, "embedding": [1, ' + "9" * 400 + "]}]}")
    with pytest.raises(EmbeddingsFailure, match="bad answer"):
        check_vectors(answer, 1)


def test_a_dry_run_shows_the_ranking_in_words(
    tmp_path: Path, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """`digest --dry-run` says what the ranking did: the papers added as similar to liked
    ones (and to which), the papers left out as close to a 👎, and a fallback to the default
    ranking, each in a line of its own."""
    with Store.open(database_url) as store:
        store.papers.upsert(full_feed_papers, now=NOW)
    with EmbeddingsStandIn(script=[Fault(status=400, body={"error": "\x1b[31mno"})]) as standin:
        path = tmp_path / "config.toml"
        path.write_text(
            local_feed_config(database_url)
            + toml_table("email", sink_email(9))
            + toml_table("embeddings", {"base_url": standin.base_url, "model": "m"})
            + "max_retries = 0\n"
        )
        cli = lambda *args: outcome(*args, config=path)  # noqa: E731
        made = cli("subscribe", "bob", "--email", "b@example.org", "robot", "--similar-min", "0.2")
        assert made[0] == 0, made[1]
        for verdict, ids in (
            ("like", ("2411.18289", "2411.18295", "2411.17703")),
            ("dislike", ("2411.18423", "2411.18443", "2411.12361")),
        ):
            assert cli(verdict, "bob", *ids)[0] == 0
        code, out = cli("digest", "--dry-run", "--since", "2024-11-01")
    assert code == 0, out
    assert "bob <b@example.org>: would get " in out and "(ranked by their 👍 / 👎)" in out
    similar = [line for line in out.splitlines() if "no rule matched" in line]
    assert similar and all(
        "[no rule matched; close to a paper they liked: “" in line for line in similar
    )
    assert "  left out: 3 papers their rules matched, close to ones they marked 👎:" in out
    assert out.count("[close to a 👎]") == 3
    assert "  note: Papers like the ones you liked were ranked by their words today" in out
    assert "\x1b" not in out and "[]" not in out
