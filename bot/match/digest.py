"""Who gets which papers: select, dedupe, rank, cap and group one subscriber's digest.

Pure: takes papers, parsed rules, what was already delivered and the clock; returns a
`Digest` (or None when there is nothing to send). Never reads the database or the clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import cast

from bot.core.calendar import ArxivCalendar
from bot.core.models import (
    Digest,
    DigestGroup,
    DigestItem,
    Hit,
    Paper,
    Ranking,
    Subscriber,
    announce_kind,
)
from bot.match.matcher import Hits, Matched, Matcher
from bot.rules import (
    LEAVES,
    And,
    Category,
    Id,
    Leaf,
    Node,
    Not,
    Or,
    PaperText,
    Rule,
    Source,
    Trending,
    Upvotes,
    leaf_text,
)

# Ranking weights. Each distinct term that matched counts once per field it matched in: a
# term in the title counts ten times one in the abstract, a phrase half as much again as a
# word, so a title hit outranks any handful of abstract hits and, within a field, more
# distinct terms outrank fewer. `au:` and `id:` name what the reader asked for by name and
# count like a title hit; `cat:`, `src:`, `upvotes>=` and `hf:top` only narrow and count
# nothing. Each further rule of the
# subscriber's that matched adds a little.
TITLE_WEIGHT = 10.0
ABSTRACT_WEIGHT = 1.0
PHRASE_BONUS = 0.5
FIELD_WEIGHTS = {
    "title": TITLE_WEIGHT,
    "abstract": ABSTRACT_WEIGHT,
    "author": TITLE_WEIGHT,
    "id": TITLE_WEIGHT,
    "category": 0.0,
    "source": 0.0,
    "upvotes": 0.0,
    "trending": 0.0,
}
EXTRA_RULE_BONUS = 0.25

# Rule tree -> paper id -> the hits of that rule on that paper (only papers it matched).
RuleMatches = Mapping[Node, Mapping[str, Hits]]
_NO_MATCHES: Mapping[str, Hits] = {}


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


def is_phrase(term: str) -> bool:
    """Whether a hit's term (a leaf's canonical text) is a phrase: `"a b"`, `ti:"a b"`,
    `multi-agent`."""
    value = term.partition(":")[2] if term[:3] in ("ti:", "abs") else term
    return value.startswith('"') or "-" in value.strip("-")


def score(hits: Iterable[Hit], rules_matched: int) -> float:
    """Title hits above abstract hits, phrases above words, more terms above fewer (see
    FIELD_WEIGHTS); each distinct (field, term) counts once however often it occurs."""
    distinct: dict[tuple[str, str], float] = {}
    for hit in hits:
        key = (hit.field, hit.term.casefold())
        if key in distinct:
            continue
        weight = FIELD_WEIGHTS.get(hit.field, 0.0)
        if hit.field in ("title", "abstract") and is_phrase(hit.term):
            weight *= 1 + PHRASE_BONUS
        distinct[key] = weight
    return sum(distinct.values()) + EXTRA_RULE_BONUS * max(0, rules_matched - 1)


def match_rules(
    rules: Iterable[Rule], papers: Sequence[Paper], *, texts: Mapping[str, PaperText] | None = None
) -> RuleMatches:
    """Every rule against every paper through one `Matcher` (each distinct rule tree once,
    each paper analyzed once): rule tree -> paper id -> hits, for the papers it matched.

    Which papers each rule matched is known at once; a match's hits are put together when
    they are first asked for (`bot.match.matched`), so that only the papers a digest ranks
    and shows cost any."""
    distinct = {rule.node: rule for rule in rules}
    matcher = Matcher(distinct.items())
    if len({paper.id for paper in papers}) < len(papers):  # a paper id twice: the last wins
        found = matcher.match(papers, texts=texts)
        return {
            node: {paper.id: hits for paper, hits in matched}
            for node in distinct
            if (matched := found.get(node))
        }
    return cast(RuleMatches, matcher.match(papers, texts=texts, hits=False))


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
    matches: RuleMatches | None = None,
) -> Selection:
    """Every pending paper that at least one of the subscriber's rules matches, ranked.

    `matches` is `match_rules` over (at least) these rules and papers, shared by every
    subscriber of a run; without it the rules are matched here."""
    rules = distinct_rules(rules)
    if matches is None:
        matches = match_rules(rules, papers)
    # Paper id -> the rules that matched it, in order, each with its matches.
    found: dict[str, list[tuple[Rule, Mapping[str, Hits]]]] = {}
    for rule in rules:
        matched = matches.get(rule.node, _NO_MATCHES)
        for paper_id in matched:
            entry = found.get(paper_id)
            if entry is None:
                found[paper_id] = [(rule, matched)]
            else:
                entry.append((rule, matched))
    items: list[DigestItem] = []
    rule_of: dict[str, str] = {}
    for paper in _matched_papers(papers, found, matches):
        entry = found[paper.id]
        if not is_pending(subscriber, paper, delivered, since=since):
            continue
        # Only the papers still owed cost hits (a match's hits are made when asked for).
        hits = [hit for _, matched in entry for hit in matched[paper.id]]
        items.append(digest_item(paper, [rule.text for rule, _ in entry], hits))
        rule_of[paper.id] = entry[0][0].text
    items.sort(key=_rank_key)
    return Selection(items=tuple(items), rule_of=rule_of)


def _matched_papers(
    papers: Sequence[Paper], found: Mapping[str, object], matches: RuleMatches
) -> Sequence[Paper]:
    """The papers whose id is in `found`, in the order of `papers`: by their positions when
    `matches` were made over these very papers (a run: one subscriber's few papers, not a
    pass over the day's), else by a pass over `papers`."""
    if isinstance(matches, Matched) and matches.papers is papers:
        return [papers[i] for i in sorted(map(matches.position, found))]
    return [paper for paper in papers if paper.id in found]


def digest_item(paper: Paper, rules: Sequence[str], hits: Iterable[Hit]) -> DigestItem:
    """A matched paper with the rules it matched, its hits (each once, by field and
    position) and its score."""
    hits = list(hits)
    return DigestItem(
        paper=paper,
        rules=tuple(rules),
        hits=tuple(sorted(set(hits), key=lambda h: (h.field, h.start, h.end, h.term))),
        score=score(hits, len(rules)),
    )


def _rank_key(item: DigestItem) -> tuple[float, int, int, str]:
    """Best score first; then the newer announcement; then more Hugging Face upvotes (a
    `hf:top10` digest comes in the day's order)."""
    announced = item.paper.announced.toordinal() if item.paper.announced else 0
    return (-item.score, -announced, -(item.paper.upvotes or 0), item.paper.id)


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
    matches: RuleMatches | None = None,
    ranking: Ranking | None = None,
) -> Digest | None:
    """The subscriber's digest of pending matching papers, or None if nothing matched.

    The best `max_papers` are sent, grouped under the first of the subscriber's rules each
    matched (groups in the order of the rules); the rest are listed in `omitted`. With a
    `ranking` (the subscriber has liked or disliked papers), "best" is the ranking's order,
    the papers it pushes out by dislikes are left out (`disliked`), and up to `similar_max`
    pending papers no rule matched but close to liked ones come last, in a group of their
    own."""
    selection = select(subscriber, rules, papers, delivered=delivered, since=since, matches=matches)
    items = list(selection.items)
    disliked: tuple[Paper, ...] = ()
    similar: list[DigestItem] = []
    if ranking is not None:
        disliked = tuple(i.paper for i in items if i.paper.id in ranking.dropped)
        items = [i for i in items if i.paper.id not in ranking.dropped]
        position = {item.paper.id: n for n, item in enumerate(items)}  # the rules' order
        scores = ranking.scores
        items.sort(key=lambda i: (-scores.get(i.paper.id, float("-inf")), position[i.paper.id]))
        items = [replace(item, rank=n) for n, item in enumerate(items)]
        similar = similar_items(subscriber, ranking, papers, delivered, since=since, taken=position)
    if not items and not similar:
        return None
    kept = items[: subscriber.max_papers]  # the similar papers come on top (similar_max)
    omitted = tuple(item.paper for item in items[subscriber.max_papers :])
    groups: dict[str, list[DigestItem]] = {}  # in the order of the rules (items are ranked)
    for rule in distinct_rules(rules):
        groups[rule.text] = []
    for item in kept:
        groups[selection.rule_of[item.paper.id]].append(item)
    found = [DigestGroup(rule=r, items=tuple(i)) for r, i in groups.items() if i]
    if similar:
        found.append(DigestGroup(rule="", items=tuple(similar), similar=True))
    sent = [item.paper for group in found for item in group.items]
    announced = sorted({p.announced for p in sent if p.announced is not None}, reverse=True)
    return Digest(
        subscriber=subscriber,
        digest_id=digest_id(subscriber, channel, [*sent, *omitted, *disliked]),
        created=now,
        groups=tuple(found),
        omitted=omitted,
        announced=tuple(announced),
        channel=channel,
        disliked=disliked,
        ranking_note=ranking.note if ranking is not None else None,
        ranked=ranking is not None,
    )


