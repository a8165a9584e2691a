"""Notices: the short plain-text emails the web pages and Slack send on request, outside the
digests: "confirm your address" (double opt-in) and "here is a fresh manage link".

Pure, like the digest renderer: the caller passes the link, the clock and the settings.
A notice is transactional (asked for by its reader), so it has no List-Unsubscribe.
"""

from __future__ import annotations

import email.utils
from datetime import datetime
from email.headerregistry import Address
from email.message import EmailMessage
from typing import Literal

from bot.core.checks import check_address, check_header_text
from bot.core.mail import MAIL_POLICY
from bot.render import template_env
from bot.render.email import EmailSettings
from bot.render.text import tidy
from bot.render.words import N_, words_for

__all__ = ["NoticeKind", "build_notice"]

NoticeKind = Literal["confirm", "link"]

SUBJECTS: dict[NoticeKind, str] = {
    "confirm": N_("Confirm your address for %(site)s digests"),
    "link": N_("Your link to manage your %(site)s digests"),
}


def build_notice(
    kind: NoticeKind,
    settings: EmailSettings,
    *,
    to: str,
    url: str,
    days: int,
    subscriber_name: str,
    origin: str = "",
    notice_id: str,
    now: datetime,
    language: str | None = None,
) -> EmailMessage:
    """A plain-text notice to `to` carrying one signed `url` that works for `days` days,
    in the words of a reader of `language` (a subscriber's tag; None: English).
    `notice_id` makes the Message-ID (the outbox's key for it)."""
    if now.tzinfo is None:
        raise ValueError("now must be a timezone-aware datetime")
    to_addr = check_address(to, what="notice recipient")
    site = tidy(settings.site_name)
    words = words_for(language)
    text = (
        template_env(words.tag)
        .get_template(f"notice/{kind}.txt.j2")
        .render(
            site_name=site,
            email=to_addr,
            url=url,
            days=days,
            subscriber_name=subscriber_name,
            origin=origin,
        )
    )
    msg = EmailMessage(policy=MAIL_POLICY)
    from_name = tidy(check_header_text(settings.from_name, what="from_name"))
    msg["From"] = Address(display_name=from_name, addr_spec=check_address(settings.from_addr))
    msg["To"] = to_addr
    msg["Subject"] = words.gettext(SUBJECTS[kind]) % {"site": site}
    msg["Date"] = email.utils.format_datetime(now)
    msg["Message-ID"] = f"<{notice_id}@{settings.domain}>"
    msg["Auto-Submitted"] = "auto-generated"
    msg["X-Auto-Response-Suppress"] = "All"
    msg.set_content(text, charset="utf-8", cte="quoted-printable")
    return msg
