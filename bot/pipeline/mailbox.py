"""The bounce mailbox read by the daemon: every `[bounces] every_minutes`, `paperbell run`
reads the mailbox `[bounces] imap_url` names (what `paperbell bounce --imap` does from cron),
while it leads.

imaplib blocks, so each read runs in a thread: the event loop (ticks, the web app) never
waits for the IMAP server. A read has a deadline (`READ_SECONDS`): past it, no further
message is taken (the rest wait for the next read), and each IMAP command has the section's
`timeout`. A read that fails (the server down, a bad login) is logged once with a hint,
counted, and tried again at the next time; it never stops the daemon. Wiring only: what a
message does is bot.pipeline.bounces's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from bot.bounces.imap import BounceMailbox, ImapSettings
from bot.core.errors import PaperbellError
from bot.core.plurals import plural
from bot.core.verp import MessageIds, Verp
from bot.pipeline.bounces import UNTOUCHED, BounceOutcome, read_mailbox
from bot.store import Store

log = logging.getLogger(__name__)

READ_SECONDS = 300.0  # a read takes no new message past this (one command: [bounces] timeout)


@dataclass
class MailboxCounters:
    """What the daemon's reads of the bounce mailbox came to (for /metrics)."""

    reads: dict[str, int] = field(default_factory=dict)  # "ok" / "error"
    messages: dict[str, int] = field(default_factory=dict)  # by action
    last_read: datetime | None = None
    last_error: str | None = None


class MailboxReader:
    """Reads the bounce mailbox at `settings` every `every` seconds (`run`), each read in a
    thread (`read`), into `store`; `verp` and `message_ids` tie a bounce to its digest,
    `bounce_limit` refusals in a row pause (`bot.pipeline.bounces`). Made from the config
    by `bot.pipeline.wiring.mailbox_reader`."""

    def __init__(
        self,
        settings: ImapSettings,
        store: Store,
        *,
        every: float,
        verp: Verp | None,
        message_ids: MessageIds | None,
        bounce_limit: int,
        clock: Callable[[], datetime],
        deadline: float = READ_SECONDS,
    ) -> None:
        self.settings = settings
        self.every = every
        self.store = store
        self.clock = clock
        self.deadline = deadline
        self.verp = verp
        self.message_ids = message_ids
        self.bounce_limit = bounce_limit
        self.counters = MailboxCounters()
        self.stopping = False
        self._failing = False
        self._stop = asyncio.Event()

    def _read(self, until: float) -> list[BounceOutcome]:
        """One read of the mailbox (blocking: in a thread)."""
        with BounceMailbox(self.settings) as mailbox:
            return read_mailbox(
                mailbox,
                store=self.store,
                verp=self.verp,
                bounce_limit=self.bounce_limit,
                now=self.clock(),
                should_stop=lambda: self.stopping or time.monotonic() > until,
                message_ids=self.message_ids,
            )

    async def read(self) -> list[BounceOutcome] | None:
        """Read the mailbox once, in a thread; None when it could not be read (logged, the
        first of a run of failures as an error with its hint, and counted)."""
        try:
            outcomes = await asyncio.to_thread(self._read, time.monotonic() + self.deadline)
        except Exception as exc:  # whatever it was: logged, counted, tried again next time
            self._failed(exc)
            return None
        self.counters.reads["ok"] = self.counters.reads.get("ok", 0) + 1
        self.counters.last_read, self.counters.last_error = self.clock(), None
        if self._failing:
            self._failing = False
            log.info("bounce mailbox %s: read again", self.settings.where)
        for outcome in outcomes:
            key = outcome.action
            self.counters.messages[key] = self.counters.messages.get(key, 0) + 1
            log.log(
                logging.WARNING if key in UNTOUCHED else logging.INFO,
                "bounce: %s: %s",
                key,
                outcome.line,
            )
        if outcomes:
            left = sum(o.action in UNTOUCHED for o in outcomes)
            log.info(
                "bounce mailbox %s: %s read, %d left in it",
                self.settings.where,
                plural(len(outcomes), "message"),
                left,
            )
        return outcomes

    def _failed(self, exc: Exception) -> None:
        self.counters.reads["error"] = self.counters.reads.get("error", 0) + 1
        said = str(exc) if isinstance(exc, PaperbellError) else f"{type(exc).__name__}: {exc}"
        self.counters.last_error = said.splitlines()[0] if said else type(exc).__name__
        if self._failing:  # said already: once per run of failures
            log.debug("bounce mailbox: still failing: %s", self.counters.last_error)
            return
        self._failing = True
        every = f"{self.every / 60:g} min"
        if isinstance(exc, PaperbellError):
            log.error("%s (tried again every %s)", said, every)
        else:
            log.exception(
                "bounce mailbox %s: the read failed (tried again every %s)",
                self.settings.where,
                every,
            )

    def stop(self) -> None:
        """Stop `run`: a read under way takes no further message, a wait ends."""
        self.stopping = True
        self._stop.set()

    async def run(self, *, leading: Callable[[], bool], interval: float | None = None) -> None:
        """Read now, then every `interval` seconds (default every_minutes) while
        `leading()` (one process reads the mailbox), until `stop()`."""
        step = interval if interval is not None else self.every
        loop = asyncio.get_running_loop()
        due = loop.time()
        while not self.stopping:
            if leading():
                await self.read()
            due += step
            if due < loop.time():  # the read took longer than the interval: no burst
                due = loop.time() + step
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), due - loop.time())
