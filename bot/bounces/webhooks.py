"""What a mail provider's webhook event says: the JSON of Amazon SES (the `Message` of an SNS
notification), Postmark and Mailgun, read into the same `BounceReport` a returned message
gives (hard, soft, complaint; the status code, the address that failed, the Message-ID of
the digest it answers, the addresses that may carry the VERP token), so that both take
one path (bot.pipeline.bounces.handle_report).

Pure: a decoded JSON value in, a `WebhookEvent` out; never raises for what the value holds
(any type, any size the caller let in). Events that are no bounce or complaint (a delivery,
an open, a click, a delay) give no report. Checking that the call is the provider's (SNS's
signature, Postmark's credentials, Mailgun's HMAC) is the caller's: bot.bounces.sns and
bot.bounces.signatures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.bounces.report import BounceReport, Kind, read_bounce
from bot.bounces.text import ADDRESS, clip, kind_of_status
from bot.core.mail import enhanced_status

MAX_RECIPIENTS = 50  # of one event (SES may name several; paperbell sends to one)
MAX_KEY = 200  # characters of a provider's event id kept
MAX_CONTENT = 512 * 1024  # characters of a bounce's raw content (Postmark's "Content") read

# Postmark's bounce types (its `Type`), by what they mean here; the rest say nothing about
# the address (a DMARC refusal, a template error, an unsubscribe request ...).
POSTMARK_KINDS: dict[str, Kind] = {
    "HardBounce": "hard",
    "BadEmailAddress": "hard",
    "ManuallyDeactivated": "hard",  # Postmark no longer sends to it
    "Transient": "soft",
    "SoftBounce": "soft",
    "DnsError": "soft",
    "AutoResponder": "auto-reply",
    "SpamComplaint": "complaint",
    "SpamNotification": "complaint",
}
SES_KINDS: dict[str, Kind] = {"Permanent": "hard", "Transient": "soft"}  # its bounceType
MAILGUN_KINDS: dict[str, Kind] = {"permanent": "hard", "temporary": "soft"}  # its severity


@dataclass(frozen=True, slots=True)
class WebhookEvent:
    """One provider event: its key (the provider's id, so that a delivery made again is
    known: "ses:FEEDBACK-ID"), what it was ("bounce", "complaint", "delivery" ...), and a
    report for each address it names (none: not a bounce, or unreadable: `problem`)."""

    provider: str
    key: str | None
    event: str
    reports: tuple[BounceReport, ...] = ()
    problem: str | None = None

    def sources(self) -> list[tuple[str | None, BounceReport]]:
        """Each report with the key it is recorded under (one per address)."""
        if self.key is None:
            return [(None, report) for report in self.reports]
        if len(self.reports) == 1:
            return [(self.key, self.reports[0])]
        return [(f"{self.key}#{i}", report) for i, report in enumerate(self.reports)]


def unreadable(provider: str, problem: str) -> WebhookEvent:
    """An event that could not be read, and why."""
    report = BounceReport("unknown", "unreadable", problem=f"{provider}: {problem}"[:300])
    return WebhookEvent(provider, None, "unreadable", (report,), problem=problem)


def load_json(body: bytes) -> tuple[Any, str | None]:
    """The JSON value of a request's body, or None and why not (not UTF-8, not JSON,
    nested too deep, a number too long)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None, "the body is not UTF-8"
    try:
        return json.loads(text), None
    except RecursionError:
        return None, "the JSON is nested too deep"
    except ValueError as exc:  # JSONDecodeError, or an integer of over 4,300 digits
        return None, f"not JSON: {str(exc)[:100]}"


# -- Amazon SES (the Message of an SNS notification) ---------------------------------------


