"""Email rendering: a Digest into a subject, a plain-text part, an HTML part, and a message.

This module owns what a digest email says and its headers (List-Id, List-Unsubscribe,
Message-ID ...). It is pure: it reads templates and nothing else; it never sends (that is
`bot.channels`), never reads the clock (`now` is passed in) and never trusts its input:
paper text is escaped in HTML, header values are checked for CR/LF and shape, and a
paper's URLs become links only through `bot.core.links.web_url` (http and https only: a feed's
`javascript:` or `data:` link is shown as plain text, never as a link). What it shows of
each paper and rule is the view model it shares with Slack (`bot.render.view`).

The HTML part's CSS lives in a <style> block in the template and is inlined onto each
element here (css_inline, never fetching anything): most clients drop <style>. The same
digest always gives the same bytes (the MIME boundary is made from the content), which the
golden tests (tests/test_email_golden.py) rely on.
"""

from __future__ import annotations

import email.policy
import email.utils
import functools
import hashlib
import re
import shlex
from dataclasses import dataclass, replace
from datetime import date, datetime
from email.message import EmailMessage
from urllib.parse import quote, urlsplit

import css_inline

from bot.core.checks import check_address, check_header_text
from bot.core.languages import language_script
from bot.core.links import LOOPBACK_HOSTS
from bot.core.models import Digest, Paper
from bot.render import template_env
from bot.render.text import plural, tidy
from bot.render.view import (
    GroupView,
    group_views,
    layout_of,
    quote_rule,
    texts_view,
)
from bot.render.view import texts_note as texts_note_of

__all__ = [
    "ACKNOWLEDGEMENT",
    "DigestLinks",
    "EmailSettings",
    "RenderedEmail",
    "build_message",
    "check_address",
    "inline_css",
    "render_digest",
    "subject_line",
]

# The arXiv terms of use ask every digest to carry this line, word for word.
ACKNOWLEDGEMENT = "Thank you to arXiv for use of its open access interoperability."

SUBJECT_LIMIT = 120
# The most HTML a digest with summaries or translations is sent with, in bytes (decoded):
# Gmail clips a message's HTML past 102 KB, hiding the rest and the unsubscribe link.
HTML_BUDGET = 100_000
SHORTENED_NOTE = "Abstracts are shortened: in full, this digest is too long for some mail apps."
TOC_MIN_PAPERS = 6  # a digest this long opens with a table of contents
PREHEADER_LIMIT = 200

_MSGID_LEFT_RE = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,200}")
_ATOMS_RE = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~ -]+")


@dataclass(frozen=True)
class EmailSettings:
    """Who digests come from and how the list identifies itself."""

    from_addr: str
    from_name: str = "paperbell"
    list_id: str = "paperbell digest"
    unsubscribe_mailto: str = ""  # empty: from_addr
    site_name: str = "paperbell"

    @property
    def unsubscribe_address(self) -> str:
        return self.unsubscribe_mailto or self.from_addr

    @property
    def domain(self) -> str:
        return check_address(self.from_addr, what="from_addr").rpartition("@")[2].lower()


@dataclass(frozen=True)
class DigestLinks:
    """The subscriber's signed links, made by the caller (`bot.core.links`): the RFC 8058
    one-click unsubscribe URL (https) and the manage page (https, or http on loopback)."""

    unsubscribe: str | None = None
    manage: str | None = None


@dataclass(frozen=True)
class RenderedEmail:
    """A digest as words: the subject and both bodies, before any header is built."""

    subject: str
    text: str
    html: str


def subject_line(digest: Digest, *, limit: int = SUBJECT_LIMIT) -> str:
    """`3 new papers: "diffusion policy", "multi-agent" (+2 rules)`, at most `limit` chars."""
    count = digest.count
    if count == 0:
        note = tidy(digest.note or "").split(";")[0].rstrip(".")
        return note if note and len(note) <= limit else "No new papers for your rules"
    head = f"{plural(count, 'new paper')}: "
    rules = [quote_rule(rule) for rule in digest.rules if tidy(rule)]
    if not rules:
        return head.rstrip(": ")
    shown: list[str] = []
    for index, rule in enumerate(rules):
        rest = len(rules) - index - 1
        more = f" (+{plural(rest, 'rule')})" if rest else ""
        candidate = head + ", ".join([*shown, rule]) + more
        if len(candidate) > limit and shown:
            break
        shown.append(rule)
    hidden = len(rules) - len(shown)
    tail = f" (+{plural(hidden, 'rule')})" if hidden else ""
    subject = head + ", ".join(shown) + tail
    if len(subject) > limit:  # a single rule too long to fit: cut it
        keep = limit - len(head) - len(tail) - 4
        subject = head + shown[0][:keep].rstrip() + '..."' + tail
    return tidy(subject)


ARXIV_KINDS = frozenset({"arxiv", "arxiv_query"})


def _day(day: date) -> str:
    return f"{day:%A} {day.day} {day:%B %Y}"


