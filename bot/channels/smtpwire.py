"""aiosmtplib's preparation of a message for DATA, done with plain byte operations.

Before each DATA, aiosmtplib writes every line ending of the message as CRLF and doubles
a period that starts a line, with two regular expressions over the whole message (and,
when the server announces SIZE, writes the line endings once more to count the bytes).
For a digest of ~56 KB that is ~0.9 ms of the event loop's CPU a message (~1.4 ms with
SIZE): a quarter of what the process that sends spends on each one.

`install` wraps both steps in aiosmtplib's modules:

- the line endings: paperbell's messages are built with CRLF line endings
  (`bot.core.mail.MAIL_POLICY`), which the step leaves as they are; three byte counts
  (~0.1 ms) show that a message has no bare CR or LF and it is returned as it is, any
  other message goes through aiosmtplib's own step;
- the periods: a line that starts with one (the stylesheet of the HTML part has a few:
  ".card {") is doubled by a byte replacement of LF + period (a line starts at the
  message's start and after each LF, as `(?m)^` reads it).

What goes on the wire is the same byte for byte (tests/channels/test_smtpwire.py compares both
with aiosmtplib's on hostile bytes); an aiosmtplib without these names (another major
version) is left as it is, only slower.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, cast

import aiosmtplib.protocol
import aiosmtplib.smtp

__all__ = ["has_leading_period", "install", "line_endings_are_crlf"]


def line_endings_are_crlf(message: bytes) -> bool:
    """Whether every CR and every LF of `message` is part of a CRLF and it ends with one:
    aiosmtplib's `normalize_message_line_endings` returns such a message unchanged."""
    pairs = message.count(b"\r\n")
    return (
        message.endswith(b"\r\n")
        and message.count(b"\r") == pairs
        and message.count(b"\n") == pairs
    )


def has_leading_period(message: bytes) -> bool:
    """Whether a line of `message` starts with a period (the dot-stuffing of DATA: a
    line starts at the message's start and after each LF, as `(?m)^` reads it)."""
    return message.startswith(b".") or b"\n." in message


class _Stuffing:
    """aiosmtplib's `PERIOD_REGEX` (`(?m)^\\.`), its `sub` of a period starting a line by
    two done with byte replacement (a line starts at the message's start and after each
    LF, as `(?m)^` reads it); any other use is the compiled pattern's own (`regex`)."""

    __slots__ = ("regex",)

    def __init__(self, regex: re.Pattern[bytes]) -> None:
        self.regex = regex

    def sub(self, repl: Any, string: Any, count: int = 0) -> Any:
        if not (type(string) is bytes and type(repl) is bytes and repl == b".." and not count):
            return self.regex.sub(repl, string, count)
        if not has_leading_period(string):
            return string
        stuffed = string.replace(b"\n.", b"\n..")
        return b"." + stuffed if stuffed.startswith(b".") else stuffed

    def __getattr__(self, name: str) -> Any:
        if name == "regex":  # not yet set (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.regex, name)


def _normalizing(original: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    def normalize_message_line_endings(message: bytes) -> bytes:
        if type(message) is bytes and line_endings_are_crlf(message):
            return message
        return original(message)

    normalize_message_line_endings.__wrapped__ = original  # type: ignore[attr-defined]
    return normalize_message_line_endings


_NORMALIZED = (
    (b"a\r\n.b\r\n", b"a\r\n.b\r\n"),
    (b"a\nb\rc\r\n\n", b"a\r\nb\r\nc\r\n\r\n"),
    (b"a", b"a\r\n"),
    (b"", b"\r\n"),
)


def install() -> bool:
    """Wrap both steps in aiosmtplib's modules (once; again: nothing). False: this
    aiosmtplib does not have them where 5.x has them, and is left as it is."""
    protocol: dict[str, Any] = vars(aiosmtplib.protocol)
    smtp: dict[str, Any] = vars(aiosmtplib.smtp)
    pattern = protocol.get("PERIOD_REGEX")
    found = protocol.get("normalize_message_line_endings")
    if isinstance(pattern, _Stuffing):
        return True
    if not isinstance(pattern, re.Pattern) or pattern.pattern != rb"(?m)^\.":
        return False
    if not callable(found) or smtp.get("normalize_message_line_endings") is not found:
        return False
    normalize = cast("Callable[[bytes], bytes]", found)
    # The step the shortcut stands for: line endings made CRLF, one added at the end, and
    # nothing else (a later aiosmtplib doing more there is left as it is).
    if not all(normalize(given) == made for given, made in _NORMALIZED):
        return False
    fast = _normalizing(normalize)
    protocol["PERIOD_REGEX"] = _Stuffing(pattern)
    protocol["normalize_message_line_endings"] = fast
    smtp["normalize_message_line_endings"] = fast
    return True
