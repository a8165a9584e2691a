"""Delivery: stored papers -> each subscriber's digest -> the outbox -> the channels.

Owns the order of a delivery run, as visible steps, and what a caller may ask of one (a
`DeliveryRequest`); every decision inside a step belongs to a stage (`bot.match`,
`bot.render`, `bot.channels.outbox`). What it runs with (the store, the channels, their
settings, the link signer) is wired once from the config (`bot.pipeline.wiring.Parts`).

    plan_delivery   who is due, their rules parsed; the papers of their windows, each
                    distinct rule matched once
    build_digests   per subscriber and target (each place their digests go: the channel
                    registry's kinds say where): the digest built (or the empty day's note)
    write_texts     the summaries and translations their subscribers asked for, of the
                    papers going out (`bot.pipeline.texts`; a preview asks no model)
    queue           each digest into the outbox as a job, with its papers, once per
                    period (`bot.pipeline.dispatch`, as the step after it)
    send            the outbox drained: each job claimed, rendered for its target by its
                    channel kind (`bot.pipeline.jobs`), its message kept, sent through the
                    channel and recorded once the far end accepted it
    (report)        one `DeliveryReport` per digest, or per reason there is none, in the
                    subscribers' order

The plan is made once for everyone; the steps after it run a share of the subscribers at
a time (`shares`), so that the first digests are sent seconds after the start and few
messages are held in memory. A dry run renders and stops; a run to files renders and
writes each payload through the file channel, and queues and records nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

from bot.channels import RenderContext, Target, channel_kind, kind_of, subscriber_targets, where
from bot.core.errors import MissingSecrets, PaperbellError, RuleError
from bot.core.models import Digest, Paper, Ranking, Subscriber
from bot.match.digest import RuleMatches, build_digest, match_rules, note_digest
from bot.match.matched import collector_paused
from bot.pipeline.activity import refresh_rule_counts
from bot.pipeline.dispatch import (
    DeliveryReport,
    Outgoing,
    outgoing_of,
    queue,
    report_of,
    send,
    write_files,
)
from bot.pipeline.texts import TextsRun, write_texts
from bot.pipeline.wiring import Parts
from bot.rules import Rule, parse_rule

# "send": queue each digest in the outbox, then send what it holds, recording each message
# (the config's subscribers are synced first, the rules' counts refreshed after); "dry-run":
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
    them to their time. `sends` false: the digests are queued, not sent by this process
    (its sender processes send them)."""

    mode: Mode = "send"
    only: str | None = None  # this subscriber alone, by name
    subscribers: Sequence[Subscriber] | None = None
    since: date | Callable[[Subscriber], date] | None = None
    period: Callable[[Subscriber], str] | None = None
    note: Callable[[Subscriber], str | None] | None = None
    catch_up: bool = True
    sends: bool = True  # False: queue only; the sender processes send (bot.cli.senders)


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
    parts: Parts,
    request: DeliveryRequest,
    *,
    now: datetime,
    clock: Callable[[], datetime] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    on_texts: Callable[[TextsRun], None] | None = None,
) -> list[DeliveryReport]:
    """Each subscriber's digest per target, of stored papers they have not received there,
    queued in the outbox and sent (or, as `request` says, only rendered and reported or
    written to files): a share of the subscribers at a time, so that the first digests go
    out while the others are made. `clock` times the sending (default: `now`);
    `should_stop()` is checked before each share and each message; `on_texts` hears what
    the run's summaries and translations came to."""
    _refuse_unsigned_links(parts, request)
    # Planning reads everyone and matches every rule: in a thread, so that the daemon's
    # web app and slash command answer meanwhile (`collector_paused` says why).
    with collector_paused():
        plan = await asyncio.to_thread(plan_delivery, parts, request, now=now)
    rankings = await _rankings(parts, plan, now=now)
    sending_clock = clock or (lambda: now)
    reports = list(plan.left_out)
    texts_run: TextsRun | None = None  # the first share's: those who want texts come first
    tried: set[int] = set()  # outbox records tried this run: each is tried once a run
    # Building digests takes CPU: in a thread, so that the event loop (the daemon's web app
    # and slash command) is never held for a whole share.
    for share in shares(plan.parsed):
        if should_stop():  # the subscribers left are planned by the next run
            break
        built, skipped = await asyncio.to_thread(
            build_digests, parts, plan, request, now=now, rankings=rankings, parsed=share
        )
        digests, share_texts = await write_texts(
            parts.text_model,
            parts.store,
            [d for d, _ in built],
            now=now,
            ask=request.mode == "send",
        )
        texts_run = texts_run or share_texts
        targets = (target for _, target in built)
        pairs = list(zip(digests, targets, strict=True))
        reports += skipped
        if request.mode == "send":  # each digest a job, rendered by the worker sending it
            reports += await asyncio.to_thread(queue, parts.store, pairs, request, now=now)
            if request.sends:
                reports += await send(parts, sending_clock, request, should_stop, tried=tried)
        else:  # a preview or files: rendered here, nothing queued
            reports += await _render_here(parts, pairs, now, request.mode)
        await asyncio.sleep(0)  # the event loop's turn: the web app answers in between
    if on_texts is not None:
        on_texts(texts_run or TextsRun(model=parts.text_model.model if parts.text_model else None))
    if request.mode == "send" and not should_stop():  # for the manage pages, after the digests
        shared = (plan.first, plan.papers, plan.matches)
        await asyncio.to_thread(
            refresh_rule_counts, parts.store, plan.parsed, now=now, shared=shared
        )
    return _in_order(reports, plan.subscribers)


