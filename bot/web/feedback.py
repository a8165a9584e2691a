"""The pages of the 👍 / 👎 links beside each paper of an email: `GET /feedback/{token}` (what
the link records, sent on by its script: one click), `POST /feedback/{token}` (records it),
`POST /feedback/{token}/undo`, and the script, `/static/feedback.js`.

Wiring only: what a verdict does is `bot.manage` (`record_feedback`, `undo_feedback`). A GET
records nothing: mail security scanners (Outlook's Safe Links, Proofpoint, Mimecast) open
every link of a message, both 👍 and 👎 of every paper, before its reader does. The page a
link opens posts its form at once from a script (a scanner that fetches runs none), and
shows a button when scripts are off; the post is CSRF-checked like every form here. The
same verdict again changes nothing, and every page says what is recorded and offers Undo,
which puts back the verdict the click replaced (a 👎 before a 👍, the config file's).
"""

from __future__ import annotations

import functools

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bot.core.links import web_url
from bot.core.models import DECLARED_VIA, Feedback, Paper, Verdict
from bot.manage import FeedbackLink, Refused
from bot.render import templates_dir
from bot.render.text import letters, tidy
from bot.render.words import N_, words_for
from bot.web.site import Site

__all__ = ["FEEDBACK_SCRIPT_PATH", "FeedbackPages", "paper_name"]

# The script that sends a feedback page's form, served from templates/web/ (shipped with
# the templates); templates/web/feedback.html.j2 names the same path.
FEEDBACK_SCRIPT_PATH = "/static/feedback.js"
TITLE_CHARS = 300
SAID: dict[Verdict, str] = {"like": N_("👍 You like"), "dislike": N_("👎 You do not like")}


def paper_name(key: str, title: str | None) -> str:
    """A paper as a page names it: its title (TeX as letters), else its key."""
    shown = tidy(letters(title or ""))
    if len(shown) > TITLE_CHARS:
        shown = shown[: TITLE_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return shown or key


def paper_url(key: str, paper: Paper | None) -> str | None:
    """The paper's page, checked (`web_url`); an arXiv key without a stored paper: arXiv's."""
    if paper is not None:
        return web_url(paper.abs_url, what=f"paper {key[:80]}: a link")
    if ":" in key:  # "doi:…", "url:…", "title:…": nothing to link to without the paper
        return None
    return web_url(f"https://arxiv.org/abs/{key}", what=f"paper {key[:80]}: a link")


class FeedbackPages:
    """The 👍 / 👎 links' pages, over `site`."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.manager = site.manager

    async def _opened(self, request: Request) -> FeedbackLink | Response:
        token = request.path_params["token"]
        found = await run_in_threadpool(self.manager.open_feedback, token)
        if isinstance(found, Refused):
            return self.site.refused(request, found, token=token, purpose="feedback")
        return found

    async def view(self, request: Request, link: FeedbackLink, *, undone: bool = False) -> Response:
        """The page: asking (posted by its script at once), recorded (with Undo), or undone."""
        token = request.path_params["token"]
        sub, key, verdict = link.subscriber, link.paper, link.verdict
        current, paper = await run_in_threadpool(self._state, link)
        recorded = current is not None and current.verdict == verdict
        state = "undone" if undone else "recorded" if recorded else "ask"
        title = paper.title if paper else current.title if current else ""
        heading = {
            "ask": N_("Recording your verdict"),
            "recorded": N_("Thank you: noted"),
            "undone": N_("Taken back"),
        }[state]
        words = words_for(sub.language)
        return self.site.page(
            request,
            "feedback",
            title=heading,
            language=sub.language,
            heading=words.gettext(heading),
            state=state,
            verdict=verdict,
            said=words.gettext(SAID[verdict]),
            other=current.verdict if current is not None and not recorded else None,
            # Undone: the verdict it had replaced stands again (a click before, the file's).
            restored=current.verdict if undone and current is not None else None,
            restored_declared=current is not None and current.via in DECLARED_VIA,
            paper_title=paper_name(key, title),
            paper_url=paper_url(key, paper),
            key=key,
            sub=sub,
            action=f"/feedback/{token}",
            manage_url=self.manager.link("manage", sub),
            script=FEEDBACK_SCRIPT_PATH,
        )

    def _state(self, link: FeedbackLink) -> tuple[Feedback | None, Paper | None]:
        return self.manager.feedback_on(link.subscriber, link.paper), self.manager.paper(link.paper)

    async def page(self, request: Request) -> Response:
        """`GET /feedback/{token}`: what the link records; recording nothing yet."""
        found = await self._opened(request)
        if isinstance(found, Response):
            return found
        return await self.view(request, found)

    async def post(self, request: Request) -> Response:
        """`POST /feedback/{token}`: record the verdict, then the page says so (303)."""
        form = await self.site.checked_form(request)
        if isinstance(form, Response):
            return form
        found = await self._opened(request)
        if isinstance(found, Response):
            return found
        await run_in_threadpool(
            self.manager.record_feedback, found.subscriber, found.paper, found.verdict, via="email"
        )
        return RedirectResponse(f"/feedback/{request.path_params['token']}", status_code=303)

    async def undo(self, request: Request) -> Response:
        """`POST /feedback/{token}/undo`: take the verdict back (if it is still the one); the
        one it replaced, if any, stands again."""
        form = await self.site.checked_form(request)
        if isinstance(form, Response):
            return form
        found = await self._opened(request)
        if isinstance(found, Response):
            return found
        await run_in_threadpool(
            self.manager.undo_feedback, found.subscriber, found.paper, found.verdict
        )
        return await self.view(request, found, undone=True)

    async def script(self, request: Request) -> Response:
        """The feedback page's script: a file, as the pages' policy runs no inline script."""
        return Response(
            _script(),
            media_type="text/javascript",
            headers={"Cache-Control": "public, max-age=3600"},
        )


@functools.cache
def _script() -> bytes:
    return (templates_dir() / "web" / "feedback.js").read_bytes()
