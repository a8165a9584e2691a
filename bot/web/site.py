"""What every page shares (`Site`): a page rendered from `templates/web/*.html.j2` with its
form token and cookie, the refusal pages of a link that does not work, a posted form read
through the guards, and sending the mail a page queued.

Defines no route (the pages are `bot.web.pages` and `bot.web.signup`) and decides nothing
about a subscriber (that is `bot.manage`). The security headers are not set here: the web
app sets them on every response (`bot.web.app.SecurityHeaders`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from bot.core.errors import PaperbellError
from bot.core.models import Subscriber
from bot.manage import Manager, Refused, mask
from bot.render import template_env
from bot.render.words import N_, words_for
from bot.web.guards import CSRF_COOKIE, CSRF_FIELD, Csrf, parse_form, read_body

log = logging.getLogger(__name__)

MAX_FORM = 16 * 1024


class Site:
    """The pages' shared context: the manager, the CSRF guard, the templates, and
    `mail_queued()`, awaited after a page queued mail (it sends what the outbox holds)."""

    def __init__(
        self,
        manager: Manager,
        *,
        mail_queued: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.manager = manager
        self.mail_queued = mail_queued
        signer = manager.signer
        self.csrf = Csrf(signer.derived_key("csrf"), public_url=signer.public_url)
        self.name = manager.choices.name
        # Whom a reader may write to about what the pages cannot do: the digests' sender.
        self.contact = manager.choices.contact

    def page(
        self,
        request: Request,
        template: str,
        *,
        status: int = 200,
        title: str = "",
        language: str | None = None,
        **context: Any,
    ) -> HTMLResponse:
        """The page `template` in the words of a reader of `language` (a subscriber's tag;
        None: English); `title`: a message of the catalogs (marked with `N_`)."""
        token, fresh = self.csrf.token(request)
        words = words_for(language)
        html = (
            template_env(words.tag)
            .get_template(f"web/{template}.html.j2")
            .render(
                site_name=self.name,
                contact=self.contact,
                title=words.gettext(title) if title else "",
                csrf_field=CSRF_FIELD,
                csrf=token,
                **context,
            )
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

    def message(
        self,
        request: Request,
        heading: str,
        text: str,
        *,
        status: int = 200,
        language: str | None = None,
        values: dict[str, str] | None = None,
    ) -> Response:
        """A page that says one thing: `heading` and `text` are messages of the catalogs
        (marked with `N_`), `text` filled in with `values` (`%(name)s`) once translated."""
        words = words_for(language)
        said = words.gettext(text)
        return self.page(
            request,
            "message",
            status=status,
            title=heading,
            language=language,
            heading=words.gettext(heading),
            text=said % values if values else said,
        )

    def refused(self, request: Request, refusal: Refused, *, token: str, purpose: str) -> Response:
        language = refusal.subscriber.language if refusal.subscriber is not None else None
        if refusal.reason == "expired" and refusal.subscriber is not None:
            return self.page(
                request,
                "expired",
                status=410,
                title=N_("This link has expired"),
                language=language,
                renew_url=f"/{purpose}/{token}/renew",
                address=mask(refusal.subscriber.email),
            )
        if refusal.reason == "stopped":  # a feed or archive link of someone unsubscribed
            return self.message(
                request,
                N_("This subscription is stopped"),
                N_(
                    "It was unsubscribed, and its past digests and feed stopped with it. Resume "
                    "it (the manage link in your most recent email) and this link works again."
                ),
                status=410,
                language=language,
            )
        if refusal.reason == "gone":
            return self.message(
                request,
                N_("This link no longer works"),
                N_(
                    "The subscription it was made for has changed address or is gone. Use the "
                    "link in your most recent email."
                ),
                status=404,
                language=language,
            )
        return self.message(
            request,
            N_("This link is not valid"),
            N_(
                "It was not made by this paperbell, it was changed on the way (a mail program "
                "may have cut it), or the subscription it was made for is gone. Open the link "
                "from your most recent email again, or copy it whole."
            ),
            status=403 if refusal.reason == "forged" else 400,
            language=language,
        )

    async def read_form(self, request: Request) -> dict[str, str] | None:
        """The posted form (urlencoded, as every form here and RFC 8058 send it), or None
        when it is too large."""
        body = await read_body(request, MAX_FORM)
        if body is None:
            return None
        return parse_form(body)

    async def checked_form(self, request: Request) -> dict[str, str] | Response:
        """A posted form that passed the CSRF checks, or the page that refuses it."""
        form = await self.read_form(request)
        if form is None:
            return self.message(request, N_("Too large"), N_("That form is too large."), status=413)
        problem = self.csrf.problem(request, form)
        if problem is not None:
            return self.message(request, N_("Nothing was changed"), problem, status=403)
        return form

    async def opened(self, purpose: str, token: str) -> Subscriber | Refused:
        """The subscriber a link names, or why it does not work (the database: in a thread)."""
        return await run_in_threadpool(self.manager.open, purpose, token)  # type: ignore[arg-type]

    async def open_link(self, request: Request, purpose: str) -> Subscriber | Response:
        """The subscriber the link of this request (its `token`) names, or the page that
        refuses it (forged, expired, no longer theirs)."""
        token = request.path_params["token"]
        sub = await self.opened(purpose, token)
        if isinstance(sub, Refused):
            return self.refused(request, sub, token=token, purpose=purpose)
        return sub

    async def posted(
        self, request: Request, purpose: str
    ) -> tuple[Subscriber, dict[str, str], str] | Response:
        """A form post on a link's page: the subscriber, the form and the token, or the
        page that refuses it (too large, a bad CSRF token, a bad link)."""
        token = request.path_params["token"]
        form = await self.checked_form(request)
        if isinstance(form, Response):
            return form
        sub = await self.opened(purpose, token)
        if isinstance(sub, Refused):
            return self.refused(request, sub, token=token, purpose=purpose)
        return sub, form, token

    async def after_mail(self) -> None:
        if self.mail_queued is not None:
            try:
                await self.mail_queued()
            except PaperbellError as exc:  # it stays queued; the daemon sends it later
                log.warning("queued mail not sent yet: %s", exc)