def _announcements(digest: Digest) -> str:
    """`from the arXiv announcement of Thursday 28 November 2024`; with papers from other
    sources (a journal), `dated 20 October 2021 to 28 November 2024` (empty when unknown)."""
    days = sorted(set(digest.announced))
    if not days:
        return ""
    if not all(_announced_by_arxiv(item.paper) for item in digest.items):
        if len(days) > 3:
            return f"dated {_day(days[0])} to {_day(days[-1])}"
        return f"dated {' and '.join(_day(d) for d in days)}"
    noun = "announcement" if len(days) == 1 else "announcements"
    return f"from the arXiv {noun} of {', '.join(_day(d) for d in days)}"


def _announced_by_arxiv(paper: Paper) -> bool:
    """Whether the paper's date is an arXiv announcement (not a journal's, not the day
    Hugging Face listed it). Papers that name no source are taken to come from arXiv."""
    arxiv = not paper.sources or bool(ARXIV_KINDS & set(paper.sources))
    return paper.on_arxiv and arxiv


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _headline(digest: Digest) -> str:
    if digest.count == 0:
        return digest.note or "No new papers matched your rules"
    return f"{plural(digest.count, 'new paper')} matched your rules"


def _intro(digest: Digest) -> str:
    """The opening sentence: how many papers, from which announcement."""
    when = _announcements(digest)
    if digest.count == 0 and digest.note:
        return digest.note
    joint = ", " if when.startswith("dated") else " "
    return f"{_headline(digest)}{joint + when if when else ''}."


def _preheader(digest: Digest, groups: tuple[GroupView, ...]) -> str:
    """The line inboxes show beside the subject: the counts per rule, then the top paper."""
    if not groups:
        return _intro(digest)
    counts = ", ".join(f"{len(group.items)} for {group.rule}" for group in groups)
    text = f"{plural(digest.count, 'new paper')}: {counts}. First: {groups[0].items[0].title_text}"
    if len(text) > PREHEADER_LIMIT:
        text = text[: PREHEADER_LIMIT - 1].rsplit(" ", 1)[0].rstrip(" ,;:.") + "…"
    return text


def _unsubscribe_mailto_url(address: str, name: str) -> str:
    return f"mailto:{address}?subject={quote('unsubscribe ' + name, safe='')}"


def _check_https_url(url: str) -> str:
    check_header_text(url, what="unsubscribe_url")
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.netloc or any(c in url for c in " <>,\"'"):
        raise ValueError(f"unsubscribe_url: not a plain https URL: {url!r}")
    return url


def _check_link_url(url: str, *, what: str) -> str:
    """A link for the body: https, or http on loopback (a development server)."""
    parts = urlsplit(url)
    local = parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS
    if (parts.scheme != "https" and not local) or not parts.netloc:
        raise ValueError(f"{what}: not an https URL (or http on loopback): {url!r}")
    if any(c in url for c in " <>\"'") or any(ord(c) < 32 for c in url):
        raise ValueError(f"{what}: not a plain URL: {url!r}")
    return url


@functools.cache
def _inliner() -> css_inline.CSSInliner:
    # The <style> block stays too: its @media rules (phones, dark mode) cannot be inlined.
    return css_inline.CSSInliner(
        keep_style_tags=True, load_remote_stylesheets=False, minify_css=True
    )


def inline_css(html: str) -> str:
    """Copy the rules of the HTML's <style> block onto each element's style attribute:
    most clients (Gmail for other accounts, Outlook, Yahoo) ignore or strip <style>."""
    return _inliner().inline(html)


def render_digest(
    digest: Digest,
    settings: EmailSettings | None = None,
    *,
    links: DigestLinks | None = None,
) -> RenderedEmail:
    """Render a digest's subject, plain-text part and HTML part (its CSS inlined).

    A digest with summaries or translations whose full abstracts would take its HTML past
    `HTML_BUDGET` is rendered with short abstracts instead (and says so): past 102 KB Gmail
    clips the message, and a long digest's translations double its text."""
    rendered = _render(digest, settings, links=links)
    subscriber = digest.subscriber
    if (
        layout_of(subscriber) != "standard"
        and subscriber.abstracts == "full"
        and len(rendered.html.encode()) > HTML_BUDGET
    ):
        shorter = replace(digest, subscriber=replace(subscriber, abstracts="short"))
        rendered = _render(shorter, settings, links=links, note=SHORTENED_NOTE)
    return rendered


