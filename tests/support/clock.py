"""Clocks the tests move by hand: nothing here reads the real time or really sleeps."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta


class FakeTime:
    """A monotonic clock whose sleep moves time forward at once and records the delay: the
    `clock` and `sleep` of a `PoliteFetcher` (and a `FeedServer`'s clock, so requests arrive
    by the same time), so spacing and backoff are asserted exactly and no test waits."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


class Clock:
    """A wall clock (aware datetimes) the test sets or moves by hand: `clock()` is now."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)
