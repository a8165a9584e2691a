"""What one message that came back to the bounce address says: a DSN (RFC 3464), a
complaint (ARF, RFC 5965), an auto-reply, or nothing paperbell can use; read from the raw
bytes by `read_bounce`, which never raises.

Pure: bytes in, a `BounceReport` out; no I/O, no clock, no key. Which message the report is
about is left to the caller: the report gives every address that may carry the VERP token
(`addresses`: where the mail server delivered it, the sender the report quotes) and the
Message-ID of the original message it quotes, if any. The formats that are not RFC 3464
(Exim's, Gmail's and old Exchange's plain-text bounces, Postfix's text part) are read by
bot.bounces.text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from email import message_from_bytes, message_from_string
from email.message import Message
from email.policy import compat32
from typing import Literal

from bot.bounces.text import (
    ADDRESS,
    clip,
    header,
    kind_of_status,
    looks_like_bounce,
    read_plain_bounce,
)
from bot.core.mail import enhanced_status

Kind = Literal["hard", "soft", "complaint", "auto-reply", "unknown"]

MAX_BYTES = 2 * 1024 * 1024  # of a message read: a bounce quoting a huge digest is cut here
MAX_DEPTH = 8  # MIME nesting read (a report's original message sits two or three deep)
MAX_PARTS = 200
# Headers that say where the mail server delivered the bounce: the VERP address, when the
# server keeps it (Postfix: Delivered-To and X-Original-To; Exim: Envelope-To).
ENVELOPE_HEADERS = ("Delivered-To", "X-Original-To", "Envelope-To", "X-Envelope-To", "To")
# Feedback types that are a complaint about mail the user did not want (RFC 5965 section 7.3).
COMPLAINTS = frozenset({"abuse", "fraud", "virus", "other"})
_AUTO_SUBJECT = re.compile(
    r"^\s*(out of (the )?office|auto(matic)?[ -]?(reply|response|antwort)|autoreply|"
    r"auto:|away from|on vacation|vacation reply|abwesenheit|absence|"
    r"r[ée]ponse automatique|respuesta autom[áa]tica|risposta automatica)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class BounceReport:
    """What a returned message says. `kind`: hard (5.x.x), soft (4.x.x), complaint (a
    feedback-loop report), auto-reply, or unknown (unreadable, a delay warning, a
    delivery receipt, anything else); `form`: the format recognised."""

    kind: Kind
    form: str
    status: str | None = None  # the enhanced status code: "5.1.1"
    diagnostic: str | None = None
    recipient: str | None = None  # the address that failed (or complained)
    message_id: str | None = None  # the original message's, without <>
    addresses: tuple[str, ...] = ()  # where a VERP token may be: envelope first
    problem: str | None = None  # why it could not be read (unreadable)


def read_bounce(raw: bytes) -> BounceReport:
    """Read a returned message; anything unreadable is an "unknown" report saying why."""
    if not isinstance(raw, bytes | bytearray):
        return BounceReport("unknown", "unreadable", problem="not bytes")
    if not raw.strip():
        return BounceReport("unknown", "unreadable", problem="empty message")
    try:
        message = message_from_bytes(bytes(raw[:MAX_BYTES]), policy=compat32)
        return _read(message)
    except (RecursionError, MemoryError):
        return BounceReport("unknown", "unreadable", problem="too deeply nested")
    except Exception as exc:  # a malformed message must never stop the caller
        return BounceReport("unknown", "unreadable", problem=f"{type(exc).__name__}: {exc}"[:200])


def _read(message: Message) -> BounceReport:
    envelope = tuple(a for name in ENVELOPE_HEADERS for a in _header_values(message, name))
    report_type = str(message.get_param("report-type", "", header="content-type") or "")
    kind = message.get_content_type()
    if kind == "multipart/report" and report_type.lower() == "feedback-report":
        found = _feedback(message)
    elif kind == "multipart/report" and report_type.lower() == "delivery-status":
        found = _delivery_status(message)
    elif kind == "multipart/report" and _part(message, "message/delivery-status") is not None:
        found = _delivery_status(message)  # a report-type left out or misspelt
    elif looks_like_bounce(header(message, "From"), header(message, "Subject"), message):
        found = _plain(message)
    elif _auto_reply(message):
        found = BounceReport("auto-reply", "auto-reply", diagnostic=header(message, "Subject"))
    else:
        found = BounceReport("unknown", "not a bounce", diagnostic=header(message, "Subject"))
    return replace(found, addresses=_unique((*envelope, *found.addresses)))


# -- RFC 3464 ----------------------------------------------------------------------------


def _delivery_status(message: Message) -> BounceReport:
    part = _part(message, "message/delivery-status")
    fields = _status_groups(part) if part is not None else []
    per_message = fields[0] if fields else None
    recipients = [g for g in fields[1:] if g.get("Action") or g.get("Final-Recipient")]
    if not recipients and per_message is not None and per_message.get("Action"):
        recipients = [per_message]  # one group: some servers leave out the per-message one
    chosen = next(
        (g for g in recipients if (g.get("Action") or "").strip().lower() == "failed"),
        recipients[0] if recipients else None,
    )
    original = _original(message)
    addresses = [*_typed_values(per_message, "X-Postfix-Sender"), *_return_path(original)]
    if chosen is None:  # a report with no recipient in it: read its text as a plain bounce
        plain = _plain(message)
        return replace(plain, form="rfc3464", addresses=(*plain.addresses, *addresses))
    action = (header(chosen, "Action") or "").lower()
    diagnostic = _typed(header(chosen, "Diagnostic-Code"))
    status = enhanced_status(header(chosen, "Status")) or enhanced_status(diagnostic)
    kind: Kind = kind_of_status(status, diagnostic)
    if action in ("delayed", "delivered", "relayed", "expanded"):
        kind = "unknown"  # not a failure: a warning, or a receipt
    elif action == "failed" and kind == "unknown":
        kind = "hard"  # failed for good, with no code that says otherwise
    recipient = _typed(header(chosen, "Final-Recipient") or header(chosen, "Original-Recipient"))
    return BounceReport(
        kind,
        "rfc3464",
        status=status,
        diagnostic=clip(diagnostic or action or None),
        recipient=_address(recipient),
        message_id=_message_id(original),
        addresses=tuple(addresses),
    )


def _status_groups(part: Message) -> list[Message]:
    """The groups of fields of a message/delivery-status part (the per-message one first)."""
    payload = part.get_payload()
    if isinstance(payload, list):
        return [g for g in payload if isinstance(g, Message)][:MAX_PARTS]
    text = payload if isinstance(payload, str) else ""
    blocks = re.split(r"\r?\n\s*\r?\n", text.strip())
    return [message_from_string(block + "\n\n", policy=compat32) for block in blocks[:MAX_PARTS]]


# -- ARF ---------------------------------------------------------------------------------


def _feedback(message: Message) -> BounceReport:
    part = _part(message, "message/feedback-report")
    fields = _status_groups(part)[0] if part is not None and _status_groups(part) else None
    original = _original(message)
    feedback = (header(fields, "Feedback-Type") or "").strip().lower() if fields else ""
    # No feedback part: no report at all. Feedback-Type left out: a complaint still.
    complains = fields is not None and (feedback in COMPLAINTS or not feedback)
    kind: Kind = "complaint" if complains else "unknown"
    recipient = header(fields, "Original-Rcpt-To") if fields else None
    addresses = [
        *(_header_values(fields, "Original-Mail-From") if fields else []),
        *_return_path(original),
    ]
    if original is not None:
        recipient = recipient or header(original, "To")
    return BounceReport(
        kind,
        "arf",
        diagnostic=clip(f"feedback: {feedback or 'abuse'}"),
        recipient=_address(recipient),
        message_id=_message_id(original),
        addresses=tuple(addresses),
    )


# -- the rest: plain-text bounces, auto-replies ------------------------------------------


def _plain(message: Message) -> BounceReport:
    text = "\n".join(_texts(message))
    found = read_plain_bounce(text, failed=header(message, "X-Failed-Recipients"))
    original = _original(message) or found.original
    return BounceReport(
        found.kind,
        found.form,
        status=found.status,
        diagnostic=found.diagnostic,
        recipient=found.recipient,
        message_id=_message_id(original),
        addresses=tuple(_return_path(original)),
    )


def _auto_reply(message: Message) -> bool:
    """RFC 3834's Auto-Submitted, the headers autoresponders add, or a subject that says so."""
    submitted = (header(message, "Auto-Submitted") or "no").strip().lower()
    if not submitted.startswith("no"):
        return True
    if any(header(message, name) for name in ("X-Autoreply", "X-Autorespond", "X-Autoresponder")):
        return True
    if (header(message, "Precedence") or "").strip().lower() in ("auto_reply", "auto-reply"):
        return True
    return bool(_AUTO_SUBJECT.match(header(message, "Subject") or ""))


