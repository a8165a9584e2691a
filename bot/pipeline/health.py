"""Each source's health: "why no papers today?" answered before anyone asks.

Owns what `paperbell status`, /healthz and /metrics say of a source: its last success and
error (and since when it fails), its newest listing's size against the same weekday's usual
one (`usual_size`), whether the listing is stale (a feed day past the deadline without
it: the poll plan's `late`/`missed`) or short (under a quarter of the usual), and what a
repair from the arXiv API filled in (`bot.pipeline.repair` does the repairs). Reads the
store and the poll plans; decides nothing about polling.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from bot.core.calendar import ArxivCalendar, PollPlan, PollPolicy, plan_poll
from bot.core.plurals import plural
from bot.sources import Source
from bot.store import Store
from bot.store.sources import Listing, SourceState

SHORT_FRACTION = 4  # a listing under a quarter of the usual size is short
MIN_USUAL = 8  # below this usual size, a small listing is chance, not a fault
SAME_WEEKDAY = 8  # the usual size: the median of this many latest same-weekday listings
MIN_SAME_WEEKDAY = 2  # ... when there are at least this many; else
RECENT, MIN_RECENT = 10, 5  # the median of the latest listings of any weekday
# Feed days missed while the daemon was down are asked for this many days back from the
# day awaited (`bot.pipeline.repair.missed_days`): the digest window's default, past which
# their papers would not be sent anyway; so a daemon down for a month asks the API for a
# week, not a month.
CATCH_UP_DAYS = 7


@dataclass(frozen=True, slots=True)
class ListingChecks:
    """How listings are judged and repaired: arXiv's calendar, the poll policy (its
    deadline), and whether and how long a repair from the arXiv API may take."""

    calendar: ArxivCalendar
    policy: PollPolicy = field(default_factory=PollPolicy)
    repair: bool = True
    deadline: float = 120.0  # seconds one repair may take, all its requests together
    deadline_text: str = "06:00"  # the policy's deadline as the config writes it


@dataclass(frozen=True, slots=True)
class Usual:
    """A listing's usual size: the median of earlier listings, and of which."""

    size: int
    basis: str  # "Tuesdays" or "recent days"


def listing_size(listing: Listing) -> int:
    """How many papers a day had: its listing's, or the arXiv API's when a repair found
    more (the API's answer holds the listing's papers too)."""
    return max(listing.items, listing.repaired or 0)


def usual_size(history: Sequence[Listing], weekday: int) -> Usual | None:
    """The usual size of a listing on `weekday` (0 Monday): the median of the latest
    `SAME_WEEKDAY` listings of that weekday when there are `MIN_SAME_WEEKDAY` (Mondays carry
    the weekend's submissions), else of the latest `RECENT` of any day when there are
    `MIN_RECENT`; None: too little history to tell. `history` is newest first; days that
    brought nothing (a stale day's failed repair) do not count."""
    sizes = [(h.day, listing_size(h)) for h in history if listing_size(h) > 0]
    same = [size for day, size in sizes if day.weekday() == weekday][:SAME_WEEKDAY]
    if len(same) >= MIN_SAME_WEEKDAY:
        return Usual(round(statistics.median(same)), f"{_WEEKDAYS[weekday]}s")
    recent = [size for _, size in sizes[:RECENT]]
    if len(recent) >= MIN_RECENT:
        return Usual(round(statistics.median(recent)), "recent days")
    return None


def is_short(size: int, usual: Usual | None) -> bool:
    """Whether a listing of `size` papers is short against `usual`."""
    return usual is not None and usual.size >= MIN_USUAL and size * SHORT_FRACTION < usual.size


_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def source_plans(
    sources: Sequence[Source],
    store: Store,
    calendar: ArxivCalendar,
    policy: PollPolicy,
    *,
    now: datetime,
) -> dict[str, PollPlan]:
    """Each source's next poll, from what the store remembers of its polls."""
    states = {row.name: row for row in store.sources.states()}
    return {
        source.name: plan_of(source, states.get(source.name), calendar, policy, now=now)
        for source in sources
    }


def plan_of(
    source: Source,
    state: SourceState | None,
    calendar: ArxivCalendar,
    policy: PollPolicy,
    *,
    now: datetime,
) -> PollPlan:
    """One source's next poll, from its last poll (`state`; None: never polled)."""
    return plan_poll(
        calendar,
        replace(policy, interval=source.interval) if source.interval else policy,
        now=now,
        last_poll=state.last_poll if state else None,
        last_new=state.last_new if state else None,
        last_new_day=state.last_new_day if state else None,
        follows_calendar=source.follows_arxiv_calendar,
    )


