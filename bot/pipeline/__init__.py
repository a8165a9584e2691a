"""The stages joined: `poll()` (sources -> store) and `deliver()` (store -> digest -> channel).

Wiring only: every decision lives in the stage modules. The clock, the store, the HTTP
fetcher and the channel are passed in, so the CLI, the scheduler and the tests share this.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from bot.channels import Channel
from bot.channels.email import EmailChannel, FileChannel, SmtpSettings
from bot.channels.outbox import Channels, RetryPolicy, drain
from bot.channels.slack import WEBHOOK_PREFIX, SlackChannel, SlackSettings, slack_delivery
from bot.config import Config, EmailConfig
from bot.core.errors import ConfigError, PaperbellError, RuleError, SourceError, unexpected
from bot.core.models import Digest, Paper, Subscriber, target_label, version_key
from bot.core.redact import redact_shapes
from bot.match.digest import RuleMatches, build_digest, count_matches, match_rules, note_digest
from bot.render.email import DigestLinks, EmailSettings, build_message
from bot.render.slack import build_posts
from bot.rules import Rule, parse_rule
from bot.sources import SOURCE_KINDS, Source, load_builtin_sources
from bot.store import RuleCount, Store

if TYPE_CHECKING:
    from bot.sources.http import PoliteFetcher

log = logging.getLogger(__name__)
ARXIV_TIMEZONE = ZoneInfo("America/New_York")
# The manage page's "what each rule matched lately": how many days, how many examples.
ACTIVITY_DAYS = 7
ACTIVITY_EXAMPLES = 3


@dataclass(frozen=True, slots=True)
class PollReport:
    """One source's poll: what was read and stored, or why not."""

    source: str
    url: str
    result: str  # "ok", "not_modified", "empty", "error"
    items: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    merged: int = 0  # stored papers this poll added facts to (upvotes, DOIs)
    announced: date | None = None
    error: str | None = None
    note: str | None = None
    problems: int = 0  # entries left out (each logged with why)


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """One subscriber's digest run."""

    subscriber: str
    address: str | None
    # "sent", "failed", "retry" (failed, queued for another attempt), "nothing",
    # "queued-elsewhere" (another run queued it first), "would-send", "written", "skipped",
    # "unrecorded" (sent, but the record failed)
    status: str
    count: int = 0  # papers in the digest
    omitted: int = 0
    error: str | None = None
    where: str | None = None
    digest: Digest | None = field(default=None, repr=False)
    channel: str = "email"

    @property
    def target(self) -> str:
        """Where it went, for people: `<ada@lab.example>`, `slack #robot-learning`."""
        return "(nowhere)" if self.address is None else target_label(self.channel, self.address)


def build_sources(config: Config) -> list[Source]:
    """Instantiate every configured source through the registry."""
    load_builtin_sources()
    return [SOURCE_KINDS[s.kind](s.name, **s.options) for s in config.sources]


def build_fetcher(config: Config, client: Any, **options: Any) -> PoliteFetcher:
    """The run's polite fetcher over `client`: [polling]'s fetch limits, each source's own
    (`options` go to `PoliteFetcher`: spacing, retries)."""
    from bot.sources.http import PoliteFetcher

    defaults = config.polling.fetch_limits()
    own = {source.name: source.fetch_limits(defaults) for source in build_sources(config)}
    return PoliteFetcher(client, limits=defaults, source_limits=own, **options)


async def poll(
    config: Config,
    store: Store,
    fetcher: Any,
    *,
    now: datetime,
    only: str | None = None,
) -> list[PollReport]:
    """Fetch every source once, store new papers, and say per source what happened. A
    source that fails (whatever the exception) is reported as an error; the others go on."""
    reports = []
    for source in build_sources(config):
        if only is not None and source.name != only:
            continue
        reports.append(await poll_source(source, store, fetcher, now=now))
    return reports


