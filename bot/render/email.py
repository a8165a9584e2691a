"""Email rendering: a Digest into a subject, a plain-text part and an HTML part.

This module owns what a digest email says; `bot.render.message` makes it the message it
is sent as, with its headers (List-Id, List-Unsubscribe, Message-ID ...). It is pure: it
reads templates and nothing else; it never sends (that is `bot.channels`), never reads
the clock (`now` is passed in) and never trusts its input: paper text is escaped in HTML,
and a paper's URLs become links only through `bot.core.links.web_url` (http and https
only: a feed's `javascript:` or `data:` link is shown as plain text, never as a link).
What it shows of each paper and rule is the view model it shares with Slack
(`bot.render.view`).

The HTML part's CSS lives in two <style> blocks in the template: the first is inlined onto
each element here (css_inline, never fetching anything: some clients drop <style>), the
second (phones, dark mode, link colours and highlights) is kept as it is. Every digest is
rendered within `HTML_BUDGET`, past which Gmail clips a message (`render_digest`: less text,
then fewer papers), except one with full abstracts: it is sent whole, in numbered parts
each within the budget, or as one email if its subscriber chose so (`render_parts`). The
same digest always gives the same bytes (the MIME boundary is made from the headers: its
Message-ID and Date), which the golden tests (tests/render/test_email_golden.py) rely on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import quote, urlsplit

from bot.core.checks import check_address, check_header_text
from bot.core.languages import language_script
from bot.core.links import LOOPBACK_HOSTS
from bot.core.models import Digest, Paper
from bot.render import template_env
from bot.render.inlining import inline_css
from bot.render.parts import DigestPart, parts_needed, split, weight, with_only
from bot.render.text import clip, tidy
from bot.render.view import (
    TEXT_LENGTHS,
    GroupView,
    TextLength,
    asked_length,
    day_span,
    group_views,
    layout_of,
    ranking_note,
    rule_names,
    shown_note,
    similar_group,
    summaries_note,
    texts_view,
)
from bot.render.view import texts_note as texts_note_of
from bot.render.words import N_, Words, words_for

__all__ = [
    "ACKNOWLEDGEMENT",
    "DigestLinks",
    "EmailSettings",
    "RenderedEmail",
    "VoteLinks",
    "check_address",
    "check_https_url",
    "html_size",
    "inline_css",
    "render_digest",
    "render_parts",
    "subject_line",
    "unsubscribe_mailto_url",
]

# The arXiv terms of use ask every digest to carry this line, word for word.
ACKNOWLEDGEMENT = "Thank you to arXiv for use of its open access interoperability."

SUBJECT_LIMIT = 120
# The most HTML a digest is sent with, in bytes as they arrive (decoded, lines ending in
# CRLF: `html_size`; a plain-text digest: its text): Gmail clips a message's HTML past
# 102 KB, hiding the rest and the unsubscribe link.
HTML_BUDGET = 100_000
# What a digest too long for HTML_BUDGET with the texts its subscriber asked for says, by
# how much of each paper's text it shows instead (`bot.render.view.TextLength`), in the
# reader's words.
SHORTENED_NOTE = N_("Abstracts are shortened: in full, this email is too long for some mail apps.")
SHORTENED_NOTES: dict[TextLength, str] = {
    "short": SHORTENED_NOTE,
    "brief": N_(
        "Abstracts are cut to their first lines: in full, this email is too long for "
        "some mail apps."
    ),
    "none": N_("Abstracts are left out: with them, this email is too long for some mail apps."),
}
TOC_MIN_PAPERS = 6  # a digest this long opens with a table of contents
PREHEADER_LIMIT = 200


@dataclass(frozen=True)
class EmailSettings:
    """Who digests come from and how the list identifies itself."""

    from_addr: str
    from_name: str = "paperbell"
    list_id: str = "paperbell digest"
    unsubscribe_mailto: str = ""  # empty: from_addr
    site_name: str = "paperbell"
    # Signs each digest's Message-ID (bot.core.verp.MessageIds), so that a bounce quoting
    # it proves it saw the message; empty: unsigned.
    message_id_key: str = field(default="", repr=False)

    @property
    def unsubscribe_address(self) -> str:
        return self.unsubscribe_mailto or self.from_addr

    @property
    def domain(self) -> str:
        return check_address(self.from_addr, what="from_addr").rpartition("@")[2].lower()


@dataclass(frozen=True)
class VoteLinks:
    """A paper's 👍 and 👎 links (`bot.core.links.LinkSigner.feedback_url`)."""

    like: str
    dislike: str


