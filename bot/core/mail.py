"""The email policy every digest is built, stored and sent with: `email.policy.SMTP`, except
how a subject with non-ASCII text is folded.

Python 3.11's header folder mishandles a folded line that starts with an encoded word: it
keeps the space before the fold, so readers see two spaces ("cat:quant-ph  — Thu 28 Nov"),
and it can glue two encoded words together with no space between them ("=?utf-8?q?_?==?...",
CPython gh-144156), which some providers refuse outright (Yahoo: "554 Invalid Subject
header"). Such a subject is therefore written by the older `email.header.Header` encoder
instead: the whole text in UTF-8 encoded words, folded only between them, where RFC 2047
says the whitespace carries no meaning. Every reader decodes it back to the exact text.
An ASCII subject and every other header are folded as `email.policy.SMTP` folds them.
"""

from __future__ import annotations

from email.header import Header
from email.policy import EmailPolicy
from typing import Any

__all__ = ["MAIL_POLICY"]

_OWN_FOLDING = frozenset({"subject"})


class _MailPolicy(EmailPolicy):
    def _own(self, name: str, value: Any) -> str | None:
        if name.lower() not in _OWN_FOLDING:
            return None
        text = " ".join(str(value).split())  # a header object reads as its decoded text
        if text.isascii():
            return None
        encoded = Header(
            text, "utf-8", maxlinelen=self.max_line_length or 78, header_name=name
        ).encode(linesep=self.linesep)
        return f"{name}: {encoded}{self.linesep}"

    def fold(self, name: str, value: Any) -> str:
        own = self._own(name, value)
        return super().fold(name, value) if own is None else own

    def fold_binary(self, name: str, value: Any) -> bytes:
        own = self._own(name, value)
        return super().fold_binary(name, value) if own is None else own.encode("ascii")


MAIL_POLICY: EmailPolicy = _MailPolicy(linesep="\r\n")