# Subscribers whose digests are made, queued and sent at a time: the first share is small,
# so that the run's first message goes out soon; later ones large enough that a share's
# queries and transaction are few, small enough that few messages are held at once.
SHARE = 50
FIRST_SHARE = 5


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


async def _render_here(
    parts: Parts, pairs: list[tuple[Digest, Target]], now: datetime, mode: Mode
) -> list[DeliveryReport]:
    """A dry run's reports, or a run to files' (its payloads written), of digests rendered
    in this process at `now` (in a thread: the event loop keeps answering)."""
    outgoing, reports = await asyncio.to_thread(render, pairs, parts.render_context(now))
    if mode == "dry-run":
        return reports + [report_of(o.digest, o.recipient, "would-send") for o in outgoing]
    return reports + await write_files(parts.channels, outgoing)


def _refuse_unsigned_links(parts: Parts, request: DeliveryRequest) -> None:
    """Emails that are sent carry signed links, never the placeholders of a preview: the
    commands ask for the key first (`bot.cli.secrets`); this holds for any other caller."""
    if request.mode == "send" and "email" in parts.channels and parts.unsigned:
        raise MissingSecrets(
            [f"{line}: emails are sent with signed links" for line in parts.unsigned]
        )


def plan_delivery(parts: Parts, request: DeliveryRequest, *, now: datetime) -> DeliveryPlan:
    """Who is due (their rules parsed), the papers of their windows, and what each distinct
    rule matches among them. Raises when `request.only` names no active subscriber."""
    subscribers = request.subscribers
    if subscribers is None:
        if request.mode in ("send", "files"):  # a stored id: the emails' links name it
            parts.declare(now)
        subscribers = parts.store.subscribers.all(parts.declared(), defaults=parts.defaults)
    subscribers = list(subscribers)
    if request.only is not None:
        subscribers = [s for s in subscribers if s.name == request.only]
        if not subscribers:
            raise PaperbellError(
                f"no active subscriber named {request.only!r}", hint="see `paperbell list`"
            )
    default_since = parts.window_start(now)
    since = request.since
    if callable(since):
        since_of = since
    else:
        fixed = since or default_since
        since_of = lambda _: fixed  # noqa: E731
    first = min((since_of(sub) for sub in subscribers), default=default_since)
    papers = parts.store.papers.announced_since(first)

    left_out: list[DeliveryReport] = []
    parsed: list[tuple[Subscriber, list[Rule]]] = []
    rules: dict[str, Rule] = {}  # by text: many subscribers share a rule (a rule is frozen)

    def parsed_rule(text: str) -> Rule:
        rule = rules.get(text)
        if rule is None:
            rule = rules[text] = parse_rule(text)
        return rule

    targets: dict[str, list[Target]] = {}
    for sub in subscribers:
        targets[sub.name] = subscriber_targets(sub, parts.settings)
        if not targets[sub.name]:
            why = "no confirmed email address" if sub.email else "nowhere to deliver"
            left_out.append(DeliveryReport(sub.name, None, "skipped", error=why))
            continue
        try:
            parsed.append((sub, [parsed_rule(text) for text in sub.rules]))
        except RuleError as exc:
            # Every place their digests go, said once: none gets a digest.
            where_to = where(targets[sub.name])
            left_out.append(
                DeliveryReport(sub.name, None, "failed", error=f"bad rule: {exc}", where=where_to)
            )
    # One matcher for everyone: each distinct rule once, each paper analyzed once.
    matches = match_rules((rule for _, rules in parsed for rule in rules), papers)
    return DeliveryPlan(subscribers, parsed, targets, left_out, since_of, first, papers, matches)