@dataclass(frozen=True)
class DigestLinks:
    """The subscriber's signed links, made by the caller (`bot.core.links`): the RFC 8058
    one-click unsubscribe URL (https), the manage page (https, or http on loopback), and
    each paper's 👍 / 👎 links, by paper id (a paper without them shows none: the HTML part
    carries them); this very digest in their archive ("view in browser"), their Atom feed,
    and the page where each paper of this email is rated (the plain-text part's one link
    for all the 👍 / 👎)."""

    unsubscribe: str | None = None
    manage: str | None = None
    feedback: Mapping[str, VoteLinks] = field(default_factory=dict)
    archive: str | None = None
    feed: str | None = None
    rating: str | None = None


@dataclass(frozen=True)
class RenderedEmail:
    """A digest as words: the subject and both bodies, before any header is built; and the
    digest they show (the papers one email cannot hold counted with those left out)."""

    subject: str
    text: str
    html: str
    digest: Digest | None = field(default=None, compare=False, repr=False)
    part: DigestPart | None = field(default=None, compare=False, repr=False)  # of several


def subject_line(digest: Digest, *, limit: int = SUBJECT_LIMIT, words: Words | None = None) -> str:
    """`12 new papers: diffusion policy, multi-agent RL — Tue 24 Nov`: how many, under which
    rules (each its label, else the rule in words, as the headings show them), and the day
    the papers were announced, in the reader's `words` (English: None). At most `limit`
    characters: the rules that do not fit are counted (`(+2 more)`: a rule in words may
    hold an "and"); a first rule too long alone is cut at a word, with "…"."""
    words = words or words_for(None)
    count = digest.count
    if count == 0:
        note = tidy(digest.note or "").split(";")[0].rstrip(".")
        return (
            note if note and len(note) <= limit else words.gettext("No new papers for your rules")
        )
    head = words.ngettext("%(count)s new paper", "%(count)s new papers", count)
    when = day_span(digest.announced, words)
    tail = f" \u2014 {when}" if when and len(head) + len(when) + 24 <= limit else ""
    names = [name.text for name in rule_names(digest.rules, digest.subscriber.labels)]
    if digest.similar:
        similar = similar_group(words).text
        names.append(similar.casefold() if words.english else similar)
    if not names:
        return head + tail
    # Translators: the subject's start; the rules follow, as many as fit (none here).
    head = words.gettext("%(count)s: %(rules)s") % {"count": head, "rules": ""}
    comma = words.gettext(", ")
    shown: list[str] = []
    for index, name in enumerate(names):
        more = _and_more(len(names) - index - 1, words)
        if len(head + comma.join([*shown, name]) + more + tail) > limit:
            break
        shown.append(name)
    if not shown:  # the first rule alone is too long: cut at a word
        more = _and_more(len(names) - 1, words)
        shown = [clip(names[0], max(limit - len(head) - len(more) - len(tail), 1))]
    return tidy(head + comma.join(shown) + _and_more(len(names) - len(shown), words) + tail)


def _and_more(hidden: int, words: Words) -> str:
    if not hidden:
        return ""
    return words.ngettext(" (+%(count)s more)", " (+%(count)s more)", hidden)


ARXIV_KINDS = frozenset({"arxiv", "arxiv_query"})