# -- walking a message, bounded ----------------------------------------------------------


def _walk(message: Message, depth: int = 0, seen: list[int] | None = None) -> Iterator[Message]:
    """Every part, depth first, at most MAX_DEPTH deep and MAX_PARTS in all."""
    seen = [0] if seen is None else seen
    if depth > MAX_DEPTH or seen[0] >= MAX_PARTS:
        return
    seen[0] += 1
    yield message
    if message.is_multipart():
        for child in message.get_payload() or []:
            if isinstance(child, Message):
                yield from _walk(child, depth + 1, seen)


def _part(message: Message, content_type: str) -> Message | None:
    return next((p for p in _walk(message) if p.get_content_type() == content_type), None)


def _original(message: Message) -> Message | None:
    """The original message a report quotes: its message/rfc822 part, or its headers."""
    for part in _walk(message):
        kind = part.get_content_type()
        if kind == "message/rfc822":
            inner = part.get_payload()
            if isinstance(inner, list) and inner and isinstance(inner[0], Message):
                return inner[0]
        if kind == "text/rfc822-headers":
            body = part.get_payload(decode=True)
            if isinstance(body, bytes):
                return message_from_bytes(body[:65536], policy=compat32)
    return None


def _texts(message: Message) -> Iterator[str]:
    """The text parts' decoded text, outside any quoted original message."""
    for part in _walk(message):
        if part.get_content_type() == "message/rfc822":
            break
        if part.get_content_maintype() != "text" or part.get_content_subtype() == "html":
            continue
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            yield _decode(payload, part.get_content_charset())


