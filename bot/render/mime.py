"""A digest email's bytes, written out directly: the headers folded as `MAIL_POLICY` folds
them, each part quoted-printable, multipart/alternative (text first, HTML last) or plain
text alone. The same structure, headers and decoded parts as the `email` package builds
(`EmailMessage.set_content` / `add_alternative`, then `as_bytes`), at a fraction of its
cost: the bodies are encoded by `binascii.b2a_qp` (C) instead of the package's pure-Python
encoder, a plain short header is written as it is, and only the others go through the
policy's header parser and folder (tests/render/test_mime.py holds the two side by side).
Pure: no I/O, no clock.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import re
from collections.abc import Iterable, Sequence
from email.headerregistry import UnstructuredHeader

from bot.core.mail import MAIL_POLICY

__all__ = ["header", "list_header", "message_bytes", "quoted_printable"]

CRLF = b"\r\n"
# A value the policy writes unchanged, short enough for one line (`header`): in a header of
# free text, printable ASCII words, single spaces between them, no encoded word ("=?"); in
# an address or message id header, a plain address or id.
_PLAIN_RE = re.compile(r"[!-~]+(?: [!-~]+)*")
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_DOT_ATOM = rf"{_ATOM}(?:\.{_ATOM})*"
_DOMAIN = r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
_STRUCTURED_RE = {
    "to": re.compile(rf"{_DOT_ATOM}@{_DOMAIN}"),
    "message-id": re.compile(rf"<{_DOT_ATOM}@{_DOMAIN}>"),
}
_LINE = 78  # MAIL_POLICY.max_line_length

_PART = b'Content-Type: text/%s; charset="utf-8"\r\nContent-Transfer-Encoding: quoted-printable\r\n'


def list_header(name: str, entries: Sequence[str]) -> bytes:
    """A header of comma-separated entries never to be encoded (RFC 2369's List-*: URLs
    in angle brackets, which readers take as they stand), folded between entries only:
    the policy's folder writes an entry longer than a line as RFC 2047 encoded words,
    which no mail app reads as a URL. A line may pass 78 characters (RFC 5322 allows
    998); the entries are checked ASCII (UnicodeEncodeError, a ValueError, if not)."""
    one = f"{name}: {', '.join(entries)}\r\n"
    folded = one if len(one) <= _LINE + 2 else f"{name}: " + ",\r\n ".join(entries) + "\r\n"
    if any("\r" in entry or "\n" in entry for entry in entries):
        raise ValueError(f"{name}: an entry holds a line break")
    return folded.encode("ascii")


def header(name: str, value: str) -> bytes:
    """One header line (folded lines), as an `EmailMessage` given `value` writes it."""
    if len(name) + 2 + len(value) <= _LINE and _plain(name.lower(), value):
        return f"{name}: {value}\r\n".encode("ascii")
    return _folded(name, value)


def _plain(name: str, value: str) -> bool:
    pattern = _STRUCTURED_RE.get(name)
    if pattern is not None:
        return pattern.fullmatch(value) is not None
    return _free_text(name) and _PLAIN_RE.fullmatch(value) is not None and "=?" not in value


@functools.cache
def _free_text(name: str) -> bool:
    """Whether the policy takes a header named `name` as free text (unstructured)."""
    factory = MAIL_POLICY.header_factory
    kind = factory.registry.get(name, factory.default_class)  # type: ignore[attr-defined]
    return issubclass(kind, UnstructuredHeader)


@functools.lru_cache(maxsize=4096)
def _folded(name: str, value: str) -> bytes:
    """The policy's own parse and fold (cached: a run's From and List-Id are the same for
    every message, and many subjects repeat)."""
    _, parsed = MAIL_POLICY.header_store_parse(name, value)
    return MAIL_POLICY.fold_binary(name, parsed)


def quoted_printable(text: str) -> bytes:
    """A text part's body: UTF-8, lines ending in CRLF (one at the end), quoted-printable."""
    lines = text.encode("utf-8").splitlines()
    return binascii.b2a_qp(CRLF.join(lines) + CRLF, istext=True)


def message_bytes(
    headers: Iterable[tuple[str, str | tuple[str, ...]]], text: str, html: str | None
) -> bytes:
    """The message: `headers` (name, value) in order (a tuple value: the entries of a
    `list_header`), then the text part, or
    multipart/alternative of the text and the HTML parts when `html` is given. The MIME
    boundary is made from the headers, not at random: the same digest gives the same
    bytes, and each message (its own Message-ID) its own boundary. "=_" never occurs in a
    quoted-printable body, so the boundary cannot clash with the parts' content."""
    head = b"".join(
        list_header(name, value) if isinstance(value, tuple) else header(name, value)
        for name, value in headers
    )
    if html is None:
        return head + _PART % b"plain" + b"MIME-Version: 1.0\r\n\r\n" + quoted_printable(text)
    digest = hashlib.sha256(head).hexdigest()
    boundary = f"=_paperbell_{digest[:32]}".encode("ascii")
    return b"".join(
        (
            head,
            b'MIME-Version: 1.0\r\nContent-Type: multipart/alternative;\r\n boundary="',
            boundary,
            b'"\r\n\r\n--',
            boundary,
            CRLF,
            _PART % b"plain",
            CRLF,
            quoted_printable(text),
            b"\r\n--",
            boundary,
            CRLF,
            _PART % b"html",
            b"MIME-Version: 1.0\r\n\r\n",
            quoted_printable(html),
            b"\r\n--",
            boundary,
            b"--\r\n",
        )
    )
