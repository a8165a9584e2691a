"""What each rule matched lately: the counts the manage page shows, refreshed by delivery.

Owns when the counts are refreshed (at most once a day per subscriber, as a delivery that
records runs) and over which papers (the last `ACTIVITY_DAYS` announcement days stored),
reusing the delivery's matches when they cover those days. The counting is
`bot.match.digest.count_matches`'; the manage page only reads what is stored. Whatever goes
wrong here is logged and never costs anyone their digest.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import date, datetime, timedelta

from bot.core.errors import PaperbellError
from bot.core.models import Paper, Subscriber
from bot.match.digest import RuleMatches, count_matches, match_rules
from bot.rules import Rule
from bot.store import RuleCount, Store

log = logging.getLogger("bot.pipeline")  # the pipeline's log lines, under one name
# The manage page's "what each rule matched lately": how many days, how many examples.
ACTIVITY_DAYS = 7
ACTIVITY_EXAMPLES = 3


def refresh_rule_counts(
    store: Store,
    parsed: Sequence[tuple[Subscriber, Sequence[Rule]]],
    *,
    now: datetime,
    days: int = ACTIVITY_DAYS,
    shared: tuple[date, Sequence[Paper], RuleMatches] | None = None,
) -> int:
    """Count what each rule matched among the papers of the last `days` announcement days
    stored (up to the latest), for the subscribers not counted yet today (UTC), and store
    it for the manage page, which only reads it. `shared` is a run's (first day, papers,
    matches) of these subscribers' rules: used when it covers those days (or no paper
    stored was announced on the days it leaves out), so that nothing is matched twice.
    Each distinct rule is counted once, and everyone's counts are stored in one
    transaction. Returns how many subscribers were counted; a database error is logged,
    never stops a delivery."""
    try:
        counted = store.rule_counts.times()
        stale = [
            (sub, rules)
            for sub, rules in parsed
            if sub.id is not None
            and not (sub.id in counted and counted[sub.id].date() == now.date())
        ]
        latest = store.papers.latest_announcement() if stale else None
        if latest is None:
            return 0
        first = latest - timedelta(days=days - 1)
        if shared is not None and _covers(store, shared[0], first):
            papers, matches = shared[1], shared[2]
        else:
            papers = store.papers.announced_since(first)
            matches = match_rules((rule for _, rules in stale for rule in rules), papers)
        recent = [p for p in papers if p.announced is not None and first <= p.announced <= latest]
        # Each distinct rule counted once: many subscribers share their rules.
        distinct = {rule.text: rule for _, rules in stale for rule in rules}
        found = count_matches(list(distinct.values()), recent, matches, examples=ACTIVITY_EXAMPLES)
        store.rule_counts.save_many(
            {
                sub.id: [
                    RuleCount(text, found[text][0], len(recent), first, latest, found[text][1], now)
                    for text in dict.fromkeys(rule.text for rule in rules)
                ]
                for sub, rules in stale
                if sub.id is not None
            }
        )
        return len(stale)
    except PaperbellError as exc:
        log.warning("rule counts not refreshed: %s", exc)
        return 0
    except Exception:  # the manage page's figures must never cost anyone their digest
        log.exception("rule counts not refreshed")
        return 0


def _covers(store: Store, shared_first: date, first: date) -> bool:
    """Whether the papers announced since `shared_first` are all those announced since
    `first`: it is no later, or no paper stored was announced in between."""
    return shared_first <= first or not store.papers.per_day(first, shared_first - timedelta(1))
