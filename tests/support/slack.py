"""Requests as Slack sends them to the app: signed with the app's signing secret."""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def signed(
    body: bytes | str, *, secret: str = SIGNING_SECRET, at: float | None = None
) -> dict[str, str]:
    """The headers of a slash command's POST: Slack's v0 signature over the raw body,
    HMAC-SHA256 of `v0:{timestamp}:{body}` with the signing secret, made now or `at`."""
    raw = body.encode() if isinstance(body, str) else body
    stamp = str(int(at if at is not None else time.time()))
    digest = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + raw, hashlib.sha256)
    return {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest.hexdigest()}",
        "Content-Type": "application/x-www-form-urlencoded",
    }
