"""The bounce mailbox over IMAP ([bounces] imap_url): its messages read one by one, and a
message that was dealt with moved aside (to `processed_folder`), the others left as they
were: not moved, not even marked read (`BODY.PEEK`).

Owns the IMAP conversation (imaplib, the standard library's client) and its failures, which
become one `DeliveryError` naming the server; nothing else. What a message says and what is
done about it is bot.bounces.report's and bot.pipeline.bounces's.
"""

from __future__ import annotations

import contextlib
import imaplib
import re
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Literal
from urllib.parse import unquote, urlsplit

from bot.core.errors import DeliveryError

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_MESSAGES = 500  # read in one go; the rest wait for the next
MAX_MESSAGE_BYTES = 10 * 1024 * 1024  # a larger one is left in the mailbox, unread


@dataclass(frozen=True)
class ImapSettings:
    """Where the bounce mailbox is: from `imap_url`, and the password (from the
    environment)."""

    host: str
    port: int
    security: Literal["tls", "starttls", "none"]
    username: str
    mailbox: str = "INBOX"
    processed_folder: str = "paperbell-processed"
    password: str | None = None
    timeout: float = 30.0

    @property
    def where(self) -> str:
        return f"{self.username}@{self.host}:{self.port}/{self.mailbox}"


def parse_imap_url(url: str) -> ImapSettings:
    """`imaps://USER@HOST[:PORT][/MAILBOX]` (TLS, port 993), or `imap://...` (STARTTLS,
    port 143; with no TLS at all on loopback only). USER with an "@" writes it "%40"."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("imap", "imaps") or not parts.hostname:
        raise ValueError("an imaps://USER@HOST/MAILBOX (or imap://) URL")
    if parts.password is not None:
        raise ValueError("no password in the URL: name its variable in password_env")
    if not parts.username:
        raise ValueError("the URL names no user: imaps://USER@HOST/MAILBOX")
    host = parts.hostname
    security: Literal["tls", "starttls", "none"] = "tls" if parts.scheme == "imaps" else "starttls"
    if security == "starttls" and host in LOOPBACK:
        security = "none"  # a server on this machine: nothing crosses a network
    try:
        port = parts.port or (993 if security == "tls" else 143)
    except ValueError:
        raise ValueError(f"not a port: {url!r}") from None
    mailbox = unquote(parts.path.lstrip("/")) or "INBOX"
    if any(c in mailbox for c in '\r\n"\\') or len(mailbox) > 200:
        raise ValueError(f"not a mailbox name: {mailbox!r}")
    return ImapSettings(host, port, security, unquote(parts.username), mailbox)


@dataclass(frozen=True)
class MailboxMessage:
    """One message of the mailbox: a key that names it for good (UIDVALIDITY and UID), its
    UID for this session, and its bytes."""

    key: str
    uid: str
    raw: bytes


class BounceMailbox:
    """An open IMAP session on the bounce mailbox (a context manager)."""

    def __init__(self, settings: ImapSettings) -> None:
        if any(c in settings.processed_folder for c in '\r\n"\\'):
            raise ValueError(f"not a folder name: {settings.processed_folder!r}")
        self.settings = settings
        self._imap: imaplib.IMAP4 | None = None
        self._validity = ""

    def __enter__(self) -> BounceMailbox:
        s = self.settings
        try:
            if s.security == "tls":
                imap: imaplib.IMAP4 = imaplib.IMAP4_SSL(
                    s.host, s.port, ssl_context=ssl.create_default_context(), timeout=s.timeout
                )
            else:
                imap = imaplib.IMAP4(s.host, s.port, timeout=s.timeout)
                if s.security == "starttls":
                    imap.starttls(ssl.create_default_context())
            self._imap = imap
            imap.login(s.username, s.password or "")
            kind, data = imap.select(_quoted(s.mailbox))
            _check(kind, data, f"open the mailbox {s.mailbox}")
            kind, data = imap.response("UIDVALIDITY")
            self._validity = (data[0] or b"").decode() if data and data[0] else "0"
        except (TimeoutError, imaplib.IMAP4.error, OSError, ssl.SSLError) as exc:
            self.close()
            raise DeliveryError(
                f"cannot read the bounce mailbox {s.where}: {_said(exc)}",
                hint="check [bounces] imap_url and the password variable named in password_env",
            ) from None
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        imap, self._imap = self._imap, None
        if imap is None:
            return
        with contextlib.suppress(imaplib.IMAP4.error, OSError):
            imap.logout()

    def messages(
        self, *, read_before: Callable[[str], bool] = lambda key: False
    ) -> Iterator[MailboxMessage]:
        """The mailbox's messages, oldest first (at most MAX_MESSAGES), read without
        marking them read. Those whose key `read_before` knows are passed over unfetched
        and uncounted: mail left in the mailbox must not fill every later read."""
        imap = self._open()
        _, data = self._run(imap.uid, "SEARCH", None, "ALL")
        found = data[0] if data else None
        uids = found.split() if isinstance(found, bytes) else []
        taken = 0
        for uid in uids:
            text = uid.decode()
            key = f"imap:{self._validity}:{text}@{self.settings.where}"
            if read_before(key):
                continue
            if taken >= MAX_MESSAGES:
                return
            taken += 1
            size = self._size(imap, text)
            if size is None or size > MAX_MESSAGE_BYTES:
                continue
            _, data = self._run(imap.uid, "FETCH", text, "(BODY.PEEK[])")
            raw = next((part[1] for part in data if isinstance(part, tuple)), None)
            if isinstance(raw, bytes):
                yield MailboxMessage(key, text, raw)

    def move_aside(self, message: MailboxMessage) -> None:
        """Move a message dealt with to the processed folder (made if missing)."""
        imap = self._open()
        folder = _quoted(self.settings.processed_folder)
        imap.create(folder)  # "already exists" is no error here
        if b"MOVE" in b" ".join(_capabilities(imap)):
            self._run(imap.uid, "MOVE", message.uid, folder)
            return
        self._run(imap.uid, "COPY", message.uid, folder)
        self._run(imap.uid, "STORE", message.uid, "+FLAGS.SILENT", r"(\Deleted)")
        if b"UIDPLUS" in b" ".join(_capabilities(imap)):
            self._run(imap.uid, "EXPUNGE", message.uid)
        else:
            self._run(imap.expunge)

    def _size(self, imap: imaplib.IMAP4, uid: str) -> int | None:
        _, data = self._run(imap.uid, "FETCH", uid, "(RFC822.SIZE)")
        found = re.search(
            rb"RFC822\.SIZE (\d+)", b" ".join(d for d in data if isinstance(d, bytes))
        )
        return int(found.group(1)) if found else None

    def _open(self) -> imaplib.IMAP4:
        if self._imap is None:
            raise DeliveryError("the bounce mailbox is not open")
        return self._imap

    def _run(self, command: object, *args: object) -> tuple[str, list[object]]:
        try:
            kind, data = command(*args)  # type: ignore[operator]
            _check(kind, data, str(args[0]) if args else "answer")
        except (TimeoutError, imaplib.IMAP4.error, OSError, ssl.SSLError) as exc:
            raise DeliveryError(
                f"the bounce mailbox {self.settings.where} failed: {_said(exc)}"
            ) from None
        return kind, list(data or [])


def _check(kind: str, data: object, what: str) -> None:
    if kind != "OK":
        said = data[0] if isinstance(data, list) and data else data
        text = said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)
        raise imaplib.IMAP4.error(f"{what}: {kind} {text}"[:300])


def _capabilities(imap: imaplib.IMAP4) -> tuple[bytes, ...]:
    return tuple(c.encode() if isinstance(c, str) else c for c in imap.capabilities)


def _quoted(name: str) -> str:
    return f'"{name}"'


def _said(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.replace("\r", " ").replace("\n", " ")[:300]
