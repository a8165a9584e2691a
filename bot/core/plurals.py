"""Counts in words: `plural(1, "paper")` is "1 paper", `plural(1504, "paper")` "1,504 papers".

The one helper every message uses (the command line, `status`, logs, digests), so that no
line says "1 subscribers". Pure: no I/O.
"""

from __future__ import annotations


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """`1 paper`, `3 papers`, `1,504 papers` (`plural_form` for an irregular word)."""
    word = singular if count == 1 else (plural_form or singular + "s")
    return f"{count:,} {word}"
