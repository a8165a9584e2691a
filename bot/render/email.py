"""Email rendering: a Digest into a subject, a plain-text part, an HTML part, and a message.

This module owns what a digest email says and its headers (List-Id, List-Unsubscribe,
Message-ID ...). It is pure: it reads templates and nothing else; it never sends (that is
`bot.channels`), never reads the clock (`now` is passed in) and never trusts its input:
paper text is escaped in HTML, header values are checked for CR/LF and shape.
"""

from __future__ import annotations

import email.policy
import email.utils
import re
import shlex
from dataclasses import dataclass, field
from datetime import date, datetime
from email.message import EmailMessage
from urllib.parse import quote, urlsplit

from bot.checks import check_address, check_header_text
from bot.models import Digest, DigestItem, Paper
from bot.render import template_env
from bot.render.text import plural, tidy

__all__ = [
    "ACKNOWLEDGEMENT",
    "EmailSettings",
    "RenderedEmail",
    "build_message",
    "check_address",
    "quote_rule",
    "render_digest",
    "subject_line",
]

# The arXiv terms of use ask every digest to carry this line, word for word.
ACKNOWLEDGEMENT = "Thank you to arXiv for use of its open access interoperability."

SUBJECT_LIMIT = 120

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
class RenderedEmail:
    """A digest as words: the subject and both bodies, before any header is built."""

    subject: str
    text: str
    html: str


@dataclass(frozen=True)
class _CategoryView:
    name: str
    primary: bool


@dataclass(frozen=True)
class _ItemView:
    number: int
    paper: Paper
    rules: tuple[str, ...]  # as shown: quoted
    title_spans: tuple[tuple[int, int], ...]
    abstract_spans: tuple[tuple[int, int], ...]
    categories: tuple[_CategoryView, ...]
    markers: tuple[str, ...]
    dois: tuple[tuple[str, str], ...]  # (doi, https://doi.org/... link)


@dataclass(frozen=True)
class _GroupView:
    rule: str  # as shown: quoted
    heading: str
    items: tuple[_ItemView, ...] = field(default=())


def quote_rule(rule: str) -> str:
    """A rule as shown to people: in double quotes, unless it already carries its own."""
    rule = tidy(rule)
    return rule if '"' in rule else f'"{rule}"'


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


def _item_view(number: int, item: DigestItem) -> _ItemView:
    paper = item.paper
    primary = paper.primary_category
    markers: list[str] = []
    if paper.is_cross and primary:
        markers.append(f"cross-list from {primary}")
    if paper.is_update:
        markers.append(f"updated: v{paper.version}")
    return _ItemView(
        number=number,
        paper=paper,
        rules=tuple(quote_rule(rule) for rule in item.rules),
        title_spans=tuple((h.start, h.end) for h in item.hits if h.field == "title"),
        abstract_spans=tuple((h.start, h.end) for h in item.hits if h.field == "abstract"),
        categories=tuple(
            _CategoryView(name, index == 0) for index, name in enumerate(paper.categories)
        ),
        markers=tuple(markers),
        dois=tuple((doi, "https://doi.org/" + quote(doi, safe="/:;()._-")) for doi in paper.dois),
    )


def _groups(digest: Digest) -> tuple[_GroupView, ...]:
    groups: list[_GroupView] = []
    number = 0
    for group in digest.groups:
        items = []
        for item in group.items:
            number += 1
            items.append(_item_view(number, item))
        rule = quote_rule(group.rule)
        heading = f"{rule} · {plural(len(items), 'paper')}"
        groups.append(_GroupView(rule=rule, heading=heading, items=tuple(items)))
    return tuple(groups)


def _day(day: date) -> str:
    return f"{day:%A} {day.day} {day:%B %Y}"


def _intro(digest: Digest) -> str:
    days = sorted(set(digest.announced))
    when = ""
    if days:
        noun = "announcement" if len(days) == 1 else "announcements"
        when = f" from the arXiv {noun} of {', '.join(_day(d) for d in days)}"
    if digest.count == 0:
        return digest.note or f"No new papers matched your rules{when}."
    return f"{plural(digest.count, 'new paper')} matched your rules{when}."


def _unsubscribe_mailto_url(address: str, name: str) -> str:
    return f"mailto:{address}?subject={quote('unsubscribe ' + name, safe='')}"


def _check_https_url(url: str) -> str:
    check_header_text(url, what="unsubscribe_url")
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.netloc or any(c in url for c in " <>,\"'"):
        raise ValueError(f"unsubscribe_url: not a plain https URL: {url!r}")
    return url


def render_digest(
    digest: Digest,
    settings: EmailSettings | None = None,
    *,
    unsubscribe_url: str | None = None,
) -> RenderedEmail:
    """Render a digest's subject, plain-text part and HTML part."""
    subscriber = digest.subscriber
    site_name = tidy(settings.site_name) if settings else "paperbell"
    unsubscribe_address = None
    if settings is not None:
        unsubscribe_address = check_address(settings.unsubscribe_address, what="unsubscribe_mailto")
    subject = subject_line(digest)
    context = {
        "subject": subject,
        "site_name": site_name,
        "intro": _intro(digest),
        "groups": _groups(digest),
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
        "unsubscribe_url": _check_https_url(unsubscribe_url) if unsubscribe_url else None,
        "acknowledgement": ACKNOWLEDGEMENT,
    }
    env = template_env()
    text = env.get_template("email/digest.txt.j2").render(context)
    html = env.get_template("email/digest.html.j2").render(context)
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
    unsubscribe_url: str | None = None,
) -> EmailMessage:
    """Build the multipart/alternative message for one digest (text first, HTML last).

    `unsubscribe_url`, when given, is the subscriber's RFC 8058 one-click https URL; it is
    listed before the mailto link and `List-Unsubscribe-Post` is added.
    """
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

    rendered = render_digest(digest, settings, unsubscribe_url=unsubscribe_url)

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
    msg.add_alternative(rendered.html, subtype="html", charset="utf-8", cte="quoted-printable")
    return msg
