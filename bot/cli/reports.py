"""The commands that report and change nothing: `check-config` (is the file right? is its
database's schema up to date? which secrets' variables are not set, and who needs them?)
and `status` (the sources' polls, each subscriber's next digest and deliveries, the
outbox).

`status` gathers everything first (`gather_status`: the store and the schedule's plans),
then prints it as tables; the tables only format what was gathered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bot.cli.people import subscriber_state
from bot.cli.secrets import who_needs
from bot.cli.shell import config_option, handle_errors, load_config, open_store, upgrade_command
from bot.config import DATABASE_URL, SECRET_KINDS, Config, config_notes
from bot.core.checks import redact_url
from bot.core.errors import ConfigError, StoreError
from bot.core.models import Subscriber
from bot.core.plurals import plural

if TYPE_CHECKING:
    from bot.channels import Target
    from bot.core.calendar import PollPlan
    from bot.pipeline.health import SourceHealth
    from bot.pipeline.planning import DigestPlan
    from bot.store import (
        BounceDay,
        LeftOut,
        ModelDay,
        OutboxStatus,
        SourceState,
        Store,
        Workers,
    )


@click.command("check-config")
@config_option
@handle_errors
def check_config(config_path: Path) -> None:
    """Validate the config file and report every problem at once; say which secrets'
    variables are not set, and which commands need them (the others run without), and
    what a subscriber asks for that the file cannot give yet (a note). Apprise URLs are
    read offline (one with a secret belongs in the variable apprise_env names)."""
    from bot.config.likes import like_file_problems, like_file_report

    try:
        config = load_config(config_path)
    except ConfigError as exc:  # every problem at once: the like_files' too
        more = like_file_problems(config_path)
        if not more:
            raise
        raise ConfigError(exc.problems + more, source=exc.source, hint=exc.hint) from None
    like_problems, like_lines = like_file_report(config)
    if like_problems:
        raise ConfigError(like_problems, source=str(config_path))
    rules = sum(len(s.rules) for s in config.subscribers)
    click.echo(
        f"{config_path}: OK ({plural(len(config.sources), 'source')}, "
        f"{plural(len(config.subscribers), 'subscriber')}, {plural(rules, 'rule')}; "
        f"database {database_line(config)})"
    )
    click.echo(f"schema: {schema_line(config)}")
    for missing in config.missing(*SECRET_KINDS):
        click.echo(f"not set: {missing.variable} ({missing.key}): {who_needs(config, missing)}")
    for note in config_notes(config):
        click.echo(f"note: {note}")
    for line in like_lines:
        click.echo(line)


def database_line(config: Config) -> str:
    """Where the database is, its password hidden; named by a variable, which one."""
    name = config.database.url_env
    if name is None:
        return redact_url(config.database.url)
    if config.missing(DATABASE_URL):
        return f"from ${name}, which is not set"
    return f"{redact_url(config.database.url)} (from ${name})"


def schema_line(config: Config) -> str:
    """The database's schema state, for check-config: up to date, needs an upgrade, no
    database yet, or why it cannot tell (the file is right either way)."""
    from bot.store import schema_state

    if unset := config.missing(DATABASE_URL):
        return f"cannot tell: {unset[0].line()}"
    try:
        state = schema_state(config.database_url())
    except StoreError as exc:
        return f"cannot tell: {exc.message}"
    if not state.exists:
        return f"no database yet (created at {state.head}, the newest, on first use)"
    if state.up_to_date:
        return f"up to date ({state.current})"
    if not state.known:
        return f"{state.describe()}: this paperbell cannot use it"
    line = f"{state.describe()}: needs `{upgrade_command(config)}`"
    if config.database.auto_upgrade:
        line += " (or the next command upgrades it: [database] auto_upgrade = true)"
    return line


@click.command()
@config_option
@handle_errors
def status(config_path: Path) -> None:
    """Show the sources' polls, each subscriber's next digest and deliveries (a line per
    destination, with its retry or pause), the outbox, each email relay ([email]'s, or each
    of [[email.servers]] with its weight: its limits max_per_second, max_per_hour and
    max_per_day, what it took lately, a slow-down it asked for, being skipped as failing),
    how many email digests wait and when the next goes, and today's summaries and
    translations (requests, budget, failures, tokens)."""
    from bot.pipeline.bounces import bounces_line
    from bot.store import utcnow

    config = load_config(config_path)
    store = open_store(config, create=False)
    found = gather_status(config, store, now=utcnow())
    _table(_source_rows(found))
    for source in found.sources:  # in full: the table cuts its problem column
        for line in (*source.health.problems, *source.health.notes):
            click.echo(f"  {source.name}: {line}")
    click.echo("")
    _table(_subscriber_rows(found))
    for each in found.subscribers:  # why a digest day sent nothing, in full
        if each.nothing is not None and each.subscriber.active:
            slot, why = each.nothing
            click.echo(f"  {each.subscriber.name}: nothing on {slot}: {why}")
    if lines := target_lines(found):
        click.echo("\ndestinations:")
        for line in lines:
            click.echo(f"  {line}")
    totals = ", ".join(f"{n} {state}" for state, n in found.outbox.items())
    click.echo(f"\noutbox: {totals} (digests)")
    click.echo(f"daemon: {workers_line(found.workers)}")
    if found.bounces is not None:
        click.echo(bounces_line(found.bounces))
    if found.relay is not None:
        click.echo(found.relay)
    for line in texts_lines(config, found):
        click.echo(line)


def workers_line(found: Workers) -> str:
    """The `paperbell run` processes on the database, and which one leads (polls, plans);
    every one sends."""
    if not found.running:
        return "no `paperbell run` on this database"
    if found.running == (found.leader,):
        return f"`paperbell run` {found.leader}, leading"
    others = [name for name in found.running if name != found.leader]
    lead = f"{found.leader} leads" if found.leader else "none leads yet: the next to look will"
    count = plural(len(found.running), "`paperbell run` process", "`paperbell run` processes")
    return f"{count} ({lead}; {', '.join(others)})" if others else f"{count} ({lead})"


def texts_lines(config: Config, found: Status) -> list[str]:
    """Today's summaries and translations, per model: requests (and the budget), texts
    written and read from the store, failures and why, tokens."""
    day = found.now.date()
    llm = config.llm
    if llm is None and not found.models:
        return []
    from bot.render.terminal import terminal_safe  # here: most commands print no texts

    lines = [f"\nsummaries and translations today ({day:%Y-%m-%d} UTC):"]
    if llm is None:
        lines.append("  no [llm] is set up: summaries are Hugging Face's, where there is one")
    used = {m.model: m for m in found.models}
    if llm is not None and llm.model not in used:
        lines.append(f"  {llm.model}: no request yet")
    for m in found.models:
        budget = ""
        if llm is not None and m.model == llm.model and llm.max_requests_per_day is not None:
            budget = f" of {llm.max_requests_per_day:,} allowed"
        tokens = m.prompt_tokens + m.completion_tokens
        line = (
            f"  {m.model}: {plural(m.requests, 'request')}{budget}, {m.written:,} written, "
            f"{m.cached:,} already stored, {m.failed:,} failed"
        )
        if m.failures:
            reasons = sorted(m.failures.items(), key=lambda kv: (-kv[1], kv[0]))
            line += " (" + ", ".join(f"{why}: {n}" for why, n in reasons) + ")"
        line += f", {plural(tokens, 'token')} ({m.prompt_tokens:,} in, {m.completion_tokens:,} out)"
        lines.append(line)
        if m.over_budget:
            lines.append(
                f"  {m.model}: the budget ran out (max_requests_per_day): {m.over_budget:,} "
                "texts not asked for; those papers went out with their abstracts"
            )
        if m.last_error and m.failed:
            at = f" at {m.last_error_at:%H:%M} UTC" if m.last_error_at else ""
            lines.append(f"  {m.model}: last error{at}: {terminal_safe(m.last_error)}")
    return lines


@dataclass(frozen=True)
class SourceStatus:
    """A source: what the store remembers of its last poll, and its next one."""

    name: str
    state: SourceState | None  # None: never polled
    plan: PollPlan
    left_out: LeftOut | None
    health: SourceHealth


@dataclass(frozen=True)
class SubscriberStatus:
    """A subscriber: active or not, its next digest, what it was sent, its outbox."""

    subscriber: Subscriber
    state: str  # `subscriber_state`
    plan: DigestPlan
    papers_sent: int
    outbox: OutboxStatus | None
    nothing: tuple[str, str] | None = None  # its last slot sent nothing: (slot, why)
    # Each place its digests go, with that target's outbox and pause (if any).
    targets: tuple[TargetStatus, ...] = ()


@dataclass(frozen=True)
class TargetStatus:
    """One place a subscriber's digests go: its outbox, and why it is paused or skipped."""

    target: Target
    outbox: OutboxStatus | None
    paused: str | None = None


