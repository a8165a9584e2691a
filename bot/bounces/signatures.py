"""The checks that a webhook call is the provider's, for the providers that sign with a
shared secret: Mailgun (HMAC-SHA256 of timestamp + token under the webhook signing key,
a timestamp no older than `WINDOW`, a token not seen before) and Postmark (which signs
nothing: the secret is the password of the HTTP basic auth in the webhook's URL).

Pure: the time is passed in; every comparison of a secret takes constant time. SNS's RSA
signatures are bot.bounces.sns's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

WINDOW = 300.0  # seconds either side of now a Mailgun timestamp may be
MAX_TOKENS = 100_000  # Mailgun tokens remembered (a replay inside WINDOW is refused)


@dataclass(frozen=True, slots=True)
class MailgunSignature:
    """The `signature` object of a Mailgun call."""

    timestamp: str
    token: str
    signature: str


def mailgun_signature(data: Any) -> MailgunSignature | None:
    """The signature a Mailgun call carries (None: none, or not strings)."""
    found = data.get("signature") if isinstance(data, Mapping) else None
    if not isinstance(found, Mapping):
        return None
    values = [found.get(k) for k in ("timestamp", "token", "signature")]
    if not all(isinstance(v, str) and 0 < len(v) <= 256 for v in values):
        return None
    timestamp, token, signature = (str(v) for v in values)
    return MailgunSignature(timestamp, token, signature)


def mailgun_problem(signed: MailgunSignature | None, key: str, *, now: float) -> str | None:
    """Why a Mailgun call is not Mailgun's (None: it is): no signature, a stale or future
    timestamp, a wrong HMAC."""
    if signed is None:
        return "no signature"
    stamp = signed.timestamp
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12):
        return "a timestamp that is no number"
    if abs(now - int(stamp)) > WINDOW:
        return "a stale timestamp (or a clock that is off)"
    expected = hmac.new(key.encode(), (stamp + signed.token).encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signed.signature.encode("utf-8", "replace")):
        return "a wrong signature"
    return None


class SeenTokens:
    """Mailgun tokens seen within the window: the same signed call twice is a replay."""

    def __init__(self, window: float = WINDOW, limit: int = MAX_TOKENS) -> None:
        self.window, self.limit = window, limit
        self._seen: OrderedDict[str, float] = OrderedDict()

    def first_time(self, token: str, *, now: float) -> bool:
        """Remember `token`; False when it was seen before (within twice the window)."""
        while self._seen and (
            len(self._seen) >= self.limit or next(iter(self._seen.values())) < now - 2 * self.window
        ):
            self._seen.popitem(last=False)
        if token in self._seen:
            return False
        self._seen[token] = now
        return True


def basic_auth_ok(header: str | None, secret: str) -> bool:
    """Whether an Authorization header is basic auth whose password is `secret` (any user
    name), compared in constant time."""
    scheme, _, value = (header or "").partition(" ")
    if scheme.lower() != "basic" or not value or len(value) > 1024:
        return False
    try:
        decoded = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return False
    _, colon, password = decoded.partition(b":")
    return bool(colon) and hmac.compare_digest(password, secret.encode())
