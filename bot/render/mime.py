"""A digest email's bytes, built by the standard library's `email` package with `MAIL_POLICY`:
multipart/alternative (text first, HTML last) or plain text alone, each part in the
shorter of its two 7-bit transfer encodings (`transfer_encoding`). Pure: no I/O, no clock.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from email.headerregistry import BaseHeader
from email.message import EmailMessage, MIMEPart
from functools import lru_cache
from typing import Literal

from bot.core.mail import MAIL_POLICY

__all__ = ["message_bytes", "transfer_encoding"]

TransferEncoding = Literal["quoted-printable", "base64"]

# Quoted-printable writes a byte outside printable ASCII (and "=") as three; base64 writes
# every three bytes as four. Each folds its lines at 76 characters.
_LINE = 76
_ESCAPED = bytes(range(0x7F, 0x100)) + b"="  # the bytes quoted-printable writes as three


def transfer_encoding(body: str | bytes) -> TransferEncoding:
    """The 7-bit encoding that writes `body` shorter: quoted-printable for text that is
    mostly ASCII (readable as it is), base64 for text in a script outside it (Chinese
    in quoted-printable takes three times its bytes; in base64, four thirds). Both pass
    any relay, with or without 8BITMIME, so the queued bytes never depend on the server.
    `body` is the text, or its UTF-8 bytes."""
    data = body if isinstance(body, bytes) else body.encode("utf-8", "replace")
    escaped = len(data) - len(data.translate(None, _ESCAPED))
    quoted = len(data) + 2 * escaped
    quoted += 3 * (quoted // (_LINE - 1))  # "=" CRLF at each soft line break
    base64 = -(-len(data) // 3) * 4
    base64 += 2 * (base64 // _LINE)
    return "base64" if base64 < quoted else "quoted-printable"


def message_bytes(headers: Sequence[tuple[str, str]], text: str, html: str | None) -> bytes:
    """The message: `headers` (name, value) in order, then the text part, or
    multipart/alternative of the text and the HTML parts when `html` is given. The MIME
    boundary is made from the headers, not at random: the same digest gives the same
    bytes, and each message (its own Message-ID) its own boundary. "=_" never occurs in a
    quoted-printable or base64 body, so the boundary cannot clash with the parts' content."""
    message = EmailMessage(policy=MAIL_POLICY)
    for name, value in headers:
        message[name] = _shared(name, value) if name.lower() in _SHARED else value
    if html is None:
        _fill(message, text, "plain")
        message["MIME-Version"] = _shared("MIME-Version", "1.0")
        return message.as_bytes()
    head = "\n".join(f"{name}: {value}" for name, value in headers).encode()
    message["MIME-Version"] = _shared("MIME-Version", "1.0")
    message["Content-Type"] = _shared("Content-Type", "multipart/alternative")
    message.set_boundary(f"=_paperbell_{hashlib.sha256(head).hexdigest()[:32]}")
    for body, subtype in ((text, "plain"), (html, "html")):
        part = EmailMessage(policy=MAIL_POLICY)
        _fill(part, body, subtype)
        message.attach(part)
    return message.as_bytes()


# Headers the same in most messages of a site or a run (its sender, the run's date, each
# part's type), and what `_shared` keeps of them.
_SHARED = frozenset(
    (
        "from",
        "date",
        "list-id",
        "list-unsubscribe-post",
        "auto-submitted",
        "x-auto-response-suppress",
        "mime-version",
        "content-type",
        "content-transfer-encoding",
    )
)


@lru_cache(maxsize=256)
def _shared(name: str, value: str) -> BaseHeader:
    """The header `name: value` as the email package parses it, parsed once for all the
    messages it occurs in: parsing takes longer than the rest of a header's work, and a
    parsed header never changes (the policy takes one as it is)."""
    return MAIL_POLICY.header_factory(name, value)


def _fill(part: MIMEPart, body: str, subtype: str) -> None:
    """`body` as a UTF-8 text part in the shorter of its 7-bit encodings, as `set_content`
    writes it, but encoded in C (the email package's quoted-printable encoder is pure
    Python, and each subscriber's parts are tens of kilobytes of their own)."""
    data = body.encode("utf-8", "replace")
    lines = data.splitlines()  # its line ends, as set_content's
    encoding = transfer_encoding(data)
    part["Content-Type"] = _shared("Content-Type", f'text/{subtype}; charset="utf-8"')
    part["Content-Transfer-Encoding"] = _shared("Content-Transfer-Encoding", encoding)
    if encoding == "quoted-printable":
        encoded = binascii.b2a_qp(b"\n".join(lines) + b"\n")
    else:  # base64 carries text's canonical CRLF line ends
        encoded = base64.encodebytes(b"\r\n".join(lines) + b"\r\n")
    part.set_payload(encoded.decode("ascii"))
