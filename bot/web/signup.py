"""The pages anyone may open, with no link: the sign-up page (`/subscribe`, when [web] signup
is on) and the live rule check (`/rules/check` and its script), which the manage page uses
too.

Wiring only: what a sign-up does is `bot.manage`. Both are throttled (`Throttle`): the
sign-up page mails strangers, the rule check parses whatever it is sent.
"""

from __future__ import annotations

import functools
import logging
from datetime import timedelta

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.render import templates_dir
from bot.web.guards import Throttle, client_of
from bot.web.site import Site

log = logging.getLogger(__name__)

# The pages' script, served from templates/web/ (shipped in the package with the templates);
# templates/web/rule_check.html.j2 names the same path.
SCRIPT_PATH = "/static/rule-check.js"
# Sign-ups (each mails a confirmation) an hour: from one client address, and from everyone
# (far above one client's: it takes forty clients to close the page for an hour).
SIGNUPS_PER_CLIENT = 5
SIGNUPS_OVERALL = 200
# Live rule checks (one per pause in typing) a minute: from one client address, and overall.
RULE_CHECKS_PER_CLIENT = 30
RULE_CHECKS_OVERALL = 3000


class SignupPages:
    """`GET`/`POST /subscribe`, `POST /rules/check` and the script, over `site`."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.manager = site.manager
        self.signups = Throttle(per_client=SIGNUPS_PER_CLIENT, overall=SIGNUPS_OVERALL)
        self._told_of_proxy = False
        self.rule_checks = Throttle(
            per_client=RULE_CHECKS_PER_CLIENT,
            overall=RULE_CHECKS_OVERALL,
            window=timedelta(minutes=1),
        )

    def _client(self, request: Request) -> str:
        """The client, as the throttles count it (`client_of`); the first request that
        names another through a proxy's header, while [web] trusted_proxies names no
        proxy, logs that its word is not taken (everyone behind it is one client)."""
        if (
            not self._told_of_proxy
            and "x-forwarded-for" in request.headers
            and not self.manager.choices.trusted_proxies
        ):
            self._told_of_proxy = True
            log.warning(
                "web: a request came through a proxy (X-Forwarded-For) from %s, and [web] "
                "trusted_proxies names none: its word on the client is not taken, so every "
                "visitor through it counts as one client in the sign-up and rule-check "
                "limits (name the proxy there if it is yours)",
                client_of(request),
            )
        return client_of(request)

    async def signup_page(self, request: Request) -> Response:
        if not self.manager.choices.signup:
            return self._closed(request)
        return self.site.page(
            request, "subscribe", title="Subscribe", values={}, problems=[], rule_problem=None
        )

    async def signup_post(self, request: Request) -> Response:
        if not self.manager.choices.signup:
            return self._closed(request)
        form = await self.site.checked_form(request)
        if isinstance(form, Response):
            return form
        email, rule = form.get("email", "").strip(), form.get("rule", "").strip()
        problems = self.manager.signup_problems(email, rule)
        rule_problem = self.manager.check_rule(rule)
        if not (problems or rule_problem) and not self.signups.allow(
            self._client(request), self.manager.clock()
        ):
            return self.site.message(
                request,
                "Too many sign-ups",
                "This page has sent many confirmation emails in the last hour. Please try "
                "again in an hour"
                + (
                    f", or write to {contact} to be subscribed."
                    if (contact := self.site.contact)
                    else "."
                ),
                status=429,
            )
        if problems or rule_problem is not None:
            return self.site.page(
                request,
                "subscribe",
                status=400,
                title="Subscribe",
                values={"email": email, "rule": rule},
                problems=problems,
                rule_problem=rule_problem,
            )
        await run_in_threadpool(self.manager.signup, email, rule)
        await self.site.after_mail()
        return self.site.message(
            request,
            "Check your inbox",
            f"If {email} can take digests, a message is on its way to it with a link to "
            "confirm. Nothing is sent to the address until its owner opens that link.",
        )

    def _closed(self, request: Request) -> Response:
        return self.site.message(request, "Not found", "Sign-up is not open here.", status=404)

    async def check_rule(self, request: Request) -> Response:
        """Live validation of the rule fields: {ok, message, column}. It reads nothing
        stored, so it needs no link; it parses only (no paper is matched), at most
        RULE_CHECKS_PER_CLIENT times a minute from one address."""
        if not self.rule_checks.allow(self._client(request), self.manager.clock()):
            return JSONResponse(
                {"ok": False, "message": "too many checks in a minute; wait a moment"},
                status_code=429,
                headers={"Retry-After": "60"},
            )
        form = await self.site.read_form(request) or {}
        problem = self.manager.check_rule(form.get("rule", ""))
        if problem is None:
            return JSONResponse({"ok": True})
        return JSONResponse({"ok": False, "message": problem.message, "column": problem.column})

    async def script(self, request: Request) -> Response:
        """The pages' one script (the live rule check): a file, never inline, so the
        pages' policy runs no inline script at all."""
        return Response(
            _script(),
            media_type="text/javascript",
            headers={"Cache-Control": "public, max-age=3600"},
        )


@functools.cache
def _script() -> bytes:
    return (templates_dir() / "web" / "rule-check.js").read_bytes()