def _announcements(digest: Digest, words: Words) -> str:
    """`From the arXiv announcement of Thursday 28 November 2024`; with papers from other
    sources (a journal), `Dated 20 October 2021 to 28 November 2024` (empty when unknown)."""
    days = sorted(set(digest.announced))
    if not days:
        return ""
    if not all(_announced_by_arxiv(item.paper) for item in digest.items):
        if len(days) > 3:
            return words.gettext("Dated %(first)s to %(last)s") % {
                "first": words.day(days[0]),
                "last": words.day(days[-1]),
            }
        listed = words.gettext(" and ").join(words.day(d) for d in days)
        return words.gettext("Dated %(days)s") % {"days": listed}
    listed = words.gettext(", ").join(words.day(d) for d in days)
    if len(days) == 1:
        return words.gettext("From the arXiv announcement of %(days)s") % {"days": listed}
    return words.gettext("From the arXiv announcements of %(days)s") % {"days": listed}


def _announced_by_arxiv(paper: Paper) -> bool:
    """Whether the paper's date is an arXiv announcement (not a journal's, not the day
    Hugging Face listed it). Papers that name no source are taken to come from arXiv."""
    arxiv = not paper.sources or bool(ARXIV_KINDS & set(paper.sources))
    return paper.on_arxiv and arxiv


def _generated(digest: Digest, words: Words) -> str:
    """When the digest was made, on its reader's clock (their schedule's zone, else the
    config's default): `Generated Friday 29 November 2024, 09:00 (UTC+8).`"""
    when = words.moment(digest.created, digest.subscriber.schedule.timezone)
    return words.gettext("Generated %(time)s.") % {"time": when}


def _headline(digest: Digest, words: Words) -> str:
    if digest.count == 0:
        return digest.note or words.gettext("No new papers matched your rules")
    similar = len(digest.similar)
    matched = digest.count - similar
    if not similar:
        return words.ngettext(
            "%(count)s new paper matched your rules",
            "%(count)s new papers matched your rules",
            matched,
        )
    if not matched:
        return words.ngettext(
            "%(count)s new paper like ones you liked",
            "%(count)s new papers like ones you liked",
            similar,
        )
    head = words.ngettext(
        "%(count)s new paper matched your rules", "%(count)s new papers matched your rules", matched
    )
    more = words.ngettext(
        "and %(count)s more is like ones you liked",
        "and %(count)s more are like ones you liked",
        similar,
    )
    return words.gettext("%(matched)s, %(similar)s") % {"matched": head, "similar": more}


def _intro(digest: Digest, words: Words) -> str:
    """The opening sentence: how many papers, from which announcement."""
    when = _announcements(digest, words)
    if digest.count == 0 and digest.note:
        return digest.note
    headline = _headline(digest, words)
    if not when:
        return words.gettext("%(headline)s.") % {"headline": headline}
    # The announcements' line, as the middle of a sentence: "from the arXiv …", ", dated …"
    arxiv = all(_announced_by_arxiv(item.paper) for item in digest.items)
    joined = (
        words.gettext("%(headline)s %(when)s.")
        if arxiv
        else words.gettext("%(headline)s, %(when)s.")
    )
    middle = when[:1].lower() + when[1:] if words.english else when
    return joined % {"headline": headline, "when": middle}


def _preheader(
    digest: Digest,
    groups: tuple[GroupView, ...],
    words: Words,
    *,
    part_note: str | None = None,
) -> str:
    """The line inboxes show beside the subject: the counts per rule, then the top paper
    (a part: which part, then its first paper)."""
    if not groups:
        return _intro(digest, words)
    first = groups[0].items[0].title_text
    if part_note:
        return clip(
            words.gettext("%(part)s First: %(title)s") % {"part": part_note, "title": first},
            PREHEADER_LIMIT,
        )
    counts = words.gettext(", ").join(
        (
            words.gettext("%(count)s for %(rule)s")
            if group.rule.rule
            else words.gettext("%(count)s %(rule)s")
        )
        % {"count": words.number(len(group.items)), "rule": group.rule}
        for group in groups
    )
    text = words.gettext("%(papers)s: %(counts)s. First: %(title)s") % {
        "papers": words.ngettext("%(count)s new paper", "%(count)s new papers", digest.count),
        "counts": counts,
        "title": groups[0].items[0].title_text,
    }
    if len(text) > PREHEADER_LIMIT:
        text = text[: PREHEADER_LIMIT - 1].rsplit(" ", 1)[0].rstrip(" ,;:.") + "…"
    return text


