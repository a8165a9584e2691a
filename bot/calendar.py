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

import tomllib
from collections.abc import Iterator, Mapping
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

    def feed_days(self, start: date, end: date) -> Iterator[date]:
        """The feed days from `start` to `end`, both included."""
        day = start
        while day <= end:
            if self.day(day).announces:
                yield day
            day += timedelta(days=1)

    def last_feed_day(self, on_or_before: date) -> date:
        """The latest feed day not after `on_or_before`."""
        day = on_or_before
        while not self.day(day).announces:
            day -= timedelta(days=1)
        return day

    def next_feed_day(self, after: date) -> date:
        """The first feed day after `after`."""
        day = after + timedelta(days=1)
        while not self.day(day).announces:
            day += timedelta(days=1)
        return day


def eastern_date(at: datetime) -> date:
    """The Eastern date at an instant: the feed day a listing fetched then belongs to."""
    return at.astimezone(ARXIV_TZ).date()


def eastern(day: date, clock: time) -> datetime:
    """An Eastern wall-clock time on `day`, as an aware datetime."""
    return datetime.combine(day, clock, tzinfo=ARXIV_TZ)


@dataclass(frozen=True, slots=True)
class PollPolicy:
    """When a calendar source is polled: from `start` (Eastern) on each feed day, every
    `retry` until a poll brings ids not stored before; after `deadline` the listing is
    late, and polled every `late_retry` until the next feed day."""

    start: time = time(0, 5)
    # A day's listing cannot appear before the announcement, at 20:00 Eastern the evening
    # before: new ids from then on belong to it (the rebuild may come before `start`).
    announcement: time = time(20, 0)
    deadline: time = time(6, 0)
    retry: timedelta = timedelta(minutes=10)
    late_retry: timedelta = timedelta(hours=1)
    interval: timedelta = timedelta(hours=1)  # sources that do not follow arXiv's calendar


@dataclass(frozen=True, slots=True)
class PollPlan:
    """When a source is next polled, and what its listing is waiting for."""

    at: datetime
    feed_day: date | None  # the feed day the source should hold by now (calendar sources)
    has_it: bool  # whether a poll since that day's start brought new ids
    late: bool  # past the deadline without that day's listing


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

    "New" means ids the store did not hold (`last_new` is when a poll last brought some),
    never the feed's own date: a feed that still holds the previous day's batch brings no
    new ids, so it is "not yet". The feed's date (`last_new_day`, that poll's) only vetoes:
    new ids in a feed dated before the day awaited are an older listing (the first poll of
    a new install, late in the evening), not that day's."""
    if not follows_calendar:
        at = now if last_poll is None else max(now, last_poll + policy.interval)
        return PollPlan(at, None, True, False)
    today = eastern_date(now)
    day = calendar.last_feed_day(today)
    if eastern(day, policy.start) > now:  # before today's start: yesterday's batch counts
        day = calendar.last_feed_day(day - timedelta(days=1))
    start = eastern(day, policy.start)
    opens = eastern(day - timedelta(days=1), policy.announcement)
    got = last_new is not None and last_new >= opens
    if got and (last_new_day is None or last_new_day >= day):
        return PollPlan(eastern(calendar.next_feed_day(day), policy.start), day, True, False)
    if last_poll is None or last_poll < start:
        return PollPlan(now, day, False, False)
    late = now >= eastern(day, policy.deadline)
    at = max(now, last_poll + (policy.late_retry if late else policy.retry))
    # A new feed day begins: poll at its start, late or not.
    at = min(at, eastern(calendar.next_feed_day(day), policy.start))
    return PollPlan(at, day, False, late)