@dataclass(frozen=True)
class Status:
    """Everything `paperbell status` shows, read at `now`."""

    now: datetime
    sources: list[SourceStatus]
    subscribers: list[SubscriberStatus]
    outbox: dict[str, int]  # digests by outbox status
    models: list[ModelDay]  # each model's use today (UTC)
    workers: Workers  # the `paperbell run` processes on the database, and the leader
    bounces: BounceDay | None = None  # what came back to the bounce address today (UTC)
    relay: str | None = None  # the [email] relay's limits and the digests waiting for it


def gather_status(config: Config, store: Store, *, now: datetime) -> Status:
    """Read the store and plan the next polls and digests, as the daemon would at `now`."""
    from bot.channels import subscriber_targets  # only `status` needs them here
    from bot.pipeline import build_sources, listing_checks
    from bot.pipeline.health import source_health, source_plans
    from bot.pipeline.planning import digest_plans
    from bot.pipeline.wiring import channel_settings
    from bot.store import workers

    calendar, policy = config.polling.calendar(), config.polling.policy()
    sources = build_sources(config)
    plans = source_plans(sources, store, calendar, policy, now=now)
    states = {s.name: s for s in store.sources.states()}
    left_out = store.sources.left_out()
    health = {
        h.name: h
        for h in source_health(sources, store, listing_checks(config), now=now, plans=plans)
    }
    nothing = store.subscribers.slot_notes()
    outbox = store.outbox.status()
    per_target = store.outbox.target_status()
    paused = store.targets.paused()
    settings = channel_settings(config)
    counts = store.outbox.delivery_counts()
    everyone = store.subscribers.all(
        config.declared_subscribers(), include_inactive=True, defaults=config.digest.defaults()
    )
    upcoming = {
        p.subscriber.name: p for p in digest_plans(everyone, plans, calendar, policy, now=now)
    }
    return Status(
        now=now,
        sources=[
            SourceStatus(
                s.name, states.get(s.name), plans[s.name], left_out.get(s.name), health[s.name]
            )
            for s in sources
        ],
        subscribers=[
            SubscriberStatus(
                sub,
                subscriber_state(store, sub),
                upcoming[sub.name],
                counts.get(sub.id or -1, (0, None))[0],
                outbox.get(sub.id or -1),
                nothing.get(sub.id or -1),
                tuple(
                    TargetStatus(
                        target,
                        per_target.get((sub.id or -1, target.channel)),
                        pause.reason
                        if (pause := paused.get((sub.id or -1, target.channel)))
                        else None,
                    )
                    for target in subscriber_targets(sub, settings)
                ),
            )
            for sub in everyone
        ],
        outbox=store.outbox.totals(now=now),
        models=store.texts.day(now.date()),
        workers=workers(store.database),
        bounces=store.bounces.day(now.date()),
        relay=relay_line(config, store, now=now) if config.email is not None else None,
    )