async def poll_source(source: Source, store: Store, fetcher: Any, *, now: datetime) -> PollReport:
    """Poll one source (one request or several), store its papers, say what happened.
    Never raises for the source's own failure (a SourceError, or any bug reading it: that
    one is logged with its traceback): it is recorded for `status` and reported as an error,
    so the other sources and the digests of papers already stored go on."""
    url = str(getattr(source, "url", ""))
    try:
        return await _poll_source(source, store, fetcher, url=url, now=now)
    except SourceError as exc:
        message = str(exc)
        log.error("source %s: %s", source.name, message)
    except Exception as exc:  # a bug reading this source must not stop the others
        message = unexpected(exc)
        log.exception("source %s: failed unexpectedly: %s", source.name, message)
    message = redact_shapes(message)  # `status` shows it: no password from a source's url
    try:
        store.record_poll(source.name, url=url, now=now, result="error", error=message)
    except Exception as exc:  # the database is down: the poll's outcome is only logged
        log.error("source %s: could not record the failed poll: %s", source.name, exc)
    return PollReport(source.name, url, "error", error=message)


async def _poll_source(
    source: Source, store: Store, fetcher: Any, *, url: str, now: datetime
) -> PollReport:
    state = store.fetch_state(source.name, url)
    harvest = await source.harvest(fetcher, state, now=now)
    if harvest.not_modified:
        store.record_poll(source.name, url=url, now=now, result="not_modified", state=state)
        return PollReport(source.name, url, "not_modified")
    for problem in harvest.problems:
        log.warning("source %s: left out %s", source.name, problem)
    papers = tagged(_dated(harvest.papers, now), source)
    counts = store.upsert_papers(papers, now=now, authority=source.authority)
    result = "ok" if papers else "empty"
    store.record_poll(
        source.name,
        url=url,
        now=now,
        result=result,
        state=harvest.state,
        items=len(papers),
        new=counts.new,
        updated=counts.updated,
        announced=harvest.announced,
        batch=batch_id(papers),
        left_out=harvest.problems,
    )
    return PollReport(
        source.name,
        url,
        result,
        items=len(papers),
        new=counts.new,
        updated=counts.updated,
        unchanged=counts.unchanged,
        merged=counts.merged,
        announced=harvest.announced,
        note=harvest.empty_reason,
        problems=len(harvest.problems),
    )


def tagged(papers: Sequence[Paper], source: Source) -> list[Paper]:
    """Papers marked with the source's name and kind, for `src:` rules."""
    return [
        replace(
            paper,
            source=paper.source or source.name,
            sources=tuple(dict.fromkeys((*paper.sources, *source.tags))),
        )
        for paper in papers
    ]


def batch_id(papers: Sequence[Paper]) -> str | None:
    """A name for the set of (versioned) ids a feed held; None for an empty feed."""
    if not papers:
        return None
    ids = "\n".join(sorted(p.versioned_id for p in papers))
    return hashlib.sha256(ids.encode()).hexdigest()[:32]


def _dated(papers: Sequence[Paper], now: datetime) -> list[Paper]:
    """Papers whose feed gave no date belong to the day they were polled (US Eastern, arXiv's
    calendar), so they reach the digest window instead of being stored and never sent."""
    today = now.astimezone(ARXIV_TIMEZONE).date()
    undated = sum(1 for p in papers if p.announced is None)
    if undated:
        log.warning("%d papers without an announcement date; taking %s", undated, today)
    return [p if p.announced is not None else replace(p, announced=today) for p in papers]


def _email_section(config: Config) -> EmailConfig:
    if config.email is None:
        raise ConfigError(["email: the [email] section is missing"], source=str(config.path))
    return config.email


def smtp_settings(config: Config) -> SmtpSettings:
    """The SMTP connection settings from [email]."""
    e = _email_section(config)
    return SmtpSettings(
        host=e.host,
        port=e.effective_port,
        security=e.security,
        username=e.username,
        password=e.password,
        timeout=e.timeout,
    )


def email_settings(config: Config) -> EmailSettings:
    """The message-building settings from [email]."""
    e = _email_section(config)
    return EmailSettings(
        from_addr=e.from_address,
        from_name=e.from_name,
        list_id=e.list_id,
        unsubscribe_mailto=e.unsubscribe_mailto or "",
    )


