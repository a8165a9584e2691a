"""Paper sources: one module per kind, all registered in one registry.

A source has a pure `parse(body) -> ParsedFeed` tested on real payloads, and an async
`fetch(...) -> FetchResult` that only moves bytes. Built-in kinds register themselves
the same way a third-party kind would: `@register("kind")` on a `Source` subclass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, ClassVar, TypeVar

from bot.models import Paper


@dataclass(frozen=True, slots=True)
class FetchState:
    """What we remember of a source between polls, for conditional GET."""

    etag: str | None = None
    last_modified: str | None = None


@dataclass(frozen=True, slots=True)
class FetchResult:
    """The outcome of one fetch: a body to parse, or `not_modified` (HTTP 304)."""

    url: str
    status: int  # HTTP status (200 for file:// URLs)
    body: bytes | None
    etag: str | None = None
    last_modified: str | None = None

    @property
    def not_modified(self) -> bool:
        return self.status == 304


@dataclass(frozen=True, slots=True)
class ParsedFeed:
    """What a body held: papers, and which announcement day (if the feed says)."""

    papers: tuple[Paper, ...]
    announced: date | None = None
    title: str = ""
    # Why a feed holds no papers, when it is a normal, valid outcome (weekend, holiday).
    empty_reason: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)  # papers per announce type


class Source:
    """Base of every source kind. Subclasses set `kind` and implement parse and fetch."""

    kind: ClassVar[str] = ""
    # Whether the source publishes on arXiv's calendar (a listing per feed day, rebuilt at
    # about midnight US Eastern): the daemon then polls it from that time until new ids
    # come, and waits for it before sending digests. Other sources are polled at an interval.
    follows_arxiv_calendar: ClassVar[bool] = False

    def __init__(self, name: str, **options: Any) -> None:
        self.name = name
        self.options = options

    def parse(self, body: bytes, *, status: int = 200) -> ParsedFeed:  # pragma: no cover
        raise NotImplementedError

    async def fetch(self, http: Any, state: FetchState) -> FetchResult:  # pragma: no cover
        raise NotImplementedError


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


def load_builtin_sources() -> None:
    """Import the built-in source modules so they register themselves."""
    from bot.sources import arxiv  # noqa: F401