def relay_line(config: Config, store: Store, *, now: datetime) -> str:
    """The email relays (the [email] one, or each of [[email.servers]]), a line each: its
    limits, what it took lately, a slow-down it asked for, being skipped as failing; and the
    email digests waiting (how many, and when the next goes)."""
    from bot.pipeline.wiring import relays_limits

    relays = relays_limits(config)
    lines = []
    for name, limits, weight in relays:
        state = store.relays.state(name, now=now)
        parts = [f"limits {limits.describe()}" if limits.windows() else "no limits"]
        if len(relays) > 1:
            parts.insert(0, f"weight {weight}")
        if limits.windows() or state.last_day:  # a relay with no limits counts nothing
            parts.append(
                f"took {state.last_second} in the last second, {state.last_hour} in the "
                f"hour, {state.last_day} in the day"
            )
        if state.slow_until is not None and state.slow_until > now:
            parts.append(
                f"slowed to one message every {state.slow_seconds or 0:g} s until "
                f"{state.slow_until:%Y-%m-%d %H:%M:%S} UTC (it answered 'slow down')"
            )
        if state.failing_until is not None and state.failing_until > now:
            parts.append(
                f"skipped as failing until {state.failing_until:%Y-%m-%d %H:%M:%S} UTC: "
                f"{state.failure}"
            )
        lines.append(f"email relay {name}: " + "; ".join(parts))
    waiting = store.outbox.waiting("email", now=now)
    held: list[str] = []
    for count, due, what in (
        (waiting.held, waiting.next_held, "waiting for the limits or a slow-down"),
        (waiting.retries, waiting.next_retry, "to retry after a failure"),
    ):
        if count:
            when = "now" if due is None or due <= now else f"at {due:%Y-%m-%d %H:%M:%S} UTC"
            held.append(f"{plural(count, 'email digest')} {what}, the next {when}")
    if waiting.due:
        held.append(f"{plural(waiting.due, 'email digest')} due now")
    if held and len(lines) == 1:
        lines[0] += "; " + "; ".join(held)
    elif held:
        lines.append("email: " + "; ".join(held))
    return "\n".join(lines)


