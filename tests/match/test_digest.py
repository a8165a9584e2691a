"""Digest selection on real papers: dedupe, updates, ranking, cap and grouping."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime

from bot.core.models import Hit, Paper, Subscriber
from bot.match.digest import build_digest, digest_id, is_pending, is_phrase, match_rules, score
from bot.rules import parse_rule

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)


def sub(*rules: str, **kw: object) -> Subscriber:
    return Subscriber(name="ada", email="ada@example.org", rules=rules, id=1, **kw)  # type: ignore[arg-type]


def digest_for(subscriber: Subscriber, papers: tuple[Paper, ...], delivered=None):  # type: ignore[no-untyped-def]
    rules = [parse_rule(r) for r in subscriber.rules]
    return build_digest(subscriber, rules, papers, delivered=delivered or {}, now=NOW)


def test_a_paper_matched_by_several_rules_appears_once_with_every_rule(
    full_feed_papers: tuple[Paper, ...],
) -> None:
    s = sub('"language model"', "reasoning", max_papers=1000)
    d = digest_for(s, full_feed_papers)
    assert d is not None
    ids = [i.paper.id for i in d.items]
    assert len(ids) == len(set(ids))
    both = [i for i in d.items if len(i.rules) == 2]
    assert both, "some paper mentions both"
    assert all(i.rules == ('"language model"', "reasoning") for i in both)
    # Filed under the first rule it matched; groups follow the subscriber's rule order.
    assert d.rules[0] == '"language model"'
    assert all(i in d.groups[0].items for i in both)


def test_ranking_puts_title_hits_first(full_feed_papers: tuple[Paper, ...]) -> None:
    d = digest_for(sub("quantum", max_papers=1000), full_feed_papers)
    assert d is not None
    fields = [{h.field for h in i.hits} for i in d.items]
    first_abstract_only = next(n for n, f in enumerate(fields) if "title" not in f)
    assert all("title" not in f for f in fields[first_abstract_only:])
    assert score([Hit("title", 0, 3, "x")], 1) > score([Hit("abstract", 0, 3, "x")] * 5, 1)


def test_ranking_criteria_in_order() -> None:
    title, abstract = Hit("title", 0, 5, "robot"), Hit("abstract", 0, 5, "robot")
    phrase = Hit("abstract", 0, 9, '"robot arm"')
    # Title above abstract, whatever the number of abstract terms.
    assert score([title], 1) > score([Hit("abstract", i, i + 1, f"w{i}") for i in range(9)], 1)
    # A phrase above a word, in the same field.
    assert score([phrase], 1) > score([abstract], 1)
    assert score([Hit("title", 0, 9, 'ti:"robot arm"')], 1) > score([title], 1)
    # More distinct terms above fewer; repeats of one term count once.
    two = [abstract, Hit("abstract", 10, 15, "grasp")]
    assert score(two, 1) > score([abstract, abstract, Hit("abstract", 20, 25, "robot")], 1)
    # An author or id asked for by name counts like a title hit; a category counts nothing.
    assert score([Hit("author", 2, 2, "au:lecun")], 1) == score([title], 1)
    assert score([Hit("category", 0, 0, "cat:cs.RO"), abstract], 1) == score([abstract], 1)
    # Each further rule matched adds a little, less than any term.
    assert score([abstract], 2) > score([abstract], 1)
    assert score([abstract], 3) < score(two, 1)


def test_is_phrase() -> None:
    assert is_phrase('"robot arm"') and is_phrase('ti:"robot arm"') and is_phrase("multi-agent")
    assert is_phrase('abs:"a b"')
    assert not is_phrase("robot") and not is_phrase("ti:robot") and not is_phrase("transform*")


def test_shared_matches_give_the_same_digest(full_feed_papers: tuple[Paper, ...]) -> None:
    """The pipeline matches every subscriber's rules at once; a digest must not change."""
    ada = sub('"language model"', "reasoning -survey", max_papers=1000)
    grace = Subscriber(name="grace", email="g@example.org", rules=("qubit", "au:zhang"), id=2)
    rules = {s.name: [parse_rule(r) for r in s.rules] for s in (ada, grace)}
    shared = match_rules([r for rs in rules.values() for r in rs], full_feed_papers)
    for s in (ada, grace):
        alone = build_digest(s, rules[s.name], full_feed_papers, delivered={}, now=NOW)
        together = build_digest(
            s, rules[s.name], full_feed_papers, delivered={}, now=NOW, matches=shared
        )
        assert alone == together and alone is not None