def last_sent_day(papers: Iterable[Paper], sent: Container[str]) -> date | None:
    """The latest announcement day of the papers (among `papers`) already `sent`: similar
    papers are only taken from days after it."""
    days = [p.announced for p in papers if p.id in sent and p.announced is not None]
    return max(days, default=None)


def similar_items(
    subscriber: Subscriber,
    ranking: Ranking,
    papers: Sequence[Paper],
    delivered: Mapping[str, int],
    *,
    since: date | None,
    taken: Mapping[str, object],
) -> list[DigestItem]:
    """The ranking's similar papers that are still owed to the subscriber (pending, in their
    categories, not matched by a rule), best first, at most `similar_max`: only papers
    announced after every paper they were sent already, so that a digest adds the best of
    its own days and the next digest does not add the runners-up of days already sent."""
    if subscriber.similar_max <= 0 or not ranking.similar:
        return []
    by_id = {paper.id: paper for paper in papers}
    last_sent = last_sent_day(papers, delivered)
    found: list[DigestItem] = []
    for close in ranking.similar:
        paper = by_id.get(close.paper_id)
        if paper is None or paper.id in taken or paper.id in ranking.dropped:
            continue
        if last_sent is not None and (paper.announced is None or paper.announced <= last_sent):
            continue
        if not is_pending(subscriber, paper, delivered, since=since):
            continue
        found.append(
            DigestItem(paper=paper, rules=(), hits=(), score=0.0, similar_to=close.closest_title)
        )
        if len(found) >= subscriber.similar_max:
            break
    return found


