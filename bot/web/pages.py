"""The pages reached from every email, as Starlette routes: one-click unsubscribe (RFC 8058),
the manage page, address confirmation (double opt-in) and the optional sign-up page.

Wiring only: what each page does is `bot.manage`; this module reads forms, checks the
cross-site request forgery token, renders `templates/web/*.html.j2` and answers. Links are
capabilities (a signed token in the URL names the subscriber); there is no login and no
session. Every form but the one-click POST (which mail providers send with no cookie, by
design) carries a CSRF token tied to a cookie, and cross-site posts are refused.
"""

from __future__ import annotations

import email.policy
import functools
import logging
import secrets
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from email import message_from_bytes
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from zoneinfo import available_timezones

from itsdangerous import BadSignature, URLSafeSerializer
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from bot.channels import Channel
from bot.config import Config
from bot.core.errors import PaperbellError
from bot.core.links import PURPOSES
from bot.core.models import Subscriber
from bot.core.schedule import WEEKDAYS
from bot.manage import Manager, Refused, RuleProblem, mask, notice_sender
from bot.render import template_env, templates_dir
from bot.render.notice import NoticeKind
from bot.store import Store
from bot.web.app import read_body

__all__ = ["CSRF_COOKIE", "Csrf", "build_pages", "page_routes"]

log = logging.getLogger(__name__)

CSRF_COOKIE = "paperbell_csrf"
CSRF_FIELD = "csrf"
MAX_FORM = 16 * 1024
# The pages' script, served from templates/web/ (shipped in the package with the templates);
# templates/web/rule_check.html.j2 names the same path.
SCRIPT_PATH = "/static/rule-check.js"
ONE_CLICK = "List-Unsubscribe=One-Click"
# Sign-ups (each mails a confirmation) an hour: from one client address, and from everyone.
SIGNUPS_PER_CLIENT = 5
SIGNUPS_OVERALL = 50
# Live rule checks (one per pause in typing) a minute: from one client address, and overall.
RULE_CHECKS_PER_CLIENT = 30
RULE_CHECKS_OVERALL = 600

# What a finished change says at the top of the manage page (?done=KEY).
DONE = {
    "added": "Rule added.",
    "edited": "Rule saved.",
    "removed": "Rule removed.",
    "settings": "Settings saved.",
    "paused": "Paused: no digests until you resume.",
    "resumed": "Resumed: your next digest comes at its usual time.",
    "confirmed": "Address confirmed: your digests will come by email.",
}


class Throttle:
    """At most `per_client` events a `window` (an hour unless said) from one address and
    `overall` from everyone: the sign-up page mails strangers, so it must not become a way to
    mail-bomb someone; the live rule check must not become a way to keep the app busy."""

    def __init__(
        self, *, per_client: int, overall: int, window: timedelta = timedelta(hours=1)
    ) -> None:
        self.per_client, self.overall, self.window = per_client, overall, window
        self._events: deque[tuple[datetime, str]] = deque()

    def allow(self, client: str, now: datetime) -> bool:
        while self._events and now - self._events[0][0] > self.window:
            self._events.popleft()
        mine = sum(1 for _, who in self._events if who == client)
        if len(self._events) >= self.overall or mine >= self.per_client:
            return False
        self._events.append((now, client))
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


