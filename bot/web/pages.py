"""The pages reached from every email, as Starlette routes: one-click unsubscribe (RFC 8058),
the manage page, address confirmation (double opt-in) and a fresh link for an expired one;
`page_routes` lists them with the sign-up page and the rule check (`bot.web.signup`), the
personal Atom feed (`bot.web.feed`), the digest archive (`bot.web.archive`) and the page
where an email's papers are rated (`bot.web.rating`).

Wiring only: what each page does is `bot.manage`; this module reads forms, renders through
`bot.web.site.Site` and answers. Links are capabilities (a signed token in the URL names
the subscriber); there is no login and no session. Every form but the one-click POST (which
mail providers send with no cookie, by design) carries a CSRF token tied to a cookie, and
cross-site posts are refused.
"""

from __future__ import annotations

import email.policy
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email import message_from_bytes
from urllib.parse import urlsplit
from zoneinfo import available_timezones

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from bot.channels import Channel
from bot.channels.apprise_urls import MAX_URL
from bot.config import Config
from bot.core.errors import PaperbellError
from bot.core.links import PURPOSES
from bot.core.models import DECLARED_VIA, Feedback, Subscriber
from bot.core.schedule import WEEKDAYS
from bot.manage import (
    Manager,
    Refused,
    SiteChoices,
    language_choices,
    mask,
    notice_sender,
    paper_count_choices,
    reading_parts,
)
from bot.manage.rules import RuleProblem
from bot.pipeline import wire
from bot.render.notice import NoticeKind
from bot.render.words import N_, words_for
from bot.store import Store
from bot.web.archive import ArchivePages
from bot.web.feed import FeedPages
from bot.web.feedback import FEEDBACK_SCRIPT_PATH, FeedbackPages, paper_name
from bot.web.guards import parse_form, read_body
from bot.web.rating import RatingPages
from bot.web.signup import SCRIPT_PATH, SignupPages
from bot.web.site import MAX_FORM, Site

__all__ = ["LinkPages", "build_pages", "page_routes"]

ONE_CLICK = "List-Unsubscribe=One-Click"
SETTING_FIELDS = (
    "schedule",
    "day",
    "time",
    "timezone",
    "email_format",
    "abstracts",
    "long_emails",  # a digest too long for one email: "parts" or "one"
    "max_papers",  # how many papers an email shows
    "similar_max",  # how many papers like the liked ones an email adds
    "summaries",  # "on", or "off" from a hidden field (an unchecked box sends nothing)
    "language",  # a tag, or "none": English only
)

# What a finished change says at the top of the manage page (?done=KEY; translated there).
DONE = {
    "added": N_("Rule added."),
    "edited": N_("Rule saved."),
    "removed": N_("Rule removed."),
    "settings": N_("Settings saved."),
    "paused": N_("Paused: no digests until you resume."),
    "resumed": N_("Resumed: your next digest comes at its usual time."),
    "confirmed": N_("Address confirmed: your digests will come by email."),
    "confirmed-paused": N_(
        "Address confirmed: your digests will come by email once you resume them."
    ),
    "forgotten": N_("Removed from your liked and disliked papers."),
    "destination-added": N_("Destination added: your next digest goes there too."),
    "destination-removed": N_("Destination removed."),
    "email-resumed": N_("Email resumed: your next digest comes by email at its usual time."),
}
# Where a verdict came from, as the manage page says it (translated there).
FEEDBACK_FROM = {
    "email": N_("from an email"),
    "slack": N_("in Slack"),
    "page": N_("on this page"),
    "command": N_("with a command"),
    "config": N_("in the config file"),
    "file": N_("from your library file"),
}

Form = dict[str, str]


