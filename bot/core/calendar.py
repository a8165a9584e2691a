"""arXiv's announcement calendar, and when to poll a source that follows it.  [pure]

arXiv announces at 20:00 US Eastern, Sunday to Thursday, and rebuilds its listing feeds at
about midnight Eastern: a *feed day* is the Eastern date of a feed, Monday to Friday,
except the published holidays (kept as data in `bot/data/arxiv_holidays.toml`, extended
from the config). With this the bot tells "no announcement today" (weekend, holiday) from
"something is wrong" (the listing is late), and knows when polling is worth it.

Dates and times are passed in: nothing here reads the clock or does I/O (the holiday file
is read once from the package by `ArxivCalendar.default`).
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from importlib.resources import files
from zoneinfo import ZoneInfo

ARXIV_TZ = ZoneInfo("America/New_York")
WEEKEND = frozenset({5, 6})  # Saturday, Sunday: no feed day


@dataclass(frozen=True, slots=True)
class Day:
    """One Eastern date as arXiv sees it: an announcement, or why not."""

    day: date
    announces: bool
    reason: str | None = None  # "weekend", or the holiday's name

    def describe(self) -> str:
        """'Thursday 26 November 2026 (Thanksgiving, an arXiv holiday)' and the like."""
        text = f"{self.day:%A} {self.day.day} {self.day:%B %Y}"
        if self.reason == "weekend":
            return f"{text} (weekend: arXiv announces nothing)"
        if self.reason:
            return f"{text} ({self.reason}, an arXiv holiday)"
        return text


@functools.cache
def _bundled_holidays() -> dict[date, str]:
    text = files("bot").joinpath("data/arxiv_holidays.toml").read_text(encoding="utf-8")
    holidays = {}
    for year in tomllib.loads(text).values():
        for day, name in year.items():
            holidays[date.fromisoformat(day)] = str(name)
    return holidays


class ArxivCalendar:
    """Feed days: weekdays minus holidays (Eastern dates)."""

    def __init__(self, holidays: Mapping[date, str]) -> None:
        self.holidays = dict(holidays)
        self.years = frozenset(d.year for d in self.holidays)

    @classmethod
    def default(cls, extra: Mapping[date, str] | None = None) -> ArxivCalendar:
        """The bundled holiday list, plus the config's."""
        return cls({**_bundled_holidays(), **(extra or {})})

    def day(self, day: date) -> Day:
        """Whether `day` has a listing, and if not, why."""
        if day.weekday() in WEEKEND:
            return Day(day, False, "weekend")
        name = self.holidays.get(day)
        if name is not None:
            return Day(day, False, name)
        return Day(day, True)

    def knows(self, year: int) -> bool:
        """Whether the holiday list covers `year` (else a holiday looks like a late listing)."""
        return year in self.years

    def last_feed_day(self, on_or_before: date) -> date:
        """The latest feed day not after `on_or_before`."""
        day = on_or_before
        while not self.day(day).announces:
            day -= timedelta(days=1)
        return day


SUBMISSION_DEADLINE = time(14, 0)  # Eastern: later submissions wait for the next day's


def announcement_day(calendar: ArxivCalendar, submitted: datetime) -> date:
    """The feed day a submission made at `submitted` is listed on, by arXiv's schedule: a
    weekday submission before 14:00 Eastern is announced at 20:00 and listed in the next
    feed day's listing; a later one, a day after. An estimate (arXiv may hold a paper
    back); a daily listing that has the paper knows better and corrects it."""
    local = submitted.astimezone(ARXIV_TZ)
    closes = local.date()
    if closes.weekday() in WEEKEND or local.time() >= SUBMISSION_DEADLINE:
        closes = _next_weekday(closes)
    day = closes + timedelta(days=1)
    while not calendar.day(day).announces:
        day += timedelta(days=1)
    return day


def submission_window(calendar: ArxivCalendar, day: date) -> tuple[datetime, datetime]:
    """When the submissions listed on feed day `day` were made, by arXiv's schedule (the
    inverse of `announcement_day`): from 14:00 Eastern on a weekday to 14:00 Eastern on the
    last weekday before `day`, start included, end excluded. A listing after a weekend or
    holiday spans the days between."""
    last = _weekday_before(day)
    first = last
    while True:
        earlier = _weekday_before(first)
        following = earlier + timedelta(days=1)
        while not calendar.day(following).announces:
            following += timedelta(days=1)
        if following != day:
            break
        first = earlier
    return (
        eastern(_weekday_before(first), SUBMISSION_DEADLINE),
        eastern(last, SUBMISSION_DEADLINE),
    )


