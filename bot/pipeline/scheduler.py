"""The daemon behind `paperbell run`: polls, digests and sends on schedule. It decides when;
what each step does is decided elsewhere.

Every `tick` does three things in order, each safe to repeat:

1. poll the sources whose time has come (`bot.core.calendar.plan_poll`: arXiv listings from
   about midnight US Eastern on feed days until new ids appear, other sources at an interval);
2. build and queue the digests whose slot has come (`bot.core.schedule`; who is due and what
   each digest reaches back to: `bot.pipeline.planning`), once the listing they should hold
   is in (or late past the deadline); a slot is remembered as handled, and the outbox is
   unique per slot, so neither a restart nor a second process queues one twice.
   With sender processes, `paperbell run` has this done by a planner process of its own
   (`planner`, bot.cli.planner), so that a run never holds the web app's event loop;
3. send what the outbox holds and is due (`bot.channels.outbox.drain`).

Several processes may run on one PostgreSQL database: one of them leads (`Leadership`, an
advisory lock) and alone does 1 and 2; every one does 3, the outbox handing each digest to
one of them (`FOR UPDATE SKIP LOCKED`). The others ask for the lead at each of their ticks,
which come every `FOLLOWER_SECONDS` at most (so they join a long send soon after it starts),
and the first to ask after the leader stopped or died takes over, with a leader's start-up
work (the config's subscribers and likes mirrored). Without a `Leadership` (the tests, a
single process) the daemon leads. On SQLite one `run` per database file.

The leader also reads the bounce mailbox ([bounces] every_minutes), on a timer of its own
and in a thread (`bot.pipeline.mailbox`), so a slow IMAP server delays no tick; and once a
day, at the end of a tick, prunes old messages and bounces (`prune_due`, a few batches a
tick, in a thread: bot.pipeline.retention).

A plain asyncio loop fires the ticks (`serve`): every `[daemon] tick_seconds` it starts one
unless the last is still running. The schedule itself lives in the database (slots handled,
the outbox unique per slot), so restarts and a second process agree. A scheduler library
would add nothing: APScheduler's persistent job stores, the one thing a loop lacks, cannot
be shared by several processes, and would be a second copy of the schedule that the manage
page and /papers would have to keep in step. The clock is injected, so the
tests drive `tick` through weeks, time zones and DST changes without waiting, and `paperbell
run --clock-*` (hidden, for tests) runs the whole process on a fast clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.channels.outbox import Attempt, drain, worker_name
from bot.core.calendar import PollPlan, eastern_date
from bot.core.models import Subscriber
from bot.core.plurals import plural
from bot.pipeline.deliver import DeliveryReport
from bot.pipeline.health import SourceHealth, source_health, source_plans
from bot.pipeline.jobs import renderer
from bot.pipeline.planning import plan_due
from bot.pipeline.poll import PollReport, check_listing, poll_source
from bot.pipeline.retention import prune_old, pruned_line
from bot.pipeline.wiring import DaemonParts, Parts
from bot.store import Leadership, workers

log = logging.getLogger(__name__)

# A process that does not lead ticks at least this often (seconds): a tick of its own is
# one look at the lock and one at the outbox.
FOLLOWER_SECONDS = 5.0
# Pruning ([database] keep_*_days): once a day, at most this many batches of 500 records a
# tick (the rest at the next ticks), so that no tick waits long for it.
PRUNE_EVERY = timedelta(days=1)
PRUNE_BATCHES = 20
# What a stop past its deadline still gives the web app's replies (seconds): enough to see
# that none is under way, so that none is reported abandoned for want of a look.
LAST_LOOK_SECONDS = 0.05


@dataclass
class Counters:
    """What the daemon has done since it started (for /metrics and /healthz)."""

    started: datetime | None = None
    tick_started: datetime | None = None
    last_tick: datetime | None = None
    last_tick_error: str | None = None
    ticks: int = 0
    tick_errors: int = 0
    polls: dict[str, int] = field(default_factory=dict)  # by result
    digests: dict[str, int] = field(default_factory=dict)  # by report status
    sends: dict[str, int] = field(default_factory=dict)  # by attempt status
    left_out: dict[str, int] = field(default_factory=dict)  # items polls left out, by source
    leader_since: datetime | None = None  # when this process took the lead (None: it does not lead)
    prune_errors: int = 0


# What plans and queues the due digests in another process (`bot.cli.planner`): given the
# moment and what tells it to stop, the run's reports.
Planner = Callable[[datetime, Callable[[], bool]], Awaitable[list[DeliveryReport]]]


@dataclass(frozen=True, slots=True)
class TickReport:
    polls: list[PollReport]
    digests: list[DeliveryReport]
    attempts: list[Attempt]


class Daemon:
    """Polls, digests and sends, one `tick` at a time; `serve` runs it on a timer. It runs
    with the parts wired from the config at start: delivery's (`parts`: the store, the
    channels, the retry policy ...) and its own (`own`: the sources, the listings' checks,
    the mailbox, its timings; `wire_daemon`). With a
    `leadership`, polls and digests only while it leads; with `sends` false, leaves the
    sending to its sender processes (`bot.cli.senders`); with a `planner`, leaves the
    planning of the due digests to it (`bot.cli.planner`: a process of its own)."""

    def __init__(
        self,
        parts: Parts,
        own: DaemonParts,
        *,
        fetcher: Any,
        clock: Callable[[], datetime],
        owner: str | None = None,
        leadership: Leadership | None = None,
        sends: bool = True,
        planner: Planner | None = None,
    ) -> None:
        self.parts = parts
        self.store = parts.store
        self.fetcher = fetcher
        self.clock = clock
        self.owner = owner or worker_name()
        self.leadership = leadership
        self.leading = leadership is None  # whether this process polls and plans
        self.sends = sends  # whether it sends the queued digests (else its senders do)
        self.planner = planner  # what plans the due digests (None: this process)
        self.sources = own.sources
        self.checks = own.checks
        self.calendar = own.checks.calendar
        self.policy = own.checks.policy
        self.retry = parts.retry
        self.mirror_likes = own.mirror_likes
        self.keep = own.keep  # how long old messages and bounces are kept
        self.timings = own.timings  # [daemon] tick_seconds, tick_deadline_seconds ...
        self.counters = Counters()
        # The bounce mailbox ([bounces] every_minutes), read beside the ticks while leading.
        self.mailbox = own.mailbox
        self.stopping = False
        self.stop_by: float | None = None  # when a stop asked for must be done (monotonic)
        self._task: asyncio.Task[TickReport | None] | None = None
        self._reading: asyncio.Task[None] | None = None
        self._prune_at: datetime | None = None  # None: at the next tick that leads
        self._warned_years: set[int] = set()

    # -- the decisions, applied -------------------------------------------------------------

    def subscribers(self) -> list[Subscriber]:
        """The active subscribers, with the config's defaults for unset schedules."""
        return self.store.subscribers.all(self.parts.declared(), defaults=self.parts.defaults)

    def plans(self, now: datetime) -> dict[str, PollPlan]:
        return source_plans(self.sources, self.store, self.calendar, self.policy, now=now)

    def health(
        self, now: datetime, *, plans: Mapping[str, PollPlan] | None = None
    ) -> list[SourceHealth]:
        """Each source's health at `now` (for /healthz and /metrics)."""
        return source_health(self.sources, self.store, self.checks, now=now, plans=plans)

    async def tick(self) -> TickReport:
        """Poll what is due, queue the digests that are due (both while this process
        leads), send what is queued."""
        now = self.clock()
        self.counters.tick_started = now
        polls: list[PollReport] = []
        digests: list[DeliveryReport] = []
        if await self.lead(now):
            self._check_calendar(now)
            polls = await self.poll_due(now)
            digests = await self.digests_due(self.clock())
        attempts = await self.send_due() if self.sends else []
        if self.leading and not self.stopping:
            await self.prune_due(self.clock())
        self.counters.ticks += 1
        self.counters.last_tick = self.clock()
        self.counters.last_tick_error = None
        return TickReport(polls, digests, attempts)

    async def lead(self, now: datetime) -> bool:
        """Whether this process leads: the lead taken if it is free (the leader stopped or
        died), a leader's start-up work done on taking it."""
        if self.leadership is None:
            return True
        was = self.leading
        self.leading = self.leadership.take()
        if self.leading and not was:
            self.counters.leader_since = now
            log.info("leading: this process polls the sources and plans the digests")
            await self._start_leading(now)
        elif was and not self.leading:
            self.counters.leader_since = None
            log.warning("no longer leading: this process sends queued digests only")
        return self.leading

    async def _start_leading(self, now: datetime) -> None:
        """What a leader does first: mirror the config's subscribers and likes."""
        self.store.subscribers.sync_config(self.parts.declared(), now=now)
        try:  # the verdicts' texts: a failure here must not keep the daemon from starting
            await self.mirror_likes(self.fetcher, now)
        except Exception:
            log.exception("likes: could not mirror the config's likes")

    def _follow(self) -> None:
        """Say, once, that another process leads and this one sends."""
        try:
            leader = workers(self.store.database).leader
        except Exception:  # only the log line's detail
            leader = None
        log.info(
            "another `paperbell run` leads (%s): this one sends queued digests and takes "
            "the lead when that one stops",
            leader or "which one, the database does not say",
        )

    async def poll_due(self, now: datetime) -> list[PollReport]:
        """Poll each source whose planned time has come (at most once per tick)."""
        plans = self.plans(now)
        reports = []
        for source in self.sources:
            if self.stopping:
                break
            if plans[source.name].at > now:  # no poll due: a failed repair may be
                if source.follows_arxiv_calendar and source.can_repair:
                    await check_listing(source, self.store, self.fetcher, self.checks, now=now)
                continue
            report = await poll_source(
                source, self.store, self.fetcher, now=self.clock(), checks=self.checks
            )
            _count(self.counters.polls, report.result)
            if report.problems:
                _count(self.counters.left_out, source.name, report.problems)
            log.info(
                "polled %s: %s, %s, %d new",
                source.name,
                report.result,
                plural(report.items, "item"),
                report.new,
            )
            reports.append(report)
        return reports

    async def digests_due(self, now: datetime) -> list[DeliveryReport]:
        """Queue (and send) the digests whose slot has come and whose listing is in: here,
        or in the planner's process; counted either way."""
        if self.stopping or not self.parts.channels:
            return []
        if self.planner is not None:
            reports = await self.planner(now, lambda: self.stopping)
        else:
            reports = await self.plan_due(now)
        for report in reports:
            _count(self.counters.digests, report.status)
        return reports

    async def plan_due(
        self, now: datetime, *, should_stop: Callable[[], bool] | None = None
    ) -> list[DeliveryReport]:
        """Plan, queue (and, when this process sends, send) the digests that are due now,
        each slot marked handled; a line logged per digest. `should_stop()` ends the run
        early (default: the daemon is stopping)."""
        should_stop = should_stop or (lambda: self.stopping)
        return await plan_due(
            self.parts,
            self.checks,
            self.plans(now),
            self.subscribers(),
            now=now,
            clock=self.clock,
            sends=self.sends,
            should_stop=should_stop,
        )

    async def send_due(self) -> list[Attempt]:
        """Render and send the queued digests that are due (retries wait for their time)."""
        if not self.parts.channels:
            return []
        attempts = await drain(
            self.store,
            self.parts.channels,
            clock=self.clock,
            owner=self.owner,
            retry=self.retry,
            due_only=True,
            should_stop=lambda: self.stopping,
            render=renderer(self.parts),
        )
        for attempt in attempts:
            _count(self.counters.sends, attempt.status)
        return attempts

    async def prune_due(self, now: datetime) -> None:
        """Prune the database once a day ([database] keep_sent_days, keep_bounces_days,
        keep_unconfirmed_days), in a thread, `PRUNE_BATCHES` at most a tick; a failure is
        logged and tried in an hour."""
        if self._prune_at is not None and now < self._prune_at:
            return
        try:
            pruned = await asyncio.to_thread(
                prune_old,
                self.keep,
                self.store,
                now=now,
                batches=PRUNE_BATCHES,
                should_stop=lambda: self.stopping,
            )
        except Exception as exc:  # the ticks go on; the database says why
            self.counters.prune_errors += 1
            self._prune_at = now + timedelta(hours=1)
            log.error("pruning the database failed (tried again in an hour): %s", exc)
            return
        self._prune_at = None if pruned.more else now + PRUNE_EVERY
        if pruned.messages or pruned.bounces or pruned.signups:
            log.info("pruned the database: %s", pruned_line(self.keep, pruned))

    def _check_calendar(self, now: datetime) -> None:
        year = eastern_date(now).year
        if not self.calendar.knows(year) and year not in self._warned_years:
            self._warned_years.add(year)
            log.warning(
                "arXiv's holidays of %d are not in paperbell's calendar: a holiday will look "
                "like a late listing; add them under [polling] holidays",
                year,
            )

    # -- running ----------------------------------------------------------------------------

    def stop_deadline(self) -> float:
        """When the stop must be done (`time.monotonic()`): [daemon] shutdown_grace_seconds
        from the first call, once the stop is asked for. The start-up work, the running
        tick, the web app and the child processes share it, so a stop ends within one
        grace period, which the unit's stop timeout counts on."""
        if self.stop_by is None:
            self.stop_by = time.monotonic() + self.timings.shutdown_grace_seconds
        return self.stop_by

    def grace_left(self) -> float:
        """Seconds left until `stop_deadline()`."""
        return max(0.0, self.stop_deadline() - time.monotonic())

    def _on_timer(self) -> None:
        """The timer's job: start a tick unless one is still running. It returns at once, so
        a long tick never delays the timer (a missed beat is skipped, not queued)."""
        if self.stopping or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._guarded_tick())

    async def _guarded_tick(self) -> TickReport | None:
        try:
            return await self.tick()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one bad tick must not stop the daemon
            self.counters.tick_started = None  # not running: /healthz then reads the age
            self.counters.tick_errors += 1
            self.counters.last_tick_error = f"{type(exc).__name__}: {exc}"
            log.exception("tick failed: %s", exc)
            return None

    async def serve(
        self,
        stop: asyncio.Event,
        *,
        web: Any = None,
        interval: float | None = None,
        replies: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Run until `stop` is set: a tick every `interval` seconds (default [daemon]
        tick_seconds), the web app (a uvicorn server) beside. At the end, `replies()` waits
        for the work the web app's requests left running (a /papers digest being sent),
        which holds claims under this process's name too. The web app starts first: it
        answers (health "starting", Slack's 3 seconds) while the start-up work waits on a
        slow API."""
        self.counters.started = self.clock()
        web_task = asyncio.create_task(self._web(web)) if web is not None else None
        try:
            await self._start(stop)
        except BaseException:  # the start failed: the web app goes with it
            await self._stop_web(web, web_task)
            raise
        timer = asyncio.create_task(self._timer(stop, interval or self.timings.tick_seconds))
        if self.mailbox is not None:
            self._reading = asyncio.create_task(self.mailbox.run(leading=lambda: self.leading))
        stopped = asyncio.create_task(stop.wait())
        waiters: list[asyncio.Task[Any]] = [stopped]
        if web_task is not None:
            waiters.append(web_task)
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            await self._shutdown(timer, web, web_task, replies)

    async def _start(self, stop: asyncio.Event) -> None:
        """Take the lead (or follow). A stop meanwhile gives a leader's start-up work (liked
        papers asked of a slow arXiv API) the grace period, as a running tick, then
        abandons it: what it fetched is stored whole or not at all, and asked again at the
        next start."""
        now = self.clock()
        starting = asyncio.create_task(
            self._start_leading(now) if self.leadership is None else self._lead_or_follow(now)
        )
        stopped = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if await self._finished_by_deadline(starting, "the start-up work"):
            starting.result()  # its error, as if it had been awaited here

    async def _finished_by_deadline(self, task: asyncio.Task[Any], what: str) -> bool:
        """Wait for `task` until the stop's deadline (`stop_deadline`); past it, cancel it
        and say that `what` was abandoned. True if it finished (its result is there)."""
        if not task.done():
            grace = self.grace_left()
            log.info("waiting up to %.1fs for %s to finish", grace, what)
            done, _ = await asyncio.wait({task}, timeout=grace)
            if not done:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                log.warning("abandoned %s", what)
                return False
        return True

    async def _lead_or_follow(self, now: datetime) -> None:
        if not await self.lead(now):
            self._follow()

    async def _timer(self, stop: asyncio.Event, interval: float) -> None:
        """A tick now, then one every `interval` seconds of the event loop's monotonic clock
        (`FOLLOWER_SECONDS` at most while another process leads); a tick still running when
        the next is due makes that beat a no-op."""
        loop = asyncio.get_running_loop()
        due = loop.time()
        while not self.stopping and not stop.is_set():
            self._on_timer()
            step = interval if self.leading else min(interval, FOLLOWER_SECONDS)
            due += step
            if due < loop.time():  # the loop was blocked or the machine slept: no burst
                due = loop.time() + step
            await asyncio.sleep(due - loop.time())

    @staticmethod
    async def _web(server: Any) -> None:
        try:
            await server.serve()
        except SystemExit:  # uvicorn exits when it cannot listen (port taken)
            log.error("the web app could not start")

    async def _stop_web(self, web: Any, web_task: asyncio.Task[None] | None) -> None:
        """Stop the web app, closing the connections still open at the stop's deadline and
        ending their requests: one still running would send its notice mail, claimed under
        this process's name, after the claims are handed back."""
        if web is None or web_task is None:
            return
        web.should_exit = True
        done, _ = await asyncio.wait({web_task}, timeout=self.grace_left())
        if not done:  # open connections: closed without waiting for them
            web.force_exit = True
        await asyncio.gather(web_task, return_exceptions=True)
        requests = set(web.server_state.tasks)  # uvicorn leaves them running at force_exit
        for request in requests:
            request.cancel()
        if requests:
            await asyncio.wait(requests, timeout=LAST_LOOK_SECONDS)

    async def _shutdown(
        self,
        timer: asyncio.Task[None],
        web: Any,
        web_task: Any,
        replies: Callable[[], Awaitable[None]] | None,
    ) -> None:
        """Stop ticking; let a running tick finish its batch, stop the web app and wait for
        its `replies`, abandoning what is left at the stop's deadline; then hand the claimed
        digests back at once."""
        self.stopping = True
        timer.cancel()
        await asyncio.gather(timer, return_exceptions=True)
        if self.mailbox is not None:
            self.mailbox.stop()  # a read under way ends after the message it is on
        if self._task is not None:
            await self._finished_by_deadline(self._task, "the running tick")
        if self._reading is not None:
            await self._finished_by_deadline(self._reading, "the read of the bounce mailbox")
        # First: the web app's notice mail is claimed under this process's name too, and
        # one handed back while it is being sent could be sent again by another process.
        await self._stop_web(web, web_task)
        if replies is not None:
            try:
                await asyncio.wait_for(replies(), max(self.grace_left(), LAST_LOOK_SECONDS))
            except TimeoutError:
                log.warning("abandoned the slash commands' work under way")
        released = self.store.outbox.release(self.owner)
        if released:
            log.info("handed back %s", plural(released, "claimed digest"))
        if self.leadership is not None:
            self.leadership.resign()  # another process takes the lead at its next tick
            self.leading = False


def _count(counter: dict[str, int], key: str, by: int = 1) -> None:
    counter[key] = counter.get(key, 0) + by
