"""Who gets which papers: select, dedupe, rank, cap and group one subscriber's digest.

Pure: takes papers, parsed rules, what was already delivered and the clock; returns a
`Digest` (or None when there is nothing to send). Never reads the database or the clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from bot.models import Digest, DigestGroup, DigestItem, Hit, Paper, Subscriber, announce_kind
from bot.rules import PaperText, Rule, analyze, match

# Ranking weights: a term found in the title counts far more than one in the abstract,
# a phrase more than a single word, and each further rule matched adds a little.
TITLE_WEIGHT = 10.0
ABSTRACT_WEIGHT = 1.0
PHRASE_BONUS = 0.5
EXTRA_RULE_BONUS = 0.25


@dataclass(frozen=True, slots=True)
class Selection:
    """The papers a subscriber would get now, before the cap."""

    items: tuple[DigestItem, ...]
    rule_of: Mapping[str, str]  # paper id -> the rule it is filed under


def is_pending(
    subscriber: Subscriber,
    paper: Paper,
    delivered: Mapping[str, int],
    *,
    since: date | None = None,
) -> bool:
    """Whether this version of the paper is still owed to the subscriber.

    A paper already delivered is never owed again, except a newer version to a subscriber
    who asked for updates (`include` has "replace"). A paper never delivered is owed as what
    it was when first announced (new or cross-list, if that was on or after `since`), even
    if a newer version came out before the digest ran; otherwise as an update."""
    if not subscriber.takes_categories_of(paper):
        return False
    wants_updates = "replace" in subscriber.include
    got = delivered.get(paper.id)
    if got is not None:
        return wants_updates and paper.version > got
    first_kind = announce_kind(paper.first_type or paper.announce_type)
    first_day = paper.first_announced or paper.announced
    fresh = since is None or first_day is None or first_day >= since
    if fresh and first_kind in subscriber.include:
        return True
    return wants_updates and paper.is_update


def score(hits: Sequence[Hit], rules_matched: int) -> float:
    """Title hits above abstract hits, phrases above words, more terms above fewer."""
    weights = {"title": TITLE_WEIGHT, "abstract": ABSTRACT_WEIGHT}
    distinct: dict[tuple[str, str], float] = {}
    for hit in hits:
        weight = weights.get(hit.field, 0.0)
        if weight and (" " in hit.term or hit.term.startswith('"') or "-" in hit.term.strip("-")):
            weight += PHRASE_BONUS
        key = (hit.field, hit.term.lower())
        distinct[key] = max(distinct.get(key, 0.0), weight)
    return sum(distinct.values()) + EXTRA_RULE_BONUS * max(0, rules_matched - 1)


HitsOf = Callable[[Rule, Paper], "tuple[Hit, ...] | None"]


def direct_hits() -> HitsOf:
    """Evaluate a rule on a paper directly, analysing each paper once."""
    texts: dict[str, PaperText] = {}

    def hits_of(rule: Rule, paper: Paper) -> tuple[Hit, ...] | None:
        text = texts.get(paper.id)
        if text is None:
            text = texts[paper.id] = analyze(paper)
        return match(rule, text)

    return hits_of


def distinct_rules(rules: Sequence[Rule]) -> list[Rule]:
    """The rules without repeats (the same meaning twice: `robot`, `robots`); first one kept."""
    seen: dict[object, Rule] = {}
    for rule in rules:
        seen.setdefault(rule.node, rule)
    return list(seen.values())


def select(
    subscriber: Subscriber,
    rules: Sequence[Rule],
    papers: Sequence[Paper],
    *,
    delivered: Mapping[str, int],
    since: date | None = None,
    hits_of: HitsOf | None = None,
) -> Selection:
    """Every pending paper that at least one of the subscriber's rules matches, ranked."""
    hits_of = hits_of or direct_hits()
    rules = distinct_rules(rules)
    items: list[DigestItem] = []
    rule_of: dict[str, str] = {}
    for paper in papers:
        if not is_pending(subscriber, paper, delivered, since=since):
            continue
        matched: list[str] = []
        hits: list[Hit] = []
        for rule in rules:
            found = hits_of(rule, paper)
            if found is not None:
                matched.append(rule.text)
                hits.extend(h for h in found if h not in hits)
        if matched:
            items.append(
                DigestItem(
                    paper=paper,
                    rules=tuple(matched),
                    hits=tuple(sorted(hits, key=lambda h: (h.field, h.start, h.end))),
                    score=score(hits, len(matched)),
                )
            )
            rule_of[paper.id] = matched[0]
    items.sort(key=_rank_key)
    return Selection(items=tuple(items), rule_of=rule_of)


def _rank_key(item: DigestItem) -> tuple[float, int, str]:
    announced = item.paper.announced.toordinal() if item.paper.announced else 0
    return (-item.score, -announced, item.paper.id)


def digest_id(subscriber: Subscriber, channel: str, papers: Sequence[Paper]) -> str:
    """A stable identity for a digest: the same subscriber, channel and papers give the same
    id, so a digest re-sent after a crash carries the same Message-ID."""
    digest = hashlib.sha256(f"{subscriber.name}\n{channel}\n".encode())
    for versioned in sorted(p.versioned_id for p in papers):
        digest.update(versioned.encode() + b"\n")
    return f"paperbell.{digest.hexdigest()[:32]}"


def build_digest(
    subscriber: Subscriber,
    rules: Sequence[Rule],
    papers: Sequence[Paper],
    *,
    delivered: Mapping[str, int],
    now: datetime,
    channel: str = "email",
    since: date | None = None,
    hits_of: HitsOf | None = None,
) -> Digest | None:
    """The subscriber's digest of pending matching papers, or None if nothing matched.

    The best `max_papers` are sent, grouped under the first of the subscriber's rules each
    matched (groups in the order of the rules); the rest are listed in `omitted`."""
    selection = select(subscriber, rules, papers, delivered=delivered, since=since, hits_of=hits_of)
    if not selection.items:
        return None
    kept = selection.items[: subscriber.max_papers]
    omitted = tuple(item.paper for item in selection.items[subscriber.max_papers :])
    groups: dict[str, list[DigestItem]] = {}  # in the order of the rules (items are ranked)
    for rule in distinct_rules(rules):
        groups[rule.text] = []
    for item in kept:
        groups[selection.rule_of[item.paper.id]].append(item)
    sent = [item.paper for item in kept]
    announced = sorted({p.announced for p in sent if p.announced is not None}, reverse=True)
    return Digest(
        subscriber=subscriber,
        digest_id=digest_id(subscriber, channel, [*sent, *omitted]),
        created=now,
        groups=tuple(DigestGroup(rule=r, items=tuple(i)) for r, i in groups.items() if i),
        omitted=omitted,
        announced=tuple(announced),
    )
