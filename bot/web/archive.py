"""A subscriber's past digests: `GET /archive/{token}` lists them by day (in the subscriber's
time zone, newest first, `PAGE_SIZE` a page), `GET /archive/{token}/{digest_id}` shows one.

What a digest shows: an email as it was sent, its HTML part (a plain-text email, its text),
under a thin bar back to the list; any other channel's digest (Slack) the papers it
carried, as the store holds them now, since what Slack shows is Slack's own rendering of
blocks. An email's "view in browser" link opens its digest here (its digest id is in the
link: `LinkSigner.archive_url`).

Wiring only: who the token names is `bot.manage` (a standing link: no expiry, ended by an
unsubscribe or a change of address), what was sent is `store.archive`. An archived email
is served with a policy of its own beside the site's (`sandbox`: no script runs in it,
whatever it holds; the web app keeps both), no-store like every page. Mail that is no digest
(confirmations, fresh links: the notice channel) is never listed nor shown.
"""

from __future__ import annotations

import email.policy
import html
import re
from dataclasses import dataclass
from datetime import date, datetime
from email import message_from_bytes
from email.message import EmailMessage
from email.parser import BytesHeaderParser
from zoneinfo import ZoneInfo

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from bot.channels import kind_of
from bot.core.links import web_url
from bot.core.models import Paper, Subscriber
from bot.pipeline import NOTICE_CHANNEL
from bot.render.text import letters, plural, shorten_authors, tidy
from bot.render.words import N_, Words, words_for
from bot.store import SentDigest
from bot.web.feedback import paper_name
from bot.web.site import Site

__all__ = ["ArchivePages", "digest_title", "sent_when"]

PAGE_SIZE = 100
MAX_PAGE = 10_000
MAX_DIGEST_ID = 128  # the outbox's column
LEAVE_OUT = (NOTICE_CHANNEL,)
# By kind: an Apprise target's channel is "apprise:<key>", one name for all of them.
CHANNEL_NAMES = {"email": N_("Email"), "slack": N_("Slack"), "apprise": N_("Chat / push")}
# An archived email may run no script and load nothing: added to the site's policy.
SHOWN_EMAIL_POLICY = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_BODY = re.compile(rb"<body\b[^>]*>", re.IGNORECASE)


def channel_name(channel: str, words: Words | None = None) -> str:
    """A digest's channel as the list names it: Email, Slack, Chat / push."""
    kind = kind_of(channel)
    name = CHANNEL_NAMES.get(kind)
    return (words or words_for(None)).gettext(name) if name else kind.title()


@dataclass(frozen=True)
class DigestLine:
    """One digest as the list shows it."""

    url: str
    time: str
    channel: str
    title: str


@dataclass(frozen=True)
class PaperLine:
    """One paper of a digest that was not an email."""

    title: str
    url: str | None
    authors: str
    abstract: str


def _zone(sub: Subscriber) -> ZoneInfo:
    try:
        return ZoneInfo(sub.schedule.timezone)
    except (ValueError, KeyError, OSError):
        return ZoneInfo("UTC")


def _when(moment: datetime, sub: Subscriber) -> datetime:
    return moment.astimezone(_zone(sub))


def _day(day: date) -> str:
    return f"{day:%A} {day.day} {day:%B %Y}"


def _subject(head: bytes) -> str | None:
    """An email's subject, from the start of the message (its headers)."""
    try:
        parsed = BytesHeaderParser(policy=email.policy.default).parsebytes(head)
        subject = parsed.get("Subject")
    except (ValueError, LookupError, TypeError):
        return None
    return tidy(str(subject)) if subject else None


def sent_when(digest: SentDigest, sub: Subscriber, words: Words | None = None) -> str:
    """When a digest was sent, in the subscriber's time zone: `Thursday 28 November 2024 at
    16:00 (Europe/London)`; in another language, as it writes it (`2024年11月29日星期五
    00:00（UTC+8）`)."""
    if words is not None and not words.english:
        return words.moment(digest.sent, _zone(sub).key)
    sent = _when(digest.sent, sub)
    return f"{_day(sent.date())} at {sent:%H:%M} ({_zone(sub).key})"


def digest_title(digest: SentDigest) -> str:
    """A digest as the pages name it: an email's subject, else how many papers it had."""
    return _title(digest)


def _title(digest: SentDigest) -> str:
    if digest.channel == "email" and (subject := _subject(digest.head)):
        return subject
    if digest.papers:
        return plural(digest.papers, "paper")
    return "No papers: a note"


def _message(payload: bytes) -> EmailMessage | None:
    try:
        parsed = message_from_bytes(payload, policy=email.policy.default)
    except (ValueError, LookupError, TypeError):
        return None
    return parsed if isinstance(parsed, EmailMessage) else None


