"""Plain-text bounces, the formats that are not RFC 3464: Exim's ("Mail delivery failed:
returning message to sender", X-Failed-Recipients), Gmail's older "Delivery Status
Notification (Failure)" text, Exchange's "Undeliverable:" notes, Postfix's and qmail's text;
and the small readers bot.bounces.report shares (a header's text, a status code).

Pure: text in, what it says out. The patterns are the wordings real servers use (see
tests/fixtures/bounces/); a bounce worded otherwise is still read when it carries a status
or SMTP code, else it is "unknown" and changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email import message_from_string
from email.header import decode_header, make_header
from email.message import Message
from email.policy import compat32
from typing import Literal

from bot.core.mail import enhanced_status

MAX_DIAGNOSTIC = 500
MAX_TEXT = 200_000  # characters of a bounce's text read

ADDRESS = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9.-]{0,253})")
_SMTP_CODE = re.compile(r"(?<![\w.])([45])\d\d(?=[ -])")
_BOUNCE_SENDER = re.compile(r"mailer-daemon|postmaster|mail delivery", re.IGNORECASE)
_BOUNCE_SUBJECT = re.compile(
    r"undeliver|undelivered|delivery status notification|returned mail|mail delivery failed|"
    r"delivery failure|failure notice|could not be delivered|non-delivery|nondeliverable|"
    r"returning message to sender|mail system error",
    re.IGNORECASE,
)
# Where a plain bounce starts quoting the original message.
_ORIGINAL = re.compile(
    r"^.*(?:this is a copy of the message|----- original message -----|"
    r"below this line is a copy of the message|original message headers:|"
    r"------ original message|----- the header of the original message|"
    r"--- below this line is a copy).*$",
    re.IGNORECASE | re.MULTILINE,
)
# The phrases after which each format names the address that failed.
_FAILED_AFTER = re.compile(
    r"(?:following address\(es\) failed:|following recipient failed permanently:|"
    r"following recipient\(s\) could not be reached:|could not be delivered to:|"
    r"delivery has failed to these recipients or (?:distribution lists|groups):|"
    r"following addresses had permanent fatal errors|could not be delivered to the following)",
    re.IGNORECASE,
)
_TEMPORARY = re.compile(
    r"has been delayed|temporary (?:error|failure|problem)|will (?:try|retry|continue trying)|"
    r"still trying|warning: message \S{1,64} delayed",
    re.IGNORECASE,
)
_PERMANENT = re.compile(
    r"permanent(?:ly)? (?:error|failure|fatal)|failed permanently|could not be reached|"
    r"recipient not found|user unknown|unknown user|no such user|does not exist|"
    r"mailbox unavailable|address rejected|not be delivered",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class PlainBounce:
    kind: Literal["hard", "soft", "unknown"]
    form: str  # exim, gmail, exchange, postfix, text
    status: str | None
    diagnostic: str | None
    recipient: str | None
    original: Message | None  # the quoted original message, when the text holds one


def header(message: Message | None, name: str) -> str | None:
    """A header's text (encoded words decoded; odd ones left as they are), at most 2000
    characters; None when absent."""
    if message is None:
        return None
    value = message.get(name)
    if value is None:
        return None
    text = str(value)[:2000]
    try:
        return str(make_header(decode_header(text)))[:2000]
    except (LookupError, ValueError, UnicodeError):
        return text


def clip(text: str | None) -> str | None:
    """Diagnostic text on one line, at most MAX_DIAGNOSTIC characters, no control chars."""
    if not text:
        return None
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat[:MAX_DIAGNOSTIC] or None


def kind_of_status(status: str | None, text: str | None) -> Literal["hard", "soft", "unknown"]:
    """hard for 5.x.x (or a 5xx reply in `text` when there is no status), soft for 4.x.x."""
    first = status[0] if status else None
    if first is None:
        code = _SMTP_CODE.search(text or "")
        first = code.group(1) if code else None
    return "hard" if first == "5" else "soft" if first == "4" else "unknown"


def looks_like_bounce(sender: str | None, subject: str | None, message: Message) -> bool:
    """Whether a message that is no multipart/report is still a bounce, by who sent it,
    its subject or Exim's X-Failed-Recipients."""
    if message.get("X-Failed-Recipients"):
        return True
    return bool(_BOUNCE_SENDER.search(sender or "")) or bool(_BOUNCE_SUBJECT.search(subject or ""))


def read_plain_bounce(text: str, *, failed: str | None = None) -> PlainBounce:
    """What a plain-text bounce says: its kind, status, the failed address and the reason,
    and the original message it quotes. `failed`: Exim's X-Failed-Recipients."""
    text = text[:MAX_TEXT]
    cut = _ORIGINAL.search(text)
    head = text[: cut.start()] if cut else text
    original = _quoted(text[cut.end() :]) if cut else None
    form = _form(head)
    status = enhanced_status(head)
    kind = kind_of_status(status, head)
    if kind == "unknown":
        if _TEMPORARY.search(head):
            kind = "unknown"  # a delay warning: the server is still trying
        elif _PERMANENT.search(head):
            kind = "hard"
    recipient = _failed_address(head, failed)
    return PlainBounce(kind, form, status, _diagnostic(head, status), recipient, original)


def _form(head: str) -> str:
    lowered = head.lower()
    if "created automatically by mail delivery software" in lowered:
        return "exim"
    if "delivery to the following recipient" in lowered:
        return "gmail"
    if "microsoft exchange" in lowered or "could not be reached" in lowered:
        return "exchange"
    if "this is the mail system at host" in lowered:
        return "postfix"
    if "this is the qmail-send program" in lowered:
        return "qmail"
    return "text"


def _failed_address(head: str, failed: str | None) -> str | None:
    found = ADDRESS.search(failed or "")
    if found:
        return found.group(0)[:320]
    after = _FAILED_AFTER.search(head)
    found = ADDRESS.search(head, after.end()) if after else None
    if found is None:
        postfix = re.search(r"^<([^<>\s]{3,320})>:", head, re.MULTILINE)
        found = ADDRESS.search(postfix.group(1)) if postfix else None
    return found.group(0)[:320] if found else None


def _diagnostic(head: str, status: str | None) -> str | None:
    """The line that says why: the one with the status or an SMTP reply, else the line
    after the failed address (Exchange: "Recipient Not Found")."""
    lines = [
        line.strip()
        for line in head.splitlines()
        if line.strip() and not _FAILED_AFTER.search(line)
    ]
    for line in lines:
        if (status and status in line) or _SMTP_CODE.search(line):
            return clip(line)
    for line in lines:
        if _PERMANENT.search(line) or _TEMPORARY.search(line):
            return clip(line)
    return None


def _quoted(rest: str) -> Message | None:
    """The original message quoted after a plain bounce's marker line (its headers at
    least)."""
    body = rest.lstrip("\r\n ")
    if not body or ":" not in body.partition("\n")[0]:
        return None
    return message_from_string(body[:65536], policy=compat32)
