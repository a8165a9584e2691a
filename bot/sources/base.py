"""The Source base class and the types every source kind shares.

Owns what a source is (`Source`: parse, fetch, harvest, backfill), what it hands back
(`FetchResult`, `ParsedFeed`, `Harvest`), what it remembers between polls (`FetchState`),
how much one request may bring (`FetchLimits`), and the options every kind accepts
(`SourceOptions`, `source_options`, `FetchURL`, `WebURL`, `interval`). It must not know any
kind (they subclass `Source` in their own modules) nor do I/O itself: `fetch` and
`harvest` receive the fetcher.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from bot.core.errors import ConfigError
from bot.core.models import Paper


@dataclass(frozen=True, slots=True)
class FetchState:
    """What we remember of a source between polls, for conditional GET."""

    etag: str | None = None
    last_modified: str | None = None


MEGABYTE = 1024 * 1024
# Bounds of the fetch limits ([polling] and every source): sane, finite, and large enough
# for any real feed (arXiv's largest listing is about 5 MB).
MAX_BODY_MB_LIMIT = 4096
REQUEST_DEADLINE_LIMIT = 3600


@dataclass(frozen=True, slots=True)
class FetchLimits:
    """How much one request may bring and how long one attempt may take, connect to last
    byte ([polling] max_body_mb and request_deadline_seconds, or a source's own)."""

    max_body: int = 50 * MEGABYTE  # bytes
    deadline: float = 60.0  # seconds


class SourceOptions(BaseModel):
    """Options every source kind accepts; each kind's options model inherits them."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, allow_inf_nan=False)

    # None: the [polling] defaults.
    max_body_mb: float | None = Field(None, gt=0, le=MAX_BODY_MB_LIMIT)
    request_deadline_seconds: float | None = Field(None, gt=0, le=REQUEST_DEADLINE_LIMIT)


class _LimitOptions(SourceOptions):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


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
    # Entries left out, each with why ("entry 7: no title"): the rest are still papers.
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Harvest:
    """What one poll of a source brought: papers (from one or several requests), the
    validators to keep for the next conditional GET, and what to tell people."""

    papers: tuple[Paper, ...]
    state: FetchState = FetchState()
    not_modified: bool = False
    announced: date | None = None
    empty_reason: str | None = None
    problems: tuple[str, ...] = ()


class Source:
    """Base of every source kind. Subclasses set `kind` and implement parse and fetch."""

    kind: ClassVar[str] = ""
    # Whether the source publishes on arXiv's calendar (a listing per feed day, rebuilt at
    # about midnight US Eastern): the daemon then polls it from that time until new ids
    # come, and waits for it before sending digests. Other sources are polled at an interval.
    follows_arxiv_calendar: ClassVar[bool] = False
    # How far its bibliographic fields are trusted over another source's for the same
    # paper (bot.core.merge: arXiv's listing 3, the arXiv API 2, a feed 1, Hugging Face 0).
    authority: ClassVar[int] = 1
    # Whether a short or missing listing can be filled in from elsewhere (`repair_day`).
    can_repair: bool = False
    # How often a source that does not follow arXiv's calendar is polled (None: the
    # [polling] interval_minutes); set from its `interval_minutes` option.
    interval: timedelta | None = None

    def __init__(self, name: str, **options: Any) -> None:
        self.name = name
        self.options = options
        # Every kind's fetch limits, read here so a kind's module need not (SourceOptions).
        self.limit_options = source_options(
            _LimitOptions, name, options, hint="see max_body_mb and request_deadline_seconds"
        )

    def fetch_limits(self, defaults: FetchLimits) -> FetchLimits:
        """This source's fetch limits: its own options, else `defaults` ([polling])."""
        mb, seconds = self.limit_options.max_body_mb, self.limit_options.request_deadline_seconds
        return FetchLimits(
            max_body=defaults.max_body if mb is None else max(1, int(mb * MEGABYTE)),
            deadline=defaults.deadline if seconds is None else seconds,
        )

    @property
    def tags(self) -> tuple[str, ...]:
        """What `src:` finds this source's papers by: its name and its kind, lower case."""
        return tuple(dict.fromkeys((self.name.lower(), self.kind)))

    def tagged(self, papers: Sequence[Paper]) -> list[Paper]:
        """`papers` marked with this source's name and kind, for `src:` rules (what every
        poll, backfill and repair stores)."""
        return [
            replace(
                paper,
                source=paper.source or self.name,
                sources=tuple(dict.fromkeys((*paper.sources, *self.tags))),
            )
            for paper in papers
        ]

    def parse(self, body: bytes, *, status: int = 200) -> ParsedFeed:  # pragma: no cover
        raise NotImplementedError

    async def fetch(self, http: Any, state: FetchState) -> FetchResult:  # pragma: no cover
        raise NotImplementedError

    def backfill_days(self, since: date, until: date) -> list[date] | None:
        """The days a backfill of `since`..`until` fetches, one part each; None: this
        source cannot look back (a feed only holds its latest entries)."""
        return None

    async def backfill_day(self, http: Any, day: date) -> list[Paper]:  # pragma: no cover
        """One day's papers for a backfill (as many requests as it takes)."""
        raise NotImplementedError

    async def repair_day(self, http: Any, day: date, calendar: Any) -> list[Paper] | None:
        """A feed day's papers from elsewhere (the arXiv API), when this source's listing of
        `day` came short or not at all; None: this source cannot (the default)."""
        return None

    async def harvest(self, http: Any, state: FetchState, *, now: datetime) -> Harvest:
        """One poll: fetch, then parse (off the event loop). Sources that need several
        requests (pages, days) override this; `parse` stays pure and `fetch`/`harvest` do
        the only I/O."""
        fetched = await self.fetch(http, state)
        if fetched.not_modified:
            return Harvest((), state, not_modified=True)
        assert fetched.body is not None
        # In a thread: a large feed parses for seconds, and /healthz, Slack and the pages
        # keep answering meanwhile (parse is pure, so it is safe there).
        parsed = await asyncio.to_thread(self.parse, fetched.body, status=fetched.status)
        return Harvest(
            parsed.papers,
            FetchState(etag=fetched.etag, last_modified=fetched.last_modified),
            announced=parsed.announced,
            empty_reason=parsed.empty_reason,
            problems=parsed.problems,
        )


OptionsT = TypeVar("OptionsT", bound=BaseModel)


def source_options(
    model: type[OptionsT], name: str, options: Mapping[str, Any], *, hint: str
) -> OptionsT:
    """A source's options checked by its model, or a ConfigError naming each problem."""
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        problems = [
            f"sources.{name}.{'.'.join(str(part) for part in error['loc'])}: "
            f"{error['msg'].removeprefix('Value error, ')}"
            for error in exc.errors()
        ]
        raise ConfigError(problems, hint=f"{hint} in config.example.toml") from None


def _url_of(schemes: tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not value.startswith(schemes):
            names = ", ".join(schemes[:-1]) + f" or {schemes[-1]}"
            raise ValueError(f"must be an {names} URL, not {value!r}")
        return value

    return check


# A source's `url` option: where it reads from (file:// for a saved copy), or a web service.
FetchURL = Annotated[str, AfterValidator(_url_of(("https://", "http://", "file://")))]
WebURL = Annotated[str, AfterValidator(_url_of(("https://", "http://")))]


def each_day(first: date, last: date) -> list[date]:
    """Every date from `first` to `last`, both included: the days a backfill fetches."""
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def interval(minutes: float | None) -> timedelta | None:
    """A source's `interval_minutes` option as the `Source.interval` it sets."""
    return timedelta(minutes=minutes) if minutes else None
