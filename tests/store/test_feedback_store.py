"""The store's verdicts on papers, vectors and fitted models (`store.feedback`,
`store.vectors`, `store.ranking_models`), on a real database (SQLite; PostgreSQL when
PAPERBELL_TEST_DATABASE_URL is set)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core.models import Feedback
from bot.store import RankingModel, Store

pytestmark = pytest.mark.database

NOW = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)


def subscriber(store: Store, name: str = "ada") -> int:
    sub, _ = store.subscribers.add(name, email=f"{name}@example.org", rules=["robot"], now=NOW)
    assert sub.id is not None
    return sub.id


def test_a_verdict_replaces_the_earlier_one_and_a_repeat_changes_nothing(store: Store) -> None:
    ada = subscriber(store)
    liked = Feedback("2411.18179", "like", "email", "A title", "A title\n\nAbstract", NOW)
    assert store.feedback.set(ada, liked)
    assert not store.feedback.set(ada, liked)  # a second click
    later = NOW + timedelta(hours=1)
    disliked = Feedback("2411.18179", "dislike", "slack", created=later)
    assert store.feedback.set(ada, disliked)
    (now,) = store.feedback.of(ada)
    assert (now.verdict, now.via, now.created) == ("dislike", "slack", later)
    assert (now.title, now.text) == ("A title", "A title\n\nAbstract")  # kept: none given
    assert store.feedback.remove(ada, "2411.18179")
    assert not store.feedback.remove(ada, "2411.18179")
    assert store.feedback.of(ada) == []


def test_a_verdict_needs_a_time(store: Store) -> None:
    with pytest.raises(ValueError, match="time"):
        store.feedback.set(subscriber(store), Feedback("2411.18179", "like", "command"))


def test_the_config_list_is_replaced_whole_and_never_over_a_verdict_given_by_hand(
    store: Store,
) -> None:
    ada, bob = subscriber(store), subscriber(store, "bob")
    config = [Feedback(key, "like", "config") for key in ("2411.00001", "2411.00002")]
    store.feedback.replace_via(ada, "config", config, now=NOW)
    store.feedback.set(bob, Feedback("2411.00001", "like", "command", created=NOW))
    # By hand: a dislike of a paper the file likes wins, and stays when the file changes.
    store.feedback.set(ada, Feedback("2411.00002", "dislike", "email", created=NOW))
    store.feedback.replace_via(
        ada,
        "config",
        [Feedback(key, "like", "config") for key in ("2411.00002", "2411.00003")],
        now=NOW + timedelta(days=1),
    )
    verdicts = {(f.key, f.verdict, f.via) for f in store.feedback.of(ada)}
    assert verdicts == {("2411.00002", "dislike", "email"), ("2411.00003", "like", "config")}
    # A file's list does not touch the config's, nor another subscriber's.
    store.feedback.replace_via(ada, "file", [], now=NOW)
    assert len(store.feedback.of(ada)) == 2
    assert [f.key for f in store.feedback.of(bob)] == ["2411.00001"]
    assert set(store.feedback.of_all()) == {ada, bob}
    assert set(store.feedback.of_all([bob])) == {bob}
    assert store.feedback.counts() == {"like": 2, "dislike": 1}


def test_a_verdict_given_by_hand_on_a_declared_paper_is_then_the_hand_s(store: Store) -> None:
    ada = subscriber(store)
    store.feedback.replace_via(ada, "config", [Feedback("2411.00001", "like", "config")], now=NOW)
    assert not store.feedback.set(ada, Feedback("2411.00001", "like", "slack", created=NOW))
    store.feedback.replace_via(ada, "config", [], now=NOW)  # the line leaves the file
    assert [(f.key, f.via) for f in store.feedback.of(ada)] == [("2411.00001", "slack")]


def test_undo_puts_back_the_verdict_a_click_replaced(store: Store) -> None:
    ada = subscriber(store)
    key = "2411.18179"
    disliked = Feedback(key, "dislike", "email", "A title", "A title\n\nAbstract", NOW)
    store.feedback.set(ada, disliked)
    store.feedback.set(ada, Feedback(key, "like", "email", created=NOW + timedelta(hours=1)))
    assert not store.feedback.take_back(ada, key, "dislike")  # not the one recorded
    assert store.feedback.take_back(ada, key, "like")
    assert store.feedback.of(ada) == [disliked]  # as it was, its time too
    assert store.feedback.take_back(ada, key, "dislike")  # nothing before it: gone
    assert store.feedback.of(ada) == []
    assert not store.feedback.take_back(ada, key, "dislike")
    # 👍, 👎, 👍: Undo goes back one verdict.
    for n, verdict in enumerate(("like", "dislike", "like")):
        store.feedback.set(ada, Feedback(key, verdict, "slack", created=NOW + timedelta(n)))
    assert store.feedback.take_back(ada, key, "like")
    assert [(f.verdict, f.created) for f in store.feedback.of(ada)] == [
        ("dislike", NOW + timedelta(1))
    ]


def test_undo_of_a_click_over_the_config_files_verdict_gives_it_back_to_the_file(
    store: Store,
) -> None:
    ada = subscriber(store)
    declared = [Feedback("2411.00001", "dislike", "config"), Feedback("2411.00002", "like", "file")]
    store.feedback.replace_via(ada, "config", declared[:1], now=NOW)
    store.feedback.replace_via(ada, "file", declared[1:], now=NOW)
    store.feedback.set(ada, Feedback("2411.00001", "like", "email", created=NOW))
    store.feedback.set(ada, Feedback("2411.00002", "like", "email", created=NOW))  # the same
    assert store.feedback.take_back(ada, "2411.00001", "like")
    assert store.feedback.take_back(ada, "2411.00002", "like")
    verdicts = {(f.key, f.verdict, f.via) for f in store.feedback.of(ada)}
    assert verdicts == {("2411.00001", "dislike", "config"), ("2411.00002", "like", "file")}
    # The file changes under a click: Undo gives what the file says now, or nothing.
    store.feedback.set(ada, Feedback("2411.00001", "like", "email", created=NOW))
    store.feedback.set(ada, Feedback("2411.00002", "dislike", "email", created=NOW))
    store.feedback.replace_via(ada, "config", [Feedback("2411.00001", "like", "config")], now=NOW)
    store.feedback.replace_via(ada, "file", [], now=NOW)
    assert store.feedback.take_back(ada, "2411.00001", "like")
    assert store.feedback.take_back(ada, "2411.00002", "dislike")
    assert {(f.key, f.verdict, f.via) for f in store.feedback.of(ada)} == {
        ("2411.00001", "like", "config")
    }


def test_a_repeated_verdict_fills_in_a_text_not_known_before(store: Store) -> None:
    ada = subscriber(store)
    assert store.feedback.set(ada, Feedback("1706.03762", "like", "command", created=NOW))
    known = Feedback("1706.03762", "like", "command", "Attention", "Attention\n\nThe dominant")
    assert not store.feedback.set(ada, known, now=NOW + timedelta(days=1))  # no new verdict
    (kept,) = store.feedback.of(ada)
    assert (kept.title, kept.text, kept.created) == ("Attention", known.text, NOW)


def test_vectors_are_kept_once_per_model_and_text(store: Store) -> None:
    store.vectors.put("minilm", {"h1": b"\x01" * 8, "h2": b"\x02" * 8}, now=NOW)
    store.vectors.put("minilm", {"h1": b"\x09" * 8, "h3": b"\x03" * 8}, now=NOW)
    store.vectors.put("other", {"h1": b"\x04" * 8}, now=NOW)
    assert store.vectors.get("minilm", ["h1", "h3", "nope"]) == {
        "h1": b"\x01" * 8,
        "h3": b"\x03" * 8,
    }
    assert store.vectors.count("minilm") == 3 and store.vectors.count() == 4


def test_a_fitted_model_is_replaced_and_goes_with_its_subscriber(store: Store) -> None:
    ada = subscriber(store)
    first = RankingModel(ada, "tfidf-1", "abc", b"weights", NOW)
    store.ranking_models.put(first)
    second = RankingModel(ada, "tfidf-1", "def", b"other", NOW + timedelta(hours=1))
    store.ranking_models.put(second)
    assert store.ranking_models.get([ada, 999]) == {ada: second}
    store.feedback.set(ada, Feedback("2411.00001", "like", "command", created=NOW))
    store.subscribers.delete("ada")
    assert store.ranking_models.get([ada]) == {} and store.feedback.of_all() == {}