def page_routes(
    manager: Manager,
    *,
    mail_queued: Callable[[], Awaitable[None]] | None = None,
) -> list[Route]:
    """The routes of the pages, for `bot.web.app.create_app`. `mail_queued()` is awaited after a
    page queued mail (a confirmation, a fresh link): it sends what the outbox holds."""
    signer = manager.signer
    csrf = Csrf(signer.derived_key("csrf"), public_url=signer.public_url)
    signups = Throttle(per_client=SIGNUPS_PER_CLIENT, overall=SIGNUPS_OVERALL)
    rule_checks = Throttle(
        per_client=RULE_CHECKS_PER_CLIENT,
        overall=RULE_CHECKS_OVERALL,
        window=timedelta(minutes=1),
    )
    env = template_env()
    site = manager.config.email.from_name if manager.config.email else "paperbell"

    def page(
        request: Request,
        template: str,
        *,
        status: int = 200,
        title: str = "",
        **context: Any,
    ) -> HTMLResponse:
        token, fresh = csrf.token(request)
        html = env.get_template(f"web/{template}.html.j2").render(
            site_name=site,
            title=title,
            csrf_field=CSRF_FIELD,
            csrf=token,
            **context,
        )
        response = HTMLResponse(html, status_code=status)
        # The security headers (a script policy with no inline script, no referrer: the
        # URL is a capability) are set on every response by bot.web.app.SecurityHeaders.
        response.headers["Cache-Control"] = "no-store"
        if fresh is not None:
            response.set_cookie(
                CSRF_COOKIE,
                fresh,
                httponly=True,
                samesite="strict",
                # https as the visitor sees it (uvicorn reads X-Forwarded-Proto from a
                # proxy on loopback); plain http only when tried out on loopback.
                secure=request.url.scheme == "https",
                path="/",
            )
        return response

    def message(request: Request, heading: str, text: str, *, status: int = 200) -> Response:
        return page(request, "message", status=status, title=heading, heading=heading, text=text)

    def refused(request: Request, refusal: Refused, *, token: str, purpose: str) -> Response:
        if refusal.reason == "expired" and refusal.subscriber is not None:
            return page(
                request,
                "expired",
                status=410,
                title="This link has expired",
                renew_url=f"/{purpose}/{token}/renew",
                address=mask(refusal.subscriber.email),
            )
        if refusal.reason == "gone":
            return message(
                request,
                "This link no longer works",
                "The subscription it was made for has changed address or is gone. Use the "
                "link in your most recent email.",
                status=404,
            )
        return message(
            request,
            "This link is not valid",
            "It was not made by this paperbell, or it was changed on the way (a mail program "
            "may have cut it). Open the link from the email again, or copy it whole.",
            status=403 if refusal.reason == "forged" else 400,
        )

    async def read_form(request: Request) -> dict[str, str] | None:
        """The posted form (urlencoded, as every form here and RFC 8058 send it), or None
        when it is too large."""
        body = await read_body(request, MAX_FORM)
        if body is None:
            return None
        return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))

    async def checked_form(request: Request) -> dict[str, str] | Response:
        """A posted form that passed the CSRF checks, or the page that refuses it."""
        form = await read_form(request)
        if form is None:
            return message(request, "Too large", "That form is too large.", status=413)
        problem = csrf.problem(request, form)
        if problem is not None:
            return message(request, "Nothing was changed", problem, status=403)
        return form

    async def posted(
        request: Request, purpose: str
    ) -> tuple[Subscriber, dict[str, str], str] | Response:
        """A form post on a link's page: the subscriber, the form and the token, or the
        page that refuses it (too large, a bad CSRF token, a bad link)."""
        token = request.path_params["token"]
        form = await checked_form(request)
        if isinstance(form, Response):
            return form
        sub = await opened(purpose, token)
        if isinstance(sub, Refused):
            return refused(request, sub, token=token, purpose=purpose)
        return sub, form, token

    async def opened(purpose: str, token: str) -> Subscriber | Refused:
        return await run_in_threadpool(manager.open, purpose, token)  # type: ignore[arg-type]

    async def after_mail() -> None:
        if mail_queued is not None:
            try:
                await mail_queued()
            except PaperbellError as exc:  # it stays queued; the daemon sends it later
                log.warning("queued mail not sent yet: %s", exc)

    # -- one-click unsubscribe ------------------------------------------------------------

    def unsubscribe_view(
        request: Request, sub: Subscriber, token: str, *, done: bool, stopped: str
    ) -> Response:
        """The unsubscribe page: asking first, or done (`stopped`: "email" or "all")."""
        return page(
            request,
            "unsubscribe",
            title="Unsubscribed" if done else "Unsubscribe",
            sub=sub,
            address=mask(sub.email),
            done=done,
            stopped=stopped,
            token=token,
        )

    async def unsubscribe_page(request: Request) -> Response:
        token = request.path_params["token"]
        sub = await opened("unsubscribe", token)
        if isinstance(sub, Refused):
            return refused(request, sub, token=token, purpose="unsubscribe")
        done = not sub.active or (bool(sub.email) and not sub.email_confirmed)
        stopped = "all" if not sub.active else "email"
        return unsubscribe_view(request, sub, token, done=done, stopped=stopped)

    async def unsubscribe_post(request: Request) -> Response:
        token = request.path_params["token"]
        body = await read_body(request, MAX_FORM)
        if body is None:
            return message(request, "Too large", "That request is too large.", status=413)
        if not one_click(body, request.headers.get("content-type", "")):
            return message(
                request,
                "Nothing was changed",
                f"An unsubscribe request carries {ONE_CLICK}; this one did not.",
                status=400,
            )
        sub = await opened("unsubscribe", token)
        if isinstance(sub, Refused):
            return refused(request, sub, token=token, purpose="unsubscribe")
        stopped = await run_in_threadpool(manager.unsubscribe, sub)
        return unsubscribe_view(request, sub, token, done=True, stopped=stopped)

    async def unsubscribe_undo(request: Request) -> Response:
        found = await posted(request, "unsubscribe")
        if isinstance(found, Response):
            return found
        sub, _, _ = found
        await run_in_threadpool(manager.resume, sub)
        return message(
            request,
            "You are subscribed again",
            f"Digests for {sub.name} will come to {mask(sub.email)} at their usual time.",
        )

    # -- fresh links (an expired but genuine link) ----------------------------------------

    async def renew(request: Request) -> Response:
        purpose, token = request.path_params["purpose"], request.path_params["token"]
        if purpose not in PURPOSES:
            return message(request, "Not found", "There is no such page.", status=404)
        form = await checked_form(request)
        if isinstance(form, Response):
            return form
        found = await opened(purpose, token)
        sub = found.subscriber if isinstance(found, Refused) else found
        if sub is None:
            return refused(request, found, token=token, purpose=purpose)  # type: ignore[arg-type]
        # An address that is not (or no longer) confirmed gets a confirmation link.
        kind: NoticeKind = "confirm" if purpose == "confirm" or not sub.email_confirmed else "link"
        await run_in_threadpool(manager.send_notice, kind, sub)
        await after_mail()
        return message(
            request,
            "A new link is on its way",
            f"We sent a new link to {mask(sub.email)} (at most one a day). It may take a "
            "minute; look in your spam folder too.",
        )

    # -- manage -------------------------------------------------------------------------

    async def manage_view(
        request: Request,
        sub: Subscriber,
        token: str,
        *,
        status: int = 200,
        error: str | None = None,
        rule_problem: RuleProblem | None = None,
        editing: int | None = None,
        problems: list[str] | None = None,
    ) -> Response:
        activity = await run_in_threadpool(manager.activity, sub)
        done = DONE.get(request.query_params.get("done", ""))
        return page(
            request,
            "manage",
            status=status,
            title="Your paper digests",
            sub=sub,
            token=token,
            base=f"/manage/{token}",
            activity=activity,
            done=done,
            error=error,
            rule_problem=rule_problem,
            editing=editing,
            problems=problems or [],
            weekdays=WEEKDAYS,
            timezones=_timezones(),
            editable=sub.origin == "database",
            unsubscribe_url=manager.link("unsubscribe", sub),
        )

    async def manage_page(request: Request) -> Response:
        token = request.path_params["token"]
        sub = await opened("manage", token)
        if isinstance(sub, Refused):
            return refused(request, sub, token=token, purpose="manage")
        return await manage_view(request, sub, token)

    async def manage_post(request: Request) -> Response:
        action = request.path_params["action"]
        found = await posted(request, "manage")
        if isinstance(found, Response):
            return found
        sub, form, token = found
        base = f"/manage/{token}"
        try:
            if action == "add":
                rule_problem = await run_in_threadpool(manager.add_rule, sub, form.get("rule", ""))
                if rule_problem is not None:
                    return await manage_view(
                        request, sub, token, status=400, rule_problem=rule_problem, editing=0
                    )
                return RedirectResponse(f"{base}?done=added#rules", status_code=303)
            if action in ("edit", "remove"):
                number = int(form.get("number", "0") or 0)
                if action == "remove":
                    error = await run_in_threadpool(manager.remove_rule, sub, number)
                    if error is not None:
                        return await manage_view(request, sub, token, status=400, error=error)
                    return RedirectResponse(f"{base}?done=removed#rules", status_code=303)
                rule_problem = await run_in_threadpool(
                    manager.edit_rule, sub, number, form.get("rule", "")
                )
                if rule_problem is not None:
                    return await manage_view(
                        request, sub, token, status=400, rule_problem=rule_problem, editing=number
                    )
                return RedirectResponse(f"{base}?done=edited#rules", status_code=303)
            if action == "settings":
                keys = ("schedule", "day", "time", "timezone", "email_format", "abstracts")
                values = {k: form[k] for k in keys if form.get(k)}
                problems = await run_in_threadpool(manager.change_settings, sub, values)
                if problems:
                    return await manage_view(request, sub, token, status=400, problems=problems)
                return RedirectResponse(f"{base}?done=settings#settings", status_code=303)
            if action in ("pause", "resume"):
                if action == "pause":
                    await run_in_threadpool(manager.unsubscribe, sub)
                else:
                    await run_in_threadpool(manager.resume, sub)
                return RedirectResponse(f"{base}?done={action}d", status_code=303)
        except (PaperbellError, ValueError) as exc:
            text = exc.message if isinstance(exc, PaperbellError) else str(exc)
            return await manage_view(request, sub, token, status=400, error=text)
        return message(request, "Not found", "There is no such page.", status=404)

    async def check_rule(request: Request) -> Response:
        """Live validation of the rule fields: {ok, message, column}. It reads nothing
        stored, so it needs no link; it parses only (no paper is matched), at most
        RULE_CHECKS_PER_CLIENT times a minute from one address."""
        client = request.client.host if request.client else "?"
        if not rule_checks.allow(client, manager.clock()):
            return JSONResponse(
                {"ok": False, "message": "too many checks in a minute; wait a moment"},
                status_code=429,
                headers={"Retry-After": "60"},
            )
        form = await read_form(request) or {}
        problem = manager.check_rule(form.get("rule", ""))
        if problem is None:
            return JSONResponse({"ok": True})
        return JSONResponse({"ok": False, "message": problem.message, "column": problem.column})

    # -- confirm an address (double opt-in) ------------------------------------------------

    async def confirm_page(request: Request) -> Response:
        token = request.path_params["token"]
        sub = await opened("confirm", token)
        if isinstance(sub, Refused):
            return refused(request, sub, token=token, purpose="confirm")
        return page(request, "confirm", title="Confirm your address", sub=sub, address=sub.email)

    async def confirm_post(request: Request) -> Response:
        found = await posted(request, "confirm")
        if isinstance(found, Response):
            return found
        sub, _, _ = found
        await run_in_threadpool(manager.confirm, sub)
        manage_url = urlsplit(manager.link("manage", sub)).path
        return RedirectResponse(f"{manage_url}?done=confirmed", status_code=303)

    # -- sign-up ------------------------------------------------------------------------

    async def signup_page(request: Request) -> Response:
        if not manager.config.web.signup:
            return message(request, "Not found", "Sign-up is not open here.", status=404)
        return page(
            request, "subscribe", title="Subscribe", values={}, problems=[], rule_problem=None
        )

    async def signup_post(request: Request) -> Response:
        if not manager.config.web.signup:
            return message(request, "Not found", "Sign-up is not open here.", status=404)
        form = await checked_form(request)
        if isinstance(form, Response):
            return form
        email, rule = form.get("email", "").strip(), form.get("rule", "").strip()
        problems = manager.signup_problems(email, rule)
        rule_problem = manager.check_rule(rule)
        client = request.client.host if request.client else "?"
        if not (problems or rule_problem) and not signups.allow(client, manager.clock()):
            return message(
                request,
                "Too many sign-ups",
                "This page has sent many confirmation emails in the last hour. Try again "
                "later, or ask the operator to subscribe you.",
                status=429,
            )
        if problems or rule_problem is not None:
            return page(
                request,
                "subscribe",
                status=400,
                title="Subscribe",
                values={"email": email, "rule": rule},
                problems=problems,
                rule_problem=rule_problem,
            )
        await run_in_threadpool(manager.signup, email, rule)
        await after_mail()
        return message(
            request,
            "Check your inbox",
            f"If {email} can take digests, a message is on its way to it with a link to "
            "confirm. Nothing is sent to the address until its owner opens that link.",
        )

    async def script(request: Request) -> Response:
        """The pages' one script (the live rule check): a file, never inline, so the
        pages' policy runs no inline script at all."""
        return Response(
            _script(),
            media_type="text/javascript",
            headers={"Cache-Control": "public, max-age=3600"},
        )

    return [
        Route(SCRIPT_PATH, script, methods=["GET"]),
        Route("/unsubscribe/{token}", unsubscribe_page, methods=["GET"]),
        Route("/unsubscribe/{token}", unsubscribe_post, methods=["POST"]),
        Route("/unsubscribe/{token}/undo", unsubscribe_undo, methods=["POST"]),
        Route("/{purpose:str}/{token}/renew", renew, methods=["POST"]),
        Route("/manage/{token}", manage_page, methods=["GET"]),
        Route("/rules/check", check_rule, methods=["POST"]),
        Route("/manage/{token}/{action}", manage_post, methods=["POST"]),
        Route("/confirm/{token}", confirm_page, methods=["GET"]),
        Route("/confirm/{token}", confirm_post, methods=["POST"]),
        Route("/subscribe", signup_page, methods=["GET"]),
        Route("/subscribe", signup_post, methods=["POST"]),
    ]


