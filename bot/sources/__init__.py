"""Paper sources: one module per kind, all registered in one registry.

A source has a pure `parse(body) -> ParsedFeed` tested on real payloads, and an async
`fetch(...) -> FetchResult` that only moves bytes. Built-in kinds register themselves
the same way a third-party kind would: `@register("kind")` on a `Source` subclass.

This is the package's face: the base types (`bot.sources.base`), the registry
(`bot.sources.registry`) and `load_builtin_sources`, the one place that imports every
built-in kind (arxiv, arxiv_query, feed, huggingface). The kinds' parsers live in their
own modules, with what they share in `bot.sources.feedtext` and `bot.sources.diagnosis`;
the fetcher is `bot.sources.http`.
"""

from __future__ import annotations

from bot.sources.base import (
    MAX_BODY_MB_LIMIT,
    MEGABYTE,
    REQUEST_DEADLINE_LIMIT,
    FetchLimits,
    FetchResult,
    FetchState,
    FetchURL,
    Harvest,
    ParsedFeed,
    Source,
    SourceOptions,
    WebURL,
    each_day,
    interval,
    source_options,
)
from bot.sources.registry import SOURCE_KINDS, register

__all__ = [
    "MAX_BODY_MB_LIMIT",
    "MEGABYTE",
    "REQUEST_DEADLINE_LIMIT",
    "SOURCE_KINDS",
    "FetchLimits",
    "FetchResult",
    "FetchState",
    "FetchURL",
    "Harvest",
    "ParsedFeed",
    "Source",
    "SourceOptions",
    "WebURL",
    "each_day",
    "interval",
    "load_builtin_sources",
    "register",
    "source_options",
]


def load_builtin_sources() -> None:
    """Import the built-in source modules so they register themselves."""
    from bot.sources import arxiv, arxiv_query, feed, huggingface  # noqa: F401
