"""Links: the one check every URL passes before it becomes a link (`web_url`), and signed
links (the manage page, one-click unsubscribe and address confirmation URLs, and the 👍 / 👎
of each paper of a digest: `feedback` links, which name a paper and a verdict too).

`web_url` is what every renderer (email HTML and text, Slack, the pages) calls on a paper's
URLs: only plain http(s) URLs with a host become links; `javascript:`, `data:` and anything
odd are left out with a log line, so a feed cannot put script into a page or an email.

Each link carries a token made with itsdangerous (HMAC-SHA256 over the payload and the time
it was made) naming one subscriber and the address it was sent to. A token proves that
paperbell made it, for that subscriber, at that time; it is checked against the purpose it
was made for (a manage token does not confirm an address) and its age. Pure: the clock is
passed in; nothing here reads the environment or the database.

A feedback token (an email's 👍 / 👎 link, a Slack button's value: `feedback_token`,
`feedback_url`) is short, since an email carries two for each of up to 50 papers within
Gmail's 102 KB: it carries the subscriber's id, the verdict and the paper's key, then the
time and a signature (HMAC-SHA256 cut to 96 bits) over all of them that also covers the
subscriber's `owner_tag` without carrying it, so it is checked against the subscriber it
names (`read_feedback`). Each token has its own signature: one edited to another paper,
verdict, subscriber, address or time is refused, as is a paper key no link could carry.

A rating token (the one link of an email's plain-text part to a page where each of its
papers gets its 👍 / 👎: `rating_url`, `read_rating`) is made the same way, with a salt of
its own, over the subscriber's id and the digest's id (its hex packed into bytes): short,
in date as long as a feedback link, refused when edited to another digest or subscriber.

A standing link (the personal Atom feed, `/feed/TOKEN.atom`, and the digest archive,
`/archive/TOKEN`) sits in a feed reader or an old email for years, so it does not expire:
its token is the subscriber's id and an HMAC-SHA256 over it whose key covers the purpose and
the `owner_tag`, the same for every email (`standing_token`, `read_standing`). What ends it
is the subscriber's: a change of address, the subscriber deleted, or (checked by the pages)
an unsubscribe; changing the secret key ends every link at once. The feed's and the
archive's tokens differ: a feed URL given to a hosted feed reader does not open the archive
(whose emails carry the manage and unsubscribe links).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from urllib.parse import urlsplit

from itsdangerous import (
    BadSignature,
    SignatureExpired,
    Signer,
    TimestampSigner,
    URLSafeTimedSerializer,
)
from itsdangerous.signer import HMACAlgorithm

from bot.core.checks import is_web_url
from bot.core.models import VERDICTS, Subscriber, Verdict

__all__ = [
    "MAX_FEEDBACK_KEY",
    "PURPOSES",
    "STANDING",
    "LinkSigner",
    "Purpose",
    "Standing",
    "TokenProblem",
    "Visitor",
    "address_tag",
    "check_public_url",
    "max_ages",
    "owner_tag",
    "placeholder_url",
    "web_url",
]

log = logging.getLogger(__name__)

Purpose = Literal["manage", "unsubscribe", "confirm", "feedback", "rate"]
PURPOSES: tuple[Purpose, ...] = ("manage", "unsubscribe", "confirm", "feedback", "rate")
# The links that name more than a subscriber, each read by a reader of its own.
_NAMING = frozenset({"feedback", "rate"})
# The links that do not expire (see the module's docstring): the Atom feed and the archive.
Standing = Literal["feed", "archive"]
STANDING: tuple[Standing, ...] = ("feed", "archive")
MAX_STANDING_TOKEN = 100  # characters: a standing token is about 56
# How a feedback token's body writes its verdict: a body with any other mark is none of ours.
_VERDICT_CODES: dict[str, Verdict] = {"l": "like", "d": "dislike"}
_CODE_OF = {verdict: code for code, verdict in _VERDICT_CODES.items()}
# The longest paper key a feedback link names (an arXiv id is 10-20 characters, a DOI key
# rarely over 100): a paper with a longer one gets no 👍 / 👎 links.
MAX_FEEDBACK_KEY = 200
MAX_FEEDBACK_TOKEN = 400  # characters: anything longer is no token of ours
MAX_DIGEST_ID = 128  # the outbox's column: a rating token names a digest at most this long
# How a rating token's body writes its digest: "h" its id's hex packed ("paperbell.<hex>"),
# "r" the id itself (any other), each base64url.
_HEX_DIGEST = re.compile(r"paperbell\.((?:[0-9a-f]{2}){1,32})")
FEEDBACK_SIGNATURE_BYTES = 12  # 96 bits: forging one takes ~2**96 tries
MIN_SECRET = 32
# The token of a link that could not be signed (a preview made without the secret key).
UNSIGNED = "UNSIGNED-PREVIEW-no-secret-key"
# Hosts where plain http is allowed (a development server): `urlsplit().hostname` forms.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def web_url(url: str | None, *, what: str = "a link") -> str | None:
    """`url` if it may become a link: http or https, a host, no credentials, no space or
    control or invisible character, at most MAX_URL_LENGTH characters. Otherwise None (logged:
    `what` says whose link it was); an empty `url` is None without a word."""
    if not url:
        return None
    candidate = url.strip(" \t\r\n")
    if is_web_url(candidate):
        return candidate
    log.warning("%s is left out: not a plain http(s) URL: %r", what, url[:200])
    return None


def check_public_url(url: str) -> str:
    """The site's public address, without a trailing slash: https, or http on loopback, and
    no path, since the pages' forms and redirects point at the site's root."""
    parts = urlsplit(url)
    loopback = parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS
    if parts.scheme != "https" and not loopback:
        raise ValueError(
            "use an https:// URL (http:// only on loopback: mail providers need https for "
            "one-click unsubscribe)"
        )
    if not parts.hostname or parts.query or parts.fragment or any(c in url for c in " <>\"'"):
        raise ValueError(f"not a plain site address: {url!r}")
    if parts.path.strip("/"):
        raise ValueError(
            f"give the site's root, with no path ({parts.path!r}): the pages' forms post to "
            "/manage/... on it, so serve them on a host name of their own"
        )
    return url.rstrip("/")


def placeholder_url(public_url: str, purpose: Purpose | Standing) -> str:
    """Where a signed link would go, with a token that says it is none: for previews made
    without the secret key. The pages refuse it as any forged token."""
    suffix = ".atom" if purpose == "feed" else ""
    return f"{public_url.rstrip('/')}/{purpose}/{UNSIGNED}{suffix}"


def address_tag(email: str | None) -> str:
    """A short digest of an address: a link names the address it was sent to without
    showing it in the URL (proxies and logs see URLs), and stops working when it changes."""
    return hashlib.sha256((email or "").strip().lower().encode()).hexdigest()[:12]


def owner_tag(sub: Subscriber) -> str:
    """What a link binds besides the database id: the address it went to and when the
    subscriber was made, so a link outlives neither a change of address nor its subscriber
    (a database may give a deleted subscriber's id to the next one)."""
    made = int(sub.created.timestamp()) if sub.created is not None else 0
    return address_tag(f"{sub.email or ''}|{made}")


@dataclass(frozen=True)
class Visitor:
    """Who a valid token names: a subscriber (by database id) at an address; a feedback
    link also names a paper (its key) and a verdict on it."""

    subscriber_id: int
    tag: str  # address_tag() of the address the link was sent to
    made: datetime
    paper: str | None = None  # feedback links: the paper's key ("2411.18179", "doi:…")
    verdict: Verdict | None = None  # feedback links: "like" or "dislike"
    digest: str | None = None  # rating links: the digest's id ("paperbell.3da9…")

    def belongs_to(self, sub: Subscriber) -> bool:
        """Whether the link was made for this subscriber, at the address they have now."""
        return sub.id == self.subscriber_id and hmac.compare_digest(self.tag, owner_tag(sub))


@dataclass(frozen=True)
class TokenProblem:
    """Why a token is refused. `expired` tokens are genuine: `visitor` says whose they were
    (to offer a fresh link, sent to the address on file), never to act on."""

    reason: Literal["forged", "expired"]
    visitor: Visitor | None = None


def _clock_signer(moment: datetime) -> type[TimestampSigner]:
    return _signer_at(int(moment.timestamp()))


@functools.lru_cache(maxsize=64)  # a run signs thousands of links at one time
def _signer_at(stamp: int) -> type[TimestampSigner]:
    class ClockSigner(TimestampSigner):
        def get_timestamp(self) -> int:
            return stamp

        def derive_key(self, secret_key: str | bytes | None = None) -> bytes:
            # The signing key, derived once per signer (itsdangerous derives it again for
            # every signature: an HMAC more for each of a run's many thousand links).
            if secret_key is not None:
                return super().derive_key(secret_key)
            key: bytes | None = self.__dict__.get("_derived_key")
            if key is None:
                key = self.__dict__["_derived_key"] = super().derive_key()
            return key

    return ClockSigner


class _ShortHMAC(HMACAlgorithm):
    """HMAC-SHA256 cut to FEEDBACK_SIGNATURE_BYTES: a feedback link's signature."""

    def __init__(self) -> None:
        super().__init__(hashlib.sha256)

    def get_signature(self, key: bytes, value: bytes) -> bytes:
        return super().get_signature(key, value)[:FEEDBACK_SIGNATURE_BYTES]


def _feedback_body(number: int, paper: str, verdict: Verdict) -> str:
    text = f"{number}\n{_CODE_OF[verdict]}\n{paper}".encode()
    return base64.urlsafe_b64encode(text).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class _Claim:
    """What a feedback token's body says, unchecked."""

    subscriber_id: int
    verdict: Verdict
    paper: str


def _votable(paper: str) -> bool:
    """Whether a paper's key can ride in a feedback token: not too long (MAX_FEEDBACK_KEY),
    and no control or invisible character (a NUL would not even store)."""
    return 0 < len(paper) <= MAX_FEEDBACK_KEY and paper.isprintable()


def _feedback_claim(token: str) -> _Claim | None:
    """What a feedback token claims (unchecked): None when its body is not one we make."""
    if len(token) > MAX_FEEDBACK_TOKEN or not token.isascii() or token.count(".") != 2:
        return None
    body = token.partition(".")[0]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        text = raw.decode()
    except (binascii.Error, ValueError):
        return None
    number, code, paper = [*text.split("\n", 2), "", ""][:3]
    verdict = _VERDICT_CODES.get(code)
    if not (number.isascii() and number.isdigit() and len(number) <= 12) or verdict is None:
        return None
    if not _votable(paper):
        return None
    return _Claim(int(number), verdict, paper)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None


def _digest_ok(digest_id: str) -> bool:
    """Whether a digest id can be named by a rating token: what the outbox stores."""
    return 0 < len(digest_id) <= MAX_DIGEST_ID and digest_id.isascii() and digest_id.isprintable()


def _rating_body(number: int, digest_id: str) -> str:
    packed = _HEX_DIGEST.fullmatch(digest_id)
    if packed:
        return f"{number}h{_b64(bytes.fromhex(packed.group(1)))}"
    return f"{number}r{_b64(digest_id.encode())}"


def _rating_claim(token: str) -> tuple[int, str] | None:
    """The subscriber id and digest id a rating token names (unchecked), or None when its
    body is not one we make."""
    if len(token) > MAX_FEEDBACK_TOKEN or not token.isascii() or token.count(".") != 2:
        return None
    body = token.partition(".")[0]
    number = body[: len(body) - len(body.lstrip("0123456789"))]
    code, rest = body[len(number) : len(number) + 1], body[len(number) + 1 :]
    raw = _unb64(rest) if rest else None
    if not number or len(number) > 12 or raw is None:
        return None
    if code == "h" and 0 < len(raw) <= 32:
        digest_id = f"paperbell.{raw.hex()}"
    elif code == "r":
        try:
            digest_id = raw.decode()
        except UnicodeDecodeError:
            return None
    else:
        return None
    # Only the form this module writes: one body for each digest.
    if not _digest_ok(digest_id) or _rating_body(int(number), digest_id) != body:
        return None
    return int(number), digest_id


class LinkSigner:
    """Makes and reads the signed links of one site (`public_url`) with one secret."""

    def __init__(self, secret: str, public_url: str, *, max_age: dict[str, timedelta]) -> None:
        if len(secret) < MIN_SECRET:
            raise ValueError(f"the secret key must be at least {MIN_SECRET} characters")
        self._secret = secret
        self.public_url = check_public_url(public_url)
        self.max_age = max_age
        # One feedback signer per subscriber and time, kept: a digest signs two links (or
        # buttons) a paper with one.
        self._feedback_signers: dict[tuple[str, datetime], TimestampSigner] = {}
        # The last subscriber's owner_tag (by address and birth): a digest's five kinds of
        # link ask for the same one in a row.
        self._last_tag: tuple[tuple[str | None, datetime | None], str] | None = None

    def _owner_tag(self, sub: Subscriber) -> str:
        owner, last = (sub.email, sub.created), self._last_tag
        if last is None or last[0] != owner:
            last = self._last_tag = (owner, owner_tag(sub))
        return last[1]

    def derived_key(self, name: str) -> str:
        """A key for another use (the pages' CSRF tokens), derived from the secret."""
        return hmac.new(self._secret.encode(), f"paperbell.{name}".encode(), "sha256").hexdigest()

    def _serializer(self, purpose: Purpose, now: datetime) -> URLSafeTimedSerializer:
        return URLSafeTimedSerializer(
            self._secret,
            salt=f"paperbell.{purpose}",
            signer=_clock_signer(now),
            signer_kwargs={"digest_method": hashlib.sha256},
        )

    def token(self, purpose: Purpose, sub: Subscriber, *, now: datetime) -> str:
        if purpose == "feedback":
            raise ValueError("a feedback link names a paper: use feedback_token")
        if purpose == "rate":
            raise ValueError("a rating link names a digest: use rating_url")
        if sub.id is None:
            raise ValueError(f"{sub.name} is not stored: a link needs its database id")
        return str(self._serializer(purpose, now).dumps([sub.id, self._owner_tag(sub)]))

    def url(self, purpose: Purpose, sub: Subscriber, *, now: datetime) -> str:
        """The full link: `https://site/manage/TOKEN`."""
        return f"{self.public_url}/{purpose}/{self.token(purpose, sub, now=now)}"

    def read(self, purpose: Purpose, token: str, *, now: datetime) -> Visitor | TokenProblem:
        """Whose the token is, or why it is refused (a feedback token: `read_feedback`, a
        rating token: `read_rating`)."""
        if purpose in _NAMING:
            return TokenProblem("forged")
        serializer = self._serializer(purpose, now)
        max_age = int(self.max_age[purpose].total_seconds())
        try:
            payload, made = serializer.loads(token, max_age=max_age, return_timestamp=True)
        except SignatureExpired as exc:  # genuine, but old: its raw payload, to decode
            try:
                payload = serializer.load_payload(exc.payload) if exc.payload else None
            except BadSignature:
                payload = None
            return TokenProblem("expired", _visitor(payload, exc.date_signed))
        except BadSignature:
            return TokenProblem("forged")
        visitor = _visitor(payload, made)
        return visitor if visitor is not None else TokenProblem("forged")

    # -- feedback links: 👍 / 👎 on one paper ------------------------------------------------

    def _feedback_signer(
        self, tag: str, now: datetime, purpose: str = "feedback"
    ) -> TimestampSigner:
        salt = f"paperbell.{purpose}.{tag}"
        signer = self._feedback_signers.get((salt, now))
        if signer is None:
            if len(self._feedback_signers) >= 256:
                self._feedback_signers.clear()
            signer = self._feedback_signers[(salt, now)] = _clock_signer(now)(
                self._secret,
                salt=salt,
                key_derivation="hmac",
                algorithm=_ShortHMAC(),
            )
        return signer

    def feedback_token(
        self, sub: Subscriber, paper: str, verdict: Verdict, *, now: datetime
    ) -> str | None:
        """A token that records `verdict` on `paper` for `sub`, signed over all three (an
        email's 👍 / 👎 link, a Slack button's value); None for a paper whose key it cannot
        carry (too long, or a control character in it)."""
        if sub.id is None:
            raise ValueError(f"{sub.name} is not stored: a link needs its database id")
        if verdict not in VERDICTS:
            raise ValueError(f"not a verdict: {verdict!r}")
        if not _votable(paper):
            return None
        body = _feedback_body(sub.id, paper, verdict)
        token = self._feedback_signer(self._owner_tag(sub), now).sign(body).decode()
        return token if len(token) <= MAX_FEEDBACK_TOKEN else None

    def feedback_url(
        self, sub: Subscriber, paper: str, verdict: Verdict, *, now: datetime
    ) -> str | None:
        """The full link: `https://site/feedback/TOKEN` (None: see `feedback_token`)."""
        token = self.feedback_token(sub, paper, verdict, now=now)
        return f"{self.public_url}/feedback/{token}" if token else None

    def read_feedback(
        self,
        token: str,
        *,
        now: datetime,
        owner: Callable[[int], Subscriber | None],
    ) -> Visitor | TokenProblem | None:
        """Whose verdict on which paper the token records, or why it is refused; None when
        it names a subscriber `owner` (a lookup by id) does not know (gone, or made up:
        the signature covers the subscriber, so without them it cannot be checked)."""
        claim = _feedback_claim(token)
        if claim is None:
            return TokenProblem("forged")
        subscriber_id, verdict, paper = claim.subscriber_id, claim.verdict, claim.paper
        sub = owner(subscriber_id)
        if sub is None or sub.id != subscriber_id:
            return None
        tag = owner_tag(sub)
        return self._checked(
            token,
            self._feedback_signer(tag, now),
            lambda made: Visitor(subscriber_id, tag, made, paper, verdict),
        )

    def _checked(
        self, token: str, signer: TimestampSigner, visitor: Callable[[datetime], Visitor]
    ) -> Visitor | TokenProblem:
        """The visitor a 👍 / 👎 or rating token names (`visitor(when it was signed)`), or
        "expired" (with that visitor: a fresh link can be mailed) or "forged"."""
        max_age = int(self.max_age["feedback"].total_seconds())
        try:
            _, made = signer.unsign(token, max_age=max_age, return_timestamp=True)
        except SignatureExpired as exc:
            if exc.date_signed is None:
                return TokenProblem("forged")
            return TokenProblem("expired", visitor(exc.date_signed))
        except BadSignature:
            return TokenProblem("forged")
        return visitor(made)

    # -- rating links: the page where each paper of one email gets its 👍 / 👎 -----------------

    def rating_url(self, sub: Subscriber, digest_id: str, *, now: datetime) -> str | None:
        """The full link: `https://site/rate/TOKEN`, naming `sub` and the digest `digest_id`
        (None for an id no digest is stored under)."""
        if sub.id is None:
            raise ValueError(f"{sub.name} is not stored: a link needs its database id")
        if not _digest_ok(digest_id):
            return None
        body = _rating_body(sub.id, digest_id)
        token = self._feedback_signer(self._owner_tag(sub), now, "rate").sign(body).decode()
        return f"{self.public_url}/rate/{token}"

    def read_rating(
        self,
        token: str,
        *,
        now: datetime,
        owner: Callable[[int], Subscriber | None],
    ) -> Visitor | TokenProblem | None:
        """Whose digest the token opens for rating, or why it is refused; None when it names
        a subscriber `owner` (a lookup by id) does not know (as `read_feedback`)."""
        claim = _rating_claim(token)
        if claim is None:
            return TokenProblem("forged")
        subscriber_id, digest_id = claim
        sub = owner(subscriber_id)
        if sub is None or sub.id != subscriber_id:
            return None
        tag = owner_tag(sub)
        return self._checked(
            token,
            self._feedback_signer(tag, now, "rate"),
            lambda made: Visitor(subscriber_id, tag, made, digest=digest_id),
        )

    # -- standing links: the Atom feed and the archive ---------------------------------------

    def _standing_signer(self, purpose: Standing, tag: str) -> Signer:
        return Signer(
            self._secret,
            salt=f"paperbell.{purpose}.{tag}",
            key_derivation="hmac",
            digest_method=hashlib.sha256,
        )

    def standing_token(self, purpose: Standing, sub: Subscriber) -> str:
        """The subscriber's feed or archive token: `ID.SIGNATURE`, the same every time."""
        if purpose not in STANDING:
            raise ValueError(f"not a standing link: {purpose!r}")
        if sub.id is None:
            raise ValueError(f"{sub.name} is not stored: a link needs its database id")
        return self._standing_signer(purpose, self._owner_tag(sub)).sign(str(sub.id)).decode()

    def feed_url(self, sub: Subscriber) -> str:
        """The subscriber's Atom feed: `https://site/feed/TOKEN.atom`."""
        return f"{self.public_url}/feed/{self.standing_token('feed', sub)}.atom"

    def archive_url(self, sub: Subscriber, digest_id: str | None = None) -> str:
        """The subscriber's archive (`https://site/archive/TOKEN`), or one digest in it."""
        base = f"{self.public_url}/archive/{self.standing_token('archive', sub)}"
        return f"{base}/{digest_id}" if digest_id else base

    def read_standing(
        self,
        purpose: Standing,
        token: str,
        *,
        owner: Callable[[int], Subscriber | None],
    ) -> Visitor | TokenProblem | None:
        """Whose feed or archive the token opens, or why it is refused; None when it names
        a subscriber `owner` (a lookup by id) does not know (gone, or made up: the
        signature covers the subscriber, so without them it cannot be checked)."""
        number, dot, _ = token.partition(".")
        if (
            purpose not in STANDING
            or len(token) > MAX_STANDING_TOKEN
            or not token.isascii()  # ours are; and a lone surrogate cannot even be encoded
            or not dot
            or not (number.isascii() and number.isdigit() and 0 < len(number) <= 12)
        ):
            return TokenProblem("forged")
        sub = owner(int(number))
        if sub is None or sub.id != int(number):
            return None
        tag = owner_tag(sub)
        if not self._standing_signer(purpose, tag).validate(token):
            return TokenProblem("forged")
        made = sub.created or datetime.fromtimestamp(0, tz=UTC)
        return Visitor(sub.id, tag, made)


def _visitor(payload: object, made: datetime | None) -> Visitor | None:
    if (
        not isinstance(payload, list)
        or len(payload) != 2
        or not isinstance(payload[0], int)
        or not isinstance(payload[1], str)
        or made is None
    ):
        return None
    return Visitor(subscriber_id=payload[0], tag=payload[1], made=made)


def max_ages(
    *,
    manage_days: float,
    unsubscribe_days: float,
    confirm_days: float,
    feedback_days: float = 730,
) -> dict[str, timedelta]:
    """How long each kind of link works (👍 / 👎 links: two years unless said: people click
    them in old digests)."""
    return {
        "manage": timedelta(days=manage_days),
        "unsubscribe": timedelta(days=unsubscribe_days),
        "confirm": timedelta(days=confirm_days),
        "feedback": timedelta(days=feedback_days),
    }