def _weekday_before(day: date) -> date:
    day -= timedelta(days=1)
    while day.weekday() in WEEKEND:
        day -= timedelta(days=1)
    return day


def eastern_date(at: datetime) -> date:
    """The Eastern date at an instant: the feed day a listing fetched then belongs to."""
    return at.astimezone(ARXIV_TZ).date()


def eastern(day: date, clock: time) -> datetime:
    """An Eastern wall-clock time on `day`, as an aware datetime."""
    return datetime.combine(day, clock, tzinfo=ARXIV_TZ)


def _weekday_on_or_before(day: date) -> date:
    while day.weekday() in WEEKEND:
        day -= timedelta(days=1)
    return day


def _next_weekday(day: date) -> date:
    day += timedelta(days=1)
    while day.weekday() in WEEKEND:
        day += timedelta(days=1)
    return day


@dataclass(frozen=True, slots=True)
class PollPolicy:
    """When a calendar source is polled: from `start` (Eastern) on each weekday, every
    `retry` until a poll brings a new batch; after `deadline` the listing is late, and
    polled every `late_retry` until the day ends. A holiday is polled too, every
    `late_retry` until the deadline, to confirm it: if the list is wrong, nothing is lost."""

    start: time = time(0, 5)
    # A day's listing cannot appear before the announcement, at 20:00 Eastern the evening
    # before: a new batch from then on belongs to it (the rebuild may come before `start`).
    announcement: time = time(20, 0)
    deadline: time = time(6, 0)
    retry: timedelta = timedelta(minutes=10)
    late_retry: timedelta = timedelta(hours=1)
    interval: timedelta = timedelta(hours=1)  # sources that do not follow arXiv's calendar


def listing_day(policy: PollPolicy, at: datetime) -> date:
    """The Eastern date whose listing is the current one at `at`: today's once its polling
    has started (`policy.start`), yesterday's before."""
    day = eastern_date(at)
    if eastern(day, policy.start) > at:
        day -= timedelta(days=1)
    return day


@dataclass(frozen=True, slots=True)
class PollPlan:
    """When a source is next polled, and what its listing is waiting for."""

    at: datetime
    feed_day: date | None  # the weekday whose listing the source should hold by now
    has_it: bool  # whether a poll since that day's listing could appear brought a new batch
    late: bool  # past the deadline, on that day, without its listing
    expected: bool = True  # that day has a listing by arXiv's calendar (not a holiday)
    missed: bool = False  # that day ended without its listing (or before the first poll)


def plan_poll(
    calendar: ArxivCalendar,
    policy: PollPolicy,
    *,
    now: datetime,
    last_poll: datetime | None,
    last_new: datetime | None,
    follows_calendar: bool,
    last_new_day: date | None = None,
) -> PollPlan:
    """The next poll of one source.

    "New" means a batch of ids the source did not give before (`last_new` is when a poll
    last brought one), never the feed's own date: a feed that still holds the previous
    day's batch is "not yet". The feed's date (`last_new_day`, that poll's) only vetoes:
    a new batch dated before the day awaited is an older listing (the first poll of a new
    install, late in the evening), not that day's."""
    if not follows_calendar:
        at = now if last_poll is None else max(now, last_poll + policy.interval)
        return PollPlan(at, None, True, False)
    day = _weekday_on_or_before(listing_day(policy, now))
    expected = calendar.day(day).announces
    start = eastern(day, policy.start)
    following = eastern(_next_weekday(day), policy.start)
    opens = eastern(day - timedelta(days=1), policy.announcement)
    got = last_new is not None and last_new >= opens
    if got and (last_new_day is None or last_new_day >= day):
        return PollPlan(following, day, True, False, expected)
    if last_poll is None or last_poll < start:
        return PollPlan(now, day, False, False, expected)
    if eastern_date(now) > day:  # the day is over: arXiv serves another feed now
        return PollPlan(following, day, False, False, expected, missed=expected)
    deadline = eastern(day, policy.deadline)
    if not expected:  # a holiday: confirm it now and then until the deadline
        at = last_poll + policy.late_retry
        return PollPlan(max(now, at) if at < deadline else following, day, False, False, False)
    late = now >= deadline
    at = max(now, last_poll + (policy.late_retry if late else policy.retry))
    return PollPlan(min(at, following), day, False, late)