def read_ses(message: Any) -> WebhookEvent:
    """An SES notification (`notificationType`, or `eventType` for event publishing):
    Bounce or Complaint give reports; Delivery and the rest, none."""
    if not isinstance(message, Mapping):
        return unreadable("ses", "the notification is not a JSON object")
    kind = _text(message.get("notificationType") or message.get("eventType")) or ""
    mail = _mapping(message.get("mail"))
    headers = _ses_headers(mail)
    common = _mapping(mail.get("commonHeaders"))
    message_id = _message_id(_text(common.get("messageId")) or headers.get("message-id"))
    addresses = _addresses(_text(mail.get("source")), headers.get("return-path"))
    if kind == "Bounce":
        bounce = _mapping(message.get("bounce"))
        key = _key("ses", bounce.get("feedbackId"), mail.get("messageId"))
        reports = tuple(
            _ses_bounce(bounce, recipient, message_id=message_id, addresses=addresses)
            for recipient in _list(bounce.get("bouncedRecipients"))
        )
        return _event("ses", key, "bounce", reports)
    if kind == "Complaint":
        complaint = _mapping(message.get("complaint"))
        key = _key("ses", complaint.get("feedbackId"), mail.get("messageId"))
        feedback = (_text(complaint.get("complaintFeedbackType")) or "abuse").lower()
        said: Kind = "unknown" if feedback == "not-spam" else "complaint"
        reports = tuple(
            BounceReport(
                said,
                "ses",
                diagnostic=clip(f"feedback: {feedback}"),
                recipient=_address(_mapping(each).get("emailAddress")),
                message_id=message_id,
                addresses=addresses,
            )
            for each in _list(complaint.get("complainedRecipients"))
        )
        return _event("ses", key, "complaint", reports)
    return WebhookEvent("ses", None, kind.lower()[:40] or "unknown")


def _ses_bounce(
    bounce: Mapping[str, Any],
    recipient: Any,
    *,
    message_id: str | None,
    addresses: tuple[str, ...],
) -> BounceReport:
    each = _mapping(recipient)
    diagnostic = _text(each.get("diagnosticCode"))
    status = enhanced_status(_text(each.get("status"))) or enhanced_status(diagnostic)
    bounce_type = _text(bounce.get("bounceType")) or ""
    sub_type = _text(bounce.get("bounceSubType")) or ""
    kind = SES_KINDS.get(bounce_type) or kind_of_status(status, diagnostic)
    said = diagnostic or f"{bounce_type} bounce: {sub_type}".strip(": ")
    return BounceReport(
        kind,
        "ses",
        status=status,
        diagnostic=clip(said),
        recipient=_address(each.get("emailAddress")),
        message_id=message_id,
        addresses=addresses,
    )


def _ses_headers(mail: Mapping[str, Any]) -> dict[str, str]:
    """The original message's headers SES quotes (`mail.headers`), by lower-case name."""
    found: dict[str, str] = {}
    for each in _list(mail.get("headers"))[:200]:
        pair = _mapping(each)
        name, value = _text(pair.get("name")), _text(pair.get("value"))
        if name and value is not None:
            found.setdefault(name.lower(), value)
    return found


# -- Postmark ------------------------------------------------------------------------------


def read_postmark(data: Any) -> WebhookEvent:
    """A Postmark webhook call: a Bounce or SpamComplaint record gives a report (its
    `Content`, the raw bounce when the webhook includes it, is read for the Message-ID and
    the VERP address of the digest); Delivery, Open, Click and the rest, none."""
    if not isinstance(data, Mapping):
        return unreadable("postmark", "the event is not a JSON object")
    record = _text(data.get("RecordType")) or ""
    if record not in ("Bounce", "SpamComplaint"):
        return WebhookEvent("postmark", None, record.lower()[:40] or "unknown")
    bounce_type = _text(data.get("Type")) or record
    kind = POSTMARK_KINDS.get(bounce_type, "unknown")
    if record == "SpamComplaint":
        kind = "complaint"
    details = _text(data.get("Details")) or _text(data.get("Description"))
    content = _text(data.get("Content"))
    quoted = read_bounce(content[:MAX_CONTENT].encode()) if content else None
    metadata = _mapping(data.get("Metadata"))
    message_id = _message_id(_text(metadata.get("message-id"))) or (
        quoted.message_id if quoted else None
    )
    status = enhanced_status(details) or (quoted.status if quoted else None)
    report = BounceReport(
        kind,
        "postmark",
        status=status,
        diagnostic=clip(f"{bounce_type}: {details}" if details else bounce_type),
        recipient=_address(data.get("Email")),
        message_id=message_id,
        addresses=quoted.addresses if quoted else (),
    )
    key = _key("postmark", data.get("ID"), None, kind=record)
    return _event("postmark", key, "complaint" if kind == "complaint" else "bounce", (report,))


