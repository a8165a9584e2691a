"""Secrets kept out of the logs: a logging filter that masks the config's secret values and
the well-known shapes of secrets (Slack webhook URLs and tokens, a URL's password).

The CLI installs it on the log handlers when it configures logging and hands it each
config's secrets (`bot.config.config_secrets`) when it loads one; every record that
passes a handler is masked, whoever
logged it (paperbell, slack_sdk's request log at -vv, httpx, uvicorn). Pure: no I/O, no
environment; it only rewrites log records.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

__all__ = ["MASK", "SecretFilter", "redact_shapes"]

MASK = "***"
MIN_SECRET = 4  # shorter values would mask ordinary words (and are no secret anyway)

# Anchored on a fixed prefix and followed by one character class: linear on any text.
_SHAPES = (
    re.compile(r"(?i)(hooks\.slack\.com/(?:services|workflows|triggers)/)[^\s\"'<>]+"),
    re.compile(r"\b(xox[abprse]-)[A-Za-z0-9-]+"),
    re.compile(r"\b(xapp-)[A-Za-z0-9-]+"),
    # A URL's password: scheme://user:PASSWORD@host
    re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]{0,20}://[^\s/:@]{0,200}:)[^\s/@]{1,500}(?=@)"),
)


class SecretFilter(logging.Filter):
    """Masks secrets in every record it sees (message, arguments, traceback)."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        super().__init__()
        self.secrets: set[str] = set()
        self.add(secrets)

    def add(self, secrets: Iterable[str | None]) -> None:
        """Mask these values from now on."""
        self.secrets.update(s for s in secrets if s and len(s) >= MIN_SECRET)
        self._ordered = sorted(self.secrets, key=len, reverse=True)  # the longest first

    def redact(self, text: str) -> str:
        for secret in self._ordered:
            if secret in text:
                text = text.replace(secret, MASK)
        for shape in _SHAPES:
            text = shape.sub(lambda m: m.group(1) + MASK, text)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it itself
            return True
        cleaned = self.redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


def redact_shapes(text: str) -> str:
    """`text` with the well-known shapes of secrets masked (a URL's password, a Slack
    webhook or token): for what is stored and shown later, such as a poll's error."""
    return SecretFilter().redact(text)