def one_click(body: bytes, content_type: str) -> bool:
    """Whether a POST carries `List-Unsubscribe=One-Click`, as RFC 8058 sends it: in a
    multipart/form-data body (which it recommends) or urlencoded."""
    if content_type.lower().startswith("multipart/form-data"):
        head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
        parsed = message_from_bytes(head + body, policy=email.policy.HTTP)
        for part in parsed.iter_parts() if parsed.is_multipart() else ():
            if part.get_param("name", header="content-disposition") == "List-Unsubscribe":
                value = part.get_payload(decode=True)
                if isinstance(value, bytes) and value.strip() == b"One-Click":
                    return True
        return False
    form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return form.get("List-Unsubscribe") == "One-Click"


def build_pages(
    config: Config,
    store: Store,
    channels: Mapping[str, Channel],
    *,
    clock: Callable[[], datetime],
) -> list[Route] | None:
    """The pages' routes, when [web] has public_url and secret_key_env; mail they queue is
    sent at once through `channels` (the daemon would send it at its next tick anyway)."""
    signer = config.web.link_signer()
    if signer is None:
        return None
    # Config-file subscribers get links too: they need their database ids.
    store.sync_config_subscribers(config.declared_subscribers(), now=clock())
    manager = Manager(config, store, signer, clock=clock)
    return page_routes(manager, mail_queued=notice_sender(config, store, channels, clock=clock))


@functools.cache
def _script() -> bytes:
    return (templates_dir() / "web" / "rule-check.js").read_bytes()


@functools.cache
def _timezones() -> tuple[str, ...]:
    """The zones the settings form offers (read from the system once, not per page)."""
    return tuple(sorted(z for z in available_timezones() if "/" in z or z == "UTC"))