# -- Mailgun -------------------------------------------------------------------------------


def read_mailgun(data: Any) -> WebhookEvent:
    """A Mailgun webhook call's `event-data`: "failed" (permanent: hard; temporary: soft)
    and "complained" give a report; the rest, none."""
    if not isinstance(data, Mapping):
        return unreadable("mailgun", "the event is not a JSON object")
    event = _mapping(data.get("event-data"))
    if not event:
        return unreadable("mailgun", "no event-data")
    name = _text(event.get("event")) or ""
    message = _mapping(event.get("message"))
    headers = _mapping(message.get("headers"))
    variables = _mapping(event.get("user-variables"))
    message_id = _message_id(_text(headers.get("message-id"))) or _message_id(
        _text(variables.get("message-id"))
    )
    envelope = _mapping(event.get("envelope"))
    addresses = _addresses(_text(envelope.get("sender")))
    key = _key("mailgun", event.get("id"), None)
    recipient = _address(event.get("recipient"))
    if name == "complained":
        report = BounceReport(
            "complaint",
            "mailgun",
            diagnostic="feedback: abuse",
            recipient=recipient,
            message_id=message_id,
            addresses=addresses,
        )
        return _event("mailgun", key, "complaint", (report,))
    if name != "failed":
        return WebhookEvent("mailgun", None, name.lower()[:40] or "unknown")
    status_of = _mapping(event.get("delivery-status"))
    said = " ".join(
        t
        for t in (
            _text(status_of.get("code")),
            _text(status_of.get("message")),
            _text(status_of.get("description")),
        )
        if t
    )
    status = enhanced_status(_text(status_of.get("enhanced-code"))) or enhanced_status(said)
    severity = _text(event.get("severity")) or ""
    kind = MAILGUN_KINDS.get(severity) or kind_of_status(status, said)
    reason = _text(event.get("reason"))
    report = BounceReport(
        kind,
        "mailgun",
        status=status,
        diagnostic=clip(f"{reason}: {said}" if reason and said else said or reason),
        recipient=recipient,
        message_id=message_id,
        addresses=addresses,
    )
    return _event("mailgun", key, "bounce", (report,))


# -- reading JSON values that may be anything ------------------------------------------------


def _event(
    provider: str, key: str | None, event: str, reports: tuple[BounceReport, ...]
) -> WebhookEvent:
    if not reports:
        return unreadable(provider, f"a {event} that names no address")
    return WebhookEvent(provider, key, event, reports[:MAX_RECIPIENTS])


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    """A JSON string (or number) as text with no NUL nor lone surrogate (a database
    refuses both), at most 10,000 characters; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    text = str(value)[:10_000] if not isinstance(value, int) or abs(value) < 10**40 else None
    if text is None:
        return None
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")


def _address(value: Any) -> str | None:
    found = ADDRESS.search(_text(value) or "")
    return found.group(0)[:320] if found else None


def _addresses(*values: str | None) -> tuple[str, ...]:
    """The addresses in `values` (brackets and names dropped), each once."""
    return tuple(dict.fromkeys(a for a in map(_address, values) if a))


def _message_id(value: str | None) -> str | None:
    """A Message-ID without its brackets (any printable ASCII, at most 250 characters)."""
    if not value:
        return None
    found = re.search(r"<?([!-;=?-~]{1,250})>?", value.strip())
    return found.group(1) if found and "@" in found.group(1) else None


def _key(provider: str, value: Any, fallback: Any, *, kind: str = "") -> str | None:
    """The key an event is recorded under: the provider's id, printable ASCII only."""
    text = _text(value) or _text(fallback)
    if not text:
        return None
    clean = "".join(c for c in text if c.isascii() and c.isprintable())[:MAX_KEY]
    if not clean:
        return None
    return f"{provider}:{kind}:{clean}" if kind else f"{provider}:{clean}"