def build_digests(
    parts: Parts,
    plan: DeliveryPlan,
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
    paused = parts.store.targets.paused()
    # What each of them has received, in one query (not one per subscriber).
    received = parts.store.outbox.delivered_versions_of(
        [s.id for s, _ in parsed if s.id is not None]
    )
    for sub, rules in parsed:
        for target in plan.targets.get(sub.name, ()):
            kind, recipient = kind_of(target.channel), target.recipient
            pause = paused.get((sub.id, target.channel)) if sub.id is not None else None
            if kind not in parts.channels or target.problem is not None or pause is not None:
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


def render(
    digests: Iterable[tuple[Digest, Target]], context: RenderContext
) -> tuple[list[Outgoing], list[DeliveryReport]]:
    """Each digest rendered for its target by the target's channel kind (as the digest it
    shows: an email holds at most what mail apps show whole); a report for each that could
    not be (its kind is not registered, or refuses the digest)."""
    outgoing: list[Outgoing] = []
    reports: list[DeliveryReport] = []
    for digest, target in digests:
        kind = channel_kind(target.channel)
        try:
            if kind is None:
                raise ValueError(f"no channel kind {target.kind!r} is known")
            rendered = kind.render(digest, target, context)
        except ValueError as exc:
            reports.append(report_of(digest, target.recipient, "failed", error=str(exc)))
            continue
        outgoing += outgoing_of(rendered, target.recipient)
    return outgoing, reports


async def _rankings(parts: Parts, plan: DeliveryPlan, *, now: datetime) -> dict[int, Ranking]:
    """The planned subscribers' rankings by their verdicts (bot.pipeline.similar); none when
    it fails (papers like these never stop a digest: they go unranked). A site where nobody
    ever gave a verdict does not even load the ranking's libraries (numpy, scipy)."""
    if not parts.store.feedback.any():
        return {}
    from bot.pipeline.similar import rank_subscribers

    try:
        ranked = await rank_subscribers(
            parts.embeddings, parts.store, plan.parsed, plan.papers, plan.matches, now=now
        )
    except Exception as exc:
        log.error("papers like these: digests go unranked this run: %s", exc, exc_info=True)
        return {}
    return ranked.rankings


def _in_order(reports: list[DeliveryReport], subscribers: list[Subscriber]) -> list[DeliveryReport]:
    """The reports in the subscribers' order, a digest's "queued" left out once its send
    was reported."""
    tried = {r.outbox_id for r in reports if r.status != "queued" and r.outbox_id is not None}
    kept = [r for r in reports if not (r.status == "queued" and r.outbox_id in tried)]
    order = {s.name: i for i, s in enumerate(subscribers)}
    return sorted(kept, key=lambda r: order.get(r.subscriber, len(order)))