def _decode(payload: bytes, charset: str | None) -> str:
    try:
        return payload[:MAX_BYTES].decode(charset or "utf-8", errors="replace")
    except (LookupError, ValueError):  # an unknown or nonsense charset
        return payload[:MAX_BYTES].decode("latin-1")


def _header_values(message: Message | None, name: str) -> list[str]:
    if message is None:
        return []
    return [str(v)[:2000] for v in (message.get_all(name) or [])][:20]


def _typed(value: str | None) -> str | None:
    """A DSN field's value without its type: "rfc822; ada@lab" -> "ada@lab"."""
    if value is None:
        return None
    kind, semicolon, rest = value.partition(";")
    return " ".join((rest if semicolon and " " not in kind.strip() else value).split())


def _typed_values(message: Message | None, name: str) -> list[str]:
    return [v for v in (_typed(value) for value in _header_values(message, name)) if v]


def _return_path(original: Message | None) -> list[str]:
    return _header_values(original, "Return-Path")


def _address(value: str | None) -> str | None:
    found = ADDRESS.search(value or "")
    return found.group(0)[:320] if found else None


def _message_id(original: Message | None) -> str | None:
    value = header(original, "Message-ID") if original is not None else None
    found = re.search(r"<([^<>\s]{1,250})>", value or "")
    if found:
        return found.group(1)
    bare = (value or "").strip()
    return bare[:250] if bare and " " not in bare else None


def _unique(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in values if v))[:40]
