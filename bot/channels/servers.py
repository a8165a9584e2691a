"""Several SMTP relays ([[email.servers]]): one email sender over them all (`RelayPool`).

Each message goes to a relay chosen by weight (`WeightedRoundRobin`: deterministic, a relay
of weight 3 takes three for every one of weight 1, interleaved), among the relays that are
neither skipped as failing nor slowed down (every process sees those through the database:
bot.channels.limits); when none is, among them all. Each relay's share goes over its own
connection, side by side, within its own limits.

A message a relay did not take for a reason of its own (it could not be reached, refused
paperbell as it connected, asked to slow down, had no room in its limits, or refused it
with a 4xx) is tried on another relay in the same call, one it has not been tried on; a
relay that failed so is used no more in this call. A permanent refusal (5xx) of the
recipient is not tried elsewhere: it is the recipient's; nor is a message the relay may
have taken (the connection broke, or no answer came, after it went): it waits for its
retry, as with one relay. A message every relay declined
keeps the most useful of its outcomes: left queued for the earliest time a relay gave, or
else its last failure. Each message is sent at most once per call: a relay that took it is
never followed by another. Limits that cannot be read (the database is down) stop the call,
as with one relay: the messages not yet tried get no outcome and are handed back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.channels.base import OnProgress, OnSent, SendOutcome, ShouldStop
from bot.channels.email import EmailChannel, SmtpSettings
from bot.channels.limits import RelayLimiter
from bot.core.errors import StoreError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Relay:
    """One of [[email.servers]]: how to reach it, its limits (`limiter`) and its weight."""

    smtp: SmtpSettings
    weight: int = 1
    limiter: RelayLimiter | None = None

    @property
    def name(self) -> str:
        """ "host:port", as its limits are kept."""
        return f"{self.smtp.host.lower()}:{self.smtp.port}"


class WeightedRoundRobin:
    """Smooth weighted round-robin (as nginx spreads requests): at each pick, every
    candidate's current value grows by its weight, the highest is chosen (the first listed
    on a tie) and the candidates' total weight is taken from it. Over any stretch of picks
    among the same candidates, each gets its share of its weight, interleaved."""

    def __init__(self, weights: dict[str, int]) -> None:
        self.weights = dict(weights)
        self.current = dict.fromkeys(weights, 0)

    def pick(self, candidates: Sequence[str]) -> str:
        total = 0
        for name in candidates:
            self.current[name] += self.weights[name]
            total += self.weights[name]
        chosen = max(candidates, key=lambda name: self.current[name])
        self.current[chosen] -= total
        return chosen


class RelayPool:
    """Delivers digests over several SMTP relays, by weight (see the module)."""

    name = "email"

    def __init__(
        self,
        relays: Sequence[Relay],
        *,
        envelope_from: Callable[[Any], str | None] | None = None,
    ) -> None:
        if not relays:
            raise ValueError("a relay pool needs a relay")
        self.relays = list(relays)
        self.envelope_from = envelope_from
        self.order = WeightedRoundRobin({r.name: r.weight for r in self.relays})

    def load(self, payload: bytes, progress: str | None = None) -> bytes:
        return payload

    def _usable(self, closed: set[str]) -> tuple[list[Relay], list[Relay]]:
        """The relays still open in this call, and those of them to prefer (neither
        failing nor slowed down; all of them when none is)."""
        open_ = [r for r in self.relays if r.name not in closed]
        healthy = [r for r in open_ if r.limiter is None or r.limiter.healthy()]
        return open_, healthy or open_

    def _others_healthy(self, relay: Relay, closed: set[str]) -> bool:
        return any(
            r is not relay and r.name not in closed and (r.limiter is None or r.limiter.healthy())
            for r in self.relays
        )

    async def _send(
        self,
        relay: Relay,
        share: list[tuple[Any, Any]],
        on_sent: OnSent,
        closed: set[str],
        should_stop: ShouldStop | None,
        on_progress: OnProgress | None,
    ) -> tuple[Relay, EmailChannel, list[SendOutcome], bool]:
        """Send `share` through `relay`; stop it early (`diverted`: the rest are tried on
        another relay) once the relay fails or slows down while another is healthy."""
        channel = EmailChannel(relay.smtp, envelope_from=self.envelope_from, limiter=relay.limiter)
        diverted = False

        def stop() -> bool:
            nonlocal diverted
            if should_stop is not None and should_stop():
                return True
            limiter = relay.limiter
            try:
                if (
                    limiter is not None
                    and not limiter.healthy()
                    and self._others_healthy(relay, closed)
                ):
                    diverted = True
            except StoreError as exc:  # as with one relay: the rest are handed back, untried
                log.error("cannot read the relays' limits; stopping: %s", exc)
                return True
            return diverted

        outcomes = await channel.send_all(share, on_sent, should_stop=stop, on_progress=on_progress)
        return relay, channel, outcomes, diverted

    async def send_all(
        self,
        batch: Sequence[tuple[Any, Any]],
        on_sent: OnSent,
        *,
        should_stop: ShouldStop | None = None,
        on_progress: OnProgress | None = None,
    ) -> list[SendOutcome]:
        """Send every message over the relays (see the module); before each message,
        `should_stop()` may end the batch (the messages never tried get no outcome)."""
        messages = {id(item): message for item, message in batch}
        tried: dict[int, set[str]] = {id(item): set() for item, _ in batch}
        best: dict[int, SendOutcome] = {}  # a message's most useful outcome so far
        final: list[SendOutcome] = []
        closed: set[str] = set()  # relays that failed, slowed or filled in this call
        by_name = {r.name: r for r in self.relays}
        pending = [item for item, _ in batch]
        while pending:
            if should_stop is not None and should_stop():
                final += [best[id(item)] for item in pending if id(item) in best]
                break
            try:
                open_, preferred = self._usable(closed)
            except StoreError as exc:
                log.error("cannot read the relays' limits; stopping: %s", exc)
                final += [best[id(item)] for item in pending if id(item) in best]
                break
            shares: dict[str, list[tuple[Any, Any]]] = {}
            for item in pending:
                untried = tried[id(item)]
                choices = [r.name for r in preferred if r.name not in untried]
                choices = choices or [r.name for r in open_ if r.name not in untried]
                if not choices:  # every relay declined it, or is closed: its best outcome
                    if id(item) in best:  # (else never tried: no outcome, handed back)
                        final.append(best[id(item)])
                    continue
                shares.setdefault(self.order.pick(choices), []).append((item, messages[id(item)]))
            if not shares:
                break
            results = await asyncio.gather(
                *(
                    self._send(by_name[name], share, on_sent, closed, should_stop, on_progress)
                    for name, share in shares.items()
                )
            )
            pending = []
            for relay, channel, outcomes, diverted in results:
                if channel.unreachable is not None and relay.limiter is not None:
                    relay.limiter.fail(channel.unreachable)  # every process skips it a while
                if channel.unreachable is not None or diverted:
                    closed.add(relay.name)
                answered = set()
                for outcome in outcomes:
                    key = id(outcome.item)
                    answered.add(key)
                    tried[key].add(relay.name)
                    # Taken, maybe taken (its retry is the outbox's), or the recipient's
                    # refusal: never tried on another relay.
                    settled = outcome.ok or outcome.maybe_sent
                    if settled or (outcome.permanent and channel.unreachable is None):
                        final.append(outcome)
                        continue
                    if outcome.retry_at is not None:  # slowed down or full: not again here
                        closed.add(relay.name)
                    best[key] = _better(best.get(key), outcome)
                    pending.append(outcome.item)
                if diverted and not (should_stop is not None and should_stop()):
                    pending += [item for item, _ in shares[relay.name] if id(item) not in answered]
        return final


def _better(kept: SendOutcome | None, new: SendOutcome) -> SendOutcome:
    """Of two outcomes of one message declined by two relays, the one to report: queued
    for the earlier time (no attempt counted), else the later failure."""
    if kept is None or kept.retry_at is None:
        return new
    if new.retry_at is not None and new.retry_at < kept.retry_at:
        return new
    return kept