def _part(message: EmailMessage, kind: str) -> str | None:
    part = message.get_body((kind,))
    if part is None:
        return None
    try:
        content = part.get_content()
    except (ValueError, LookupError):
        return None
    return content if isinstance(content, str) else None


class ArchivePages:
    """The archive's pages, over `site`."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.manager = site.manager

    async def _opened(self, request: Request) -> Subscriber | Response:
        return await self.site.open_link(request, "archive")

    async def index(self, request: Request) -> Response:
        """`GET /archive/{token}`: the digests sent, by day, newest first."""
        sub = await self._opened(request)
        if isinstance(sub, Response):
            return sub
        raw = request.query_params.get("page", "1")
        page = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 6 else 1
        page = min(max(page, 1), MAX_PAGE)
        assert sub.id is not None
        found = await run_in_threadpool(
            self.manager.store.archive.digests,
            sub.id,
            leave_out=LEAVE_OUT,
            limit=PAGE_SIZE + 1,
            offset=(page - 1) * PAGE_SIZE,
        )
        base = f"/archive/{request.path_params['token']}"
        days: dict[str, list[DigestLine]] = {}
        words = words_for(sub.language)
        for digest in found[:PAGE_SIZE]:
            sent = _when(digest.sent, sub)
            day = _day(sent.date()) if words.english else words.day(sent.date())
            days.setdefault(day, []).append(
                DigestLine(
                    url=f"{base}/{digest.digest_id}",
                    time=f"{sent:%H:%M}",
                    channel=channel_name(digest.channel, words),
                    title=_title(digest),
                )
            )
        return self.site.page(
            request,
            "archive",
            title=N_("Your past digests"),
            language=sub.language,
            sub=sub,
            days=days,
            zone=_zone(sub).key,
            newer=f"{base}?page={page - 1}" if page > 1 else None,
            older=f"{base}?page={page + 1}" if len(found) > PAGE_SIZE else None,
            feed_url=self.manager.signer.feed_url(sub),
        )

    async def digest(self, request: Request) -> Response:
        """`GET /archive/{token}/{digest_id}`: one digest as it was sent."""
        sub = await self._opened(request)
        if isinstance(sub, Response):
            return sub
        digest_id = request.path_params["digest"]
        found = None
        # Ours are plain ASCII; PostgreSQL refuses a NUL in a query, so nothing else is asked.
        if len(digest_id) <= MAX_DIGEST_ID and digest_id.isascii() and digest_id.isprintable():
            assert sub.id is not None
            found = await run_in_threadpool(
                self.manager.store.archive.digest, sub.id, digest_id, leave_out=LEAVE_OUT
            )
        if found is None:
            return self.site.message(
                request,
                N_("No such digest"),
                N_(
                    "This digest is not in your archive: it was never sent (or not yet), or it "
                    "was sent to another subscription."
                ),
                status=404,
                language=sub.language,
            )
        digest, papers = found
        back = f"/archive/{request.path_params['token']}"
        words = words_for(sub.language)
        when = sent_when(digest, sub, words)
        message = _message(digest.message or b"") if digest.channel == "email" else None
        shown = _part(message, "html") if message is not None else None
        if shown is not None:
            return self._email(shown, back=back, when=when)
        return self.site.page(
            request,
            "archive_digest",
            title=_title(digest),
            language=sub.language,
            heading=_title(digest),
            when=when,
            channel=channel_name(digest.channel, words),
            back=back,
            text=_part(message, "plain") if message is not None else None,
            papers=[_paper_line(paper) for paper in papers],
        )

    def _email(self, shown: str, *, back: str, when: str) -> Response:
        """An email's HTML part as it was sent, under a bar back to the list."""
        bar = (
            '<div style="margin:0;padding:10px 16px;font:14px/1.4 -apple-system,'
            "'Segoe UI',Roboto,Helvetica,Arial,sans-serif;background:#1f2328;color:#f2f2ee\">"
            f'<a href="{html.escape(back)}" style="color:#f2f2ee">&larr; All your past '
            f"digests</a> &middot; sent {html.escape(when)}</div>"
        ).encode()
        body = shown.encode()
        found = _BODY.search(body)
        at = found.end() if found else 0
        page = body[:at] + bar + body[at:]
        response = HTMLResponse(page)
        response.headers["Cache-Control"] = "no-store"
        response.headers["Content-Security-Policy"] = SHOWN_EMAIL_POLICY
        return response


def _paper_line(paper: Paper) -> PaperLine:
    return PaperLine(
        title=paper_name(paper.id, paper.title),
        url=web_url(paper.abs_url, what=f"paper {paper.id[:80]}: a link"),
        authors=shorten_authors(paper.authors),
        abstract=tidy(letters(paper.abstract)),
    )
