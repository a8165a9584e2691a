"""Delivery: stored papers -> each subscriber's digest -> the outbox -> the channels.

Owns the order of a delivery run, as visible steps, and what a caller may ask of one (a
`DeliveryRequest`); every decision inside a step belongs to a stage (`bot.match`,
`bot.render`, `bot.channels.outbox`). The clock, the store and the channels are passed in.

    plan_delivery   who is due, their rules parsed; the papers of their windows, each
                    distinct rule matched once (and, when recording, the rules' counts
                    for the manage page: `bot.pipeline.activity`)
    build_digests   per subscriber and target (each place their digests go: the channel
                    registry's kinds say where): the digest built (or the empty day's note)
    write_texts     the summaries and translations their subscribers asked for, of the
                    papers going out (`bot.pipeline.texts`; a preview asks no model)
    render          each digest rendered for its target by its channel kind
                    (`bot.pipeline.payloads`)
    queue           each payload into the outbox with its papers, once per period
                    (`bot.pipeline.dispatch`, as the two steps after it)
    send            the outbox drained through the channels, each message recorded once
                    the far end accepted it
    (report)        one `DeliveryReport` per digest, or per reason there is none, in the
                    subscribers' order

The plan is made once for everyone (one matcher pass, in a thread, the cyclic collector
paused); a large run's render workers start meanwhile. The steps after it run a share of
the subscribers at a time (`shares`: those who want summaries or translations together,
then FIRST_SHARE, then SHARE at a time), so that the first digests are sent seconds after
the start and no more than a share's messages are held in memory. A share's digests are
built giving the event loop back every BUILD_TURN subscribers, its payloads queued in a
thread, rendering here gives the loop back every TURN digests, and the manage pages' rule
counts are refreshed in a thread at the end: the daemon's web app and slash command share
the loop.

A dry run stops after rendering; a run to files sends the payloads through the
channels given and queues and records nothing.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal

from bot.channels import (
    CHANNEL_KINDS,
    Channel,
    RenderContext,
    Target,
    kind_of,
    load_builtin_channels,
    subscriber_targets,
    where,
)
from bot.channels.outbox import Channels
from bot.channels.renderpool import PoolBroken, RenderPool
from bot.config import SECRET_KEY, Config
from bot.core.calendar import eastern_date
from bot.core.errors import MissingSecrets, PaperbellError, RuleError
from bot.core.models import Digest, Paper, Ranking, Subscriber
from bot.match.digest import RuleMatches, build_digest, match_rules, note_digest
from bot.match.matched import Matched, collector_paused
from bot.pipeline.activity import refresh_rule_counts
from bot.pipeline.dispatch import DeliveryReport, Outgoing, queue, report_of, send, write_files
from bot.pipeline.likes import sync_declared_likes
from bot.pipeline.payloads import (
    POOL_FROM,
    linker,
    render_context,
    render_for,
    render_processes,
    render_settings,
)
from bot.pipeline.texts import TextsRun, write_texts
from bot.pipeline.wiring import channel_settings
from bot.rules import Rule, parse_rule
from bot.store import Store

# "send": queue each digest in the outbox, then send what it holds, recording each message
# (the config's subscribers are synced and the rules' counts refreshed first); "dry-run":
# build and report, send and record nothing; "files": send through the channels given
# (`digest --out`: files), queue and record no delivery (the config's subscribers are
# synced first, as when sending: the files' manage and unsubscribe links name them).
Mode = Literal["send", "dry-run", "files"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DeliveryRequest:
    """What a delivery run is asked for, in one value: its mode, whose digests, which days.

    `subscribers` are the daemon's (those whose digest is due); by default every active
    subscriber (the config's synced into the store first, when sending or writing files).
    `since` is the first announcement day a digest takes, one for all or per subscriber
    (the window of their schedule); by default the [digest] window. `period(subscriber)`
    names the schedule slot a digest is for (two runs cannot queue one slot twice); by
    default the digest's own id. `note(subscriber)` is the text of a short note sent when
    their digest holds nothing (None: send nothing). `catch_up` also sends queued digests
    still waiting for their retry time (a run from the command line); the daemon leaves
    them to their time."""

    mode: Mode = "send"
    only: str | None = None  # this subscriber alone, by name
    subscribers: Sequence[Subscriber] | None = None
    since: date | Callable[[Subscriber], date] | None = None
    period: Callable[[Subscriber], str] | None = None
    note: Callable[[Subscriber], str | None] | None = None
    catch_up: bool = True


@dataclass(frozen=True, slots=True)
class DeliveryPlan:
    """Who is due and what their rules match: the first step's result."""

    subscribers: list[Subscriber]  # the run's, in the order of its reports
    parsed: list[tuple[Subscriber, list[Rule]]]  # those with somewhere to go and good rules
    targets: Mapping[str, list[Target]]  # where each one's digests go, by subscriber name
    left_out: list[DeliveryReport]  # the others, and why
    since: Callable[[Subscriber], date]  # each one's first announcement day
    first: date  # the earliest of those
    papers: Sequence[Paper]  # announced since `first`
    matches: RuleMatches


async def deliver(
    config: Config,
    store: Store,
    channels: Channels,
    request: DeliveryRequest,
    *,
    now: datetime,
    clock: Callable[[], datetime] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    on_texts: Callable[[TextsRun], None] | None = None,
    pool_from: int = POOL_FROM,
) -> list[DeliveryReport]:
    """Build every subscriber's digest, per channel they take (email, Slack), from stored
    papers they have not received there, queue it in the outbox (with its papers, in one
    transaction), then send what the outbox holds through `channels` (kind -> channel; one
    channel serves every kind), recording each message right after it was accepted; a
    share of the subscribers at a time (`shares`), so that the first digests go out while
    the others are made: as
    `request` says (see `DeliveryRequest`). `clock` times the sending (default: `now`);
    `should_stop()` is checked before each message (the daemon shutting down);
    `on_texts` hears what the run's summaries and translations came to. A run of
    `pool_from` digests or more renders them in worker processes (bot.channels.renderpool)."""
    _refuse_unsigned_links(config, channels, request)
    if not isinstance(channels, Mapping):
        load_builtin_channels()
        channels = dict.fromkeys(CHANNEL_KINDS, channels)
    # A run that will render in worker processes starts them first: they start (a second
    # or so) while the plan is made, and are ready when its first digests are.
    pool = await _early_pool(config, store, request, now=now, pool_from=pool_from)
    frozen = False
    # Shares being rendered by the pool's workers while this process queues and sends the
    # one before: as many as there are workers, then the oldest is taken.
    ahead: deque[asyncio.Task[Made]] = deque()
    tried: set[int] = set()  # the outbox records this run tried to send, not sent

    async def finish(made: Made) -> list[DeliveryReport]:
        """A share's rendered digests queued and sent (or, as `request` says, reported or
        written to files), with a report for each that could not be rendered."""
        outgoing, failed = made
        if request.mode == "dry-run":
            return [*failed, *(report_of(o.digest, o.recipient, "would-send") for o in outgoing)]
        if request.mode == "files":
            return [*failed, *await write_files(channels, outgoing)]
        # In a thread, as the share's digests are built: a share's payloads written in one
        # transaction hold the interpreter little but take a tenth of a second or more.
        queued = await asyncio.to_thread(queue, store, outgoing, period=request.period, now=now)
        sent = await send(
            config,
            store,
            channels,
            clock=clock or (lambda: now),
            catch_up=request.catch_up,
            should_stop=should_stop,
            tried=tried,
        )
        return [*failed, *queued, *sent]

    try:
        # Planning reads everyone and matches every rule (seconds for many thousands): in
        # a thread, so that the daemon's web app and slash command answer meanwhile.
        plan = await _planned(config, store, request, now=now, large=pool is not None)
        # The plan's many long-lived objects (papers, rules, matches) are set aside from
        # the garbage collector for the run: its full collections would otherwise walk them
        # all, holding the event loop (and the web app's answers) for a tenth of a second
        # or more each.
        gc.freeze()
        frozen = True
        workers = render_processes(config, len(plan.parsed), pool_from=pool_from)
        if pool is not None and pool.workers != workers:  # fewer due than counted
            await pool.aclose()
            pool = None
        if pool is None and workers:
            pool = _render_pool(config, now, workers)
        if pool is not None:
            await asyncio.to_thread(pool.load, plan.papers)
        try:
            rankings = await _rankings(config, store, plan, now=now)
        except Exception as exc:  # papers like these never stop a digest: sent unranked
            log.error("papers like these: digests go unranked this run: %s", exc, exc_info=True)
            rankings = {}
        if pool is not None and not pool.ready:
            # Started before the plan was made, the workers are ready but on a busy machine:
            # waited for (a second at most, as a rule), rather than this run's first digests
            # rendered here, cold, holding the event loop a tenth of a second each.
            await asyncio.to_thread(pool.wait_ready, POOL_START)
        reports = list(plan.left_out)
        texts_run: TextsRun | None = None
        context = render_context(config, now)
        # A share at a time: the first digests go out while the others are being made, and no
        # more than a few shares' messages are held at once.
        for share in shares(plan.parsed):
            built, skipped = await build_here(
                store, plan, channels, request, now=now, rankings=rankings, share=share
            )
            digests, texts = await write_texts(
                config, store, [d for d, _ in built], now=now, ask=request.mode == "send"
            )
            texts_run = texts_run or texts
            reports += skipped
            await asyncio.sleep(0)  # the event loop's turn: the web app answers in between
            pairs = list(zip(digests, (r for _, r in built), strict=True))
            if pool is None:
                made = await render_here(config, pairs, now=now, context=context)
            elif not (ahead or pool.ready):
                # The workers did not start in time: rendered here meanwhile, with every block
                # made for the first time (tens of milliseconds a digest), a digest a turn.
                made = await render_here(config, pairs, now=now, context=context, turn=1)
            else:
                ahead.append(asyncio.create_task(render_pooled(pool, config, pairs, now, context)))
                if len(ahead) <= pool.workers:
                    continue
                made = await ahead.popleft()
            reports += await finish(made)
        while ahead:
            reports += await finish(await ahead.popleft())
    finally:
        if frozen:
            gc.unfreeze()
        for task in ahead:
            task.cancel()
        if pool is not None:
            await pool.aclose()
    if on_texts is not None:
        on_texts(texts_run or TextsRun(model=config.llm.model if config.llm else None))
    if request.mode == "send":  # for the manage pages: after the digests, not before
        shared = (plan.first, plan.papers, plan.matches)
        await asyncio.to_thread(refresh_rule_counts, store, plan.parsed, now=now, shared=shared)
    return _in_order(reports, plan.subscribers)


async def _early_pool(
    config: Config, store: Store, request: DeliveryRequest, *, now: datetime, pool_from: int
) -> RenderPool | None:
    """The run's render workers, started before its plan is made when the subscribers it
    is for (as counted, not read) are enough for them; handed the papers once planned."""
    if request.only is not None:
        return None
    if request.subscribers is not None:
        counted = len(request.subscribers)
    else:
        declared = [sub.name for sub in config.declared_subscribers()]
        counted, _ = await asyncio.to_thread(store.subscribers.tally, declared)
    workers = render_processes(config, counted, pool_from=pool_from)
    return _render_pool(config, now, workers) if workers else None


def _render_pool(config: Config, now: datetime, workers: int) -> RenderPool:
    """`workers` render workers for this run, its papers handed over later (`load`)."""
    settings = render_settings(channel_settings(config))
    return RenderPool(settings, linker(config, now), workers=workers)


async def _planned(
    config: Config, store: Store, request: DeliveryRequest, *, now: datetime, large: bool
) -> DeliveryPlan:
    """`plan_delivery` in a thread, the cyclic garbage collector paused meanwhile: the
    plan makes hundreds of thousands of objects that live on, and each full collection
    they set off would walk the whole heap with the interpreter held (a tenth of a second
    each, the event loop and the web app's answers waiting). A `large` run also makes every
    match's hits there (`Matched.prepare`), not on the event loop as its first digests are
    built."""

    def plan() -> DeliveryPlan:
        made = plan_delivery(config, store, request, now=now)
        if large and isinstance(made.matches, Matched):
            made.matches.prepare()
        return made

    with collector_paused():
        return await asyncio.to_thread(plan)


# Subscribers whose digests are made, queued and sent at a time: small enough that the
# event loop is given back every few tenths of a second (the daemon's web app and slash
# command share it), large enough that a share's queries and transaction are few.
SHARE = 50
# The first share of the others (after the texts' share) is small: its digests are the
# run's first rendered, each paper's block made for the first time (tens of milliseconds
# a digest on a slow machine), and the run's first message waits for the whole share
# (bench/fanout.py on a slow 2-core VM: 2.0 s to render a first share of 50, 0.2 s for 5).
FIRST_SHARE = 5
# Digests rendered between two turns of the event loop (a few tens of milliseconds).
TURN = 5
# Subscribers whose digests are built between two turns of the event loop (~20 ms).
BUILD_TURN = 10
# Seconds a run waits for its render workers to start, once planned, before it renders
# here meanwhile (starting one takes a second or so; they start while the run plans).
POOL_START = 30.0


def shares(
    parsed: Sequence[tuple[Subscriber, list[Rule]]], size: int = SHARE, first: int = FIRST_SHARE
) -> Iterator[list[tuple[Subscriber, list[Rule]]]]:
    """The run's subscribers a share at a time: first, in one share, all who asked for
    summaries or translations (the model is asked once for the texts of all their digests,
    within one deadline and budget), then the others, `first` of them, then `size` at a
    time."""
    texts = [pair for pair in parsed if pair[0].wants_texts]
    if texts:
        yield texts
    others = [pair for pair in parsed if not pair[0].wants_texts]
    head = others[:first]
    if head:
        yield head
    for start in range(len(head), len(others), size):
        yield others[start : start + size]


def _refuse_unsigned_links(config: Config, channels: Channels, request: DeliveryRequest) -> None:
    """Emails that are sent carry signed links, never the placeholders of a preview: the
    commands ask for the key first (`bot.cli.secrets`); this holds for any other caller."""
    unsigned = config.missing(SECRET_KEY) if config.web.public_url else []
    sends_email = not isinstance(channels, Mapping) or "email" in channels
    if request.mode == "send" and sends_email and unsigned:
        raise MissingSecrets([f"{m.line()}: emails are sent with signed links" for m in unsigned])


def plan_delivery(
    config: Config, store: Store, request: DeliveryRequest, *, now: datetime
) -> DeliveryPlan:
    """Who is due (their rules parsed), the papers of their windows, and what each distinct
    rule matches among them. Raises when `request.only` names no active subscriber."""
    subscribers = request.subscribers
    if subscribers is None:
        config_subscribers = config.declared_subscribers()
        if request.mode in ("send", "files"):  # a stored id: the emails' links name it
            store.subscribers.sync_config(config_subscribers, now=now)
            sync_declared_likes(config, store, now=now)
        subscribers = store.subscribers.all(config_subscribers, defaults=config.digest.defaults())
    subscribers = list(subscribers)
    if request.only is not None:
        subscribers = [s for s in subscribers if s.name == request.only]
        if not subscribers:
            raise PaperbellError(
                f"no active subscriber named {request.only!r}", hint="see `paperbell list`"
            )
    default_since = window_start(config, now)
    since = request.since
    if callable(since):
        since_of = since
    else:
        fixed = since or default_since
        since_of = lambda _: fixed  # noqa: E731
    first = min((since_of(sub) for sub in subscribers), default=default_since)
    papers = store.papers.announced_since(first)

    left_out: list[DeliveryReport] = []
    parsed: list[tuple[Subscriber, list[Rule]]] = []
    rules: dict[str, Rule] = {}  # by text: many subscribers share a rule (a rule is frozen)

    def parsed_rule(text: str) -> Rule:
        rule = rules.get(text)
        if rule is None:
            rule = rules[text] = parse_rule(text)
        return rule

    settings = channel_settings(config)
    targets: dict[str, list[Target]] = {}
    for sub in subscribers:
        targets[sub.name] = subscriber_targets(sub, settings)
        if not targets[sub.name]:
            why = "no confirmed email address" if sub.email else "nowhere to deliver"
            left_out.append(DeliveryReport(sub.name, None, "skipped", error=why))
            continue
        try:
            parsed.append((sub, [parsed_rule(text) for text in sub.rules]))
        except RuleError as exc:
            left_out.append(
                DeliveryReport(
                    sub.name, where(targets[sub.name]), "failed", error=f"bad rule: {exc}"
                )
            )
    # One matcher for everyone: each distinct rule once, each paper analyzed once.
    matches = match_rules((rule for _, rules in parsed for rule in rules), papers)
    return DeliveryPlan(subscribers, parsed, targets, left_out, since_of, first, papers, matches)


def build_digests(
    store: Store,
    plan: DeliveryPlan,
    channels: Mapping[str, Channel],
    request: DeliveryRequest,
    *,
    now: datetime,
    rankings: Mapping[int, Ranking] | None = None,
    parsed: Sequence[tuple[Subscriber, list[Rule]]] | None = None,
) -> tuple[list[tuple[Digest, Target]], list[DeliveryReport]]:
    """Each planned subscriber's digest per target (each place their digests go), of the
    papers not delivered to them there yet; and a report for each target without a channel
    or that cannot take a digest now, each digest that holds nothing. `rankings`: by
    subscriber id, how their verdicts order their digests (bot.pipeline.similar);
    `parsed`: these of the planned subscribers only (a share of the run)."""
    rankings = rankings or {}
    parsed = plan.parsed if parsed is None else parsed
    built: list[tuple[Digest, Target]] = []
    reports: list[DeliveryReport] = []
    paused = store.targets.paused()
    # What each of them has received, in one query (not one per subscriber).
    received = store.outbox.delivered_versions_of([s.id for s, _ in parsed if s.id is not None])
    for sub, rules in parsed:
        for target in plan.targets.get(sub.name, ()):
            kind, recipient = kind_of(target.channel), target.recipient
            pause = paused.get((sub.id, target.channel)) if sub.id is not None else None
            if kind not in channels or target.problem is not None or pause is not None:
                why = target.problem or f"no {kind} channel is configured ([{kind}])"
                if pause is not None:
                    why = f"paused: {pause.reason} (`paperbell resume {sub.name}`)"
                reports.append(
                    DeliveryReport(
                        sub.name, recipient, "skipped", error=why, channel=target.channel
                    )
                )
                continue
            channel = target.channel
            delivered = received.get((sub.id, channel), {}) if sub.id is not None else {}
            digest = build_digest(
                sub,
                rules,
                plan.papers,
                delivered=delivered,
                now=now,
                channel=channel,
                since=plan.since(sub),
                matches=plan.matches,
                ranking=rankings.get(sub.id) if sub.id is not None else None,
            )
            note = request.note
            text = note(sub) if note is not None and digest is None else None
            if digest is None and text is not None:
                slot = request.period(sub) if request.period else f"note:{now:%Y-%m-%d}"
                digest = note_digest(sub, text, period=slot, now=now, channel=channel)
            if digest is None:
                reports.append(DeliveryReport(sub.name, recipient, "nothing", channel=channel))
                continue
            built.append((digest, target))
    return built, reports


async def build_here(
    store: Store,
    plan: DeliveryPlan,
    channels: Mapping[str, Channel],
    request: DeliveryRequest,
    *,
    now: datetime,
    rankings: Mapping[int, Ranking],
    share: Sequence[tuple[Subscriber, list[Rule]]],
) -> tuple[list[tuple[Digest, Target]], list[DeliveryReport]]:
    """A share's digests built (`build_digests`) BUILD_TURN subscribers at a time, giving
    the event loop back in between: on the loop, not in a thread, whose interpreter the
    web app's many short turns would each wait for."""
    built: list[tuple[Digest, Target]] = []
    reports: list[DeliveryReport] = []
    for start in range(0, len(share), BUILD_TURN):
        part = share[start : start + BUILD_TURN]
        made, skipped = build_digests(
            store, plan, channels, request, now=now, rankings=rankings, parsed=part
        )
        built += made
        reports += skipped
        await asyncio.sleep(0)
    return built, reports


def render(
    config: Config,
    digests: Iterable[tuple[Digest, Target]],
    *,
    now: datetime,
    context: RenderContext | None = None,
) -> tuple[list[Outgoing], list[DeliveryReport]]:
    """Each digest rendered for its target by the target's channel kind (as the digest it
    shows: an email holds at most what mail apps show whole); a report for each that could
    not be. `context`: the run's (`render_context`), made once for many calls."""
    outgoing: list[Outgoing] = []
    reports: list[DeliveryReport] = []
    context = context or render_context(config, now)
    for digest, target in digests:
        try:
            rendered = render_for(digest, target, context)
        except ValueError as exc:
            reports.append(report_of(digest, target.recipient, "failed", error=str(exc)))
            continue
        outgoing.append(Outgoing(rendered.digest, target.recipient, rendered.payload))
    return outgoing, reports


async def _rankings(
    config: Config, store: Store, plan: DeliveryPlan, *, now: datetime
) -> dict[int, Ranking]:
    """The planned subscribers' rankings by their verdicts (bot.pipeline.similar). A site
    where nobody ever gave a verdict does not even load the ranking's libraries (numpy,
    scipy: about a third of a second and 30 MB of every run's start)."""
    if not store.feedback.any():
        return {}
    from bot.pipeline.similar import rank_subscribers

    ranked = await rank_subscribers(config, store, plan.parsed, plan.papers, plan.matches, now=now)
    return ranked.rankings


# A share's digests rendered (each with its payload), and a report for each that could
# not be.
Made = tuple[list["Outgoing"], list[DeliveryReport]]


async def render_here(
    config: Config,
    pairs: Sequence[tuple[Digest, Target]],
    *,
    now: datetime,
    context: RenderContext,
    turn: int = TURN,
) -> Made:
    """A share rendered in this process, giving the event loop back every `turn` digests."""
    outgoing: list[Outgoing] = []
    failed: list[DeliveryReport] = []
    for start in range(0, len(pairs), turn):
        rendered, refused = render(config, pairs[start : start + turn], now=now, context=context)
        outgoing += rendered
        failed += refused
        await asyncio.sleep(0)
    return outgoing, failed


async def render_pooled(
    pool: RenderPool,
    config: Config,
    pairs: Sequence[tuple[Digest, Target]],
    now: datetime,
    context: RenderContext,
) -> Made:
    """A share rendered by the pool's workers; here, when a worker died."""
    try:
        results = await pool.render(pairs)
    except PoolBroken as exc:
        log.error("%s: the rest of this run is rendered in the main process", exc)
        return await render_here(config, pairs, now=now, context=context)
    outgoing: list[Outgoing] = []
    again: list[tuple[Digest, Target]] = []  # not rendered there: here (it says why)
    for (digest, target), result in zip(pairs, results, strict=True):
        if result.payload is None:
            again.append((digest, target))
        else:
            outgoing.append(Outgoing(result.shown or digest, target.recipient, result.payload))
    if not again:
        return outgoing, []
    here, failed = render(config, again, now=now, context=context)
    return [*outgoing, *here], failed


def window_start(config: Config, now: datetime) -> date:
    """The first announcement day the default digest window takes: `window_days` days,
    today (US Eastern, arXiv's calendar) included."""
    return eastern_date(now) - timedelta(days=config.digest.window_days - 1)


def _in_order(reports: list[DeliveryReport], subscribers: list[Subscriber]) -> list[DeliveryReport]:
    order = {s.name: i for i, s in enumerate(subscribers)}
    return sorted(reports, key=lambda r: order.get(r.subscriber, len(order)))
