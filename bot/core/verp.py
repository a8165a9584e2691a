"""VERP: the envelope sender of each message names the message, signed, so that a bounce
(a DSN sent back hours later to the envelope sender) says which message it answers even
when the report itself is mangled or missing.

With `[email] bounce_address = "bounces@example.org"`, the message kept as outbox record 42
goes out with MAIL FROM `bounces+42-k3mtq7x2ahv5s6ne@example.org`: the record's id, and an
HMAC-SHA256 of it (cut to 80 bits, base32 in lower case: a mail server may fold the case of
a local part) under a key derived from the site's secret key. The mail server hands
`bounces+...` to `bounces` (Postfix: `recipient_delimiter = +`); `read` finds the token in
whatever address it is given and says which record it names, or that it is forged.

A digest's Message-ID carries a token too (`MessageIds`): `<paperbell.<digest>.<sig>@domain>`,
the digest's id and an HMAC of it under another key derived from the site's secret, so
that a report quoting it proves it saw the message (the digest's id alone is no secret: a
hash of the subscriber's name, the channel and the papers). It is the same for the same
digest, so a digest sent again after a crash carries the same Message-ID. Only reports
that cannot carry the envelope's token rely on it (a provider's webhook, a relay that
rewrites the envelope sender, when the operator says so: `bot.pipeline.bounces`); a
Message-ID without a token (a digest sent before there were any) ties a report to nothing.

Pure: no I/O, nothing read from the environment.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Literal

SIGNATURE_CHARACTERS = 16  # base32: 80 bits
MAX_RECORD_DIGITS = 12
# `+ID-SIGNATURE@` anywhere in an address (a header may hold a name and brackets around it).
_TOKEN = re.compile(
    rf"\+([0-9]{{1,{MAX_RECORD_DIGITS}}})-([a-z2-7]{{{SIGNATURE_CHARACTERS}}})@",
    re.IGNORECASE,
)


_MESSAGE_ID = re.compile(
    rf"^(paperbell\.[0-9a-z]{{1,64}})\.([a-z2-7]{{{SIGNATURE_CHARACTERS}}})$", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class VerpToken:
    """What an address carries: the outbox record it names (`forged`: a token whose
    signature is not ours, so the record it claims is not to be believed)."""

    record: int
    status: Literal["valid", "forged"]


class Verp:
    """Makes and reads the signed envelope senders of one site."""

    def __init__(self, key: str, bounce_address: str) -> None:
        local, at, domain = bounce_address.rpartition("@")
        if not (local and at and domain) or "+" in local or not bounce_address.isascii():
            raise ValueError(
                f"{bounce_address!r}: the bounce address is a plain ASCII address with no '+'"
            )
        if not key:
            raise ValueError("VERP addresses need a key (the site's secret key)")
        self._key = key.encode()
        self.local, self.domain = local, domain.lower()

    def signature(self, record: int) -> str:
        digest = hmac.new(self._key, f"verp:{record}".encode(), hashlib.sha256).digest()
        return base64.b32encode(digest).decode().lower()[:SIGNATURE_CHARACTERS]

    def address(self, record: int) -> str:
        """The envelope sender of the message kept as outbox record `record`."""
        if record < 0 or len(str(record)) > MAX_RECORD_DIGITS:
            raise ValueError(f"not an outbox record: {record!r}")
        return f"{self.local}+{record}-{self.signature(record)}@{self.domain}"

    def read(self, address: str) -> VerpToken | None:
        """The token in `address` (None: it carries none). Only the token is read: the
        domain a forwarding server rewrote is no reason to refuse a genuine one."""
        found = _TOKEN.search(address[:2000])
        if found is None:
            return None
        record = int(found.group(1))
        given = found.group(2).lower()
        valid = hmac.compare_digest(given, self.signature(record))
        return VerpToken(record, "valid" if valid else "forged")


@dataclass(frozen=True, slots=True)
class MessageIdToken:
    """What a Message-ID carries: the digest it names (`forged`: a signature not ours)."""

    digest_id: str
    status: Literal["valid", "forged"]


class MessageIds:
    """Makes and reads the signed local parts of one site's digest Message-IDs."""

    def __init__(self, key: str) -> None:
        if not key:
            raise ValueError("signed Message-IDs need a key (the site's secret key)")
        self._key = key.encode()

    def signature(self, digest_id: str) -> str:
        digest = hmac.new(self._key, f"message-id:{digest_id}".encode(), hashlib.sha256).digest()
        return base64.b32encode(digest).decode().lower()[:SIGNATURE_CHARACTERS]

    def local(self, digest_id: str) -> str:
        """The Message-ID's local part of the digest `digest_id`: its id and signature."""
        return f"{digest_id}.{self.signature(digest_id)}"

    def read(self, message_id: str | None) -> MessageIdToken | None:
        """The token in a Message-ID (with or without its brackets); None when it carries
        none (not ours, or made before Message-IDs were signed)."""
        if not message_id or len(message_id) > 250:
            return None
        local = message_id.strip().strip("<>").rpartition("@")[0]
        found = _MESSAGE_ID.match(local)
        if found is None:
            return None
        digest_id, given = found.group(1).lower(), found.group(2).lower()
        valid = hmac.compare_digest(given, self.signature(digest_id))
        return MessageIdToken(digest_id, "valid" if valid else "forged")