def unsubscribe_mailto_url(address: str, name: str) -> str:
    """The mailto: link that unsubscribes `name` by writing to `address`."""
    return f"mailto:{address}?subject={quote('unsubscribe ' + name, safe='')}"


def check_https_url(url: str) -> str:
    """An unsubscribe URL, checked: plain https, nothing a header or a link could break on."""
    check_header_text(url, what="unsubscribe_url")
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.netloc or any(c in url for c in " <>,\"'"):
        raise ValueError(f"unsubscribe_url: not a plain https URL: {url!r}")
    return url


def _check_link_url(url: str, *, what: str) -> str:
    """A link for the body: https, or http on loopback (a development server)."""
    parts = urlsplit(url)
    local = parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS
    if not ((parts.scheme == "https" or local) and parts.netloc):
        raise ValueError(f"{what}: not an https URL (or http on loopback): {url!r}")
    if _NOT_PLAIN_RE.search(url):
        raise ValueError(f"{what}: not a plain URL: {url!r}")
    return url


_NOT_PLAIN_RE = re.compile(r"[\x00-\x20<>\"']")


def _vote_links(links: Mapping[str, VoteLinks]) -> dict[str, VoteLinks]:
    """The papers' 👍 / 👎 links, each checked as the manage link is."""
    return {
        key: VoteLinks(
            like=_check_link_url(votes.like, what="a 👍 link"),
            dislike=_check_link_url(votes.dislike, what="a 👎 link"),
        )
        for key, votes in links.items()
    }


