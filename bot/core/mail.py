"""The email policy every digest is built, stored and sent with: `email.policy.SMTP`, except
how a subject with non-ASCII text and a List-Unsubscribe header are folded.

Python 3.11's header folder mishandles a folded line that starts with an encoded word: it
keeps the space before the fold, so readers see two spaces ("cat:quant-ph  — Thu 28 Nov"),
and it can glue two encoded words together with no space between them ("=?utf-8?q?_?==?...",
CPython gh-144156), which some providers refuse outright (Yahoo: "554 Invalid Subject
header"). Such a subject is therefore written by the older `email.header.Header` encoder
instead: the whole text in UTF-8 encoded words, folded only between them, where RFC 2047
says the whitespace carries no meaning. Every reader decodes it back to the exact text.

List-Unsubscribe (RFC 2369) holds URLs in angle brackets, separated by commas, which mail
apps take only as they stand: `email.policy.SMTP` writes an entry longer than a line (a
signed one-click URL) as encoded words, and no mail app then sees the link. It is folded
between its entries only, a line passing 78 characters if an entry is that long (RFC 5322
allows 998); its entries must be ASCII.

An ASCII subject and every other header are folded as `email.policy.SMTP` folds them. A
non-ASCII subject's encoded words are the shorter of quoted-printable (mostly ASCII text)
and base64 (Chinese): the standard library's choice for UTF-8 is a process-wide setting
that a library may change (Apprise's email plugin sets quoted-printable when it is
imported), and the same digest must give the same bytes.

Also `enhanced_status`: the RFC 3463 status in a relay's answer or a bounce, read alike by
the email channel and the bounces.
"""

from __future__ import annotations

import re
from email.charset import SHORTEST, Charset
from email.header import Header
from email.policy import EmailPolicy
from typing import Any

__all__ = ["MAIL_POLICY"]


def _utf8() -> Charset:
    """UTF-8 in the shorter encoded words, whatever the process-wide setting says."""
    charset = Charset("utf-8")
    charset.header_encoding = SHORTEST
    return charset


class _MailPolicy(EmailPolicy):
    def _own(self, name: str, value: Any) -> str | None:
        key = name.lower()
        if key == "list-unsubscribe":
            return self._url_list(name, str(value))
        if key != "subject":
            return None
        text = " ".join(str(value).split())  # a header object reads as its decoded text
        if text.isascii():
            return None
        encoded = Header(
            text, _utf8(), maxlinelen=self.max_line_length or 78, header_name=name
        ).encode(linesep=self.linesep)
        return f"{name}: {encoded}{self.linesep}"

    def _url_list(self, name: str, value: str) -> str:
        if not value.isascii():
            raise ValueError(f"{name}: not ASCII: {value!r}")
        entries = [entry.strip() for entry in value.split(",")]
        line = f"{name}: {', '.join(entries)}"
        if len(line) > (self.max_line_length or 78):
            line = f"{name}: " + f",{self.linesep} ".join(entries)
        return line + self.linesep

    def fold(self, name: str, value: Any) -> str:
        own = self._own(name, value)
        return super().fold(name, value) if own is None else own

    def fold_binary(self, name: str, value: Any) -> bytes:
        own = self._own(name, value)
        return super().fold_binary(name, value) if own is None else own.encode("ascii")


MAIL_POLICY: EmailPolicy = _MailPolicy(linesep="\r\n")


# An enhanced status code (RFC 3463: class.subject.detail), standing alone in its text.
# ASCII digits ([0-9], not `\d`): a status written otherwise is kept with the bounce and
# equals none that a reason is told by. Any digit after it still means it is not one.
_STATUS = re.compile(r"(?<![\w.])([245]\.[0-9]{1,3}\.[0-9]{1,3})(?!\.?\d)")


def enhanced_status(text: str | None) -> str | None:
    """The first enhanced status code (RFC 3463) in `text`: "5.1.1". What a relay answers
    and what a bounce says are read alike."""
    found = _STATUS.search(text or "")
    return found.group(1) if found else None