class LinkPages:
    """The pages a signed link opens (unsubscribe, manage, confirm, renew), over `site`."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.manager = site.manager

    # -- one-click unsubscribe ------------------------------------------------------------

    def unsubscribe_view(
        self, request: Request, sub: Subscriber, token: str, *, done: bool, stopped: str
    ) -> Response:
        """The unsubscribe page: asking first, or done (`stopped`: "email" or "all")."""
        return self.site.page(
            request,
            "unsubscribe",
            title=N_("Unsubscribed") if done else N_("Unsubscribe"),
            language=sub.language,
            sub=sub,
            address=mask(sub.email),
            done=done,
            stopped=stopped,
            token=token,
        )

    async def unsubscribe_page(self, request: Request) -> Response:
        token = request.path_params["token"]
        sub = await self.site.open_link(request, "unsubscribe")
        if isinstance(sub, Response):
            return sub
        done = not sub.active or (bool(sub.email) and not sub.email_confirmed)
        stopped = "all" if not sub.active else "email"
        return self.unsubscribe_view(request, sub, token, done=done, stopped=stopped)

    async def unsubscribe_post(self, request: Request) -> Response:
        token = request.path_params["token"]
        body = await read_body(request, MAX_FORM)
        if body is None:
            return self.site.message(
                request, N_("Too large"), N_("That request is too large."), status=413
            )
        if not one_click(body, request.headers.get("content-type", "")):
            return self.site.message(
                request,
                N_("Nothing was changed"),
                N_("An unsubscribe request carries %(field)s; this one did not."),
                status=400,
                values={"field": ONE_CLICK},
            )
        sub = await self.site.open_link(request, "unsubscribe")
        if isinstance(sub, Response):
            return sub
        stopped = await run_in_threadpool(self.manager.unsubscribe, sub)
        return self.unsubscribe_view(request, sub, token, done=True, stopped=stopped)

    async def unsubscribe_undo(self, request: Request) -> Response:
        found = await self.site.posted(request, "unsubscribe")
        if isinstance(found, Response):
            return found
        sub, _, _ = found
        await run_in_threadpool(self.manager.resume, sub)
        # The undo restarts the subscriber, not an email a bounce paused or that awaits its
        # confirmation: say so rather than promise digests that will not come.
        email_paused = await run_in_threadpool(self.manager.email_pause, sub)
        said = N_("Digests for %(name)s will come to %(address)s at their usual time.")
        if sub.email and not sub.email_confirmed:
            said = N_(
                "Digests for %(name)s start again, but not to %(address)s until it is confirmed."
            )
        elif email_paused:
            said = N_(
                "Digests for %(name)s start again, but not to %(address)s: %(why)s. "
                "Resume the email on the “Manage your subscription” page."
            )
        return self.site.message(
            request,
            N_("You are subscribed again"),
            said,
            language=sub.language,
            values={"name": sub.name, "address": mask(sub.email), "why": email_paused or ""},
        )

    # -- fresh links (an expired but genuine link) ----------------------------------------

    async def renew(self, request: Request) -> Response:
        purpose, token = request.path_params["purpose"], request.path_params["token"]
        if purpose not in PURPOSES:
            return self.site.message(
                request, N_("Not found"), N_("There is no such page."), status=404
            )
        form = await self.site.checked_form(request)
        if isinstance(form, Response):
            return form
        found = await self.site.opened(purpose, token)
        sub = found.subscriber if isinstance(found, Refused) else found
        if sub is None:
            return self.site.refused(request, found, token=token, purpose=purpose)  # type: ignore[arg-type]
        # An address that is not (or no longer) confirmed gets a confirmation link.
        kind: NoticeKind = "confirm" if purpose == "confirm" or not sub.email_confirmed else "link"
        await run_in_threadpool(self.manager.send_notice, kind, sub)
        await self.site.after_mail()
        return self.site.message(
            request,
            N_("A new link is on its way"),
            N_(
                "We sent a new link to %(address)s (at most one a day). It may take a "
                "minute; look in your spam folder too."
            ),
            language=sub.language,
            values={"address": mask(sub.email)},
        )

    # -- manage -------------------------------------------------------------------------

    async def manage_view(
        self,
        request: Request,
        sub: Subscriber,
        token: str,
        *,
        status: int = 200,
        error: str | None = None,
        rule_problem: RuleProblem | None = None,
        editing: int | None = None,
        problems: list[str] | None = None,
        destination_problem: str | None = None,
    ) -> Response:
        activity = await run_in_threadpool(self.manager.activity, sub)
        given = await run_in_threadpool(self.manager.feedback, sub)
        places = await run_in_threadpool(self.manager.destinations, sub)
        email_paused = await run_in_threadpool(self.manager.email_pause, sub)
        done = DONE.get(request.query_params.get("done", ""))
        words = words_for(sub.language)
        return self.site.page(
            request,
            "manage",
            status=status,
            title=N_("Your paper digests"),
            language=sub.language,
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
            languages=language_choices(sub.language, words),
            paper_counts=paper_count_choices(sub.max_papers),
            similar_counts=sorted({0, 3, 5, 10, sub.similar_max}),
            reading=reading_parts(sub, words),
            editable=sub.origin == "database",
            unsubscribe_url=self.manager.link("unsubscribe", sub),
            archive_url=self.manager.signer.archive_url(sub),
            feed_url=self.manager.signer.feed_url(sub),
            liked=_verdicts(given, "like"),
            disliked=_verdicts(given, "dislike"),
            destinations=places,
            destinations_open=self.manager.choices.destinations_open,
            destination_problem=destination_problem,
            email_paused=email_paused,
        )

    async def manage_page(self, request: Request) -> Response:
        token = request.path_params["token"]
        sub = await self.site.open_link(request, "manage")
        if isinstance(sub, Response):
            return sub
        return await self.manage_view(request, sub, token)

    async def manage_post(self, request: Request) -> Response:
        """`POST /manage/{token}/{action}`: a change, then back to the page (303), or the
        page again with what is wrong (400)."""
        found = await self.site.posted(request, "manage")
        if isinstance(found, Response):
            return found
        sub, form, token = found
        change = {
            "add": self._add,
            "edit": self._edit,
            "remove": self._remove,
            "settings": self._settings,
            "pause": self._pause,
            "resume": self._resume,
            "resume-email": self._resume_email,
            "forget": self._forget,
            "add-destination": self._add_destination,
            "remove-destination": self._remove_destination,
        }.get(request.path_params["action"])
        if change is None:
            return self.site.message(
                request, N_("Not found"), N_("There is no such page."), status=404
            )
        try:
            return await change(request, sub, form, token)
        except (PaperbellError, ValueError) as exc:
            text = exc.message if isinstance(exc, PaperbellError) else str(exc)
            return await self.manage_view(request, sub, token, status=400, error=text)

    async def _add(self, request: Request, sub: Subscriber, form: Form, token: str) -> Response:
        rule_problem = await run_in_threadpool(
            self.manager.add_rule, sub, form.get("rule", ""), form.get("label", "")
        )
        if rule_problem is not None:
            return await self.manage_view(
                request, sub, token, status=400, rule_problem=rule_problem, editing=0
            )
        return _done(token, "added#rules")

    async def _edit(self, request: Request, sub: Subscriber, form: Form, token: str) -> Response:
        number = _rule_number(form)
        rule_problem = await run_in_threadpool(
            self.manager.edit_rule,
            sub,
            number,
            form.get("rule", ""),
            form.get("label", ""),
            was=form.get("was"),
        )
        if rule_problem is not None:
            return await self.manage_view(
                request, sub, token, status=400, rule_problem=rule_problem, editing=number
            )
        return _done(token, "edited#rules")

    async def _remove(self, request: Request, sub: Subscriber, form: Form, token: str) -> Response:
        error = await run_in_threadpool(
            self.manager.remove_rule, sub, _rule_number(form), was=form.get("was")
        )
        if error is not None:
            return await self.manage_view(request, sub, token, status=400, error=error)
        return _done(token, "removed#rules")

    async def _settings(
        self, request: Request, sub: Subscriber, form: Form, token: str
    ) -> Response:
        values = {k: form[k] for k in SETTING_FIELDS if form.get(k)}
        problems = await run_in_threadpool(self.manager.change_settings, sub, values)
        if problems:
            return await self.manage_view(request, sub, token, status=400, problems=problems)
        return _done(token, "settings#settings")

    async def _pause(self, request: Request, sub: Subscriber, form: Form, token: str) -> Response:
        await run_in_threadpool(self.manager.pause, sub)
        return _done(token, "paused")

    async def _resume(self, request: Request, sub: Subscriber, form: Form, token: str) -> Response:
        await run_in_threadpool(self.manager.resume, sub)
        return _done(token, "resumed")

    async def _resume_email(
        self, request: Request, sub: Subscriber, form: Form, token: str
    ) -> Response:
        await run_in_threadpool(self.manager.resume_email, sub)
        return _done(token, "email-resumed")

    async def _add_destination(
        self, request: Request, sub: Subscriber, form: Form, token: str
    ) -> Response:
        """Add an Apprise URL (field `url`); the page again with why, if it cannot be."""
        url = form.get("url", "")[:MAX_URL]
        problem = await run_in_threadpool(self.manager.add_destination, sub, url)
        if problem is not None:
            return await self.manage_view(
                request, sub, token, status=400, destination_problem=problem
            )
        return _done(token, "destination-added#destinations")

    async def _remove_destination(
        self, request: Request, sub: Subscriber, form: Form, token: str
    ) -> Response:
        """Remove a destination given here (field `channel`: its key, never its URL)."""
        channel = form.get("channel", "")[:100]
        await run_in_threadpool(self.manager.remove_destination, sub, channel)
        return _done(token, "destination-removed#destinations")

    async def _forget(self, request: Request, sub: Subscriber, form: Form, token: str) -> Response:
        """Remove a 👍 or 👎 (field `key`: the paper's key)."""
        await run_in_threadpool(self.manager.remove_feedback, sub, form.get("key", "")[:1000])
        return _done(token, "forgotten#feedback")

    # -- confirm an address (double opt-in) ------------------------------------------------

    async def confirm_page(self, request: Request) -> Response:
        sub = await self.site.open_link(request, "confirm")
        if isinstance(sub, Response):
            return sub
        return self.site.page(
            request,
            "confirm",
            title=N_("Confirm your address"),
            language=sub.language,
            sub=sub,
            address=sub.email,
        )

    async def confirm_post(self, request: Request) -> Response:
        found = await self.site.posted(request, "confirm")
        if isinstance(found, Response):
            return found
        sub, _, _ = found
        await run_in_threadpool(self.manager.confirm, sub)
        manage_url = urlsplit(self.manager.link("manage", sub)).path
        done = "confirmed" if sub.active else "confirmed-paused"
        return RedirectResponse(f"{manage_url}?done={done}", status_code=303)


def page_routes(
    manager: Manager,
    *,
    mail_queued: Callable[[], Awaitable[None]] | None = None,
) -> list[Route]:
    """The routes of the pages, for `bot.web.app.create_app`. `mail_queued()` is awaited after a
    page queued mail (a confirmation, a fresh link): it sends what the outbox holds."""
    site = Site(manager, mail_queued=mail_queued)
    links, signup, feedback = LinkPages(site), SignupPages(site), FeedbackPages(site)
    feed, archive, rating = FeedPages(site), ArchivePages(site), RatingPages(site)
    return [
        Route(SCRIPT_PATH, signup.script, methods=["GET"]),
        Route(FEEDBACK_SCRIPT_PATH, feedback.script, methods=["GET"]),
        Route("/feedback/{token}", feedback.page, methods=["GET"]),
        Route("/feedback/{token}", feedback.post, methods=["POST"]),
        Route("/feedback/{token}/undo", feedback.undo, methods=["POST"]),
        Route("/rate/{token}", rating.page, methods=["GET"]),
        Route("/rate/{token}", rating.post, methods=["POST"]),
        Route("/unsubscribe/{token}", links.unsubscribe_page, methods=["GET"]),
        Route("/unsubscribe/{token}", links.unsubscribe_post, methods=["POST"]),
        Route("/unsubscribe/{token}/undo", links.unsubscribe_undo, methods=["POST"]),
        Route("/{purpose:str}/{token}/renew", links.renew, methods=["POST"]),
        Route("/manage/{token}", links.manage_page, methods=["GET"]),
        Route("/rules/check", signup.check_rule, methods=["POST"]),
        Route("/manage/{token}/{action}", links.manage_post, methods=["POST"]),
        Route("/confirm/{token}", links.confirm_page, methods=["GET"]),
        Route("/confirm/{token}", links.confirm_post, methods=["POST"]),
        Route("/subscribe", signup.signup_page, methods=["GET"]),
        Route("/subscribe", signup.signup_post, methods=["POST"]),
        Route("/feed/{token}.atom", feed.feed, methods=["GET"]),
        Route("/archive/{token}", archive.index, methods=["GET"]),
        Route("/archive/{token}/{digest}", archive.digest, methods=["GET"]),
    ]


def build_pages(
    config: Config,
    store: Store,
    channels: Mapping[str, Channel],
    *,
    clock: Callable[[], datetime],
) -> list[Route] | None:
    """The pages alone, wired here from the config over `store` and `channels` (the mail
    they queue is sent at once through them), when [web] has public_url and secret_key_env.
    `paperbell run` and `serve` hand their own wiring to `page_routes` instead."""
    parts = wire(config, store, channels)
    if parts.signer is None:
        return None
    # Config-file subscribers get links too: they need their database ids.
    store.subscribers.sync_config(parts.declared(), now=clock())
    manager = Manager(SiteChoices.of(config), parts, clock=clock)
    return page_routes(manager, mail_queued=notice_sender(parts, clock=clock))


@dataclass(frozen=True)
class VerdictView:
    """One 👍 or 👎 as the manage page lists it."""

    key: str
    title: str
    when: datetime | None
    where: str
    removable: bool


def _verdicts(given: Sequence[Feedback], verdict: str) -> list[VerdictView]:
    """The verdicts `verdict` ("like", "dislike"), newest first, as the page lists them."""
    return [
        VerdictView(
            key=f.key,
            title=paper_name(f.key, f.title),
            when=f.created,
            where=FEEDBACK_FROM.get(f.via, f.via),
            removable=f.via not in DECLARED_VIA,
        )
        for f in reversed(given)  # newest first
        if f.verdict == verdict
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
    return parse_form(body).get("List-Unsubscribe") == "One-Click"


def _done(token: str, what: str) -> Response:
    """Back to the manage page after a change, which says what was done (`DONE`)."""
    return RedirectResponse(f"/manage/{token}?done={what}", status_code=303)


def _rule_number(form: Form) -> int:
    """The rule a form names (ValueError when it is not a number: the page says so)."""
    return int(form.get("number", "0") or 0)


@functools.cache
def _timezones() -> tuple[str, ...]:
    """The zones the settings form offers (read from the system once, not per page)."""
    return tuple(sorted(z for z in available_timezones() if "/" in z or z == "UTC"))
