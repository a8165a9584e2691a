"""The manage page's Apprise destinations: those a subscriber's digests go to, masked, and
the ones they add or remove there (kept in the database, never shown unmasked); and their
email, when bounces paused it (why, since when, and resuming it). A part of
`Manager` (its mixin): it asks the store and the Apprise channel kind, and decides nothing
a page shows beyond that.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from bot.channels import subscriber_targets
from bot.channels.apprise_urls import (
    Unreadable,
    destination,
    destination_channel,
    self_service_refusal,
)
from bot.core.models import Subscriber
from bot.pipeline.bounces import pause_line
from bot.pipeline.wiring import Parts
from bot.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DestinationView:
    """An Apprise destination as the manage page shows it: masked; given on the page
    (`here`: removable) or by the site; paused, or unreadable, and why."""

    channel: str
    label: str
    here: bool
    paused: str | None = None
    problem: str | None = None


class Destinations:
    """The Apprise destinations part of `Manager`."""

    parts: Parts
    store: Store
    clock: Callable[[], datetime]

    def _editable(self, sub: Subscriber) -> None:  # pragma: no cover - Manager's
        raise NotImplementedError

    def destinations(self, sub: Subscriber) -> list[DestinationView]:
        """Where the subscriber's digests go through Apprise, masked: those they gave here
        (removable), then the site's (its config file, a variable), each paused or not."""
        paused = self.store.targets.paused(sub.id) if sub.id is not None else {}
        given = (
            {destination_channel(url) for url in sub.apprise} if sub.origin == "database" else set()
        )
        return [
            DestinationView(
                target.channel,
                target.recipient,
                here=target.channel in given,
                paused=pause.reason
                if (pause := paused.get((sub.id or 0, target.channel)))
                else None,
                problem=target.problem,
            )
            for target in subscriber_targets(sub, self.parts.settings)
            if target.kind == "apprise"
        ]

    def add_destination(self, sub: Subscriber, url: str) -> str | None:
        """Keep an Apprise URL the subscriber typed; the problem, if any (then nothing
        changes): one Apprise cannot read, or one a subscriber may not give (a kind that is
        no web service, a host not on the public internet: `self_service_refusal`). Its
        secret stays in the database, shown masked only."""
        self._editable(sub)
        try:
            found = destination(url)
            refusal = self_service_refusal(url, self.parts.settings["apprise"].reach)
        except Unreadable as exc:
            return f"Apprise cannot read that URL ({exc})"
        if refusal is not None:
            log.info("%s: a destination given on the page was refused: %s", sub.name, refusal)
            return refusal
        assert sub.id is not None
        if any(d.channel == found.channel for d in self.destinations(sub)):
            return f"your digests go to {found.label} already"
        if not self.store.targets.add_destination(
            sub.id, found.channel, url.strip(), now=self.clock()
        ):
            return "you have as many destinations as one subscriber may: remove one first"
        log.info("%s added an Apprise destination: %s", sub.name, found.label)
        return None

    def email_pause(self, sub: Subscriber) -> str | None:
        """Why the subscriber's email is paused, if it is (bounces, a complaint): "email
        paused since 3 Dec: mailbox unknown (5.1.1)"."""
        if sub.id is None:
            return None
        pause = self.store.targets.paused(sub.id).get((sub.id, "email"))
        return pause_line(pause) if pause is not None else None

    def resume_email(self, sub: Subscriber) -> bool:
        """Send email digests again after a bounce paused them (the subscriber says the
        mailbox works again); False if they were not paused."""
        if sub.id is None:
            return False
        resumed = bool(self.store.targets.resume(sub.id, "email"))
        if resumed:
            log.info("%s resumed their email digests after a bounce", sub.name)
        return resumed

    def remove_destination(self, sub: Subscriber, channel: str) -> bool:
        """Forget a destination the subscriber gave here (its history stays)."""
        self._editable(sub)
        assert sub.id is not None
        return self.store.targets.remove_destination(sub.id, channel)
