"""What the pages reached from every email do, as plain logic: who a signed link names, and
unsubscribe, resume, settings, address confirmation, sign-up, fresh links, 👍 / 👎
on a paper (from an email link, a Slack button or the manage page: `record_feedback`,
`undo_feedback`, `remove_feedback`), a subscriber's rules (`bot.manage.rules`), Apprise
destinations (`bot.manage.destinations`); how a subscriber's reading settings (summaries,
a language) are offered and described, for the pages, Slack and the command line alike,
is `bot.manage.reading`.

No HTTP here (that is `bot.web.pages`); like `bot.slack.commands` for Slack, a request
comes in as plain values and an outcome goes out. Mail this module asks for (a
confirmation, a fresh link) is queued in the outbox, so it is sent once and never lost; the
caller drains the outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import TypeVar

from bot.channels import subscriber_targets
from bot.channels.outbox import drain
from bot.config import subscriber_problems, subscriber_settings
from bot.core.errors import AddressTaken, NameTaken, StoreError
from bot.core.links import (
    LinkSigner,
    Purpose,
    Standing,
    TokenProblem,
    Visitor,
    address_tag,
)
from bot.core.models import DECLARED_VIA, Feedback, FeedbackVia, Paper, Subscriber, Verdict
from bot.manage.choices import SiteChoices
from bot.manage.destinations import Destinations, DestinationView
from bot.manage.rating import RatingLink, Ratings, SentPapers
from bot.manage.reading import (
    LANGUAGES,
    language_called,
    language_choices,
    paper_count_choices,
    reading_parts,
)
from bot.manage.rules import Rules
from bot.pipeline.wiring import NOTICE_CHANNEL, Parts
from bot.render.notice import NoticeKind, build_notice
from bot.similar.text import paper_text

__all__ = [
    "LANGUAGES",
    "DestinationView",
    "FeedbackLink",
    "Manager",
    "RatingLink",
    "Refused",
    "SentPapers",
    "SiteChoices",
    "free_name",
    "language_called",
    "language_choices",
    "notice_sender",
    "paper_count_choices",
    "reading_parts",
    "under_free_name",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refused:
    """A link that does not let its bearer in: forged, expired, or no longer theirs."""

    reason: str  # "forged", "expired", "gone", "stopped" (a standing link of an unsubscriber)
    subscriber: Subscriber | None = None  # "expired", "stopped": whose it was (never shown)


@dataclass(frozen=True)
class FeedbackLink:
    """What a genuine 👍 / 👎 link (or Slack button) records: `verdict` on the paper with
    key `paper`, for `subscriber`."""

    subscriber: Subscriber
    paper: str
    verdict: Verdict


# How many free names a new subscriber tries, each taken by another sign-up meanwhile.
NAME_TRIES = 5
T = TypeVar("T")  # what the add under a free name returns


def free_name(parts: Parts, wanted: str, *, fallback: str) -> str:
    """A subscriber name not taken yet (in the config file or the database), made from
    `wanted` (a Slack handle, a channel name, an address's local part): `ada`, `ada-2` ..."""
    base = re.sub(r"[^A-Za-z0-9_.@\-]", "-", wanted)[:56].strip("-") or fallback
    taken = {s.name for s in parts.declared()}
    name, number = base, 1
    while name in taken or parts.store.subscribers.get(name) is not None:
        number += 1
        name = f"{base}-{number}"
    return name


def under_free_name(parts: Parts, wanted: str, add: Callable[[str], T], *, fallback: str) -> T:
    """`add(name)` for a new subscriber under a free name like `wanted` (`free_name`).
    Another sign-up may take the name between the pick and the add: `add` then raises a
    NameTaken (`Subscribers.add(only_new=True)`), and a name is picked again, never added
    to theirs; NAME_TRIES times at most."""
    for tries_left in reversed(range(NAME_TRIES)):
        try:
            return add(free_name(parts, wanted, fallback=fallback))
        except NameTaken:
            if not tries_left:
                raise
    raise AssertionError("the loop returns or raises")


# Gmail's domains, and the one it reads both as: it reads no dots in the local part either.
GMAIL_DOMAINS = {"gmail.com": "gmail.com", "googlemail.com": "gmail.com"}


def mailbox_tag(email: str) -> str:
    """One mailbox however it is written: case and a "+tag" do not make a new one, nor do a
    Gmail address's dots or its googlemail.com (so the sign-up page cannot mail one person
    many times a day through ada+1@, ada+2@, a.da@gmail.com, ad.a@gmail.com ...)."""
    local, _, domain = email.strip().lower().partition("@")
    local = local.split("+", 1)[0]
    if domain in GMAIL_DOMAINS:
        local, domain = local.replace(".", ""), GMAIL_DOMAINS[domain]
    return address_tag(f"{local}@{domain}")


def awaiting(sub: Subscriber) -> Subscriber:
    """The subscriber as its address waiting for confirmation would make it (`sub` itself
    if none waits): whom that address's confirmation link is made for, and opens as."""
    if not sub.pending_email:
        return sub
    return replace(sub, email=sub.pending_email, email_confirmed=False, pending_email=None)


def mask(email: str | None) -> str:
    """An address as shown on a page that a forwarded link may open: a•••@lab.example."""
    if not email or "@" not in email:
        return "your address"
    local, _, domain = email.partition("@")
    return f"{local[:1]}•••@{domain}"


def notice_sender(parts: Parts, *, clock: Callable[[], datetime]) -> Callable[[], Awaitable[None]]:
    """What sends the mail the pages and Slack queue (confirmations, fresh links) at once,
    through the wired channels, one drain at a time; the daemon's tick would send it
    anyway. It takes that mail alone: the digests queued meanwhile are the senders'."""
    lock = asyncio.Lock()

    async def send() -> None:
        if NOTICE_CHANNEL not in parts.channels:
            return
        async with lock:
            await drain(
                parts.store,
                parts.channels,
                clock=clock,
                retry=parts.retry,
                only=(NOTICE_CHANNEL,),
            )

    return send


class Manager(Destinations, Ratings, Rules):
    """The subscription changes the web pages make, over the wired `parts` (the store, the
    link signer, each channel kind's settings), as the site's `choices` allow."""

    def __init__(
        self, choices: SiteChoices, parts: Parts, *, clock: Callable[[], datetime]
    ) -> None:
        if parts.signer is None:
            raise ValueError("the pages need [web] public_url and secret_key_env")
        self.choices = choices
        self.parts = parts
        self.store = parts.store
        self.signer: LinkSigner = parts.signer
        self.clock = clock

    # -- who ---------------------------------------------------------------------------------

    def subscriber(self, subscriber_id: int) -> Subscriber | None:
        """The stored subscriber with this id (config-file ones included), active or not:
        one lookup (a made-up id in a link costs a query, not everyone's load)."""
        row = self.store.subscribers.get(subscriber_id)
        return self.parts.stored(row) if row else None

    def open(self, purpose: Purpose | Standing, token: str) -> Subscriber | Refused:
        """The subscriber a link names, if the link is genuine, in date, and still theirs
        (made for the address they have now)."""
        if purpose == "feedback":
            link = self.open_feedback(token)
            return link.subscriber if isinstance(link, FeedbackLink) else link
        if purpose == "rate":
            rating = self.open_rating(token)
            return rating.subscriber if isinstance(rating, RatingLink) else rating
        if purpose == "feed" or purpose == "archive":
            return self.open_standing(purpose, token)
        found = self.signer.read(purpose, token, now=self.clock())
        if isinstance(found, TokenProblem):
            whose = None
            if found.visitor is not None:
                whose = self._owner(found.visitor, purpose)
            return Refused(found.reason, whose)
        owner = self._owner(found, purpose)
        return owner if owner is not None else Refused("gone")

    def open_feedback(self, token: str) -> FeedbackLink | Refused:
        """The verdict a 👍 / 👎 link records, and for whom, if the link is genuine, in date
        and still theirs. A link naming a subscriber not stored is "forged", as one whose
        signature is wrong: it cannot be checked, and answering otherwise would tell a
        stranger which ids exist."""
        found = self.signer.read_feedback(token, now=self.clock(), owner=self.subscriber)
        if found is None:
            return Refused("forged")
        if isinstance(found, TokenProblem):
            whose = self._owner(found.visitor) if found.visitor is not None else None
            return Refused(found.reason, whose)
        owner = self._owner(found)
        if owner is None or found.paper is None or found.verdict is None:
            return Refused("gone")
        return FeedbackLink(owner, found.paper, found.verdict)

    def open_rating(self, token: str) -> RatingLink | Refused:
        """The digest an email's rating link opens, and for whom (`Ratings.rating_link`)."""
        found = self.rating_link(token)
        return found if isinstance(found, RatingLink) else Refused(*found)

    def open_standing(self, purpose: Standing, token: str) -> Subscriber | Refused:
        """Whose feed or archive a standing link opens (it never expires); "forged" when the
        subscriber it names is not stored (as for a wrong signature: see `open_feedback`),
        "gone" when it was made for another address; "stopped" while they are unsubscribed
        (it works again if they resume)."""
        looked_up: dict[int, Subscriber | None] = {}

        def lookup(subscriber_id: int) -> Subscriber | None:
            looked_up[subscriber_id] = self.subscriber(subscriber_id)
            return looked_up[subscriber_id]

        found = self.signer.read_standing(purpose, token, owner=lookup)
        if found is None:
            return Refused("forged")
        if isinstance(found, TokenProblem):
            return Refused(found.reason)
        owner = looked_up.get(found.subscriber_id)
        if owner is None or not found.belongs_to(owner):
            return Refused("gone")
        return owner if owner.active else Refused("stopped", owner)

    def _owner(self, visitor: Visitor, purpose: str = "") -> Subscriber | None:
        sub = self.subscriber(visitor.subscriber_id)
        if sub is None or visitor.belongs_to(sub):
            return sub
        # A confirmation link mailed to the address that waits opens as that address's; one
        # mailed to an address asked for before it opens as no one's.
        waiting = awaiting(sub)
        return waiting if purpose == "confirm" and visitor.belongs_to(waiting) else None

    def link(self, purpose: Purpose, sub: Subscriber) -> str:
        return self.signer.url(purpose, sub, now=self.clock())

    # -- unsubscribe, resume -----------------------------------------------------------------

    def unsubscribe(self, sub: Subscriber) -> str:
        """Stop the digests at once (RFC 8058 one-click, or the page's button). A database
        subscriber who also gets Slack digests stops only the email ones (the link came in
        an email); otherwise the subscriber stops. Returns what stopped: "email" or "all"."""
        targets = subscriber_targets(sub, self.parts.settings)
        others = any(target.kind != "email" for target in targets)
        if sub.origin == "database" and sub.email and sub.email_confirmed and others:
            self.store.subscribers.stop_email(sub.name)
            log.info("%s stopped their email digests from a link", sub.name)
            return "email"
        self.store.subscribers.set_active(sub.name, False, now=self.clock())
        log.info("%s unsubscribed from a link", sub.name)
        return "all"

    def pause(self, sub: Subscriber) -> None:
        """Stop every digest until `resume` (the manage page's button): by email, Slack and
        each destination alike, the address staying confirmed. Not `unsubscribe`, which
        stops only the email of a subscriber who gets digests elsewhere too."""
        self.store.subscribers.set_active(sub.name, False, now=self.clock())
        log.info("%s paused their digests from the manage page", sub.name)

    def resume(self, sub: Subscriber) -> None:
        """Undo an unsubscribe. The next digest comes at the next due time of the schedule
        (at once, if one passed meanwhile), with the papers not yet received within its
        window (`[digest] window_days`): never one twice, but those of a longer absence
        are left out. Email digests stopped alone come back only through a new confirmation
        (`send_notice("confirm")`): a link is no proof that its bearer owns the address."""
        self.store.subscribers.set_active(sub.name, True, now=self.clock())

    def _editable(self, sub: Subscriber) -> None:
        if sub.origin == "config":
            raise StoreError(
                "this subscription is kept in this site's own settings (its config file)",
                hint="only whoever runs this paperbell site can change it, in that file",
            )

    # -- settings ----------------------------------------------------------------------------

    def change_settings(self, sub: Subscriber, values: dict[str, str]) -> list[str]:
        """Set schedule, day, time, timezone, email_format, abstracts, long_emails ("parts"
        or "one": a digest too long for one email), max_papers (how many
        papers an email shows), summaries ("on" or "off") and language (a tag; "none" or
        English: English only); the problems, if any (then nothing changes)."""
        self._editable(sub)
        wanted = {k: v.strip() for k, v in values.items() if v is not None}
        settings, problems = subscriber_settings(sub.name, wanted)
        if problems:
            return problems
        # The slot already handled stays as it is: a new time or day whose latest slot has
        # passed sends at the next tick (only papers not sent yet), and none is skipped.
        self.store.subscribers.set_schedule(sub.name, **settings)
        return []

    # -- 👍 / 👎 -------------------------------------------------------------------------------

    def feedback(self, sub: Subscriber) -> list[Feedback]:
        """The subscriber's verdicts, oldest first."""
        return self.store.feedback.of(sub.id) if sub.id is not None else []

    def feedback_on(self, sub: Subscriber, key: str) -> Feedback | None:
        """The subscriber's verdict on the paper with key `key`, if any."""
        return next((f for f in self.feedback(sub) if f.key == key), None)

    def paper(self, key: str) -> Paper | None:
        """The stored paper with key `key` (None: not stored, or no longer)."""
        return self.store.papers.by_id([key]).get(key)

    def record_feedback(
        self, sub: Subscriber, key: str, verdict: Verdict, *, via: FeedbackVia
    ) -> Feedback:
        """Record `verdict` on the paper `key` (replacing an earlier verdict on it), with the
        text the ranking reads: its title and abstract from the store ("" when it is not
        stored: the ranking looks it up). The same verdict again changes nothing (a link
        clicked twice, or a scanner's and then its reader's click)."""
        if sub.id is None:
            raise StoreError(f"{sub.name} is not stored")
        earlier = self.feedback_on(sub, key)
        if earlier is not None and earlier.verdict == verdict and earlier.via not in DECLARED_VIA:
            return earlier
        paper = self.paper(key)
        if paper is not None:
            title, text = paper.title, paper_text(paper)
        else:  # kept from an earlier verdict on it, if there was one
            title = earlier.title if earlier else ""
            text = earlier.text if earlier else ""
        given = Feedback(
            key=key, verdict=verdict, via=via, title=title, text=text, created=self.clock()
        )
        self.store.feedback.set(sub.id, given)
        log.info("%s: %s on %s (%s)", sub.name, verdict, key, via)
        return given

    def undo_feedback(self, sub: Subscriber, key: str, verdict: Verdict) -> Feedback | None:
        """Take back `verdict` on `key`, if it is still the one recorded (a 👍 undone after a
        later 👎 on the same paper leaves the 👎): the verdict it replaced stands again (a
        👎 clicked before it, the config file's), else none. The verdict that stands now."""
        if sub.id is not None and self.store.feedback.take_back(sub.id, key, verdict):
            log.info("%s: took back %s on %s", sub.name, verdict, key)
        return self.feedback_on(sub, key)

    def remove_feedback(self, sub: Subscriber, key: str) -> bool:
        """Remove the verdict on `key` (the manage page's button). Verdicts from the config
        file or a library file stay: they are changed there."""
        earlier = self.feedback_on(sub, key)
        if earlier is None or earlier.via in DECLARED_VIA or sub.id is None:
            return False
        return self.store.feedback.remove(sub.id, key)

    # -- mail on request ---------------------------------------------------------------------

    def send_notice(self, kind: NoticeKind, sub: Subscriber, *, origin: str = "") -> bool:
        """Queue a confirmation or fresh-link email to the subscriber's address: at most one
        of each kind a day (a second ask the same day sends nothing new). False when there is
        no address or no email section."""
        email = self.parts.settings.get("email")
        if not sub.email or sub.id is None or email is None:
            return False
        now = self.clock()
        purpose: Purpose = "confirm" if kind == "confirm" else "manage"
        days = int(self.signer.max_age[purpose].total_seconds() // 86400)
        notice_id = f"{kind}-{sub.id}-{now:%Y%m%d%H%M%S}"
        message = build_notice(
            kind,
            email.message,
            to=sub.email,
            url=self.link(purpose, sub),
            days=days,
            subscriber_name=sub.name,
            origin=origin,
            notice_id=notice_id,
            now=now,
            language=sub.language,
        )
        queued = self.store.outbox.enqueue(
            sub.id,
            channel=NOTICE_CHANNEL,
            period=f"{kind}:{mailbox_tag(sub.email)}:{now:%Y-%m-%d}",
            digest_id=notice_id,
            recipient=sub.email,
            payload=bytes(message),
            sent=[],
            now=now,
        )
        return queued is not None

    def confirm(self, sub: Subscriber) -> bool:
        """The address's owner opened the confirmation link: mail may go to it now. It
        also lifts a pause of the email by bounces or a complaint: the link arrived there,
        and its owner asked for the digests again."""
        if not sub.email:
            return False
        confirmed = self.store.subscribers.confirm_email(sub.id or 0, sub.email)
        if confirmed and sub.id is not None:
            self.store.targets.resume(sub.id, "email")
        return confirmed

    @property
    def can_mail(self) -> bool:
        """Whether there is an [email] section: without one no confirmation can be mailed."""
        return self.parts.settings.get("email") is not None

    def ask_email(self, sub: Subscriber, email: str, *, origin: str) -> bool:
        """Give a (Slack) subscriber an address, unconfirmed, and mail it the confirmation; a
        confirmed address keeps the digests until then (`Subscribers.set_email`)."""
        self._editable(sub)
        self.store.subscribers.set_email(sub.name, email, confirmed=False)
        fresh = self.subscriber(sub.id or 0)
        return fresh is not None and self.send_notice("confirm", awaiting(fresh), origin=origin)

    # -- sign-up -----------------------------------------------------------------------------

    def signup_problems(self, email: str, rule: str) -> list[str]:
        problems = subscriber_problems(name="signup", email=email, rules=["placeholder"])
        problems = [p.partition(": ")[2] or p for p in problems]
        domains = self.choices.signup_domains
        domain = email.rpartition("@")[2].lower()
        if not problems and domains and domain not in domains:
            problems.append(f"sign-up is open to addresses at {', '.join(domains)}")
        return problems

    def signup(self, email: str, rule: str) -> None:
        """A new subscriber from the sign-up page, unconfirmed, with a confirmation mail; an
        address already subscribed gets its manage link instead (the page says the same in
        both cases, so it does not tell who is subscribed)."""
        email = email.strip()
        if self._by_email(email) is None:
            self._add_signed_up(email, rule.strip())
        sub = self._by_email(email)
        if sub is None:
            return
        if sub.email_confirmed:
            self.send_notice("link", sub)
        else:
            self.send_notice("confirm", sub, origin="from the sign-up page")

    def _add_signed_up(self, email: str, rule: str) -> None:
        """Add the sign-up's subscriber, unconfirmed, unless another sign-up of its mailbox
        added one since it was looked for (a double click): theirs is the one."""
        add = partial(
            self.store.subscribers.add,
            email=email,
            rules=[rule],
            now=self.clock(),
            email_confirmed=False,
            only_new=True,
            mailbox=mailbox_tag,
        )
        # Named after the address's local part: a name shows on pages a forwarded link may
        # open, the address does not.
        with contextlib.suppress(AddressTaken):
            under_free_name(self.parts, email.partition("@")[0], add, fallback="subscriber")

    def _everyone(self) -> Sequence[Subscriber]:
        return self.store.subscribers.all(
            self.parts.declared(), include_inactive=True, defaults=self.parts.defaults
        )

    def _by_email(self, email: str) -> Subscriber | None:
        """The subscriber with this mailbox (however written: case, "+tags")."""
        wanted = mailbox_tag(email)
        return next(
            (s for s in self._everyone() if s.email and s.id and mailbox_tag(s.email) == wanted),
            None,
        )
