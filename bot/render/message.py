"""A rendered digest as the email message it is sent as: its headers (From, To, List-Id,
List-Unsubscribe, Message-ID ...), each checked for CR/LF and shape, over the parts that
`bot.render.email` renders; the bytes are made by `bot.render.mime`. Pure: no I/O, and the
clock is passed in (`now`)."""

from __future__ import annotations

import email.utils
import re
from datetime import datetime
from email.headerregistry import Address
from email.message import EmailMessage
from typing import cast

from bot.core.checks import check_address, check_header_text
from bot.core.mail import MAIL_POLICY
from bot.core.models import Digest
from bot.core.verp import MessageIds
from bot.render.email import (
    DigestLinks,
    EmailSettings,
    RenderedEmail,
    check_https_url,
    render_digest,
    unsubscribe_mailto_url,
)
from bot.render.mime import message_bytes
from bot.render.text import tidy

__all__ = ["build_message", "build_message_bytes"]

_MSGID_LEFT_RE = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,200}")
_ATOMS_RE = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~ -]+")


def _phrase(text: str) -> str:
    """A header display name: as is when it is plain atoms, else a quoted string."""
    if _ATOMS_RE.fullmatch(text):
        return text
    return '"' + email.utils.quote(text) + '"'


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or "paperbell"


def build_message(
    digest: Digest,
    settings: EmailSettings,
    *,
    now: datetime,
    links: DigestLinks | None = None,
    rendered: RenderedEmail | None = None,
) -> EmailMessage:
    """The message `build_message_bytes` writes, as an `EmailMessage` (to read its parts)."""
    raw = build_message_bytes(digest, settings, now=now, links=links, rendered=rendered)
    return cast(EmailMessage, email.message_from_bytes(raw, policy=MAIL_POLICY))


def build_message_bytes(
    digest: Digest,
    settings: EmailSettings,
    *,
    now: datetime,
    links: DigestLinks | None = None,
    rendered: RenderedEmail | None = None,
) -> bytes:
    """Build the message for one digest, as the bytes it is kept and sent as:
    multipart/alternative (text first, HTML last), or plain text alone for a subscriber
    whose `email_format` is "text" (`bot.render.mime`).

    `links.unsubscribe`, when given, is the subscriber's RFC 8058 one-click https URL; it
    is listed before the mailto link and `List-Unsubscribe-Post` is added. `links.manage`
    and `links.feed` are shown in the footer of both parts, `links.archive` ("view in your
    browser") at the top. `rendered`: the digest already rendered with
    these settings and links (`render_digest`), to build it once.
    """
    unsubscribe_url = links.unsubscribe if links else None
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be a timezone-aware datetime")
    to_addr = check_address(digest.subscriber.email, what=f"{digest.subscriber.name}: email")
    if not _MSGID_LEFT_RE.fullmatch(digest.digest_id):
        raise ValueError(f"digest_id not usable in a Message-ID: {digest.digest_id!r}")
    sender, list_id, unsubscribe_address = _sender_headers(settings)

    rendered = rendered or render_digest(digest, settings, links=links)

    mailto = f"<{unsubscribe_mailto_url(unsubscribe_address, digest.subscriber.name)}>"
    headers: list[tuple[str, str]] = [
        ("From", sender),
        ("To", to_addr),
        ("Subject", tidy(rendered.subject)),
        ("Date", email.utils.format_datetime(now)),
        ("Message-ID", _message_id(digest.digest_id, settings)),
    ]
    if rendered.part is not None and rendered.part.number > 1:  # threaded under the first
        first = _message_id(rendered.part.thread, settings)
        headers += [("In-Reply-To", first), ("References", first)]
    headers.append(("List-Id", list_id))
    if unsubscribe_url:
        headers.append(("List-Unsubscribe", f"<{check_https_url(unsubscribe_url)}>, {mailto}"))
        headers.append(("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"))
    else:
        headers.append(("List-Unsubscribe", mailto))
    headers.append(("Auto-Submitted", "auto-generated"))
    headers.append(("X-Auto-Response-Suppress", "All"))
    html = rendered.html if digest.subscriber.email_format != "text" else None
    return message_bytes(headers, rendered.text, html)


def _message_id(digest_id: str, settings: EmailSettings) -> str:
    """A digest's Message-ID, in its angle brackets."""
    return f"<{_message_id_local(digest_id, settings)}@{settings.domain}>"


def _message_id_local(digest_id: str, settings: EmailSettings) -> str:
    """A digest's Message-ID's local part: its id, signed when the site has a key."""
    if not settings.message_id_key:
        return digest_id
    return MessageIds(settings.message_id_key).local(digest_id)


def _sender_headers(settings: EmailSettings) -> tuple[str, str, str]:
    """The From and List-Id values and the unsubscribe address of `settings`, checked."""
    from_addr = check_address(settings.from_addr, what="from_addr")
    unsubscribe_address = check_address(settings.unsubscribe_address, what="unsubscribe_mailto")
    from_name = tidy(check_header_text(settings.from_name, what="from_name"))
    list_name = tidy(check_header_text(settings.list_id, what="list_id"))
    sender = str(Address(display_name=from_name, addr_spec=from_addr))  # quoted as needed
    list_id = f"{_phrase(list_name)} <{_slug(list_name)}.{settings.domain}>"
    return sender, list_id, unsubscribe_address