def note_digest(
    subscriber: Subscriber, note: str, *, period: str, now: datetime, channel: str = "email"
) -> Digest:
    """A digest with no papers that says why (for subscribers with `notify_empty`)."""
    # The email's key is unchanged from before there were other channels.
    kind = "" if channel == "email" else f"{channel}\n"
    key = hashlib.sha256(f"{subscriber.name}\nnote\n{kind}{period}\n".encode()).hexdigest()[:32]
    return Digest(
        subscriber=subscriber,
        digest_id=f"paperbell.{key}",
        created=now,
        groups=(),
        note=note,
        channel=channel,
    )


def empty_note(
    calendar: ArxivCalendar,
    *,
    feed_day: date,
    days: int,
    papers: int,
    late: bool = False,
    deadline: str = "",
    failing: Sequence[tuple[str, datetime]] = (),
) -> str:
    """Why a digest holds no papers: no announcement (weekend, holiday), a late listing, or
    nothing matched among the period's papers; and the sources that fail (`failing`: name,
    since when), whose papers may be missing. `feed_day` is the last day the digest covers,
    `days` how many days it spans, `papers` how many papers they brought."""
    day = calendar.day(feed_day)
    if days == 1 and not day.announces:
        return f"No arXiv announcement for {day.describe()}."
    if late:
        text = (
            f"arXiv's listing for {day.describe()} is late; it had not come by {deadline} "
            "US Eastern, and its papers will come in your next digest."
        )
    else:
        among = "papers announced this week" if days > 1 else f"papers of {day.describe()}"
        text = f"Nothing matched your rules among the {papers:,} {among}."
    for name, since in failing:
        text += (
            f" paperbell could not read the source {name} since "
            f"{since.astimezone(UTC):%a %d %b %H:%M} UTC; its papers will come once it can."
        )
    return text


