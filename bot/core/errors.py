"""One exception tree for paperbell, each error with a message a person can act on.

    PaperbellError
    ├── ConfigError          the config file or a setting is wrong (lists every problem)
    │   └── MissingSecrets       a variable the file names for a secret this command uses is unset
    ├── RuleError            a subscription rule does not parse (points at the column)
    ├── SourceError          a source could not be read
    │   ├── FeedErrorResponse    the service answered with its own error feed (bad category ...)
    │   ├── FeedFormatError      the body is not a feed: HTML, garbage, a truncated download
    │   ├── IncompleteResults    results read in part, then stopped (a page repeated, too many)
    │   └── ObsoleteFeedFormat   a feed format the service no longer publishes (arXiv RSS 1.0)
    ├── AnswerTooLarge       an endpoint's answer past its size cap: not read on
    ├── StoreError           the database could not be opened or written
    │   └── OutdatedSchema       the database's schema is older than this paperbell's
    └── DeliveryError        a digest could not be delivered (SMTP down, address refused ...)

Every error carries an optional `hint`: the remediation a user should try. The CLI prints
the message and the hint and exits non-zero; a long-running job logs and skips.
"""

from __future__ import annotations

import unicodedata
from typing import Any


class PaperbellError(Exception):
    """Base of every error paperbell raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class ConfigError(PaperbellError):
    """The configuration is invalid; `problems` holds every `key.path: message` found."""

    def __init__(self, problems: list[str], *, source: str = "config", hint: str | None = None):
        self.problems = list(problems)
        self.source = source
        lines = "\n".join(f"  {p}" for p in self.problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"{source}: {count} {noun}:\n{lines}", hint=hint)


class MissingSecrets(ConfigError):
    """The command uses secrets whose environment variables are not set: `problems` holds
    one line per variable, each saying which key names it and what the command does with
    it. The file itself may be right (other commands run without these)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems, source="environment")
        self.message = "\n".join(self.problems)

    def __str__(self) -> str:
        return self.message


class RuleError(PaperbellError):
    """A rule that does not parse. `position` is a 0-based offset into `text`."""

    def __init__(self, message: str, *, text: str, position: int) -> None:
        self.reason = message
        self.text = text
        self.position = max(0, min(position, len(text)))
        super().__init__(f"{message} at column {self.position + 1}")

    def caret(self) -> str:
        """The rule with a caret under the offending column, for terminals and Slack (a
        control character shows as U+FFFD, one column wide)."""
        shown = "".join("\ufffd" if _unprintable(c) else c for c in self.text)
        return f"{shown}\n{' ' * self.position}^"


class SourceError(PaperbellError):
    """A source could not be fetched or parsed; other sources go on."""

    def __init__(self, message: str, *, source: str = "", url: str = "", hint: str | None = None):
        self.source = source
        self.url = url
        super().__init__(message, hint=hint)


class FeedErrorResponse(SourceError):
    """The service answered with an error document (arXiv: 'Feed error for query')."""


class FeedFormatError(SourceError):
    """The body is not a feed we can read (HTML, garbage, truncated XML)."""


class IncompleteResults(SourceError):
    """A source read part of the results it asked for, then had to stop (an API that
    answers the same page again, more pages than one request may take): `found` holds
    what it read (the source's items: API entries, papers), to keep; the rest is asked for
    again next time."""

    def __init__(
        self,
        message: str,
        *,
        found: tuple[Any, ...] = (),
        source: str = "",
        url: str = "",
        hint: str | None = None,
    ):
        self.found = found
        super().__init__(message, source=source, url=url, hint=hint)


class ObsoleteFeedFormat(SourceError):
    """A format the service no longer publishes (arXiv's pre-2024 RSS 1.0/RDF)."""


class AnswerTooLarge(PaperbellError):
    """An answer refused unread past its size cap, or compressed more than once (a few KB
    that unpack to gigabytes). `request`: the request it answered."""

    def __init__(self, message: str, *, request: Any = None) -> None:
        super().__init__(message)
        self.request = request


class StoreError(PaperbellError):
    """The database could not be opened or written."""


class NameTaken(StoreError):
    """A new subscriber's name is someone's already (taken meanwhile, by another sign-up)."""


class AddressTaken(StoreError):
    """A new subscriber's address is a database subscriber's already (signed up meanwhile,
    by another request)."""


class OutdatedSchema(StoreError):
    """The database's schema is at an older revision (`current`; None: made before
    migrations) than this paperbell's (`head`): it must be upgraded first."""

    def __init__(self, message: str, *, current: str | None, head: str) -> None:
        self.current = current
        self.head = head
        super().__init__(message)


class DeliveryError(PaperbellError):
    """A digest could not be delivered. `transient` says whether a retry may succeed."""

    def __init__(self, message: str, *, transient: bool = True, hint: str | None = None):
        self.transient = transient
        super().__init__(message, hint=hint)


def _unprintable(char: str) -> bool:
    """A control character, a lone surrogate or a bidirectional override (which reorders
    what a terminal or a page shows)."""
    return unicodedata.category(char) in ("Cc", "Cs") or char in _BIDI


_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def unexpected(exc: BaseException) -> str:
    """An exception paperbell did not raise on purpose (a bug), as one line for `status`
    and reports: its type and the start of its message, whitespace collapsed."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
