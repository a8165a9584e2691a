"""The providers' webhook calls as the tests make them: the payloads of
tests/fixtures/bounces/webhooks/ (SOURCES.md there), SNS messages signed as SNS signs them
with a certificate and RSA key made here (`SnsSigner`), Mailgun calls signed with a key,
Postmark's basic auth."""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
from datetime import datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID
from hypothesis import strategies as st

from bot.bounces.sns import NOTIFICATION_FIELDS, SUBSCRIPTION_FIELDS
from support.paths import FIXTURES

WEBHOOKS = FIXTURES / "bounces" / "webhooks"
TOPIC = "arn:aws:sns:eu-west-1:123456789012:paperbell-bounces"
CERT_URL = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-test.pem"
POSTMARK_SECRET = "postmark-webhook-password-0123456789"
MAILGUN_KEY = "mailgun-signing-key-0123456789abcdef"


def payload(name: str) -> dict[str, Any]:
    """A fixture's JSON, a fresh copy to change."""
    return copy.deepcopy(json.loads((WEBHOOKS / name).read_text(encoding="utf-8")))


class SnsSigner:
    """A certificate and key, as SNS has; signs messages as SNS signs them. The certificate
    is valid from a day before `now` to 30 days after: `now` is the test's clock."""

    def __init__(self, now: datetime, common_name: str = "sns.amazonaws.com") -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=30))
            .sign(self.key, hashes.SHA256())
        )
        self.pem = self.certificate.public_bytes(serialization.Encoding.PEM)

    def sign(self, message: dict[str, Any], *, version: str = "2") -> dict[str, Any]:
        """`message` with SignatureVersion, SigningCertURL and Signature set."""
        message = {**message, "SignatureVersion": version}
        message.setdefault("SigningCertURL", CERT_URL)
        fields = NOTIFICATION_FIELDS if message["Type"] == "Notification" else SUBSCRIPTION_FIELDS
        text = "".join(f"{k}\n{message[k]}\n" for k in fields if message.get(k) is not None)
        algorithm = hashes.SHA1() if version == "1" else hashes.SHA256()
        signature = self.key.sign(text.encode(), padding.PKCS1v15(), algorithm)
        message["Signature"] = base64.b64encode(signature).decode()
        return message

    def notification(
        self, ses: dict[str, Any], *, message_id: str = "msg-1", topic: str = TOPIC, **more: Any
    ) -> dict[str, Any]:
        """An SNS notification carrying an SES notification, signed."""
        return self.sign(
            {
                "Type": "Notification",
                "MessageId": message_id,
                "TopicArn": topic,
                "Message": json.dumps(ses),
                "Timestamp": "2026-12-03T07:02:12.000Z",
                "UnsubscribeURL": "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe",
                **more,
            }
        )


def mailgun_signed(
    data: dict[str, Any], *, timestamp: int, token: str, key: str = MAILGUN_KEY
) -> dict[str, Any]:
    """A Mailgun call signed with `key` at `timestamp` (seconds) with `token`."""
    digest = hmac.new(key.encode(), f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()
    return {**data, "signature": {"timestamp": str(timestamp), "token": token, "signature": digest}}


def basic_auth(password: str = POSTMARK_SECRET, user: str = "postmark") -> dict[str, str]:
    """Postmark's Authorization header for a webhook URL with `user:password@`."""
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def json_values(*, text: int = 40, leaves: int = 40, nan: bool = True) -> st.SearchStrategy[Any]:
    """Any JSON value Python's json reads: NaN and lone surrogates among them (unless
    `nan` is False), nested lists and objects."""
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=nan)
        | st.text(alphabet=st.characters(), max_size=text),
        lambda inner: (
            st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=20), inner, max_size=5)
        ),
        max_leaves=leaves,
    )
