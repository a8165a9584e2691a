"""Amazon SNS's HTTP deliveries (how SES's bounce and complaint notifications arrive): the
message read from the request's JSON, its signature checked, and its signing certificates
kept once fetched.

SNS signs each message (SignatureVersion 1: SHA1withRSA, 2: SHA256withRSA) over a canonical
string of its documented fields, with the key of a certificate it names in
`SigningCertURL`; that URL is believed only over https from an SNS host
(`sns.REGION.amazonaws.com`, `.com.cn` in China), so a forger cannot name a certificate
of their own. The fetch itself is injected (`Fetch`: the daemon's size-capped,
deadline-bound HTTP, bot.sources.http), so that a test hands over a certificate it made;
no other part of the check can be swapped. Verification uses `cryptography`.

No I/O of its own, no clock: `SigningCertificates.verify` awaits the injected fetch once per
certificate URL.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

# A host SNS serves its certificates (and subscription links) from.
SNS_HOST = re.compile(r"^sns\.[a-z]{2}(?:-[a-z]+)+-\d\.amazonaws\.com(?:\.cn)?$")
MAX_CERTIFICATE = 64 * 1024  # bytes of a certificate fetched
MAX_CACHED = 16  # certificates kept (SNS rotates them rarely)
TYPES = ("Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation")
# The fields signed, in order (the documented canonical string: "Name\nvalue\n" each).
NOTIFICATION_FIELDS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
SUBSCRIPTION_FIELDS = (
    "Message",
    "MessageId",
    "SubscribeURL",
    "Timestamp",
    "Token",
    "TopicArn",
    "Type",
)
HASHES: dict[str, type[hashes.HashAlgorithm]] = {"1": hashes.SHA1, "2": hashes.SHA256}

Fetch = Callable[[str], Awaitable[bytes]]


@dataclass(frozen=True, slots=True)
class SnsMessage:
    """An SNS delivery, as read from its JSON: every field as a string (absent: None)."""

    fields: Mapping[str, str]

    @property
    def type(self) -> str:
        return self.fields.get("Type", "")

    def get(self, name: str) -> str | None:
        return self.fields.get(name)


def read_message(data: Any) -> SnsMessage | str:
    """The SNS message in a request's JSON, or why it is none."""
    if not isinstance(data, Mapping):
        return "not a JSON object"
    fields: dict[str, str] = {}
    for name in {*SUBSCRIPTION_FIELDS, *NOTIFICATION_FIELDS, "Signature", "SignatureVersion"}:
        value = data.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            return f"{name} is not a string"
        fields[name] = value
    fields["SigningCertURL"] = _string(data.get("SigningCertURL") or data.get("SigningCertUrl"))
    message = SnsMessage(fields)
    if message.type not in TYPES:
        return f"not an SNS message type: {message.type[:40]!r}"
    return message


def canonical(message: SnsMessage) -> bytes | None:
    """The string SNS signs for this message (None: a field it needs is missing)."""
    names = NOTIFICATION_FIELDS if message.type == "Notification" else SUBSCRIPTION_FIELDS
    parts = []
    for name in names:
        value = message.get(name)
        if value is None:
            if name == "Subject":  # signed only when the message has one
                continue
            return None
        parts.append(f"{name}\n{value}\n")
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: SNS signs UTF-8, so this is not its
        return None


def certificate_url_ok(url: str) -> bool:
    """Whether `url` is where SNS keeps its signing certificates: https, an SNS host, no
    user or port, a .pem file."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return (
        parts.scheme == "https"
        and port is None
        and parts.username is None
        and SNS_HOST.match(parts.hostname or "") is not None
        and parts.path.endswith(".pem")
        and not parts.query
    )


def sns_url_ok(url: str) -> bool:
    """Whether `url` (a SubscribeURL) is an https link to an SNS host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    host = parts.hostname or ""
    return (
        parts.scheme == "https"
        and port is None
        and parts.username is None
        and bool(SNS_HOST.match(host))
    )


def verify(message: SnsMessage, certificate: x509.Certificate) -> bool:
    """Whether the message's signature is the one `certificate`'s key made."""
    algorithm = HASHES.get(message.get("SignatureVersion") or "")
    text = canonical(message)
    signature = _signature(message.get("Signature"))
    key = certificate.public_key()
    if algorithm is None or text is None or signature is None:
        return False
    if not isinstance(key, rsa.RSAPublicKey):
        return False
    try:
        key.verify(signature, text, padding.PKCS1v15(), algorithm())
    except InvalidSignature:
        return False
    return True


class SigningCertificates:
    """SNS's signing certificates, fetched (through `fetch`) once per URL and kept."""

    def __init__(self, fetch: Fetch) -> None:
        self.fetch = fetch
        self._kept: OrderedDict[str, x509.Certificate] = OrderedDict()

    async def verify(self, message: SnsMessage, *, now: datetime) -> str | None:
        """None when the message is SNS's; else why not (a problem with its certificate
        URL, a certificate that cannot be had or is not valid `now`, a wrong signature)."""
        url = message.get("SigningCertURL") or ""
        if not certificate_url_ok(url):
            return "SigningCertURL is not an SNS certificate (https://sns.REGION.amazonaws.com/)"
        certificate = self._kept.get(url)
        if certificate is None:
            fetched = await self._fetch(url)
            if isinstance(fetched, str):
                return fetched
            certificate = self._kept[url] = fetched
            while len(self._kept) > MAX_CACHED:
                self._kept.popitem(last=False)
        if not certificate.not_valid_before_utc <= now <= certificate.not_valid_after_utc:
            return "the signing certificate is not valid now"
        if not verify(message, certificate):
            return "the signature is wrong"
        return None

    async def _fetch(self, url: str) -> x509.Certificate | str:
        try:
            body = await self.fetch(url)
        except Exception as exc:  # the fetch's own error (SourceError): say it, go on
            return f"the signing certificate could not be fetched: {str(exc)[:200]}"
        if len(body) > MAX_CERTIFICATE:
            return "the signing certificate is too large"
        try:
            return x509.load_pem_x509_certificate(body)
        except ValueError:
            return "the signing certificate is not a PEM certificate"


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _signature(value: str | None) -> bytes | None:
    if not value or len(value) > 4096:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
