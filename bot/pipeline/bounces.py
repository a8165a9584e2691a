"""Acting on what comes back to the bounce address: one raw message in (the pipe from the
mail server, `paperbell bounce`), read (bot.bounces), tied to the message paperbell sent,
acted on, and recorded (store.bounces), whatever it was. A provider's webhook event (SES,
Postmark, Mailgun: bot.web.bounces), read into the same kind of report, takes the same
path (`handle_report`).

Which message a bounce answers: the VERP token of the address it was delivered to (or the
sender the report quotes), checked against the site's key. Anyone may mail the bounce
address, and a digest's id is no secret, so a report without that token ("tokenless") is
recorded and counted and changes nothing, unless it may be tied by the signed Message-ID
it quotes (`MessageIds`: a provider's authenticated webhook call, or any report when
[email] bounces_by_message_id says so), naming a digest sent to the address that failed;
a provider's report may also be tied to the latest digest sent to the address that
failed. What it does to that message's subscriber:

- a hard bounce (5.x.x) pauses their email (a target pause: Slack and the rest go on);
- a soft bounce (4.x.x) counts, and pauses their email once `bounce_limit` of their digests
  in a row came back;
- a complaint (ARF) stops their email at once (a database subscriber's address must be
  confirmed again to restart it);
- an auto-reply, a delay warning, a bounce of a notice (a confirmation mail), of an
  address the subscriber has since changed, or of a digest sent before their email was
  paused and resumed: recorded, nothing else.

Mail that cannot be read, carries no token or a forged one, or answers no message
paperbell sent is recorded and logged, and changes nothing for anyone. Never raises for
what the message holds: only a database that cannot be written stops it (StoreError).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.bounces import BounceReport, read_bounce
from bot.bounces.imap import BounceMailbox
from bot.core.plurals import plural
from bot.core.verp import MessageIds, Verp
from bot.store import Bounce, BounceDay, SentMessage, Store, TargetPause

log = logging.getLogger(__name__)

EMAIL = "email"
# What is left in the IMAP mailbox as it was, for a person to look at.
UNTOUCHED = frozenset({"unreadable", "forged", "unknown", "tokenless"})
# How far back a provider's report that names no message looks for the digest sent to the
# address that failed (providers report within minutes; a late DSN within a few days).
ADDRESS_WINDOW = timedelta(days=7)
# What an enhanced status code means, said shortly (RFC 3463), most precise first.
_REASONS = (
    ("5.1.1", "mailbox unknown"),
    ("5.1.2", "domain unknown"),
    ("5.1.6", "mailbox moved"),
    ("5.1.10", "address has no mail server"),
    ("5.2.1", "mailbox disabled"),
    ("5.2.2", "mailbox full"),
    ("4.2.2", "mailbox full"),
    ("5.1.", "address refused"),
    ("5.2.", "mailbox refused"),
    ("4.2.", "mailbox busy"),
    ("4.4.", "mail server unreachable"),
    ("5.4.", "mail server unreachable"),
    ("5.7.", "refused by the receiving server's policy"),
    ("4.7.", "deferred by the receiving server's policy"),
)


@dataclass(frozen=True, slots=True)
class BounceOutcome:
    """What was done with one returned message: `action` as recorded (paused, counted,
    unsubscribed, ignored, unknown, tokenless, forged, unreadable), and a line for the
    log."""

    action: str
    kind: str
    subscriber: str | None
    line: str


def reason(report: BounceReport) -> str:
    """A bounce said shortly: "mailbox unknown (5.1.1)"."""
    status = report.status
    if report.kind == "complaint":
        return "marked a digest as spam (a complaint from the mail provider)"
    said = next((text for prefix, text in _REASONS if status and status.startswith(prefix)), None)
    said = said or ("refused" if report.kind == "hard" else "not delivered for now")
    return f"{said} ({status})" if status else said


def handle_bounce(
    raw: bytes,
    *,
    store: Store,
    verp: Verp | None,
    bounce_limit: int,
    now: datetime,
    source: str | None = None,
    message_ids: MessageIds | None = None,
) -> BounceOutcome:
    """Read one returned message, act on it, record it (see the module's docstring);
    `source`: where it was read, when that names it for good (an IMAP message);
    `message_ids`: given, a report without the envelope's token may be tied to its digest
    by the signed Message-ID it quotes."""
    return handle_report(
        read_bounce(raw),
        store=store,
        verp=verp,
        bounce_limit=bounce_limit,
        now=now,
        source=source,
        message_ids=message_ids,
    )


def handle_report(
    report: BounceReport,
    *,
    store: Store,
    verp: Verp | None,
    bounce_limit: int,
    now: datetime,
    source: str | None = None,
    by_address: bool = False,
    message_ids: MessageIds | None = None,
) -> BounceOutcome:
    """Act on what a bounce says, read from a returned message or from a provider's
    webhook event, and record it: one path for both. `by_address`: the report comes from a
    provider whose call was authenticated, so that, naming no message, it may be tied to
    the latest digest sent to the address that failed (within ADDRESS_WINDOW); mail to the
    bounce address anyone can send is never believed on its address alone, nor on a
    Message-ID unless `message_ids` reads it."""
    context = _Context(store, now, source)
    if report.form == "unreadable":
        return context.record(report, "unreadable", None, f"unreadable: {report.problem}")
    found = _answered(store, report, verp, message_ids)
    if found in ("unknown", "tokenless") and by_address:
        # The provider's word: about no digest sent to that address, if not the latest.
        found = (
            report.recipient
            and store.bounces.latest_to(report.recipient, since=now - ADDRESS_WINDOW)
        ) or "unknown"
    if isinstance(found, str):
        return context.record(report, found, None, _unmatched(found, report))
    return _act(context, report, found, bounce_limit=bounce_limit)


def record_forged(report: BounceReport, *, store: Store, now: datetime) -> BounceOutcome:
    """Record a webhook call that is not the provider's (a wrong signature or secret), as
    forged: it changes nothing for anyone, and is counted in `status`."""
    line = f"a {report.form} webhook call that failed its check ({report.problem}), ignored"
    return _Context(store, now).record(report, "forged", None, line)


def read_mailbox(
    mailbox: BounceMailbox,
    *,
    store: Store,
    verp: Verp | None,
    bounce_limit: int,
    now: datetime,
    should_stop: Callable[[], bool] = lambda: False,
    message_ids: MessageIds | None = None,
) -> list[BounceOutcome]:
    """Every message of the bounce mailbox not read before, each handled once (recorded
    under its IMAP key: one read before is passed over, not counted twice): one dealt with
    is moved aside; one that is unreadable, forged or about no message paperbell sent stays
    as it was, for a person to look at. `should_stop` true: the rest wait for the next
    read."""
    outcomes = []
    for message in mailbox.messages(
        read_before=lambda key: store.bounces.read_before(key) is not None
    ):
        if should_stop():
            break
        outcome = handle_bounce(
            message.raw,
            store=store,
            verp=verp,
            bounce_limit=bounce_limit,
            now=now,
            source=message.key,
            message_ids=message_ids,
        )
        if outcome.action not in UNTOUCHED:
            mailbox.move_aside(message)
        outcomes.append(outcome)
    return outcomes


def _answered(
    store: Store, report: BounceReport, verp: Verp | None, message_ids: MessageIds | None
) -> SentMessage | str:
    """The message the report answers, or why none: "forged" (a token not ours),
    "tokenless" (no envelope token, and no signed Message-ID it may be tied by) or "unknown"
    (a token naming no digest sent to the address that failed)."""
    if verp is not None:
        for address in report.addresses:
            token = verp.read(address)
            if token is None:
                continue
            if token.status == "forged":
                return "forged"
            return store.bounces.message(token.record) or "unknown"
    signed = message_ids.read(report.message_id) if message_ids is not None else None
    if signed is None:
        return "tokenless"
    if signed.status == "forged":
        return "forged"
    message = store.bounces.message_by_digest(signed.digest_id)
    if message is None or message.status != "sent":
        return "unknown"
    if not report.recipient or report.recipient.lower() != message.recipient.lower():
        return "unknown"  # a digest's Message-ID, for another address, is no proof
    return message


def _act(
    context: _Context, report: BounceReport, message: SentMessage, *, bounce_limit: int
) -> BounceOutcome:
    store, now, record = context.store, context.now, context.record
    who = message.subscriber
    said = reason(report)
    if report.kind in ("auto-reply", "unknown"):
        what = "an auto-reply" if report.kind == "auto-reply" else f"not a failure ({said})"
        return record(report, "ignored", message, f"{who}: {what}, ignored")
    if message.channel != EMAIL:
        line = f"{who}: a {message.channel} mail came back ({said}); digests go on"
        return record(report, "counted", message, line)
    current = store.subscribers.get(message.subscriber_id)
    if current is None or (current.email or "").lower() != message.recipient.lower():
        line = f"{who}: a bounce for an address they no longer have ({said}), ignored"
        return record(report, "ignored", message, line)
    if report.kind == "complaint":
        if current.origin == "database" and current.email_confirmed:
            store.subscribers.stop_email(current.name)
        store.targets.pause(message.subscriber_id, EMAIL, said, now=now)
        line = f"{who}: {said}; their email digests stop"
        return record(report, "unsubscribed", message, line)
    paused = store.targets.paused(message.subscriber_id).get((message.subscriber_id, EMAIL))
    if paused is not None:  # a digest sent before the pause came back too: "since" stays
        line = f"{who}: {said}; {pause_line(paused)} already"
        return record(report, "counted", message, line)
    last = store.bounces.last_paused(message.subscriber_id)
    if last is not None and message.sent_at is not None and message.sent_at <= last:
        # Late, or a copy: the pause it would have made was made, and resumed since.
        line = f"{who}: a digest sent before their email was resumed came back ({said}), ignored"
        return record(report, "ignored", message, line)
    if report.kind == "hard":
        store.targets.pause(message.subscriber_id, EMAIL, said, now=now)
        return record(report, "paused", message, f"{who}: email paused: {said}")
    streak = store.bounces.streak(message)
    if streak >= bounce_limit:
        why = f"{plural(streak, 'digest')} in a row came back: {said}"
        store.targets.pause(message.subscriber_id, EMAIL, why, now=now)
        return record(report, "paused", message, f"{who}: email paused: {why}")
    line = f"{who}: {said}, {streak} of {bounce_limit} in a row before their email pauses"
    return record(report, "counted", message, line)


def _unmatched(action: str, report: BounceReport) -> str:
    if action == "forged":
        return "a bounce with a forged token (not signed with this site's key), ignored"
    article = "an" if report.form[:1].lower() in ("a", "e", "i", "o", "u") else "a"
    what = "an auto-reply" if report.kind == "auto-reply" else f"{article} {report.form} message"
    if action == "tokenless":
        return f"{what} without this site's envelope token, recorded: it changes nothing"
    return f"{what} about no message paperbell sent, ignored"


@dataclass(frozen=True, slots=True)
class _Context:
    """Where a bounce is recorded, when, and where it was read."""

    store: Store
    now: datetime
    source: str | None = None

    def record(
        self, report: BounceReport, action: str, message: SentMessage | None, line: str
    ) -> BounceOutcome:
        """Record the bounce and what was done, log it, and say so."""
        self.store.bounces.record(
            Bounce(
                received_at=self.now,
                kind=report.kind,
                action=action,
                outbox_id=message.id if message else None,
                subscriber_id=message.subscriber_id if message else None,
                status=report.status,
                diagnostic=report.diagnostic or report.problem,
                recipient=report.recipient,
                source=self.source,
            )
        )
        level = logging.WARNING if action in ("paused", "unsubscribed") else logging.INFO
        log.log(level, "bounce: %s", line)
        return BounceOutcome(action, report.kind, message.subscriber if message else None, line)


def bounces_line(day: BounceDay) -> str:
    """Today's bounces for `status`: "bounces today (2026-12-03 UTC): 2 of 200 emails sent
    (1.0%: 1 hard, 1 soft); complaints: 0 (0.0%); ignored: 3 auto-replies, 1 without the
    envelope's token"."""
    kinds = f"{day.hard} hard, {day.soft} soft"
    if day.sent:
        line = (
            f"{day.bounces} of {plural(day.sent, 'email')} sent ({day.bounces / day.sent:.1%}: "
            f"{kinds}); complaints: {day.complaints} ({day.complaints / day.sent:.1%})"
        )
    else:
        line = f"{day.bounces} ({kinds}), no email sent; complaints: {day.complaints}"
    ignored = []
    if day.auto_replies:
        ignored.append(plural(day.auto_replies, "auto-reply", "auto-replies"))
    if day.unmatched:
        ignored.append(f"{day.unmatched} unreadable, forged or about no message sent")
    if day.tokenless:
        ignored.append(f"{day.tokenless} without the envelope's token")
    more = f"; ignored: {', '.join(ignored)}" if ignored else ""
    return f"bounces today ({day.day:%Y-%m-%d} UTC): {line}{more}"


def pause_line(pause: TargetPause, label: str = "email") -> str:
    """A paused target said in one line, for `list` and the manage page: "email paused
    since 3 Dec: mailbox unknown (5.1.1)"."""
    return f"{label} paused since {pause.paused_at:%-d %b}: {pause.reason}"