def slack_settings(config: Config) -> SlackSettings:
    """How to reach Slack, from [slack] and the subscribers' webhook variables."""
    slack = config.slack
    if slack is None:
        return SlackSettings(token=None, webhooks=dict(config.webhooks))
    return SlackSettings(
        token=slack.bot_token,
        api_url=slack.api_url,
        post_interval=slack.post_interval_seconds,
        timeout=slack.timeout,
        webhooks=dict(config.webhooks),
    )


# The outbox's kind for the mails people ask for on the pages or in Slack (a confirmation
# link, a fresh manage link): sent by email, but counted apart from the digests, so a
# mistyped address never counts as a digest bounce (nor pauses anyone).
NOTICE_CHANNEL = "notice"


def build_channels(config: Config, *, out_dir: Path | None = None) -> dict[str, Channel]:
    """The channels the config sets up, by kind; with `out_dir`, one that writes files."""
    if out_dir is not None:
        files = FileChannel(out_dir)
        return {kind: files for kind in PAYLOADS}
    channels: dict[str, Channel] = {}
    if config.email is not None:
        channels["email"] = channels[NOTICE_CHANNEL] = EmailChannel(smtp_settings(config))
    if config.slack is not None or config.webhooks:
        channels["slack"] = SlackChannel(slack_settings(config))
    return channels


def retry_policy(config: Config) -> RetryPolicy:
    """The outbox's leases and retries from [delivery]."""
    d = config.delivery
    return RetryPolicy(
        lease=timedelta(seconds=d.lease_seconds),
        batch=d.batch,
        max_attempts=d.max_attempts,
        first_delay=timedelta(seconds=d.retry_first_seconds),
        max_delay=timedelta(seconds=d.retry_max_seconds),
        bounce_limit=d.bounce_limit,
    )


def window_start(config: Config, now: datetime) -> date:
    """The first announcement day the default digest window takes: `window_days` days,
    today (US Eastern, arXiv's calendar) included."""
    today = now.astimezone(ARXIV_TIMEZONE).date()
    return today - timedelta(days=config.digest.window_days - 1)


