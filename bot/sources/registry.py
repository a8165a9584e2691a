"""The registry of source kinds: `kind = "<kind>"` in the config names a `Source` subclass.

Owns `SOURCE_KINDS` and the `@register("kind")` decorator by which every kind, built in or
third-party, makes itself known when its module is imported. It must not import any
kind's module: `bot.sources.load_builtin_sources` (the package's face) does that, so no
module of the package imports one that imports it back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from bot.sources.base import Source

SourceT = TypeVar("SourceT", bound=type[Source])

SOURCE_KINDS: dict[str, type[Source]] = {}


def register(kind: str) -> Callable[[SourceT], SourceT]:
    """Class decorator: make a `Source` subclass available as `kind = "<kind>"` in the config."""

    def decorate(cls: SourceT) -> SourceT:
        if kind in SOURCE_KINDS and SOURCE_KINDS[kind] is not cls:
            raise ValueError(f"source kind {kind!r} is already registered")
        cls.kind = kind
        SOURCE_KINDS[kind] = cls
        return cls

    return decorate
