"""Whose digest is due, and the run that queues the due ones: each slot's window of days,
its note when it sent nothing, the slot marked handled. Apart from the daemon
(`bot.pipeline.scheduler`), which decides only when it runs: `paperbell status` reads the
same plans, and the planner process runs it with no timer of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from bot.core.calendar import ArxivCalendar, PollPlan, PollPolicy, listing_day
from bot.core.models import Subscriber
from bot.core.plurals import plural
from bot.core.schedule import Slot, latest_slot, next_slot
from bot.match.digest import empty_note
from bot.pipeline.deliver import DeliveryReport, DeliveryRequest, deliver
from bot.pipeline.health import ListingChecks
from bot.pipeline.texts import TextsRun
from bot.pipeline.wiring import Parts
from bot.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DigestPlan:
    """A subscriber's digest: the slot due now (if any), and the next one."""

    subscriber: Subscriber
    due: Slot | None  # a slot that has come and is not handled yet
    next: Slot
    waiting_for: tuple[str, ...] = ()  # sources whose listing the due slot waits for


def digest_plans(
    subscribers: Sequence[Subscriber],
    plans: dict[str, PollPlan],
    calendar: ArxivCalendar,
    policy: PollPolicy,
    *,
    now: datetime,
) -> list[DigestPlan]:
    """Whose digest is due: the latest slot of their schedule, if it came after they
    subscribed and is not handled yet; it waits while a calendar source has not brought the
    listing of the slot's feed day and is not yet late."""
    result = []
    for sub in subscribers:
        upcoming = next_slot(sub.schedule, now)
        slot = latest_slot(sub.schedule, now)
        if slot.key == sub.last_slot or (sub.created is not None and slot.at < sub.created):
            result.append(DigestPlan(sub, None, upcoming))
            continue
        day = calendar.last_feed_day(listing_day(policy, slot.at))
        waiting = tuple(
            name
            for name, plan in plans.items()
            if plan.feed_day is not None
            and plan.feed_day <= day
            and plan.expected
            and not (plan.has_it or plan.late or plan.missed)
        )
        result.append(DigestPlan(sub, slot, upcoming, waiting))
    return result


async def plan_due(
    parts: Parts,
    checks: ListingChecks,
    plans: dict[str, PollPlan],
    subscribers: Sequence[Subscriber],
    *,
    now: datetime,
    clock: Callable[[], datetime],
    sends: bool,
    should_stop: Callable[[], bool],
) -> list[DeliveryReport]:
    """Plan, queue (and, with `sends`, send) the digests of `subscribers` that are due now
    under the sources' `plans`, each slot marked handled; a line logged per digest.
    `should_stop()` ends the run early."""
    due = {}
    for plan in digest_plans(subscribers, plans, checks.calendar, checks.policy, now=now):
        if plan.due is None or plan.subscriber.id is None:
            continue
        if plan.waiting_for:
            log.debug("%s: waiting for %s", plan.subscriber.name, ", ".join(plan.waiting_for))
            continue
        due[plan.subscriber.id] = (plan.subscriber, plan.due)
    if not due:
        return []
    window = parts.window_days

    def window_start(sub: Subscriber, slot: Slot) -> date:
        # The schedule's window (at least window_days), and at least back to the day the
        # previous slot covered: a listing that came late, after that digest, is dated
        # then, and its papers belong in this one. A week at least after a weekly slot:
        # the first daily digest after a change from weekly reaches back to the last
        # weekly one.
        weekly = (sub.last_slot or "").startswith("weekly:")
        days = max(window, sub.schedule.days, 7 if weekly else 1)
        previous = latest_slot(sub.schedule, slot.at - timedelta(seconds=1))
        first = listing_day(checks.policy, slot.at) - timedelta(days=days - 1)
        return min(first, listing_day(checks.policy, previous.at))

    def since(sub: Subscriber) -> date:
        # Back over the previous slot's window too (if the subscriber had one): a digest
        # given up releases its papers to this one, a week of them for a weekly digest.
        slot = due[sub.id or 0][1]
        previous = latest_slot(sub.schedule, slot.at - timedelta(seconds=1))
        if sub.created is not None and previous.at < sub.created:
            return window_start(sub, slot)
        return min(window_start(sub, slot), window_start(sub, previous))

    states = {s.name: s for s in parts.store.sources.states()}
    failing = [
        (state.name, failed)
        for state in states.values()
        if state.last_result == "error"
        and state.name in plans  # a source still configured
        and (failed := state.failing_since or state.last_poll) is not None
    ]
    nothing: dict[int, str] = {}  # why each subscriber's slot sent nothing
    # The feed days whose listing is late and that no repair filled in (read once).
    late_days = {
        p.feed_day
        for name, p in plans.items()
        if p.late and p.feed_day is not None and not _filled_in(parts.store, name, p.feed_day)
    }

    def note(sub: Subscriber) -> str | None:
        slot = due[sub.id or 0][1]
        day = listing_day(checks.policy, slot.at)
        first = day - timedelta(days=sub.schedule.days - 1)
        late = day in late_days
        counts = parts.store.papers.per_day(first, day)
        text = empty_note(
            checks.calendar,
            feed_day=day,
            days=sub.schedule.days,
            papers=sum(counts.values()),
            late=late,
            deadline=checks.deadline_text,
            failing=failing,
        )
        nothing[sub.id or 0] = text
        return text if sub.notify_empty else None

    request = DeliveryRequest(
        subscribers=[sub for sub, _ in due.values()],
        since=since,
        period=lambda sub: due[sub.id or 0][1].key,
        note=note,
        catch_up=False,
        sends=sends,
    )
    reports = await deliver(
        parts,
        request,
        now=now,
        clock=clock,
        should_stop=should_stop,
        on_texts=_log_texts,
    )
    # Handled, whatever came of it: a failure is in the outbox (and status); a slot
    # with nothing to send is not tried again every tick. A run stopped early leaves
    # the subscribers it did not reach to the next run.
    reached = {report.subscriber for report in reports}
    stopped = should_stop()
    handled = {
        sid: slot.key for sid, (sub, slot) in due.items() if sub.name in reached or not stopped
    }
    sent = {report.subscriber for report in reports if report.count}
    for sid, (sub, _) in due.items():  # one channel had nothing, another papers
        if sub.name in sent:
            nothing.pop(sid, None)
    parts.store.subscribers.mark_slots(handled, notes=nothing)
    for report in reports:
        log.info(
            "digest for %s: %s (%s)",
            report.subscriber,
            report.status,
            plural(report.count, "paper"),
        )
    return reports


def _filled_in(store: Store, source: str, day: date) -> bool:
    """Whether a repair from the arXiv API filled in `source`'s listing of `day`."""
    listing = store.sources.listing(source, day)
    return listing is not None and bool(listing.repaired)


def _log_texts(run: TextsRun) -> None:
    """A delivery's summaries and translations, in the log (a warning when some failed)."""
    if line := run.line():
        log.log(logging.WARNING if run.missing else logging.INFO, "%s", line)