async def deliver(
    config: Config,
    store: Store,
    channels: Channels,
    *,
    now: datetime,
    since: date | Callable[[Subscriber], date] | None = None,
    only: str | None = None,
    dry_run: bool = False,
    record: bool = True,
    clock: Callable[[], datetime] | None = None,
    period: Callable[[Subscriber], str] | None = None,
    retry: RetryPolicy | None = None,
    catch_up: bool = True,
    subscribers: Sequence[Subscriber] | None = None,
    note: Callable[[Subscriber], str | None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> list[DeliveryReport]:
    """Build every subscriber's digest, per channel they take (email, Slack), from stored
    papers they have not received there, queue it in the outbox (with its papers, in one
    transaction), then send what the outbox holds through `channels` (kind -> channel; one
    channel serves every kind), recording each message right after it was accepted.

    `dry_run` builds and reports but sends and records nothing; `record=False` sends (e.g. to
    files) without queueing or recording. `period(subscriber)` names the schedule slot a
    digest is for (two runs cannot queue one slot twice); by default the digest's own id.
    `catch_up` also sends queued digests still waiting for their retry time (a run from
    the command line); the daemon leaves them to their time.

    The daemon passes the `subscribers` whose digest is due, `since` per subscriber (the
    window of their schedule), and `note(subscriber)`: the text of a short note sent when
    their digest holds nothing (None: send nothing), and `should_stop()` (checked before
    each message) when it shuts down."""
    if subscribers is None:
        config_subscribers = config.declared_subscribers()
        if record and not dry_run:
            store.sync_config_subscribers(config_subscribers, now=now)
        subscribers = store.subscribers(config_subscribers, defaults=config.digest.defaults())
    subscribers = list(subscribers)
    if only is not None:
        subscribers = [s for s in subscribers if s.name == only]
        if not subscribers:
            raise PaperbellError(
                f"no active subscriber named {only!r}", hint="see `paperbell list`"
            )
    if not isinstance(channels, Mapping):
        channels = {kind: channels for kind in PAYLOADS}
    default_since = window_start(config, now)
    if callable(since):
        since_of = since
    else:
        fixed = since or default_since
        since_of = lambda _: fixed  # noqa: E731
    starts = [since_of(sub) for sub in subscribers]
    papers = store.papers_announced_since(min(starts, default=default_since))

    reports: list[DeliveryReport] = []
    parsed: list[tuple[Subscriber, list[Rule]]] = []
    for sub in subscribers:
        if not sub.targets():
            why = "no confirmed email address" if sub.email else "nowhere to deliver"
            reports.append(DeliveryReport(sub.name, None, "skipped", error=why))
            continue
        try:
            parsed.append((sub, [parse_rule(text) for text in sub.rules]))
        except RuleError as exc:
            reports.append(
                DeliveryReport(sub.name, sub.address, "failed", error=f"bad rule: {exc}")
            )
    # One matcher for everyone: each distinct rule once, each paper analyzed once.
    matches = match_rules((rule for _, rules in parsed for rule in rules), papers)
    if record and not dry_run:
        first = min(starts, default=default_since)
        refresh_rule_counts(store, parsed, now=now, shared=(first, papers, matches))

    batch: list[tuple[Digest, str, bytes]] = []  # digest, recipient, payload
    for sub, rules in parsed:
        for kind, recipient in sub.targets():
            if kind not in channels:
                reports.append(
                    DeliveryReport(
                        sub.name,
                        recipient,
                        "skipped",
                        error=f"no {kind} channel is configured ([{kind}])",
                        channel=kind,
                    )
                )
                continue
            delivered = store.delivered_versions(sub.id, kind) if sub.id else {}
            digest = build_digest(
                sub,
                rules,
                papers,
                delivered=delivered,
                now=now,
                channel=kind,
                since=since_of(sub),
                matches=matches,
            )
            text = note(sub) if note is not None and digest is None else None
            if digest is None and text is not None:
                slot = period(sub) if period else f"note:{now:%Y-%m-%d}"
                digest = note_digest(sub, text, period=slot, now=now, channel=kind)
            if digest is None:
                reports.append(DeliveryReport(sub.name, recipient, "nothing", channel=kind))
                continue
            try:
                payload = PAYLOADS[kind](config, digest, recipient, now)
            except ValueError as exc:
                reports.append(
                    DeliveryReport(sub.name, recipient, "failed", error=str(exc), channel=kind)
                )
                continue
            batch.append((digest, recipient, payload))

    if dry_run:
        for digest, recipient, _ in batch:
            reports.append(_report(digest, recipient, "would-send"))
        return _in_order(reports, subscribers)
    if not record:  # written to files: nothing queued, nothing recorded
        by_digest = {id(digest): recipient for digest, recipient, _ in batch}
        for kind in dict.fromkeys(digest.channel for digest, _, _ in batch):
            files = [(d, payload) for d, _, payload in batch if d.channel == kind]
            for outcome in await channels[kind].send_all(files, lambda _: None):
                reports.append(
                    _report(
                        outcome.item,
                        by_digest[id(outcome.item)],
                        "written" if outcome.ok else "failed",
                        error=outcome.error,
                        where=outcome.where,
                    )
                )
        return _in_order(reports, subscribers)

    built: dict[int, Digest] = {}
    for digest, recipient, payload in batch:
        sub = digest.subscriber
        assert sub.id is not None
        outbox_id = store.enqueue(
            sub.id,
            channel=digest.channel,
            period=period(sub) if period else digest.digest_id,
            digest_id=digest.digest_id,
            recipient=recipient,
            payload=payload,
            sent=[item.paper for item in digest.items],
            omitted=digest.omitted,
            now=now,
        )
        if outbox_id is None:
            reports.append(_report(digest, recipient, "queued-elsewhere"))
        else:
            built[outbox_id] = digest
    for attempt in await drain(
        store,
        channels,
        clock=clock or (lambda: now),
        retry=retry or retry_policy(config),
        due_only=not catch_up,
        should_stop=should_stop,
    ):
        item = attempt.item
        digest = built.get(item.id)
        error = attempt.error
        if attempt.status == "retry" and attempt.next_attempt is not None:
            error = f"{error} (queued: next attempt {attempt.next_attempt:%Y-%m-%d %H:%M} UTC)"
        if attempt.paused:
            error = f"{error}; {item.subscriber} is paused (`paperbell resume {item.subscriber}`)"
        reports.append(
            DeliveryReport(
                item.subscriber,
                item.recipient,
                attempt.status,
                count=item.papers,
                omitted=item.omitted,
                error=error,
                digest=digest,
                channel=item.channel,
            )
        )
    return _in_order(reports, subscribers)


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
    matches) of these subscribers' rules: used when it covers those days, so that nothing
    is matched twice. Returns how many subscribers were counted; a database error is
    logged, never stops a delivery."""
    try:
        counted = store.rule_counts_times()
        stale = [
            (sub, rules)
            for sub, rules in parsed
            if sub.id is not None
            and not (sub.id in counted and counted[sub.id].date() == now.date())
        ]
        latest = store.latest_announcement() if stale else None
        if latest is None:
            return 0
        first = latest - timedelta(days=days - 1)
        if shared is not None and shared[0] <= first:
            papers, matches = shared[1], shared[2]
        else:
            papers = store.papers_announced_since(first)
            matches = match_rules((rule for _, rules in stale for rule in rules), papers)
        recent = [p for p in papers if p.announced is not None and first <= p.announced <= latest]
        for sub, rules in stale:
            assert sub.id is not None
            found = count_matches(rules, recent, matches, examples=ACTIVITY_EXAMPLES)
            store.save_rule_counts(
                sub.id,
                [
                    RuleCount(text, matched, len(recent), first, latest, examples, now)
                    for text, (matched, examples) in found.items()
                ],
            )
        return len(stale)
    except PaperbellError as exc:
        log.warning("rule counts not refreshed: %s", exc)
        return 0
    except Exception:  # the manage page's figures must never cost anyone their digest
        log.exception("rule counts not refreshed")
        return 0


def digest_links(config: Config, subscriber: Subscriber, now: datetime) -> DigestLinks | None:
    """The subscriber's signed manage and one-click unsubscribe links, when [web] is set up
    for them (public_url, secret_key_env) and the subscriber is stored (has an id)."""
    signer = config.web.link_signer()
    if signer is None or subscriber.id is None:
        return None
    unsubscribe = signer.url("unsubscribe", subscriber, now=now)
    return DigestLinks(
        unsubscribe=unsubscribe if unsubscribe.startswith("https://") else None,
        manage=signer.url("manage", subscriber, now=now),
    )


def email_payload(config: Config, digest: Digest, recipient: str, now: datetime) -> bytes:
    """The digest as the email message it is sent as."""
    links = digest_links(config, digest.subscriber, now)
    return bytes(build_message(digest, email_settings(config), now=now, links=links))


def slack_payload(config: Config, digest: Digest, recipient: str, now: datetime) -> bytes:
    """The digest as the Slack messages it is posted as (a summary, then its thread)."""
    threaded = not recipient.startswith(WEBHOOK_PREFIX)
    posts = build_posts(digest, threaded=threaded)
    items = [item.paper for item in digest.items]
    papers = [
        [version_key(items[n - 1].id, items[n - 1].version) for n in p.numbers] for p in posts
    ]
    return slack_delivery(recipient, posts, papers)


# How a digest becomes the bytes queued for each kind of channel.
PAYLOADS: dict[str, Callable[[Config, Digest, str, datetime], bytes]] = {
    "email": email_payload,
    "slack": slack_payload,
}


def _report(
    digest: Digest,
    recipient: str,
    status: str,
    *,
    error: str | None = None,
    where: str | None = None,
) -> DeliveryReport:
    return DeliveryReport(
        digest.subscriber.name,
        recipient,
        status,
        count=digest.count,
        omitted=len(digest.omitted),
        error=error,
        where=where,
        digest=digest,
        channel=digest.channel,
    )


def _in_order(reports: list[DeliveryReport], subscribers: list[Subscriber]) -> list[DeliveryReport]:
    order = {s.name: i for i, s in enumerate(subscribers)}
    return sorted(reports, key=lambda r: order.get(r.subscriber, len(order)))
