"""When a subscriber's digests are due: daily or weekly, at a local time, in a time zone.  [pure]

A *slot* is one due time of a schedule, named by its local date (`daily:2026-11-23`,
`weekly:2026-11-23`): the outbox is unique per subscriber and slot, so a slot's digest is
queued once however many processes build it. Local times go through `zoneinfo`: on a
spring-forward day a time that does not exist (02:30 in New York on 8 March 2026) is taken
with the offset before the change (it comes an hour later on the wall clock, 03:30); on a
fall-back day a time that happens twice is taken the first time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MAX_TIMEZONE = 64  # the longest IANA name has 32 characters
TIME_RE = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


def parse_time(text: str) -> time:
    """'08:00' -> time(8, 0); a ValueError names the expected form."""
    match = TIME_RE.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a time of day; write HH:MM, e.g. 08:00 or 17:30")
    return time(int(match.group(1)), int(match.group(2)))


def parse_weekday(text: str) -> int:
    """'monday' or 'mon' (any case) -> 0."""
    key = text.strip().lower()
    for index, name in enumerate(WEEKDAYS):
        if key in (name, name[:3]):
            return index
    raise ValueError(f"{text!r} is not a day of the week; write monday ... sunday")


def check_timezone(name: str) -> str:
    """An IANA time zone name, or a ValueError that suggests the right spelling. Never
    another error: a name too long for a file name, a path, a folder ("America") or a NUL
    is an unknown time zone too."""
    shown = name if len(name) <= 40 else f"{name[:40]}…"
    unknown = f"unknown time zone {shown!r}"
    if len(name) > MAX_TIMEZONE or not name.isprintable():
        raise ValueError(f"{unknown} (an IANA name such as Europe/Berlin)")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        near = sorted(z for z in available_timezones() if z.lower() == name.lower())
        hint = f"; did you mean {near[0]!r}?" if near else " (an IANA name such as Europe/Berlin)"
        raise ValueError(f"{unknown}{hint}") from None
    return name


@dataclass(frozen=True, slots=True)
class Schedule:
    """When digests are due: every day, or one day a week, at a local time."""

    every: Literal["daily", "weekly"] = "daily"
    at: time = time(8, 0)
    timezone: str = "UTC"
    weekday: int = 0  # weekly only: 0 = Monday

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def describe(self) -> str:
        """'daily at 08:00 (Europe/Berlin)', 'weekly on Monday at 08:00 (UTC)'."""
        when = "daily" if self.every == "daily" else f"weekly on {WEEKDAYS[self.weekday].title()}"
        return f"{when} at {self.at:%H:%M} ({self.timezone})"

    @property
    def days(self) -> int:
        """How many days one period spans."""
        return 1 if self.every == "daily" else 7


@dataclass(frozen=True, slots=True)
class Slot:
    """One due time of a schedule."""

    key: str  # "daily:2026-11-23": unique per subscriber and channel in the outbox
    at: datetime  # when, in UTC
    local: datetime  # when, on the subscriber's clock


def slot_on(schedule: Schedule, day: date) -> Slot:
    """The slot on local date `day` (which must be a due day of the schedule)."""
    local = datetime.combine(day, schedule.at, tzinfo=schedule.zone)
    # Round-trip through UTC: a time in a spring-forward gap becomes the real wall time.
    at = local.astimezone(UTC)
    return Slot(f"{schedule.every}:{day.isoformat()}", at, at.astimezone(schedule.zone))


def _due(schedule: Schedule, day: date) -> bool:
    return schedule.every == "daily" or day.weekday() == schedule.weekday


def latest_slot(schedule: Schedule, now: datetime) -> Slot:
    """The last slot at or before `now`."""
    day = now.astimezone(schedule.zone).date() + timedelta(days=1)
    while True:
        if _due(schedule, day):
            slot = slot_on(schedule, day)
            if slot.at <= now:
                return slot
        day -= timedelta(days=1)


def next_slot(schedule: Schedule, now: datetime) -> Slot:
    """The first slot after `now`."""
    day = now.astimezone(schedule.zone).date() - timedelta(days=1)
    while True:
        if _due(schedule, day):
            slot = slot_on(schedule, day)
            if slot.at > now:
                return slot
        day += timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Defaults:
    """The schedule of subscribers who did not choose their own (the config's [digest])."""

    schedule: Schedule = field(default_factory=Schedule)
    notify_empty: bool = False

    def resolve(
        self,
        every: str | None = None,
        day: str | None = None,
        at: str | None = None,
        timezone: str | None = None,
    ) -> Schedule:
        """A subscriber's schedule: their own settings where given, the defaults elsewhere."""
        base = self.schedule
        return Schedule(
            every="weekly" if (every or base.every) == "weekly" else "daily",
            at=parse_time(at) if at else base.at,
            timezone=timezone or base.timezone,
            weekday=parse_weekday(day) if day else base.weekday,
        )