def target_lines(found: Status) -> list[str]:
    """A line per place digests go, for subscribers whose digests go to more than one
    place or anywhere but email, or whose email is paused: what it was last sent, its retry
    or failure, its pause; none when every subscriber only gets email and none is paused
    (the table says it all)."""
    shown = [
        each
        for each in found.subscribers
        if len(each.targets) > 1 or any(t.target.kind != "email" or t.paused for t in each.targets)
    ]
    lines: list[str] = []
    for each in shown:
        for place in each.targets:
            lines.append(f"{each.subscriber.name} {place.target.label}: {_target_state(place)}")
    return lines


def _target_state(place: TargetStatus) -> str:
    box = place.outbox
    if place.paused:
        return f"paused: {place.paused}"
    if place.target.problem:
        return f"skipped: {place.target.problem}"
    sent = (
        f"last sent {box.last_sent.astimezone(UTC):%Y-%m-%d %H:%M}"
        if box and box.last_sent
        else "never sent"
    )
    if box is None:
        return sent
    if box.pending and box.next_attempt and box.attempts:
        tried = plural(box.attempts, "attempt")
        return (
            f"{sent}; retry at {box.next_attempt.astimezone(UTC):%Y-%m-%d %H:%M} UTC "
            f"({tried} failed): {box.last_error}"
        )
    if box.pending:
        return f"{sent}; {plural(box.pending, 'digest')} waiting to be sent"
    if box.last_status == "failed" and box.last_error:
        return f"{sent}; last digest failed: {box.last_error}"
    return sent


def _source_rows(found: Status) -> list[list[str]]:
    """The sources' table: a header, then a row per source."""
    rows = [
        [
            "source",
            "last poll (UTC)",
            "result",
            "items",
            "new",
            "announced: papers",
            "next poll (UTC)",
            "left out",
            "problem",
        ]
    ]
    for source in found.sources:
        st, plan, skipped, health = source.state, source.plan, source.left_out, source.health
        problem = "; ".join(health.problems)
        if skipped is not None and skipped.first and not problem:
            problem = f"left out {skipped.first}"
        when = "now" if plan.at <= found.now else f"{plan.at.astimezone(UTC):%Y-%m-%d %H:%M}"
        if st is None or st.last_poll is None:
            rows.append([source.name, "never", "", "", "", "", when, "", problem[:70]])
            continue
        rows.append(
            [
                source.name,
                f"{st.last_poll.astimezone(UTC):%Y-%m-%d %H:%M}",
                st.last_result,
                str(st.items),
                str(st.new),
                _listing_cell(health) or str(st.announced or ""),
                when,
                str(skipped.count if skipped is not None else 0),
                problem[:70],
            ]
        )
    return rows


def _listing_cell(health: SourceHealth) -> str:
    """The newest listing: its day, its papers, the usual count, what a repair added."""
    listing = health.listing
    if listing is None:
        return ""
    text = f"{listing.day}: {listing.items}"
    if health.usual is not None:
        text += f" (usual {health.usual.size})"
    if listing.repaired:
        text += f", API {listing.repaired}"
    return text


def _subscriber_rows(found: Status) -> list[list[str]]:
    """The subscribers' table: a header, then a row per subscriber."""
    rows = [
        [
            "subscriber",
            "state",
            "schedule",
            "next digest (`run`)",
            "papers sent",
            "last sent (UTC)",
            "pending",
            "failed",
            "problem",
        ]
    ]
    for each in found.subscribers:
        sub, box, due = each.subscriber, each.outbox, each.plan
        problem = ""
        if box and box.pending and box.last_error and box.next_attempt:
            problem = f"retry {box.next_attempt:%m-%d %H:%M}: {box.last_error}"
        elif box and box.last_error:
            problem = box.last_error
        elif each.nothing is not None and sub.active:
            slot, why = each.nothing
            problem = f"nothing {slot.partition(':')[2] or slot}: {why}"
        if not sub.active:
            next_digest = ""
        elif due.due is not None and due.waiting_for:
            next_digest = "due, waiting for " + ", ".join(due.waiting_for)
        elif due.due is not None:
            next_digest = "due now"
        else:
            next_digest = f"{due.next.local:%a %d %b %H:%M %Z}"
        rows.append(
            [
                sub.name,
                each.state[:50],
                sub.schedule.describe(),
                next_digest,
                str(each.papers_sent),
                f"{box.last_sent.astimezone(UTC):%Y-%m-%d %H:%M}"
                if box and box.last_sent
                else "never",
                str(box.pending if box else 0),
                str(box.failed if box else 0),
                problem[:70],
            ]
        )
    return rows


def _table(rows: list[list[str]]) -> None:
    """Print rows as aligned columns, the first row as the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
