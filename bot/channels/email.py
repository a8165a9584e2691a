"""The email channel: sends rendered digests over SMTP (aiosmtplib), one connection a batch.

Owns the SMTP conversation and its failure modes (`EmailChannel`), and the kind's entry in
the channel registry (`EmailKind`: a subscriber's confirmed address is its target, the
digest rendered by `bot.render.email`, [email] needed by whoever has an address). The
sender does not render: it gets finished messages and reports each one's fate through
`on_sent` and its outcomes; the database it touches only through the relay's limiter
(`bot.channels.limits`), which keeps the pace shared by every worker.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email import message_from_bytes, policy
from email.message import EmailMessage, Message
from email.parser import HeaderParser
from pathlib import Path
from typing import Any, Literal, cast

import aiosmtplib

from bot.channels.base import (
    Channel,
    OnProgress,
    OnSent,
    RenderContext,
    Rendered,
    SendOutcome,
    ShouldStop,
    Target,
    describe,
    failed,
    notify,
)
from bot.channels.limits import RelayLimiter, is_slow_down
from bot.channels.registry import CHANNEL_KINDS, ChannelKind, kind_of, register
from bot.core.errors import DeliveryError, StoreError, unexpected
from bot.core.mail import MAIL_POLICY, enhanced_status
from bot.core.models import Digest, Subscriber
from bot.render.email import EmailSettings, render_parts
from bot.render.message import build_message_bytes

log = logging.getLogger(__name__)

CONNECT_HINT = (
    "check [email] host, port and security (or those of its [[email.servers]] entry); "
    "is the server running?"
)


@dataclass(frozen=True)
class SmtpSettings:
    host: str
    port: int
    security: Literal["starttls", "tls", "none"] = "starttls"
    username: str | None = None
    password: str | None = None
    timeout: float = 30.0


@dataclass(frozen=True)
class EmailChannelSettings:
    """The email kind's settings from [email]: how to reach the SMTP server, and how its
    messages are built (sender, list id)."""

    smtp: SmtpSettings
    message: EmailSettings
    # The envelope sender (MAIL FROM) of each message, from what the caller tracks it by
    # (None: the From address): a VERP address naming the message ([email] bounce_address).
    envelope_from: Callable[[Any], str | None] | None = None
    # The relay's limits ([email] max_per_second ...) and its "slow down" answers, shared
    # by every process through the database (None: sent as fast as the server takes them).
    limiter: RelayLimiter | None = None
    # [[email.servers]]: the sender over several relays (bot.channels.servers.RelayPool),
    # used in place of one built from `smtp` and `limiter`.
    pool: Channel | None = None


@register("email")
class EmailKind(ChannelKind):
    """Digests by email: to a subscriber's confirmed address, one message each."""

    pauses = "subscriber"  # an address that keeps bouncing
    file_suffix = ".eml"

    @classmethod
    def config_problems(cls, raw: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
        """A subscriber with an address needs [email] (read from the raw data, so that it
        is reported even when a section fails the schema)."""
        problems: list[str] = []
        subscribers = raw.get("subscribers")
        if not isinstance(subscribers, list) or isinstance(raw.get("email"), Mapping):
            return problems
        for index, sub in enumerate(subscribers):
            if isinstance(sub, Mapping) and sub.get("email"):
                name = sub.get("name") if isinstance(sub.get("name"), str) else None
                problems.append(
                    f"subscribers[{index}].email: an [email] section is needed to send "
                    f"{name or f'subscriber {index}'}'s digests by email"
                )
        return problems

    @classmethod
    def targets(cls, subscriber: Subscriber, settings: Any) -> list[Target]:
        """The subscriber's address, once confirmed (one learnt from Slack waits for it)."""
        if not (subscriber.email and subscriber.email_confirmed):
            return []
        return [Target("email", subscriber.email, f"<{subscriber.email}>")]

    @classmethod
    def render(cls, digest: Digest, target: Target, context: RenderContext) -> Rendered:
        """The digest as the email message it is sent as, and the digest that message
        shows (the papers past what one email holds are left out: `render_digest`); or,
        with full abstracts, as the numbered emails that hold it whole (`render_parts`),
        each with its own links (its archive page, its papers' 👍 / 👎)."""
        settings = context.settings.get("email")
        if not isinstance(settings, EmailChannelSettings):
            raise ValueError("no [email] section: emails cannot be built")
        links: dict[str, Any] = {}

        def links_of(shown: Digest) -> Any:
            if shown.digest_id not in links:
                papers = [item.paper.id for item in shown.items]
                links[shown.digest_id] = context.links(shown.subscriber, papers, shown.digest_id)
            return links[shown.digest_id]

        messages = []
        for part in render_parts(digest, settings.message, links_of=links_of):
            shown = part.digest or digest
            payload = build_message_bytes(
                shown, settings.message, now=context.now, links=links_of(shown), rendered=part
            )
            messages.append(Rendered(shown, payload))
        first, *more = messages
        return Rendered(first.digest, first.payload, more=tuple(more))

    @classmethod
    def sender(cls, settings: Any) -> Channel | None:
        if not isinstance(settings, EmailChannelSettings):
            return None
        if settings.pool is not None:
            return settings.pool
        return EmailChannel(
            settings.smtp, envelope_from=settings.envelope_from, limiter=settings.limiter
        )


class EmailChannel:
    """Delivers digests to an SMTP server."""

    name = "email"

    def __init__(
        self,
        settings: SmtpSettings,
        *,
        envelope_from: Callable[[Any], str | None] | None = None,
        limiter: RelayLimiter | None = None,
    ) -> None:
        self.settings = settings
        self.envelope_from = envelope_from
        self.limiter = limiter
        # Why the server could not be used in the last batch (None: it could): it could
        # not be reached, or refused paperbell as it connected.
        self.unreachable: str | None = None

    def load(self, payload: bytes, progress: str | None = None) -> bytes:
        """The queued message: its bytes, sent as they were built (`_send`)."""
        return payload

    def _client(self) -> aiosmtplib.SMTP:
        s = self.settings
        return aiosmtplib.SMTP(
            hostname=s.host,
            port=s.port,
            use_tls=s.security == "tls",
            start_tls=s.security == "starttls",
            timeout=s.timeout,
        )

    async def _connect(self) -> aiosmtplib.SMTP:
        s = self.settings
        smtp = self._client()
        where = f"{s.host}:{s.port}"
        try:
            await smtp.connect()
            if s.username:
                await smtp.login(s.username, s.password or "")
        except aiosmtplib.SMTPAuthenticationError as exc:
            smtp.close()
            # Not the recipients' fault, so never a bounce: their digests wait for their
            # retries while the operator fixes the login.
            raise DeliveryError(
                f"the SMTP server {where} refused the login for {s.username!r}: {exc.message}",
                hint="check email.username and the password variable named in password_env",
            ) from None
        except aiosmtplib.SMTPResponseException as exc:
            if self.limiter is not None and is_slow_down(exc.code, exc.message):
                smtp.close()
                raise SlowDown(f"{exc.code} {exc.message}") from None
            smtp.close()
            raise DeliveryError(
                f"cannot connect to the SMTP server {where}: {describe(exc)}",
                hint=CONNECT_HINT,
            ) from None
        except (aiosmtplib.SMTPException, OSError) as exc:
            smtp.close()
            raise DeliveryError(
                f"cannot connect to the SMTP server {where}: {describe(exc)}",
                hint=CONNECT_HINT,
            ) from None
        return smtp

    async def send_all(
        self,
        batch: Sequence[tuple[Any, bytes]],
        on_sent: OnSent,
        *,
        should_stop: ShouldStop | None = None,
        on_progress: OnProgress | None = None,
    ) -> list[SendOutcome]:
        """Send every message (its bytes as built) over one connection;
        reconnect once if the server drops it. An item is what the caller tracks the
        message by; it comes back in the outcome.
        Before each message, `should_stop()` may end the batch (a daemon shutting down):
        the messages not tried get no outcome."""
        outcomes: list[SendOutcome] = []
        self.unreachable = None
        if not batch:
            return outcomes
        smtp: aiosmtplib.SMTP | None = None
        limiter = self.limiter
        try:
            for index, (item, message) in enumerate(batch):
                if should_stop is not None and should_stop():
                    break
                if limiter is not None:
                    try:
                        later = await limiter.acquire()
                    except StoreError as exc:  # the rest are handed back, untried
                        log.error("cannot take a place in the relay's limits: %s", exc)
                        break
                    if later is not None:
                        # No room in the relay's limits before `later`: the rest wait.
                        why = f"waiting for the relay's limits ({limiter.describe()})"
                        outcomes += [waiting(i, later, why) for i, _ in batch[index:]]
                        break
                attempt = 0
                dropped: str | None = None  # why the connection dropped during this message
                while True:
                    attempt += 1
                    try:
                        if smtp is None:
                            try:
                                smtp = await self._connect()
                            except (DeliveryError, SlowDown):
                                if dropped is not None:  # it may have gone before the drop
                                    why = f"server disconnected: {dropped}"
                                    outcomes.append(maybe_sent(item, why))
                                raise
                        mail_from = self.envelope_from(item) if self.envelope_from else None
                        errors, _ = await _send(smtp, message, mail_from)
                    except aiosmtplib.SMTPServerDisconnected as exc:
                        smtp, dropped = None, str(exc)
                        if attempt < 2:
                            log.warning("SMTP server disconnected (%s); reconnecting", exc)
                            continue
                        outcomes.append(maybe_sent(item, f"server disconnected: {exc}"))
                        break
                    except aiosmtplib.SMTPRecipientsRefused as exc:
                        codes = [e.code for e in exc.recipients]
                        text = "; ".join(
                            f"{e.recipient}: {e.code} {e.message}" for e in exc.recipients
                        )
                        slow = all(is_slow_down(e.code, e.message) for e in exc.recipients)
                        if limiter is not None and exc.recipients and slow:
                            later = limiter.slow_down()
                            smtp = _still_open(smtp)
                            if any(e.code == 421 for e in exc.recipients):  # the server's
                                outcomes.append(waiting(item, later, f"slow down: {text}"))
                            else:
                                # Her server's answer too (a greylisting that never
                                # passes): a counted retry, given up in the end.
                                outcomes.append(failed(item, f"slow down: {text}"))
                        else:
                            refused = min(codes) >= 500 and not any(
                                refuses_paperbell(e.message) for e in exc.recipients
                            )
                            outcomes.append(failed(item, f"recipient refused: {text}", refused))
                        break
                    except aiosmtplib.SMTPResponseException as exc:
                        answer = f"{exc.code} {exc.message}"
                        if limiter is not None and is_slow_down(exc.code, exc.message):
                            outcomes.append(
                                waiting(item, limiter.slow_down(), f"slow down: {answer}")
                            )
                            smtp = _still_open(smtp)
                        else:
                            # A refused MAIL FROM refuses paperbell, not the recipient: a
                            # retry, never a bounce that would pause her.
                            ours = isinstance(exc, aiosmtplib.SMTPSenderRefused)
                            ours = ours or refuses_paperbell(exc.message)
                            outcomes.append(failed(item, answer, exc.code >= 500 and not ours))
                        break
                    except ValueError as exc:  # no usable envelope: this message can never go
                        outcomes.append(failed(item, f"message not sendable: {exc}", True))
                        break
                    except (aiosmtplib.SMTPException, OSError) as exc:
                        # A timeout or a broken connection mid-message: this digest is not
                        # known to be delivered; drop the connection and go on with a new one.
                        if smtp is not None:
                            smtp.close()
                        smtp = None
                        outcomes.append(maybe_sent(item, f"SMTP error: {describe(exc)}"))
                        break
                    except (DeliveryError, SlowDown):  # the server's: for the whole batch
                        raise
                    except Exception as exc:  # a bug must not leave the rest of the batch unsent
                        log.exception("email digest failed unexpectedly")
                        if smtp is not None:
                            smtp.close()
                        smtp = None
                        outcomes.append(maybe_sent(item, f"unexpected error: {unexpected(exc)}"))
                        break
                    else:
                        if errors:  # some recipients refused; ours is the only one
                            text = "; ".join(
                                f"{r}: {e.code} {e.message}" for r, e in errors.items()
                            )
                            outcomes.append(failed(item, f"recipient refused: {text}", True))
                        else:
                            await notify(on_sent, item)
                            outcomes.append(SendOutcome(item=item, ok=True))
                            if limiter is not None:
                                limiter.answered()
                        break
        except asyncio.CancelledError:
            # Stopped mid-batch (a daemon past its grace): a QUIT's answer from a hung server
            # could take the whole timeout, so the connection is dropped at once.
            if smtp is not None:
                smtp.close()
            smtp = None
            raise
        except SlowDown as exc:
            # The relay answered "slow down" on connecting: every digest not yet sent waits.
            later = cast(RelayLimiter, limiter).slow_down()
            done = {id(o.item) for o in outcomes}
            outcomes += [
                waiting(pending, later, f"slow down: {exc}")
                for pending, _ in batch
                if id(pending) not in done
            ]
        except DeliveryError as exc:
            # The server cannot be reached (or refuses us): every digest not yet sent fails
            # with the same, actionable reason; nothing is recorded for them.
            self.unreachable = str(exc)
            done = {id(o.item) for o in outcomes}
            for pending, _ in batch:
                if id(pending) not in done:
                    outcomes.append(failed(pending, str(exc), not exc.transient))
        finally:
            if smtp is not None and smtp.is_connected:
                try:
                    await smtp.quit()
                except (aiosmtplib.SMTPException, OSError):
                    smtp.close()
        return outcomes


class SlowDown(Exception):
    """The relay answered "slow down" (421) as paperbell connected."""


def waiting(item: Any, later: datetime, why: str) -> SendOutcome:
    """Not sent and not failed: left queued until `later` (the relay's limits)."""
    return SendOutcome(item=item, ok=False, error=why, retry_at=later)


# What a relay says when its policy, not the recipient's mailbox, stops a message: it does
# not relay for paperbell, or its account may send only to verified addresses (a sandbox).
_POLICY_WORDS = ("relay access denied", "relaying denied", "unable to relay", "not verified")


def refuses_paperbell(answer: str) -> bool:
    """Whether a 5xx answer to a recipient or a message is the relay's policy toward
    paperbell (RFC 3463's 5.7.x, "Relay access denied", an unverified address in Amazon
    SES's sandbox), not her mailbox refusing: the operator's to fix, so a retry that never
    counts toward pausing her."""
    status = enhanced_status(answer)
    if status is not None:  # it says what it means: subject 7 is security or policy
        return status.split(".")[1] == "7"
    lowered = answer.lower()
    return any(words in lowered for words in _POLICY_WORDS)


def maybe_sent(item: Any, why: str) -> SendOutcome:
    """A transient failure that may have delivered the message all the same: the server
    dropped the connection, or did not answer in time, once the message may have gone."""
    return SendOutcome(item=item, ok=False, error=why, maybe_sent=True)


def _still_open(smtp: aiosmtplib.SMTP | None) -> aiosmtplib.SMTP | None:
    """The connection, unless the server closed it (a 421 does)."""
    return smtp if smtp is not None and smtp.is_connected else None


async def _send(smtp: aiosmtplib.SMTP, message: bytes, mail_from: str | None = None) -> Any:
    """Send one message as it was built: its bytes, unchanged (they were written with
    `MAIL_POLICY`; aiosmtplib's `send_message` would write them again with
    `email.policy.SMTP`, whose folding of a non-ASCII subject Python 3.11 gets wrong: see
    bot.core.mail). The envelope is the From and To addresses, read from the headers alone;
    an address that is not ASCII needs SMTPUTF8, asked for (a server without it:
    ValueError, never sendable there). A message without one From and a To goes through
    `send_message`, which finds its envelope as it can. `mail_from`, when given, is the
    envelope sender in place of the From address."""
    end = message.find(b"\r\n\r\n")
    head = message if end < 0 else message[: end + 2]
    headers = _HEADERS.parsestr(head.decode("utf-8", "surrogateescape"))
    sender = _envelope(headers, "From")
    recipients = _envelope(headers, "To")
    if len(sender) == 1 and recipients:
        if all(a.isascii() for a in (*sender, *recipients)):
            return await smtp.sendmail(mail_from or sender[0], recipients, message)
        try:
            return await smtp.sendmail(
                mail_from or sender[0], recipients, message, mail_options=["SMTPUTF8"]
            )
        except aiosmtplib.SMTPNotSupported as exc:  # asked before MAIL: nothing sent
            raise ValueError(f"an address that is not ASCII: {exc}") from None
    whole = message_from_bytes(message, policy=MAIL_POLICY)
    return await smtp.send_message(cast(EmailMessage, whole), sender=mail_from)


# The envelope is read from the headers as plain strings (compat32: the addresses are all
# it needs, no header objects), decoded as UTF-8 (an address that is not ASCII, RFC 6532).
_HEADERS = HeaderParser(policy=policy.compat32)


def _envelope(headers: Message, name: str) -> list[str]:
    """The addresses of every `name` header (none: an empty list); an address that cannot
    be read is left out (no envelope then: the message is refused, not sent elsewhere)."""
    values = [str(value) for value in headers.get_all(name, [])]
    return [address for _, address in email.utils.getaddresses(values) if address]


def html_part(message: EmailMessage) -> str | None:
    """A message's HTML part, decoded (None: a plain-text message), to open in a browser."""
    html = message.get_body(preferencelist=("html",))
    return None if html is None else str(html.get_content())


class FileChannel:
    """Writes each digest into a folder (`digest --out DIR`): an email as .eml and its HTML
    part beside it as .html (to open in a browser), any other kind as its kind's
    `file_suffix` says (a Slack digest: the .json of its messages); sends nothing."""

    name = "file"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def load(self, payload: bytes, progress: str | None = None) -> bytes:
        return payload

    async def send_all(
        self,
        batch: Sequence[tuple[Any, bytes]],
        on_sent: OnSent,
        *,
        should_stop: ShouldStop | None = None,
        on_progress: OnProgress | None = None,
    ) -> list[SendOutcome]:
        """Write each (digest, payload); the digest's `channel` names the file's kind.
        Before each, stop if `should_stop()`, as every channel does."""
        outcomes = []
        for digest, payload in batch:
            if should_stop is not None and should_stop():
                break
            suffix = _suffix(getattr(digest, "channel", "email"))
            path = self.folder / f"{digest.subscriber.name}-{digest.digest_id}{suffix}"
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                path.write_bytes(payload)
                if suffix == ".eml":
                    message = cast(EmailMessage, message_from_bytes(payload, policy=policy.default))
                    if (html := html_part(message)) is not None:
                        path.with_suffix(".html").write_text(html, encoding="utf-8")
            except OSError as exc:
                outcomes.append(failed(digest, f"cannot write {path}: {exc.strerror}", True))
                continue
            await notify(on_sent, digest)
            outcomes.append(SendOutcome(item=digest, ok=True, where=str(path)))
        return outcomes


def _suffix(channel: str) -> str:
    """The file suffix of a digest of `channel`: its kind's (`ChannelKind.file_suffix`)."""
    registered = CHANNEL_KINDS.get(kind_of(channel))
    return registered.file_suffix if registered is not None else ".txt"
