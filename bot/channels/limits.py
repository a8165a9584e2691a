"""A relay's sending limits, as the email sender sees them: before each message it asks
`RelayLimiter.acquire`, which either lets it go (after a short wait, if the relay's windows
free a place soon) or says when to try again (the rest of the batch is left queued for then:
not a failure, no attempt counted). A "slow down" answer from the relay (`slow_down`) halves
the rate of every process sending through it for a while: a relay with max_per_second goes
at half of it, one with none at `MODEST_SECONDS` a message; a further slow-down while one
holds halves it again, never below one message every `SLOWEST_SECONDS`. A relay that cannot
be reached (`fail`, told by bot.channels.servers: [[email.servers]]) is skipped as failing
for `FAIL_FOR` while another relay is usable.

The windows and slow-downs live in the database, shared by every process (`Ledger`:
bot.store.relays); this module holds no I/O of its own. With no limits set, a message asks
nothing of the database: the limiter only looks, every `LOOK_EVERY`, whether some process
was told to slow down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from bot.core.errors import StoreError

log = logging.getLogger(__name__)

# A slow-down halves the relay's rate for SLOW_FOR after its answer: half its max_per_second,
# or a message every MODEST_SECONDS with none; never slower than one every SLOWEST_SECONDS.
SLOWEST_SECONDS = 5.0
MODEST_SECONDS = 1.0
SLOW_FOR = timedelta(minutes=10)
FAIL_FOR = timedelta(minutes=5)  # a relay that cannot be reached is skipped this long
# The longest a sender waits for a place before it leaves the rest of its batch queued.
MAX_WAIT = timedelta(seconds=10)
LOOK_EVERY = timedelta(seconds=30)
PAD = timedelta(milliseconds=200)  # how often a limiter with no limits reads a slow-down


@dataclass(frozen=True, slots=True)
class Limits:
    """[email] max_per_second, max_per_hour, max_per_day (None: no limit)."""

    per_second: int | None = None
    per_hour: int | None = None
    per_day: int | None = None

    def windows(self) -> list[tuple[timedelta, int]]:
        """Each window's length and most messages. The second's is padded (`PAD`): a relay
        counts a message when it arrives, a moment after its place was taken, and that
        moment varies."""
        lengths = (timedelta(seconds=1) + PAD, timedelta(hours=1), timedelta(days=1))
        counts = (self.per_second, self.per_hour, self.per_day)
        return [(length, n) for length, n in zip(lengths, counts, strict=True) if n]

    def describe(self) -> str:
        """Such as "20 a second, 1,000 an hour" (empty: none)."""
        counts = (self.per_second, self.per_hour, self.per_day)
        parts = zip(counts, ("a second", "an hour", "a day"), strict=True)
        return ", ".join(f"{n:,} {unit}" for n, unit in parts if n)


class Ledger(Protocol):
    """Where every process's places in a relay's limits are kept (bot.store.relays)."""

    def reserve(
        self, relay: str, *, now: datetime, windows: Sequence[tuple[timedelta, int]]
    ) -> datetime | None: ...

    def slow_down(
        self, relay: str, *, now: datetime, until: datetime, seconds: float, slowest: float
    ) -> float: ...

    def fail(self, relay: str, *, until: datetime | None, why: str | None = None) -> None: ...

    def state(self, relay: str, *, now: datetime) -> SlowState: ...


class SlowState(Protocol):
    @property
    def slow_until(self) -> datetime | None: ...

    @property
    def slow_seconds(self) -> float | None: ...

    @property
    def failing_until(self) -> datetime | None: ...


class RelayLimiter:
    """One relay's limits for one sender (`relay`: "host:port")."""

    def __init__(
        self,
        ledger: Ledger,
        relay: str,
        limits: Limits,
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_wait: timedelta = MAX_WAIT,
        slowest: float = SLOWEST_SECONDS,
        modest: float = MODEST_SECONDS,
        slow_for: timedelta = SLOW_FOR,
        fail_for: timedelta = FAIL_FOR,
    ) -> None:
        self.ledger, self.relay, self.limits = ledger, relay, limits
        self.clock, self.sleep, self.max_wait = clock, sleep, max_wait
        self.slowest, self.modest = slowest, modest
        self.slow_for, self.fail_for = slow_for, fail_for
        self._windows = limits.windows()
        self._slow_until: datetime | None = None  # as last read or set
        self._slow_seconds: float | None = None
        self._failing_until: datetime | None = None
        self._looked: datetime | None = None

    def _look(self, now: datetime) -> None:
        """Read the slow-down and failure every process sees (every LOOK_EVERY)."""
        if self._looked is None or now - self._looked >= LOOK_EVERY:
            state = self.ledger.state(self.relay, now=now)
            self._slow_until, self._slow_seconds = state.slow_until, state.slow_seconds
            self._failing_until = state.failing_until
            self._looked = now

    def _slowed(self, now: datetime) -> bool:
        """Whether a slow-down holds (read from the database every LOOK_EVERY)."""
        self._look(now)
        return self._slow_until is not None and self._slow_until > now

    def failing(self) -> bool:
        """Whether the relay is skipped as failing (`fail`), as every process sees it."""
        now = self.clock()
        self._look(now)
        return self._failing_until is not None and self._failing_until > now

    def healthy(self) -> bool:
        """Neither failing nor slowed down: a relay to prefer."""
        return not self.failing() and not self._slowed(self.clock())

    async def acquire(self) -> datetime | None:
        """Wait for a place for the next message (at most `max_wait`): None, send it now;
        else the time to try again, the message not sent."""
        while True:
            now = self.clock()
            if not self._windows and not self._slowed(now):
                return None
            free = self.ledger.reserve(self.relay, now=now, windows=self._windows)
            if free is None:
                return None
            if free - now > self.max_wait:
                return free
            await self.sleep(max((free - now).total_seconds(), 0.001))

    def slow_down(self) -> datetime:
        """The relay answered "slow down": every process goes at half the rate for
        `slow_for` (half of max_per_second; with none, one message every `modest` seconds;
        halved again if a slow-down holds; never slower than one every `slowest`), or this
        one alone, if the database cannot be told. The time to try the refused message
        again."""
        now = self.clock()
        per_second = self.limits.per_second
        first = min(2 / per_second if per_second else self.modest, self.slowest)
        held = self._slow_until is not None and self._slow_until > now
        try:
            seconds = self.ledger.slow_down(
                self.relay, now=now, until=now + self.slow_for, seconds=first, slowest=self.slowest
            )
        except StoreError as exc:
            log.error("cannot record that %s asked to slow down: %s", self.relay, exc)
            doubled = 2 * self._slow_seconds if held and self._slow_seconds else first
            seconds = min(max(doubled, first), self.slowest)
        self._slow_until, self._slow_seconds = now + self.slow_for, seconds
        self._looked = now
        return now + timedelta(seconds=seconds)

    def fail(self, why: str) -> None:
        """The relay could not be reached: every process skips it for `fail_for` (when it
        has another relay to use)."""
        now = self.clock()
        self._failing_until = now + self.fail_for
        try:
            self.ledger.fail(self.relay, until=self._failing_until, why=why)
        except StoreError as exc:
            log.error("cannot record that %s is failing: %s", self.relay, exc)

    def answered(self) -> None:
        """The relay took a message: no longer failing, if it was (a write only then)."""
        if self._failing_until is None:
            return
        self._failing_until = None
        try:
            self.ledger.fail(self.relay, until=None)
        except StoreError as exc:
            log.error("cannot record that %s answers again: %s", self.relay, exc)

    def describe(self) -> str:
        """The limits, or that the relay asked to slow down."""
        return self.limits.describe() or "it asked to slow down"


# A "slow down" answer: 421 (service not available, closing: on connecting or to any
# command), and 451/454 (local error, temporary failure) to MAIL, RCPT or DATA. Any other 4xx
# whose text says so is one too ("rate", "too many", "throttl", "slow down"): a 450 or 452 for
# one mailbox otherwise stays that recipient's retry, counted as an attempt. One answered to
# RCPT but a 421 slows the relay and is counted as the recipient's retry all the same.
RATE_CODES = frozenset({421, 451, 454})
RATE_WORDS = ("rate", "too many", "throttl", "slow down")


def is_slow_down(code: int, text: str) -> bool:
    """Whether an SMTP answer asks the sender to slow down (see RATE_CODES)."""
    if code in RATE_CODES:
        return True
    lowered = text.lower()
    return 400 <= code < 500 and any(word in lowered for word in RATE_WORDS)