@dataclass(frozen=True, slots=True)
class SourceHealth:
    """One source's health, read at one moment."""

    name: str
    follows_calendar: bool
    state: SourceState | None  # None: never polled
    plan: PollPlan
    listing: Listing | None  # its newest listing (calendar sources)
    usual: Usual | None  # that listing's usual size
    failing: bool  # its last poll failed
    stale: bool  # a feed day passed its deadline without the day's listing
    short: bool  # the newest listing is under a quarter of the usual, and not repaired
    problems: tuple[str, ...]  # what is wrong, a line each
    notes: tuple[str, ...]  # what was done about it (repairs)

    @property
    def healthy(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        """What /healthz says of the source."""
        st, listing = self.state, self.listing
        return {
            "healthy": self.healthy,
            "last_poll": _iso(st.last_poll if st else None),
            "last_result": st.last_result if st else None,
            "last_success": _iso(st.last_success if st else None),
            "last_error": st.last_error if st else None,
            "failing_since": _iso(st.failing_since if st and self.failing else None),
            "stale": self.stale,
            "short": self.short,
            "awaited_day": _iso(self.plan.feed_day) if self.follows_calendar else None,
            "listing": None
            if listing is None
            else {
                "day": listing.day.isoformat(),
                "papers": listing.items,
                "usual": self.usual.size if self.usual else None,
                "usual_of": self.usual.basis if self.usual else None,
                "repaired": listing.repaired,
                "repaired_new": listing.repaired_new,
                "repair_reason": listing.repair_reason,
                "repair_error": listing.repair_error,
            },
            "problems": list(self.problems),
            "notes": list(self.notes),
        }


def _iso(value: date | datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _day(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b}"


def source_health(
    sources: Sequence[Source],
    store: Store,
    checks: ListingChecks,
    *,
    now: datetime,
    plans: Mapping[str, PollPlan] | None = None,
) -> list[SourceHealth]:
    """Every source's health at `now` (in the order given)."""
    states = {s.name: s for s in store.sources.states()}
    newest = store.sources.latest_listings()
    found = []
    for source in sources:
        state = states.get(source.name)
        plan = (plans or {}).get(source.name) or plan_of(
            source, state, checks.calendar, checks.policy, now=now
        )
        listing = newest.get(source.name) if source.follows_arxiv_calendar else None
        earlier = store.sources.listings(source.name, before=listing.day) if listing else []
        found.append(_judge(source, state, plan, listing, earlier, checks))
    return found


def _failed_catch_ups(earlier: Sequence[Listing], newest: date) -> tuple[str, ...]:
    """A line for each feed day of the last `CATCH_UP_DAYS` before the `newest` listing
    that was missed while the daemon was down, and whose repair has failed so far: its
    papers reach no one until a repair or a backfill brings them."""
    return tuple(
        f"missed {_day(e.day)} while down; its repair from the arXiv API failed: "
        f"{e.repair_error} (tried again at the next polls; or `paperbell backfill "
        f"--since {e.day.isoformat()}`)"
        for e in reversed(earlier)
        if e.repair_reason == "missed"
        and e.repair_error
        and listing_size(e) == 0
        and (newest - e.day).days < CATCH_UP_DAYS
    )


def _judge(
    source: Source,
    state: SourceState | None,
    plan: PollPlan,
    listing: Listing | None,
    earlier: Sequence[Listing],
    checks: ListingChecks,
) -> SourceHealth:
    """The source's health, from its state, its newest `listing` and the `earlier` ones."""
    problems: list[str] = []
    notes: list[str] = []
    usual = usual_size(earlier, listing.day.weekday()) if listing is not None else None
    failing = state is not None and state.last_result == "error"
    if failing and state is not None:
        since = state.failing_since or state.last_poll
        when = f" since {since.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if since else ""
        problems.append(f"failing{when}: {state.last_error or 'unknown error'}")
    stale = bool(plan.feed_day and plan.expected and (plan.late or plan.missed))
    if stale and plan.feed_day is not None:
        text = f"stale: no listing for {_day(plan.feed_day)} by {checks.deadline_text} US Eastern"
        if listing is not None and listing.day == plan.feed_day and listing.repaired:
            stale = False  # handled: the day's papers came from the arXiv API
            notes.append(text)
        else:
            problems.append(text)
    short = False
    if listing is not None and listing.items > 0 and is_short(listing.items, usual):
        assert usual is not None
        text = (
            f"short: {plural(listing.items, 'paper')} on {_day(listing.day)}, usually {usual.size} "
            f"({usual.basis})"
        )
        if not listing.repaired or is_short(listing_size(listing), usual):
            short = True
            if listing.repair_error:
                text += f"; the repair from the arXiv API failed: {listing.repair_error}"
            problems.append(text)
        else:
            notes.append(text)
    if listing is not None and listing.repaired:
        notes.append(
            f"filled in {_day(listing.day)} from the arXiv API: "
            f"{plural(listing.repaired, 'paper')}, {listing.repaired_new} of them new to paperbell"
        )
    elif listing is not None and listing.repair_error and not short:
        notes.append(f"repair of {_day(listing.day)} failed: {listing.repair_error}")
    if listing is not None:
        notes += _failed_catch_ups(earlier, listing.day)
    return SourceHealth(
        name=source.name,
        follows_calendar=source.follows_arxiv_calendar,
        state=state,
        plan=plan,
        listing=listing,
        usual=usual,
        failing=failing,
        stale=stale,
        short=short,
        problems=tuple(problems),
        notes=tuple(notes),
    )


def retry_due(listing: Listing | None, checks: ListingChecks, now: datetime) -> bool:
    """Whether a day's listing may be repaired now: never tried, or the last try failed
    at least the policy's late retry ago (a repair that worked is not repeated)."""
    if listing is None or listing.repair_tried is None:
        return True
    if listing.repair_error is None and listing.repaired:
        return False  # done (a repair that found nothing is tried again)
    return now - listing.repair_tried >= max(checks.policy.late_retry, timedelta(minutes=10))
