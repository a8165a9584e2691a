"""A digest ranked by its subscriber's verdicts (a `Ranking`, as bot.similar gives it): the
order, the papers pushed out by dislikes, the similar papers added under their own heading,
in the email and in Slack; a rules-only subscriber's digest as before. Real papers."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from bot.core.models import Closeness, Paper, Ranking, Subscriber
from bot.match.digest import build_digest
from bot.render.email import render_digest
from bot.render.slack import build_posts
from bot.rules import parse_rule

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)


def sub(*rules: str, **kw: object) -> Subscriber:
    return Subscriber(name="ada", email="ada@example.org", rules=rules, id=1, **kw)  # type: ignore[arg-type]


def digest_for(
    subscriber: Subscriber,
    papers: tuple[Paper, ...],
    ranking: Ranking | None = None,
    delivered: dict[str, int] | None = None,
):  # type: ignore[no-untyped-def]
    rules = [parse_rule(r) for r in subscriber.rules]
    return build_digest(
        subscriber, rules, papers, delivered=delivered or {}, now=NOW, ranking=ranking
    )


def test_the_ranking_orders_drops_and_adds(full_feed_papers: tuple[Paper, ...]) -> None:
    s = sub("robot", max_papers=5, similar_max=2)
    everything = digest_for(sub("robot", max_papers=1000), full_feed_papers)
    assert everything is not None
    matched = [item.paper.id for item in everything.items]
    assert len(matched) > 8
    # The ranking likes the rules' last papers best, and a dislike pushes out the first.
    scores = {pid: float(n) for n, pid in enumerate(matched)}
    unmatched = [p for p in full_feed_papers if p.id not in scores][:4]
    liked = 'Schr\\"odinger bridges for robots'
    ranking = Ranking(
        scores=scores,
        dropped=frozenset({matched[-1]}),
        similar=tuple(
            Closeness(p.id, 0.5 - n / 10, "2411.00001", liked) for n, p in enumerate(unmatched)
        ),
    )
    digest = digest_for(s, full_feed_papers, ranking)
    assert digest is not None
    ids = [item.paper.id for item in digest.items]
    assert ids[:5] == list(reversed(matched[-6:-1]))  # best score first, the disliked gone
    assert [p.id for p in digest.disliked] == [matched[-1]]
    assert ids[5:] == [p.id for p in unmatched[:2]]  # similar_max of them, best first
    assert digest.groups[-1].similar and digest.rules == ("robot",)
    assert all(i.similar_to == liked and i.rules == () for i in digest.similar)
    assert len(digest.omitted) == len(matched) - 1 - 5

    email = render_digest(digest)
    assert "Similar to what you like" in email.text and "Similar to what you like" in email.html
    assert "like \u201cSchrödinger bridges for robots\u201d" in " ".join(email.text.split())
    assert "1 paper close to ones you marked 👎 was left out." in email.text
    assert email.subject.startswith("7 new papers: robot, similar to what you like")
    assert "5 new papers matched your rules, and 2 more are like ones you liked" in " ".join(
        email.text.split()
    )
    posts = build_posts(digest)
    shown = json.dumps([post.to_dict() for post in posts], ensure_ascii=False)
    assert "Similar to what you like" in shown and "Schrödinger" in shown
    assert "marked 👎 was left out" in shown


def test_similar_papers_only_if_still_owed_and_not_matched(
    full_feed_papers: tuple[Paper, ...],
) -> None:
    s = sub("robot", similar_max=5)
    everything = digest_for(s, full_feed_papers)
    assert everything is not None
    matched = {item.paper.id for item in everything.items}
    unmatched = [p for p in full_feed_papers if p.id not in matched]
    sent, fresh = unmatched[0], unmatched[1]
    similar = (
        Closeness(next(iter(matched)), 0.9, "k", "t"),  # matched: it stays under its rule
        Closeness(sent.id, 0.8, "k", "t"),
        Closeness(fresh.id, 0.7, "k", "t"),
        Closeness("2411.99999", 0.6, "k", "t"),  # not among the papers
    )
    digest = digest_for(s, full_feed_papers, Ranking(similar=similar))
    assert digest is not None
    assert [i.paper.id for i in digest.similar] == [sent.id, fresh.id]
    # A day already sent adds no runners-up: only papers announced after what was sent.
    again = digest_for(s, full_feed_papers, Ranking(similar=similar), {sent.id: sent.version})
    assert again is not None and again.similar == ()
    # similar_max = 0: nothing added; no rule matched either: no digest.
    none = sub("zzzznotaword", similar_max=0)
    assert digest_for(none, full_feed_papers, Ranking(similar=similar)) is None
    # Only similar papers: a digest of them alone.
    only = digest_for(sub("zzzznotaword"), full_feed_papers, Ranking(similar=similar[2:]))
    assert only is not None and [i.paper.id for i in only.items] == [fresh.id]
    email = render_digest(only)
    assert "1 new paper like ones you liked" in " ".join(email.text.split())
    assert email.subject.startswith("1 new paper: similar to what you like")


def test_without_a_ranking_nothing_changes(full_feed_papers: tuple[Paper, ...]) -> None:
    s = sub("robot", max_papers=5)
    before = digest_for(s, full_feed_papers)
    empty = digest_for(s, full_feed_papers, Ranking())
    assert before is not None and empty is not None
    assert [i.paper.id for i in before.items] == [i.paper.id for i in empty.items]
    assert before.digest_id == empty.digest_id
    assert "Similar" not in render_digest(before).text


def test_a_ranking_note_reaches_the_reader(full_feed_papers: tuple[Paper, ...]) -> None:
    note = "Ranked without embeddings today: the embeddings endpoint did not answer."
    digest = digest_for(sub("robot"), full_feed_papers, Ranking(note=note))
    assert digest is not None
    assert note in render_digest(digest).text
