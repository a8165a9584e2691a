"""The guards in front of every request a stranger can send, shared by the pages and the
Slack endpoint: the body read with a size cap, the urlencoded form it holds, the cross-site
request forgery token (`Csrf`) and the rate limit (`Throttle`).

Each guard answers a yes or a no (or None past a cap) and never raises on what a visitor
sends; deciding the page or status to answer with is the caller's. No route is defined here.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections import Counter, deque
from datetime import datetime, timedelta
from urllib.parse import parse_qsl, urlsplit

from itsdangerous import BadSignature, URLSafeSerializer
from starlette.requests import Request

CSRF_COOKIE = "paperbell_csrf"
CSRF_FIELD = "csrf"


async def read_body(request: Request, limit: int) -> bytes | None:
    """The raw body (the signature covers its exact bytes), or None past `limit` bytes."""
    declared = request.headers.get("content-length", "")
    # ASCII digits only: "¹²".isdigit() is True, but int() refuses it.
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return body


def parse_form(body: bytes) -> dict[str, str]:
    """An urlencoded form's fields (a body that is not UTF-8 is read, not refused)."""
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def client_of(request: Request) -> str:
    """The client a throttle counts: the address the request came from (a trusted proxy's
    word on it, [web] trusted_proxies, is uvicorn's to take), an IPv6 client by its /64
    (one machine's share: it may use any address in it)."""
    host = request.client.host if request.client else "?"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class Throttle:
    """At most `per_client` events a `window` (an hour unless said) from one client and
    `overall` from everyone: the sign-up page mails strangers, so it must not become a way to
    mail-bomb someone; the live rule check must not become a way to keep the app busy. A
    client past its own limit is refused before it counts against everyone's, and
    `overall` is set far above `per_client`, so no one client locks everyone out."""

    def __init__(
        self, *, per_client: int, overall: int, window: timedelta = timedelta(hours=1)
    ) -> None:
        self.per_client, self.overall, self.window = per_client, overall, window
        self._events: deque[tuple[datetime, str]] = deque()
        self._counts: Counter[str] = Counter()

    def allow(self, client: str, now: datetime) -> bool:
        while self._events and now - self._events[0][0] > self.window:
            _, gone = self._events.popleft()
            self._counts[gone] -= 1
            if not self._counts[gone]:
                del self._counts[gone]
        if self._counts[client] >= self.per_client or len(self._events) >= self.overall:
            return False
        self._events.append((now, client))
        self._counts[client] += 1
        return True


class Csrf:
    """Double-submit token: a random cookie, and the same value signed in each form."""

    def __init__(self, secret: str, *, public_url: str) -> None:
        self._signer = URLSafeSerializer(secret, salt="paperbell.csrf")
        self.public_host = urlsplit(public_url).netloc

    def token(self, request: Request) -> tuple[str, str | None]:
        """The form token for this visitor, and a new cookie value to set (or None)."""
        cookie = request.cookies.get(CSRF_COOKIE)
        fresh = None
        if not cookie or len(cookie) > 64:
            cookie = fresh = secrets.token_urlsafe(24)
        return str(self._signer.dumps(cookie)), fresh

    def problem(self, request: Request, form: dict[str, str]) -> str | None:
        """Why a form post is refused, or None."""
        if request.headers.get("sec-fetch-site") == "cross-site":
            return "a form on another site tried to post here"
        origin = request.headers.get("origin")
        if origin and origin != "null" and not self._same_site(origin, request):
            return f"the form came from another site ({origin})"
        cookie = request.cookies.get(CSRF_COOKIE)
        if not cookie:
            return "your browser did not send the page's cookie (are cookies off?)"
        try:
            signed = self._signer.loads(form.get(CSRF_FIELD, ""))
        except BadSignature:
            return "the form's security token is missing or wrong"
        if not secrets.compare_digest(str(signed), cookie):
            return "the form's security token belongs to another visit"
        return None

    def _same_site(self, origin: str, request: Request) -> bool:
        """The form came from this site: its public address (behind a proxy that does not
        pass the Host header on), or the host it was served as."""
        host = urlsplit(origin).netloc
        served = {request.headers.get("host"), request.headers.get("x-forwarded-host")}
        return host == self.public_host or host in served - {None, ""}