def test_cap_keeps_the_best_and_counts_the_rest(full_feed_papers: tuple[Paper, ...]) -> None:
    full = digest_for(sub("quantum", max_papers=1000), full_feed_papers)
    capped = digest_for(sub("quantum", max_papers=5), full_feed_papers)
    assert full is not None and capped is not None
    assert capped.count == 5
    assert [i.paper.id for i in capped.items] == [i.paper.id for i in full.items[:5]]
    assert len(capped.omitted) == full.count - 5


def test_announce_types_and_updates(full_feed_papers: tuple[Paper, ...]) -> None:
    replaced = next(p for p in full_feed_papers if p.announce_type == "replace")
    new = next(p for p in full_feed_papers if p.announce_type == "new")
    default, updates = sub("x"), sub("x", include=frozenset({"new", "cross", "replace"}))
    assert not is_pending(default, replaced, {})
    assert is_pending(updates, replaced, {})
    assert is_pending(default, new, {}) and not is_pending(default, new, {new.id: 1})
    v2 = replace(new, version=2, announce_type="replace")
    assert not is_pending(default, v2, {new.id: 1})  # the v1 reader is not sent v2 ...
    assert is_pending(updates, v2, {new.id: 1})  # ... unless they asked for updates
    assert not is_pending(updates, v2, {new.id: 2})


def test_subscriber_categories_restrict(full_feed_papers: tuple[Paper, ...]) -> None:
    d = digest_for(sub("learning", categories=("cs.RO",), max_papers=1000), full_feed_papers)
    assert d is not None
    assert all("cs.RO" in i.paper.categories for i in d.items)


def test_nothing_pending_gives_no_digest(full_feed_papers: tuple[Paper, ...]) -> None:
    d = digest_for(sub('"language model"', max_papers=1000), full_feed_papers)
    assert d is not None
    delivered = {i.paper.id: i.paper.version for i in d.items}
    assert digest_for(sub('"language model"'), full_feed_papers, delivered) is None


def test_digest_id_is_stable() -> None:
    p = Paper("2411.00001", 1, "t", "a", (), ("cs.LG",))
    q = Paper("2411.00002", 1, "t", "a", (), ("cs.LG",))
    s = sub("x")
    assert digest_id(s, "email", [p, q]) == digest_id(s, "email", [q, p])
    assert digest_id(s, "email", [p]) != digest_id(s, "email", [p, q])
    assert digest_id(s, "email", [p]) != digest_id(s, "slack", [p])


def test_rules_with_the_same_meaning_do_not_double_a_paper(
    full_feed_papers: tuple[Paper, ...],
) -> None:
    d = digest_for(sub("robot", "robots", "robot ", max_papers=3), full_feed_papers)
    assert d is not None
    assert d.count == 3 and len(d.groups) == 1
    assert len({i.paper.id for i in d.items}) == 3


def test_a_new_version_before_the_digest_does_not_hide_the_paper(
    full_feed_papers: tuple[Paper, ...],
) -> None:
    v1 = next(p for p in full_feed_papers if p.announce_type == "new")
    day = v1.announced
    assert day is not None
    v2 = replace(v1, version=2, announce_type="replace", first_type="new", first_announced=day)
    default = sub("x")
    assert is_pending(default, v2, {}, since=day)  # never received: it is new to them
    old = replace(v2, first_announced=date(2020, 1, 1))
    assert not is_pending(default, old, {}, since=day)  # an update of an old paper
    assert is_pending(sub("x", include=frozenset({"new", "replace"})), old, {}, since=day)


def test_subscriber_categories_ignore_case(full_feed_papers: tuple[Paper, ...]) -> None:
    upper = digest_for(sub("learning", categories=("cs.RO",), max_papers=1000), full_feed_papers)
    lower = digest_for(sub("learning", categories=("CS.ro",), max_papers=1000), full_feed_papers)
    assert upper is not None and lower is not None and upper.count == lower.count > 0