def render_digest(
    digest: Digest,
    settings: EmailSettings | None = None,
    *,
    links: DigestLinks | None = None,
) -> RenderedEmail:
    """Render a digest's subject, plain-text part and HTML part (its CSS inlined), within
    `HTML_BUDGET` (past 102 KB Gmail clips a message, hiding the rest and the unsubscribe
    link): with each paper's text as the subscriber asked for it if it fits, else with less
    of it (short, then the first lines, then none: `TEXT_LENGTHS`) and a note that says so;
    and if even titles alone are too many, about the fewest of the lowest-ranked papers left out
    (counted with those over `max_papers`: `RenderedEmail.digest`). The budget is the HTML
    part's, or the text part's for a subscriber who takes plain text only."""
    asked = asked_length(digest.subscriber.abstracts)
    rendered = _render(digest, settings, links=links, length=asked)
    if _fits(rendered):
        return rendered
    least = _render(digest, settings, links=links, length="none", note=True)
    if _fits(least):  # the most of each paper's text that fits
        for length in TEXT_LENGTHS[TEXT_LENGTHS.index(asked) + 1 : -1]:
            shorter = _render(digest, settings, links=links, length=length, note=True)
            if _fits(shorter):
                return shorter
        return least
    # Even titles alone are too many: the lowest-ranked papers are left out, as many as
    # the size says (it grows with the papers), until the rest fit.
    count, rendered = digest.count, least
    while not _fits(rendered) and count > 1:
        count = max(1, min(count - 1, count * HTML_BUDGET // _size(rendered)))
        rendered = _render(_best(digest, count), settings, links=links, length="none", dropped=True)
    return rendered


def render_parts(
    digest: Digest,
    settings: EmailSettings | None = None,
    *,
    links_of: Callable[[Digest], DigestLinks | None] = lambda _digest: None,
) -> list[RenderedEmail]:
    """The digest as the emails it is sent as. A subscriber who asked for full abstracts
    gets every paper and its texts whole: in one email if it fits `HTML_BUDGET`, else in
    numbered parts, each within it, that mail apps thread (or in one email all the same,
    if they chose `long_emails = "one"`). Anyone else gets one email (`render_digest`).
    `links_of(digest)`: the signed links of a digest, or of a part (its own archive page,
    its papers' 👍 / 👎)."""
    if asked_length(digest.subscriber.abstracts) != "full":
        return [render_digest(digest, settings, links=links_of(digest))]
    whole = _render(digest, settings, links=links_of(digest), length="full")
    if _fits(whole) or digest.subscriber.long_emails == "one" or digest.count < 2:
        return [whole]
    weights = [weight(item, digest.texts.get(item.paper.id)) for item in digest.items]
    count = parts_needed(_size(whole), HTML_BUDGET)
    while True:
        parts = [
            _render(digest, settings, links=links_of(part.digest), length="full", part=part)
            for part in split(digest, weights, count)
        ]
        if all(_fits(part) for part in parts) or count >= digest.count:
            return parts
        count += 1


def html_size(html: str) -> int:
    """The size of an email's HTML (or text) part as mail apps count it: its bytes as they
    arrive, each line ending in CRLF."""
    return len(html.encode()) + html.count("\n") - html.count("\r\n")


def _size(rendered: RenderedEmail) -> int:
    """A rendered digest's size as mail apps count it: its HTML part's (its text part's,
    when it is sent as plain text only)."""
    digest = rendered.digest
    text_only = digest is not None and digest.subscriber.email_format == "text"
    return html_size(rendered.text if text_only else rendered.html)


def _fits(rendered: RenderedEmail) -> bool:
    """Whether a rendered digest is within `HTML_BUDGET`."""
    return _size(rendered) <= HTML_BUDGET


def _best(digest: Digest, count: int) -> Digest:
    """The digest with only its `count` best papers (by score; the digest's order breaks
    ties; a digest ranked by its reader's verdicts: its order, the similar papers last), in
    their groups; the rest, best first, join the papers left out before them."""
    ranked = sorted(enumerate(digest.items), key=lambda pair: (-pair[1].score, pair[0]))
    if digest.ranked:
        matched = [(n, item) for n, item in enumerate(digest.items) if item.similar_to is None]
        ranked = sorted(matched, key=lambda pair: pair[1].rank) + [
            (n, item) for n, item in enumerate(digest.items) if item.similar_to is not None
        ]
    kept = {index for index, _ in ranked[:count]}
    dropped = tuple(item.paper for index, item in ranked[count:])
    return replace(with_only(digest, kept), omitted=dropped + digest.omitted)


def _more(
    digest: Digest, words: Words, *, full: bool, manage_url: str | None
) -> tuple[str, str | None]:
    """What the email says of the matching papers it does not show, and where its reader
    can ask for more of them next time (their manage page, when they may change it there)."""
    shown = shown_note(digest, words)
    if shown is None:
        return "", None
    if full:  # papers left out so that mail apps show the email whole
        return words.gettext("%(shown)s More would not fit in one email.") % {"shown": shown}, None
    editable = digest.subscriber.origin == "database"
    return shown, f"{manage_url}#settings" if manage_url and editable else None


def _render(
    digest: Digest,
    settings: EmailSettings | None,
    *,
    links: DigestLinks | None,
    length: TextLength,
    note: bool = False,
    dropped: bool = False,
    part: DigestPart | None = None,
) -> RenderedEmail:
    """The digest rendered with `length` of each paper's text; `note`: say it is less than
    the subscriber asked for, to fit; `dropped`: papers were left out to fit, too; `part`:
    only this part's papers, the rest (subject, notes) still the whole digest's."""
    note = note or dropped
    links = links or DigestLinks()
    subscriber = digest.subscriber
    site_name = tidy(settings.site_name) if settings else "paperbell"
    unsubscribe_address = None
    if settings is not None:
        unsubscribe_address = check_address(settings.unsubscribe_address, what="unsubscribe_mailto")
    words = words_for(subscriber.language)
    shown = digest if part is None else part.digest
    groups = group_views(shown, abstracts=length, first=part.first if part else 1, words=words)
    part_note = part.note(digest.count, words) if part else None
    # A part's number ends its subject, within the same limit: the rules give way to it.
    numbered = f" ({part.number}/{part.total})" if part is not None else ""
    subject = subject_line(digest, limit=SUBJECT_LIMIT - len(numbered), words=words) + numbered
    layout = layout_of(subscriber)
    texts = texts_view(digest)
    language = texts.language if texts else None
    shortened = (
        words.gettext(SHORTENED_NOTES[length]) if note and length in SHORTENED_NOTES else None
    )
    texts_note = " ".join(
        said for said in (ranking_note(digest, words), texts_note_of(digest), shortened) if said
    )
    manage_url = _check_link_url(links.manage, what="manage_url") if links.manage else None
    archive_url = _check_link_url(links.archive, what="archive_url") if links.archive else None
    feed_url = _check_link_url(links.feed, what="feed_url") if links.feed else None
    rating_url = _check_link_url(links.rating, what="rating_url") if links.rating else None
    more, more_url = _more(digest, words, full=dropped, manage_url=manage_url)
    if part is not None and part.number < part.total:  # said once, at the end
        more, more_url = "", None
    feedback = _vote_links(links.feedback)
    context = {
        "subject": subject,
        "site_name": site_name,
        "intro": _intro(digest, words),
        "headline": _headline(digest, words),
        "announcements": _announcements(digest, words) if not digest.note else "",
        "generated": _generated(digest, words),
        "preheader": _preheader(digest, groups, words, part_note=part_note),
        "part_note": part_note,
        "groups": groups,
        "toc": shown.count >= TOC_MIN_PAPERS,
        "count": digest.count,
        # Each paper's announcement day, when the digest spans more than one.
        "many_days": len(set(digest.announced)) > 1,
        "more": more,
        "more_url": more_url,
        "more_link": words.gettext("Show more papers per email"),
        "recipient": subscriber.email or subscriber.name,
        "subscriber_rules": tuple(rule_names(subscriber.rules, subscriber.labels)),
        "unsubscribe_address": unsubscribe_address,
        "unsubscribe_mailto_url": (
            unsubscribe_mailto_url(unsubscribe_address, subscriber.name)
            if unsubscribe_address
            else None
        ),
        # What the unsubscribe address reads: in English, whatever the reader's language.
        "unsubscribe_subject": f"unsubscribe {subscriber.name}",
        "unsubscribe_url": check_https_url(links.unsubscribe) if links.unsubscribe else None,
        "manage_url": manage_url,
        "archive_url": archive_url,  # this digest in the subscriber's archive
        "feed_url": feed_url,
        # The plain-text part's one link to rate this email's papers (in place of each
        # paper's 👍 / 👎 links).
        "rating_url": rating_url,
        # Each paper's 👍 / 👎 links, by paper id.
        "feedback": feedback,
        "acknowledgement": ACKNOWLEDGEMENT,
        # Summaries and translations (bot.render.view.Layout); "standard" is the digest
        # without them.
        "layout": layout,
        "script": language_script(language) if language else "",
        "language_note": texts.language_note_in(words) if texts else None,
        # Who wrote the summaries: said once, at the top, not on every paper.
        "summaries_note": summaries_note((item for group in groups for item in group.items), words),
        "texts_note": texts_note,
    }
    env = template_env(words.tag)
    text = env.get_template("email/digest.txt.j2").render(context)
    html = inline_css(env.get_template("email/digest.html.j2").render(context))
    return RenderedEmail(subject=subject, text=text, html=html, digest=shown, part=part)
