"""The 👍 / 👎 links paperbell made for an email before each was signed alone: every link of an
email shared one signature over the subscriber and the time only, its paper and verdict
riding unsigned (the verdict written "+" or "-"). Written out again here, as that code made
them, so that the tests show such links, still sitting in old emails, are refused.
tests/web/test_feedback_links.py checks this against tokens the old code made."""

from __future__ import annotations

import base64
import hashlib
from datetime import datetime

from itsdangerous import TimestampSigner
from itsdangerous.signer import HMACAlgorithm

from bot.core.links import owner_tag
from bot.core.models import Subscriber, Verdict


class _ShortHMAC(HMACAlgorithm):
    """HMAC-SHA256 cut to 96 bits, as every feedback link's signature is."""

    def __init__(self) -> None:
        super().__init__(hashlib.sha256)

    def get_signature(self, key: bytes, value: bytes) -> bytes:
        return super().get_signature(key, value)[:12]


def shared_vote_token(
    secret: str, sub: Subscriber, paper: str, verdict: Verdict, *, now: datetime
) -> str:
    """The token of an email's link that shared the email's signature, made at `now`."""
    stamp = int(now.timestamp())

    class AtNow(TimestampSigner):
        def get_timestamp(self) -> int:
            return stamp

    number = str(sub.id)
    code = {"like": "+", "dislike": "-"}[verdict]
    body = base64.urlsafe_b64encode(f"{number}\n{code}\n{paper}".encode()).decode().rstrip("=")
    signer = AtNow(
        secret,
        salt=f"paperbell.votes.{owner_tag(sub)}",
        key_derivation="hmac",
        algorithm=_ShortHMAC(),
    )
    return body + signer.sign(number).decode().removeprefix(number)
