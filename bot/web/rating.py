"""The page of an email's one rating link, where each paper that email carried gets its
👍 / 👎: `GET /rate/{token}` lists them with the verdict each has now, `POST /rate/{token}`
records one (fields `paper`, and `verdict` or `take_back`), then shows the page again.

The plain-text part of a digest carries this one link in place of two long links a
paper. Wiring only: who and which digest the link names, and the verdicts, are
`bot.manage` (`open_rating`, `record_feedback`, `undo_feedback`: the same as a paper's own
link records); what the email carried is the outbox's record of it (`store.archive`).
A GET records nothing (mail scanners open every link); every post is a plain form,
CSRF-checked like every form here, and names a paper of that very email, or changes
nothing. No script: the buttons are the forms' own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bot.core.models import VERDICTS, Verdict
from bot.manage import RatingLink, Refused, SentPapers
from bot.pipeline import NOTICE_CHANNEL
from bot.render.text import shorten_authors
from bot.render.words import N_, words_for
from bot.web.archive import channel_name, digest_title, sent_when
from bot.web.feedback import paper_name, paper_url
from bot.web.site import Site

__all__ = ["RatingPages"]

LEAVE_OUT = (NOTICE_CHANNEL,)
# The verdicts the page shows but does not change: kept in a file, changed there.
DECLARED = {"config": N_("set in the config file"), "file": N_("from your library file")}
MAX_KEY = 1000  # a posted paper key longer than this names no paper of ours


@dataclass(frozen=True)
class RatedPaper:
    """One paper of the email as the page shows it, with its verdict now."""

    number: int
    key: str
    title: str
    url: str | None
    authors: str
    verdict: Verdict | None
    # Where a verdict kept outside paperbell's pages comes from (they change it there).
    declared: str | None


class RatingPages:
    """The rating link's page, over `site`."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.manager = site.manager

    async def _opened(self, request: Request) -> tuple[RatingLink, SentPapers] | Response:
        """The link's digest and its papers, or the page that refuses it: a link forged,
        expired or no longer theirs, or a digest never sent to them."""
        token = request.path_params["token"]
        link = await run_in_threadpool(self.manager.open_rating, token)
        if isinstance(link, Refused):
            return self.site.refused(request, link, token=token, purpose="rate")
        sent = await run_in_threadpool(self.manager.sent_papers, link, leave_out=LEAVE_OUT)
        if sent is None:
            return self.site.message(
                request,
                N_("No such digest"),
                N_(
                    "This email is not among those sent to you, so there is nothing to rate "
                    "here. Use the link in the email itself."
                ),
                status=404,
                language=link.subscriber.language,
            )
        return link, sent

    async def page(self, request: Request) -> Response:
        """`GET /rate/{token}`: the email's papers, each with its 👍 / 👎 buttons."""
        found = await self._opened(request)
        if isinstance(found, Response):
            return found
        link, sent = found
        sub = link.subscriber
        papers = [
            RatedPaper(
                number=number,
                key=paper.id,
                title=paper_name(paper.id, paper.title),
                url=paper_url(paper.id, paper),
                authors=shorten_authors(paper.authors),
                verdict=verdict.verdict if (verdict := sent.verdicts.get(paper.id)) else None,
                declared=DECLARED.get(verdict.via) if verdict else None,
            )
            for number, paper in enumerate(sent.papers, 1)
        ]
        words = words_for(sub.language)
        return self.site.page(
            request,
            "rate",
            title=N_("Rate this email's papers"),
            language=sub.language,
            heading=words.gettext("Rate this email's papers"),
            papers=papers,
            subject=digest_title(sent.digest),
            channel=channel_name(sent.digest.channel, words),
            when=sent_when(sent.digest, sub, words),
            action=f"/rate/{request.path_params['token']}",
            manage_url=self.manager.link("manage", sub),
        )

    async def post(self, request: Request) -> Response:
        """`POST /rate/{token}`: record the verdict on one of the email's papers (or take
        it back), then back to the page at that paper (303)."""
        form = await self.site.checked_form(request)
        if isinstance(form, Response):
            return form
        found = await self._opened(request)
        if isinstance(found, Response):
            return found
        link, sent = found
        key = form.get("paper", "")[:MAX_KEY]
        numbers = {paper.id: number for number, paper in enumerate(sent.papers, 1)}
        action: Literal["record", "take_back"] = "take_back" if "take_back" in form else "record"
        verdict = form.get("take_back" if action == "take_back" else "verdict", "")
        if key not in numbers or verdict not in VERDICTS:
            return self.site.message(
                request,
                N_("Nothing was changed"),
                N_(
                    "That form did not name a paper of this email and 👍 or 👎. Open the page "
                    "again from the email's link."
                ),
                status=400,
                language=link.subscriber.language,
            )
        sub, verdict = link.subscriber, cast(Verdict, verdict)
        if action == "take_back":
            await run_in_threadpool(self.manager.undo_feedback, sub, key, verdict)
        else:
            await run_in_threadpool(self.manager.record_feedback, sub, key, verdict, via="email")
        where = f"/rate/{request.path_params['token']}#paper-{numbers[key]}"
        return RedirectResponse(where, status_code=303)