def count_matches(
    rules: Sequence[Rule], papers: Sequence[Paper], matches: RuleMatches, *, examples: int
) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Rule text -> how many of `papers` the rule matched, and the ids of its best-ranked
    `examples` (ranked as in a digest). `matches` is `match_rules` over (at least) these rules
    and papers: nothing is matched here."""
    out: dict[str, tuple[int, tuple[str, ...]]] = {}
    by_id = {paper.id: paper for paper in papers}
    for rule in rules:
        found = matches.get(rule.node, _NO_MATCHES)
        if len(by_id) == len(papers):  # each rule's matches, not a pass over the papers
            among = [by_id[paper_id] for paper_id in found if paper_id in by_id]
        else:  # a paper id twice: counted as often as it comes
            among = [paper for paper in papers if paper.id in found]
        items = [digest_item(paper, [rule.text], found[paper.id]) for paper in among]
        items.sort(key=_rank_key)
        out[rule.text] = (len(items), tuple(item.paper.id for item in items[:examples]))
    return out


@dataclass(frozen=True, slots=True)
class Trial:
    """What one rule matches among some papers: `paperbell try`, before subscribing."""

    rule: Rule
    items: tuple[DigestItem, ...]  # ranked as a digest ranks them
    days: tuple[tuple[date | None, int, int], ...]  # (day, matched, papers), newest first
    papers: int  # how many papers were tried


def try_rule(rule: Rule, papers: Sequence[Paper]) -> Trial:
    """Match one rule against papers: the matches ranked as in a digest, and the count per
    announcement day (days without a match included, so a quiet rule shows as one)."""
    found = match_rules([rule], papers).get(rule.node, _NO_MATCHES)
    items = [
        digest_item(paper, [rule.text], found[paper.id]) for paper in papers if paper.id in found
    ]
    items.sort(key=_rank_key)
    per_day: dict[date | None, list[int]] = {}
    for paper in papers:
        counts = per_day.setdefault(paper.announced, [0, 0])
        counts[1] += 1
        counts[0] += paper.id in found
    days = sorted(per_day.items(), key=lambda kv: kv[0].toordinal() if kv[0] else 0, reverse=True)
    return Trial(
        rule=rule,
        items=tuple(items),
        days=tuple((day, matched, total) for day, (matched, total) in days),
        papers=len(papers),
    )


def absent_facts(rule: Rule, papers: Sequence[Paper]) -> list[str]:
    """The parts of `rule` that ask for what none of `papers` has, one line each: a source
    (`src:`), Hugging Face's facts (`upvotes`, `hf:top`), a category, an id. Such a part
    matches none of them, whatever their words: `try` says so rather than show a silent 0."""
    if not papers:
        return []
    lines = []
    for leaf in dict.fromkeys(_leaves(rule.node)):
        if why := _absent(leaf, papers):
            lines.append(f"{leaf_text(leaf)} matches nothing here: {why}")
    return lines


def _leaves(node: Node) -> list[Leaf]:
    if isinstance(node, LEAVES):
        return [node]
    if isinstance(node, Not):
        return _leaves(node.node)
    assert isinstance(node, And | Or)
    return [leaf for child in node.nodes for leaf in _leaves(child)]


def _absent(leaf: Leaf, papers: Sequence[Paper]) -> str | None:
    """Why no paper of `papers` can match `leaf`; None when some paper has what it asks."""
    if isinstance(leaf, Source):
        names = {name.lower() for p in papers for name in (*p.sources, p.source) if name}
        if leaf.value in names:
            return None
        came = ", ".join(sorted(names)) or "no source named"
        return (
            f"no paper came from a source named or of kind {leaf.value!r} (they came from {came})"
        )
    if isinstance(leaf, Upvotes | Trending):
        if any((p.upvotes if isinstance(leaf, Upvotes) else p.hf_rank) is not None for p in papers):
            return None
        return "no paper is on Hugging Face Daily Papers (a huggingface source brings them)"
    if isinstance(leaf, Category):
        wanted = leaf.value.casefold()
        for paper in papers:
            for category in paper.categories:
                folded = category.casefold()
                if wanted in (folded, folded.partition(".")[0]):
                    return None
        return f"no paper is listed in {leaf.value}"
    if isinstance(leaf, Id):
        return None if any(p.id == leaf.value for p in papers) else "no paper has this id"
    return None  # words, phrases, authors: a rule's own business