def _render(
    digest: Digest,
    settings: EmailSettings | None,
    *,
    links: DigestLinks | None,
    note: str | None = None,
) -> RenderedEmail:
    links = links or DigestLinks()
    subscriber = digest.subscriber
    site_name = tidy(settings.site_name) if settings else "paperbell"
    unsubscribe_address = None
    if settings is not None:
        unsubscribe_address = check_address(settings.unsubscribe_address, what="unsubscribe_mailto")
    subject = subject_line(digest)
    groups = group_views(digest)
    layout = layout_of(subscriber)
    texts = texts_view(digest)
    language = texts.language if texts else None
    texts_note = " ".join(part for part in (texts_note_of(digest), note) if part)
    context = {
        "subject": subject,
        "site_name": site_name,
        "intro": _intro(digest),
        "headline": _headline(digest),
        "announcements": _upper_first(_announcements(digest)) if not digest.note else "",
        "preheader": _preheader(digest, groups),
        "groups": groups,
        "toc": digest.count >= TOC_MIN_PAPERS,
        "count": digest.count,
        "omitted": len(digest.omitted),
        "max_papers": subscriber.max_papers,
        "subscriber_name": subscriber.name,
        "subscriber_rules": tuple(quote_rule(rule) for rule in subscriber.rules),
        "unsubscribe_address": unsubscribe_address,
        "unsubscribe_mailto_url": (
            _unsubscribe_mailto_url(unsubscribe_address, subscriber.name)
            if unsubscribe_address
            else None
        ),
        "unsubscribe_subject": f"unsubscribe {subscriber.name}",
        "unsubscribe_command": f"paperbell unsubscribe {shlex.quote(subscriber.name)}",
        "unsubscribe_url": _check_https_url(links.unsubscribe) if links.unsubscribe else None,
        "manage_url": _check_link_url(links.manage, what="manage_url") if links.manage else None,
        "acknowledgement": ACKNOWLEDGEMENT,
        # Summaries and translations (bot.render.view.Layout); "standard" is the digest
        # exactly as it was before them.
        "layout": layout,
        "extras": layout != "standard" or bool(texts_note),
        "script": language_script(language) if language else "",
        "language_note": texts.language_note if texts else None,
        "texts_note": texts_note,
    }
    env = template_env()
    text = env.get_template("email/digest.txt.j2").render(context)
    html = inline_css(env.get_template("email/digest.html.j2").render(context))
    return RenderedEmail(subject=subject, text=text, html=html)


def _phrase(text: str) -> str:
    """A header display name: as is when it is plain atoms, else a quoted string."""
    if _ATOMS_RE.fullmatch(text):
        return text
    return '"' + email.utils.quote(text) + '"'


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or "paperbell"


def build_message(
    digest: Digest,
    settings: EmailSettings,
    *,
    now: datetime,
    links: DigestLinks | None = None,
) -> EmailMessage:
    """Build the message for one digest: multipart/alternative (text first, HTML last), or
    plain text alone for a subscriber whose `email_format` is "text".

    `links.unsubscribe`, when given, is the subscriber's RFC 8058 one-click https URL; it
    is listed before the mailto link and `List-Unsubscribe-Post` is added. `links.manage`
    is shown in the footer of both parts.
    """
    unsubscribe_url = links.unsubscribe if links else None
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be a timezone-aware datetime")
    to_addr = check_address(digest.subscriber.email, what=f"{digest.subscriber.name}: email")
    from_addr = check_address(settings.from_addr, what="from_addr")
    unsubscribe_address = check_address(settings.unsubscribe_address, what="unsubscribe_mailto")
    from_name = tidy(check_header_text(settings.from_name, what="from_name"))
    list_name = tidy(check_header_text(settings.list_id, what="list_id"))
    if not _MSGID_LEFT_RE.fullmatch(digest.digest_id):
        raise ValueError(f"digest_id not usable in a Message-ID: {digest.digest_id!r}")
    domain = settings.domain

    rendered = render_digest(digest, settings, links=links)

    msg = EmailMessage(policy=email.policy.SMTP)
    msg["From"] = email.utils.formataddr((from_name, from_addr))
    msg["To"] = to_addr
    msg["Subject"] = tidy(rendered.subject)
    msg["Date"] = email.utils.format_datetime(now)
    msg["Message-ID"] = f"<{digest.digest_id}@{domain}>"
    msg["List-Id"] = f"{_phrase(list_name)} <{_slug(list_name)}.{domain}>"
    mailto = f"<{_unsubscribe_mailto_url(unsubscribe_address, digest.subscriber.name)}>"
    if unsubscribe_url:
        msg["List-Unsubscribe"] = f"<{_check_https_url(unsubscribe_url)}>, {mailto}"
        msg["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    else:
        msg["List-Unsubscribe"] = mailto
    msg["Auto-Submitted"] = "auto-generated"
    msg["X-Auto-Response-Suppress"] = "All"
    msg.set_content(rendered.text, charset="utf-8", cte="quoted-printable")
    if digest.subscriber.email_format != "text":
        msg.add_alternative(rendered.html, subtype="html", charset="utf-8", cte="quoted-printable")
        # A boundary made from the content, not at random: the same digest gives the same
        # bytes. "=_" never occurs in a quoted-printable body, so it cannot clash with it.
        content = hashlib.sha256(f"{rendered.text}\0{rendered.html}".encode()).hexdigest()
        msg.set_boundary(f"=_paperbell_{content[:32]}")
    return msg
