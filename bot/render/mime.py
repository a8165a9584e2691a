"""A digest email's bytes, built by the standard library's `email` package with `MAIL_POLICY`:
multipart/alternative (text first, HTML last) or plain text alone, each part
quoted-printable. Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from email.message import EmailMessage

from bot.core.mail import MAIL_POLICY

__all__ = ["message_bytes"]


def message_bytes(headers: Iterable[tuple[str, str]], text: str, html: str | None) -> bytes:
    """The message: `headers` (name, value) in order, then the text part, or
    multipart/alternative of the text and the HTML parts when `html` is given. The MIME
    boundary is made from the headers, not at random: the same digest gives the same
    bytes, and each message (its own Message-ID) its own boundary. "=_" never occurs in a
    quoted-printable body, so the boundary cannot clash with the parts' content."""
    message = EmailMessage(policy=MAIL_POLICY)
    for name, value in headers:
        message[name] = value
    head = b"".join(MAIL_POLICY.fold_binary(name, value) for name, value in message.items())
    message.set_content(text, cte="quoted-printable")
    if html is not None:
        message.add_alternative(html, subtype="html", cte="quoted-printable")
        message.set_boundary(f"=_paperbell_{hashlib.sha256(head).hexdigest()[:32]}")
    return message.as_bytes()
