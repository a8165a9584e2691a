"""The subscription store: the only module that opens a database session.

Tables (created on first use): papers (one row per version-less arXiv id, holding the latest
version), subscribers and their rules, deliveries (unique per subscriber, paper, version and
channel, so a re-run can never send a paper twice), the outbox of built digests, and
per-source fetch state for conditional GET, what each source's last poll left out (items
it could not read), and the signatures of recent Slack requests (replays are refused
across restarts). Papers are checked once more before they are written (NUL and lone
surrogates stripped, http(s) links only: bot.sources.feedtext). SQLite by default,
PostgreSQL through the same code.

A digest's papers are written with its outbox record in one transaction (`enqueue`, status
"queued") and marked "sent" only after the channel accepted the message (`mark_sent`, called
by bot.channels.outbox).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, cast

from sqlalchemy import Engine, LargeBinary, UniqueConstraint, delete, func, inspect, update
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, col, create_engine, select

from bot.core.checks import redact_url
from bot.core.errors import StoreError
from bot.core.merge import ARXIV_LISTING, merge_paper
from bot.core.models import (
    DEFAULT_INCLUDE,
    MAX_ID_LENGTH,
    AbstractLength,
    EmailFormat,
    Paper,
    Subscriber,
    is_arxiv_id,
    version_key,
)
from bot.core.schedule import Defaults
from bot.sources import FetchState
from bot.sources.feedtext import checked, clean_text

log = logging.getLogger(__name__)

SCHEDULE_SETTINGS = ("schedule", "day", "time", "timezone", "notify_empty")
# What a database subscriber may change about their digests (the manage page, the CLI).
SETTINGS = (*SCHEDULE_SETTINGS, "email_format", "abstracts")


class PaperRow(SQLModel, table=True):
    __tablename__ = "papers"

    id: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    version: int
    title: str
    abstract: str
    authors: str  # JSON list
    categories: str  # JSON list, primary first
    announce_type: str = Field(max_length=16)
    announced: date | None = Field(default=None, index=True)
    dois: str = "[]"  # JSON list
    journal_ref: str | None = None
    license: str | None = None
    source: str = Field(default="", max_length=128)
    first_seen: datetime
    first_announced: date | None = None  # the first version's announcement: never overwritten
    first_type: str = Field(default="new", max_length=16)
    updated_at: datetime
    sources: str = "[]"  # JSON list: every source name and kind that brought it
    authority: int = 3  # of the source that wrote the bibliographic fields (bot.core.merge)
    link: str | None = None
    upvotes: int | None = None
    hf_rank: int | None = None
    hf_day: date | None = None
    comments: int | None = None
    keywords: str = "[]"  # JSON list
    ai_summary: str | None = None
    github: str | None = None
    github_stars: int | None = None
    organization: str | None = None


class PaperKeyRow(SQLModel, table=True):
    """Another name of a stored paper ("doi:10.1101/..."): a journal feed's entry with the
    DOI of a paper stored under its arXiv id is that paper."""

    __tablename__ = "paper_keys"

    key: str = Field(primary_key=True, max_length=MAX_ID_LENGTH)
    paper_id: str = Field(index=True, max_length=MAX_ID_LENGTH)


class SubscriberRow(SQLModel, table=True):
    __tablename__ = "subscribers"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, max_length=64)
    email: str | None = Field(default=None, max_length=320)
    origin: str = Field(default="database", max_length=16)  # "config" or "database"
    active: bool = True
    categories: str = "[]"  # JSON list
    max_papers: int = 50
    include: str = '["cross", "new"]'  # JSON list
    created_at: datetime
    paused_reason: str | None = None  # why paperbell paused it (an address that bounces)
    # The subscriber's own schedule; None: the config's [digest] default.
    schedule: str | None = Field(default=None, max_length=8)  # daily, weekly
    day: str | None = Field(default=None, max_length=9)
    time: str | None = Field(default=None, max_length=5)  # "08:00"
    timezone: str | None = Field(default=None, max_length=64)
    notify_empty: bool | None = None
    last_slot: str | None = Field(default=None, max_length=32)  # handled by the daemon
    slack_channel: str | None = Field(default=None, max_length=82)  # "#name" or an id
    slack_user: str | None = Field(default=None, max_length=32, index=True)  # a user id
    slack_webhook: str | None = Field(default=None, max_length=128)  # the URL's variable
    email_confirmed: bool = True  # False: learnt from Slack, not confirmed by its owner
    email_format: str = Field(default="html", max_length=8)  # html, text
    abstracts: str = Field(default="short", max_length=8)  # short, full


class RuleRow(SQLModel, table=True):
    __tablename__ = "rules"

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscribers.id", index=True)
    text: str = Field(max_length=1000)
    created_at: datetime


class DeliveryRow(SQLModel, table=True):
    __tablename__ = "deliveries"
    __table_args__ = (UniqueConstraint("subscriber_id", "paper_id", "paper_version", "channel"),)

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscribers.id", index=True)
    paper_id: str = Field(max_length=MAX_ID_LENGTH)
    paper_version: int
    channel: str = Field(max_length=16)
    # "queued" (in a digest waiting in the outbox), "sent", or "omitted" (over the
    # subscriber's max_papers, in a digest that was queued or sent)
    status: str = Field(max_length=16)
    digest_id: str = Field(max_length=128)
    outbox_id: int | None = Field(default=None, foreign_key="outbox.id", index=True)
    created_at: datetime


class OutboxRow(SQLModel, table=True):
    """A built digest waiting to be sent, being sent, sent, or failed (the outbox).

    Written with its papers' delivery rows in one transaction; unique per subscriber,
    channel and period, so two builders cannot queue the same digest twice."""

    __tablename__ = "outbox"
    __table_args__ = (UniqueConstraint("subscriber_id", "channel", "period"),)

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscribers.id", index=True)
    channel: str = Field(max_length=16)
    period: str = Field(max_length=128)  # the schedule slot ("daily:2026-11-23"), or the digest id
    digest_id: str = Field(max_length=128)
    recipient: str = Field(max_length=320)
    payload: bytes = Field(sa_type=LargeBinary)  # the finished message, sent as it is
    papers: int = 0
    omitted: int = 0
    status: str = Field(default="pending", max_length=16, index=True)  # pending, sent, failed
    attempts: int = 0
    next_attempt: datetime
    lease_owner: str | None = Field(default=None, max_length=128)
    lease_until: datetime | None = None
    last_error: str | None = None
    created_at: datetime
    sent_at: datetime | None = None
    # A digest sent as several messages (Slack: a summary and its thread) records each
    # message as it is accepted, so a retry goes on after the last one (JSON).
    progress: str | None = None


class SourceStateRow(SQLModel, table=True):
    __tablename__ = "source_state"

    name: str = Field(primary_key=True, max_length=128)
    url: str = ""
    etag: str | None = None
    last_modified: str | None = None
    last_poll: datetime | None = None
    last_result: str = ""  # ok, not_modified, empty, error
    last_error: str | None = None
    items: int = 0
    new: int = 0
    updated: int = 0
    announced: date | None = None
    # The batch of ids the source last gave (a digest of them), and when a poll last
    # brought a different one (a new listing), with the date that poll's feed gave.
    batch: str | None = Field(default=None, max_length=64)
    last_new: datetime | None = None
    last_new_day: date | None = None


class SourceLeftOutRow(SQLModel, table=True):
    """What a source's last poll left out: how many items it could not read, and the first
    of them with why (`paperbell status`, /metrics). A table of its own, so that databases
    made before it still open (it is created on first use)."""

    __tablename__ = "source_left_out"

    name: str = Field(primary_key=True, max_length=128)
    count: int = 0
    first: str | None = None  # "item 7 (oai:arXiv.org:2411.00002v9…): version … out of range"
    at: datetime | None = None  # the poll


class BackfillRow(SQLModel, table=True):
    """A part of a backfill that is done (a source's day): a rerun skips it."""

    __tablename__ = "backfill"

    source: str = Field(primary_key=True, max_length=128)
    chunk: str = Field(primary_key=True, max_length=64)
    papers: int = 0
    done_at: datetime


class SlackRequestRow(SQLModel, table=True):
    """A signed Slack request already accepted (its signature), kept for the five minutes
    Slack's timestamps are valid: a replay is refused even after a restart, and by every
    process sharing the database."""

    __tablename__ = "slack_request"

    signature: str = Field(primary_key=True, max_length=128)
    seen: datetime = Field(index=True)  # the later of when it came and its timestamp


class RuleCountRow(SQLModel, table=True):
    """What one rule of a subscriber matched among the papers of some recent days, counted
    when digests are built (at most once a day each), so that the manage page only reads."""

    __tablename__ = "rule_counts"

    id: int | None = Field(default=None, primary_key=True)
    subscriber_id: int = Field(foreign_key="subscribers.id", index=True)
    rule: str = Field(max_length=1000)
    matched: int = 0
    papers: int = 0  # the papers of those days
    first: date | None = None  # the days: first .. last announcement day
    last: date | None = None
    examples: str = "[]"  # JSON list of the best-ranked matched papers' ids
    counted_at: datetime


@dataclass(frozen=True, slots=True)
class RuleCount:
    """A stored count of one rule (`RuleCountRow`), with its example papers' ids."""

    rule: str
    matched: int
    papers: int
    first: date | None
    last: date | None
    examples: tuple[str, ...]
    counted_at: datetime


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """A claimed outbox record: what a worker needs to send it and report on it."""

    id: int
    subscriber_id: int
    subscriber: str
    channel: str
    recipient: str
    digest_id: str
    payload: bytes
    papers: int
    omitted: int
    attempts: int  # failed attempts before this one
    progress: str | None = None  # how far a multi-message digest got (the channel's JSON)


@dataclass(frozen=True, slots=True)
class OutboxStatus:
    """One subscriber's outbox, for `paperbell status`."""

    pending: int
    failed: int
    last_sent: datetime | None
    last_error: str | None
    next_attempt: datetime | None


@dataclass(frozen=True, slots=True)
class UpsertCounts:
    new: int
    updated: int
    unchanged: int
    merged: int = 0  # stored papers another source added facts to (upvotes, DOIs, ...)


def normalize_url(url: str) -> str:
    """Use the psycopg 3 driver for plain postgresql:// URLs."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _dumps(values: Iterable[str]) -> str:
    return json.dumps(list(values))


def _paper_from_row(row: PaperRow) -> Paper:
    return Paper(
        id=row.id,
        version=row.version,
        title=row.title,
        abstract=row.abstract,
        authors=tuple(json.loads(row.authors)),
        categories=tuple(json.loads(row.categories)),
        announce_type=row.announce_type,
        announced=row.announced,
        dois=tuple(json.loads(row.dois)),
        journal_ref=row.journal_ref,
        license=row.license,
        source=row.source,
        first_announced=row.first_announced,
        first_type=row.first_type,
        sources=tuple(json.loads(row.sources)),
        link=row.link,
        upvotes=row.upvotes,
        hf_rank=row.hf_rank,
        hf_day=row.hf_day,
        comments=row.comments,
        keywords=tuple(json.loads(row.keywords)),
        ai_summary=row.ai_summary,
        github=row.github,
        github_stars=row.github_stars,
        organization=row.organization,
    )


def _fill_paper_row(row: PaperRow, paper: Paper, authority: int) -> None:
    row.version = paper.version
    row.title = paper.title
    row.abstract = paper.abstract
    row.authors = _dumps(paper.authors)
    row.categories = _dumps(paper.categories)
    row.announce_type = paper.announce_type
    row.announced = paper.announced
    row.dois = _dumps(paper.dois)
    row.journal_ref = paper.journal_ref
    row.license = paper.license
    row.source = paper.source
    row.first_announced = paper.first_announced
    row.first_type = paper.first_type or paper.announce_type
    row.sources = _dumps(paper.sources)
    row.authority = authority
    row.link = paper.link
    row.upvotes = paper.upvotes
    row.hf_rank = paper.hf_rank
    row.hf_day = paper.hf_day
    row.comments = paper.comments
    row.keywords = _dumps(paper.keywords)
    row.ai_summary = paper.ai_summary
    row.github = paper.github
    row.github_stars = paper.github_stars
    row.organization = paper.organization


class Store:
    """Everything paperbell keeps, behind plain methods. Build with `Store.open(url)`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str, *, create: bool = True) -> Store:
        """Connect, and create missing tables unless `create` is false."""
        url = normalize_url(url)
        try:
            engine = create_engine(url)
            if create:
                SQLModel.metadata.create_all(engine)
            else:
                with engine.connect():
                    pass
            missing = _missing_columns(engine)
        except (SQLAlchemyError, ModuleNotFoundError) as exc:
            raise StoreError(
                f"cannot open the database {redact_url(url)}: {_first_line(exc)}",
                hint="check [database] url; PostgreSQL needs `pip install 'paperbell[postgres]'`",
            ) from None
        if missing:
            engine.dispose()
            raise StoreError(
                f"the database {redact_url(url)} was made by an older paperbell: "
                + "; ".join(f"table {t} lacks {', '.join(c)}" for t, c in missing.items()),
                hint="paperbell cannot upgrade a database yet: point [database] url at a new "
                "one (subscribers in the config file come back on their own)",
            )
        return cls(engine)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def session(self) -> Iterator[Session]:
        try:
            with Session(self.engine, expire_on_commit=False) as session:
                yield session
        except OperationalError as exc:
            raise StoreError(f"database error: {_first_line(exc)}") from None

    # -- papers -----------------------------------------------------------------------------

    def upsert_papers(
        self, papers: Sequence[Paper], *, now: datetime, authority: int = ARXIV_LISTING
    ) -> UpsertCounts:
        """Store papers from a source of this `authority` (bot.core.merge): a paper already
        stored, under its id or a DOI it shares, is merged with the new one; count what
        was new, updated (a newer version), merged (facts added) and unchanged."""
        latest: dict[str, Paper] = {}
        storable: list[Paper] = []
        for paper in papers:  # whatever a source's parser let through: never NUL, say
            try:
                storable.append(checked(paper))
            except ValueError as exc:
                log.warning("not stored: %s", exc)
        for paper in storable:  # a feed may list an id twice; keep its highest version
            kept = latest.get(paper.id)
            if kept is None or paper.version > kept.version:
                latest[paper.id] = paper
        counts: Counter[str] = Counter()
        with self.session() as session:
            rows = self._paper_rows(session, list(latest))
            doi_keys = [f"doi:{doi}" for paper in latest.values() for doi in paper.dois]
            aliases = self._aliases(session, doi_keys)
            for paper in latest.values():
                row = rows.get(paper.id)
                if row is None:
                    row = self._stored_under_doi(session, paper, rows, aliases)
                stored = _paper_from_row(row) if row is not None else None
                incoming = replace(paper, id=row.id) if row is not None else paper
                kept, kept_authority, outcome = merge_paper(
                    stored, row.authority if row is not None else 0, incoming, authority
                )
                counts[outcome] += 1
                if row is None:
                    row = PaperRow(
                        id=kept.id,
                        version=kept.version,
                        title="",
                        abstract="",
                        authors="[]",
                        categories="[]",
                        announce_type=kept.announce_type,
                        first_seen=now,
                        updated_at=now,
                    )
                    rows[kept.id] = row
                elif outcome == "unchanged":
                    continue
                _fill_paper_row(row, kept, kept_authority)
                if outcome == "updated":
                    row.updated_at = now
                session.add(row)
                for doi in kept.dois:
                    key = f"doi:{doi}"
                    if key not in aliases:  # a DOI the paper had before: looked up now
                        known = session.get(PaperKeyRow, key)
                        aliases[key] = known.paper_id if known is not None else None
                    if aliases[key] is None:
                        aliases[key] = kept.id
                        session.add(PaperKeyRow(key=key, paper_id=kept.id))
            session.commit()
        return UpsertCounts(
            new=counts["new"],
            updated=counts["updated"],
            unchanged=counts["unchanged"] + len(storable) - len(latest),
            merged=counts["merged"],
        )

    @staticmethod
    def _paper_rows(session: Session, ids: Sequence[str]) -> dict[str, PaperRow]:
        return {row.id: row for row in _rows_where_in(session, PaperRow.id, ids)}

    @staticmethod
    def _aliases(session: Session, keys: Sequence[str]) -> dict[str, str | None]:
        found: dict[str, str | None] = dict.fromkeys(keys)
        rows = _rows_where_in(session, PaperKeyRow.key, list(found))
        found.update({row.key: row.paper_id for row in rows})
        return found

    def _stored_under_doi(
        self,
        session: Session,
        paper: Paper,
        rows: dict[str, PaperRow],
        aliases: Mapping[str, str | None],
    ) -> PaperRow | None:
        """The stored paper a new one is under another name, through a DOI they share.

        A journal entry joins the arXiv paper with its DOI. An arXiv paper whose DOI names
        a paper stored from a journal feed takes that paper over: the arXiv id becomes its
        name, and what was delivered under the old one counts for the new one."""
        for doi in paper.dois:
            other = aliases.get(f"doi:{doi}")
            if other is None or other == paper.id:
                continue
            row = rows.get(other) or session.get(PaperRow, other)
            if row is None:
                continue
            stored_on_arxiv = is_arxiv_id(row.id)
            if paper.on_arxiv and stored_on_arxiv:
                continue  # two arXiv papers naming one DOI (an erratum, a typo): both stay
            if paper.on_arxiv:
                return self._rename_paper(session, row, paper.id, rows)
            rows[row.id] = row
            return row
        return None

    @staticmethod
    def _rename_paper(
        session: Session, row: PaperRow, new_id: str, rows: dict[str, PaperRow]
    ) -> PaperRow:
        renamed = PaperRow.model_validate(row.model_dump() | {"id": new_id})
        session.delete(row)
        session.flush()
        session.add(renamed)
        session.execute(
            update(DeliveryRow).where(col(DeliveryRow.paper_id) == row.id).values(paper_id=new_id)
        )
        session.execute(
            update(PaperKeyRow).where(col(PaperKeyRow.paper_id) == row.id).values(paper_id=new_id)
        )
        rows.pop(row.id, None)
        rows[new_id] = renamed
        log.info("paper %s is arXiv:%s: stored under the arXiv id from now on", row.id, new_id)
        return renamed

    def papers_announced_since(self, since: date) -> list[Paper]:
        """Stored papers whose (latest) announcement is on or after `since`, newest first."""
        with self.session() as session:
            rows = session.exec(
                select(PaperRow)
                .where(col(PaperRow.announced) >= since)
                .order_by(col(PaperRow.announced).desc(), col(PaperRow.id))
            ).all()
            return [_paper_from_row(row) for row in rows]

    def papers_per_day(self, since: date, until: date) -> dict[date, int]:
        """How many stored papers each announcement day from `since` to `until` brought."""
        with self.session() as session:
            rows = session.exec(
                select(col(PaperRow.announced), func.count())
                .where(col(PaperRow.announced) >= since, col(PaperRow.announced) <= until)
                .group_by(col(PaperRow.announced))
            ).all()
            return {day: count for day, count in rows if day is not None}

    def paper_count(self) -> int:
        with self.session() as session:
            return int(session.exec(select(func.count()).select_from(PaperRow)).one())

    def latest_announcement(self) -> date | None:
        with self.session() as session:
            return session.exec(select(func.max(PaperRow.announced))).one()

    # -- sources ----------------------------------------------------------------------------

    def fetch_state(self, name: str, url: str | None = None) -> FetchState:
        """The validators of the last successful poll, unless the source's URL changed since
        (the old ETag says nothing about a new feed)."""
        with self.session() as session:
            row = session.get(SourceStateRow, name)
            if row is None or (url is not None and row.url != url):
                return FetchState()
            return FetchState(etag=row.etag, last_modified=row.last_modified)

    def record_poll(
        self,
        name: str,
        *,
        url: str,
        now: datetime,
        result: str,
        error: str | None = None,
        state: FetchState | None = None,
        items: int = 0,
        new: int = 0,
        updated: int = 0,
        announced: date | None = None,
        batch: str | None = None,
        left_out: Sequence[str] = (),
    ) -> None:
        """Remember a poll's outcome; the validators only when the body was stored.
        `batch` names the ids the feed held: a different one than last time is a new listing
        (counted per source: another source may already have stored the same papers).
        `left_out` describes the items the poll could not read (kept unless it failed)."""

        with self.session() as session:
            row = session.get(SourceStateRow, name) or SourceStateRow(name=name)
            row.url = url
            row.last_poll = now
            row.last_result = result
            row.last_error = clean_text(error) if error is not None else None  # a feed's words
            if result != "error":
                row.items, row.new, row.updated = items, new, updated
            if batch is not None and batch != row.batch:
                row.batch, row.last_new, row.last_new_day = batch, now, announced
            if announced is not None:
                row.announced = announced
            if state is not None:
                row.etag, row.last_modified = state.etag, state.last_modified
            session.add(row)
            if result != "error":
                skipped = session.get(SourceLeftOutRow, name) or SourceLeftOutRow(name=name)
                skipped.count, skipped.at = len(left_out), now
                skipped.first = clean_text(left_out[0][:500]) if left_out else None
                session.add(skipped)
            session.commit()

    def backfilled(self, source: str) -> set[str]:
        """The parts of a backfill of `source` already done."""
        with self.session() as session:
            rows = session.exec(select(BackfillRow.chunk).where(BackfillRow.source == source))
            return set(rows.all())

    def mark_backfilled(self, source: str, chunk: str, *, papers: int, now: datetime) -> None:
        with self.session() as session:
            row = session.get(BackfillRow, (source, chunk)) or BackfillRow(
                source=source, chunk=chunk, done_at=now
            )
            row.papers, row.done_at = papers, now
            session.add(row)
            session.commit()

    def left_out(self) -> dict[str, SourceLeftOutRow]:
        """Per source, what its last poll left out (sources never polled are absent)."""
        with self.session() as session:
            return {row.name: row for row in session.exec(select(SourceLeftOutRow)).all()}

    def source_states(self) -> list[SourceStateRow]:
        with self.session() as session:
            return list(session.exec(select(SourceStateRow).order_by(SourceStateRow.name)).all())

    # -- Slack requests ---------------------------------------------------------------------

    def first_slack_request(
        self, signature: str, *, now: datetime, window: timedelta, stamp: datetime | None = None
    ) -> bool:
        """Record a signed Slack request as seen: True the first time, False for a replay
        (also one seen by another process). It is kept while it could still be accepted:
        until `window` after the later of `now` and its timestamp `stamp`."""
        with self.session() as session:
            session.execute(delete(SlackRequestRow).where(col(SlackRequestRow.seen) < now - window))
            session.commit()
            session.add(SlackRequestRow(signature=signature, seen=max(now, stamp or now)))
            try:
                session.commit()
            except IntegrityError:  # the primary key: seen before, here or elsewhere
                session.rollback()
                return False
        return True

    # -- subscribers ------------------------------------------------------------------------

    def sync_config_subscribers(self, subscribers: Sequence[Subscriber], *, now: datetime) -> None:
        """Mirror the config file's subscribers into the database so deliveries can refer to
        them. The file stays the truth for their settings; an unsubscribe stays in force."""

        with self.session() as session:
            for sub in subscribers:
                row = session.exec(select(SubscriberRow).where(SubscriberRow.name == sub.name))
                found = row.first()
                if found is not None and found.origin != "config":
                    raise StoreError(
                        f"subscriber {sub.name!r} is in the config file and in the database",
                        hint=f"rename one of them, or `paperbell unsubscribe {sub.name} --delete`",
                    )
                found = found or SubscriberRow(name=sub.name, origin="config", created_at=now)
                found.email = sub.email
                found.slack_channel = sub.slack_channel
                found.slack_user = sub.slack_user
                found.slack_webhook = sub.slack_webhook
                found.categories = _dumps(sub.categories)
                found.max_papers = sub.max_papers
                found.include = _dumps(sorted(sub.include))
                session.add(found)
            session.commit()

    def subscribers(
        self,
        config_subscribers: Sequence[Subscriber] = (),
        *,
        include_inactive: bool = False,
        defaults: Defaults | None = None,
    ) -> list[Subscriber]:
        """Every subscriber: the config file's (with their ids, if stored) and the database's,
        whose unset schedule settings take `defaults` (the config's [digest])."""
        defaults = defaults or Defaults()
        with self.session() as session:
            rows = {r.name: r for r in session.exec(select(SubscriberRow)).all()}
            rules: dict[int, list[str]] = {}
            for rule in session.exec(select(RuleRow).order_by(col(RuleRow.id))).all():
                rules.setdefault(rule.subscriber_id, []).append(rule.text)
        result: list[Subscriber] = []
        for sub in config_subscribers:
            row = rows.get(sub.name)
            active = row.active if row is not None else True
            stored = replace(
                sub,
                id=row.id if row else None,
                active=active,
                created=_aware(row.created_at) if row else None,
                last_slot=row.last_slot if row else None,
            )
            if active or include_inactive:
                result.append(stored)
        for row in sorted(rows.values(), key=lambda r: r.name):
            if row.origin != "database" or not (row.active or include_inactive):
                continue
            assert row.id is not None
            result.append(
                Subscriber(
                    id=row.id,
                    name=row.name,
                    email=row.email,
                    rules=tuple(rules.get(row.id, ())),
                    categories=tuple(json.loads(row.categories)),
                    max_papers=row.max_papers,
                    include=frozenset(json.loads(row.include)) or DEFAULT_INCLUDE,
                    origin="database",
                    active=row.active,
                    schedule=defaults.resolve(row.schedule, row.day, row.time, row.timezone),
                    notify_empty=(
                        defaults.notify_empty if row.notify_empty is None else row.notify_empty
                    ),
                    created=_aware(row.created_at),
                    last_slot=row.last_slot,
                    slack_channel=row.slack_channel,
                    slack_user=row.slack_user,
                    slack_webhook=row.slack_webhook,
                    email_confirmed=row.email_confirmed,
                    email_format=cast(EmailFormat, row.email_format),
                    abstracts=cast(AbstractLength, row.abstracts),
                )
            )
        return result

    def set_schedule(self, name: str, **settings: str | bool | None) -> None:
        """Change a database subscriber's settings (schedule, day, time, timezone,
        notify_empty, email_format, abstracts); None sets a schedule setting back to the
        config's default."""
        with self.session() as session:
            row = self._database_subscriber(session, name)
            for key, value in settings.items():
                if key not in SETTINGS:
                    raise ValueError(f"not a subscriber setting: {key}")
                setattr(row, key, value)
            session.add(row)
            session.commit()

    def mark_slots(self, slots: Mapping[int, str]) -> None:
        """Remember, per subscriber id, the last schedule slot the daemon handled."""
        if not slots:
            return
        with self.session() as session:
            for subscriber_id, key in slots.items():
                row = session.get(SubscriberRow, subscriber_id)
                if row is not None:
                    row.last_slot = key
                    session.add(row)
            session.commit()

    def add_subscriber(
        self,
        name: str,
        *,
        email: str | None,
        rules: Sequence[str],
        now: datetime,
        categories: Sequence[str] = (),
        max_papers: int | None = None,
        include: Iterable[str] | None = None,
        slack_channel: str | None = None,
        slack_user: str | None = None,
        email_confirmed: bool = True,
        max_rules: int | None = None,
    ) -> tuple[Subscriber, bool]:
        """Create a subscriber, or add rules to an existing one (and reactivate it).
        Returns the subscriber and whether it was created. An address learnt from Slack
        (`email_confirmed=False`) receives nothing until its owner confirms it. More than
        `max_rules` rules in all is refused (a StoreError), and nothing changes."""

        with self.session() as session:
            row = session.exec(select(SubscriberRow).where(SubscriberRow.name == name)).first()
            created = row is None
            if row is None:
                row = SubscriberRow(
                    name=name,
                    email=email,
                    email_confirmed=email_confirmed,
                    origin="database",
                    created_at=now,
                )
            elif row.origin == "config":
                raise StoreError(
                    f"subscriber {name!r} is declared in the config file",
                    hint="change its rules in the config file",
                )
            if email is not None:
                # An address given again by someone who may (an admin's --email) confirms it;
                # a new one learnt from Slack waits for its owner.
                same = email == row.email
                row.email = email
                row.email_confirmed = email_confirmed or (same and row.email_confirmed)
            if slack_channel is not None:
                row.slack_channel = slack_channel
            if slack_user is not None:
                row.slack_user = slack_user
            if categories:
                row.categories = _dumps(categories)
            if max_papers is not None:
                row.max_papers = max_papers
            if include is not None:
                row.include = _dumps(sorted(set(include)))
            row.active, row.paused_reason = True, None
            session.add(row)
            session.flush()
            assert row.id is not None
            known = set(
                session.exec(select(RuleRow.text).where(RuleRow.subscriber_id == row.id)).all()
            )
            count = len(known | set(rules))
            if max_rules is not None and count > max(max_rules, len(known)):
                raise _too_many_rules(name, count, max_rules)
            for text in rules:
                if text not in known:
                    session.add(RuleRow(subscriber_id=row.id, text=text, created_at=now))
                    known.add(text)
            session.commit()
        subscriber = next(s for s in self.subscribers(include_inactive=True) if s.name == name)
        return subscriber, created

    def remove_rule(self, name: str, number: int, *, last_pauses: bool = False) -> str:
        """Delete the subscriber's rule number `number` (1-based, as `list` shows it). The
        last rule is refused, unless `last_pauses`: then the subscriber stops too."""
        with self.session() as session:
            row = self._database_subscriber(session, name)
            rules = self._rules(session, row)
            if not 1 <= number <= len(rules):
                raise StoreError(f"{name!r} has no rule {number} (it has {len(rules)})")
            if len(rules) == 1 and last_pauses:
                row.active = False
                session.add(row)
            elif len(rules) == 1:
                raise StoreError(
                    f"rule {number} is the last rule of {name!r}",
                    hint=f"to stop the digests, `paperbell unsubscribe {name}`",
                )
            text = rules[number - 1].text
            session.delete(rules[number - 1])
            session.commit()
            return text

    def rule_texts(self, name: str) -> list[str]:
        """The rules of the subscriber `name` (none if there is no such subscriber)."""
        with self.session() as session:
            row = session.exec(select(SubscriberRow).where(SubscriberRow.name == name)).first()
            return [] if row is None else [r.text for r in self._rules(session, row)]

    def add_rule(
        self, name: str, text: str, *, now: datetime, max_rules: int | None = None
    ) -> bool:
        """Add a rule to a database subscriber; False when it has that rule already. A rule
        past `max_rules` is refused (a StoreError)."""
        with self.session() as session:
            row = self._database_subscriber(session, name)
            known = session.exec(
                select(RuleRow.text).where(RuleRow.subscriber_id == row.id, RuleRow.text == text)
            ).first()
            if known is not None:
                return False
            count = len(self._rules(session, row)) + 1
            if max_rules is not None and count > max_rules:
                raise _too_many_rules(name, count, max_rules)
            assert row.id is not None
            session.add(RuleRow(subscriber_id=row.id, text=text, created_at=now))
            session.commit()
            return True

    def replace_rule(self, name: str, number: int, text: str) -> str:
        """Change the text of rule `number` (1-based); returns the text it had."""
        with self.session() as session:
            row = self._database_subscriber(session, name)
            rules = self._rules(session, row)
            if not 1 <= number <= len(rules):
                raise StoreError(f"{name!r} has no rule {number} (it has {len(rules)})")
            if any(r.text == text for i, r in enumerate(rules) if i != number - 1):
                raise StoreError(f"{name!r} has that rule already")
            rule = rules[number - 1]
            old, rule.text = rule.text, text
            session.add(rule)
            session.commit()
            return old

    def set_email(self, name: str, email: str | None, *, confirmed: bool) -> None:
        """Set a database subscriber's address; an unconfirmed one gets no mail until its
        owner opens the confirmation link (`confirm_email`)."""
        with self.session() as session:
            row = self._database_subscriber(session, name)
            if email != row.email or confirmed:
                row.email, row.email_confirmed = email, confirmed
            session.add(row)
            session.commit()

    def stop_email(self, name: str) -> None:
        """Stop a database subscriber's email digests, keeping the address (unconfirmed:
        only a new confirmation by its owner starts them again)."""
        with self.session() as session:
            row = self._database_subscriber(session, name)
            row.email_confirmed = False
            session.add(row)
            session.commit()

    def confirm_email(self, subscriber_id: int, email: str) -> bool:
        """Mark the subscriber's address confirmed, if it is still `email`; False if not."""
        with self.session() as session:
            row = session.get(SubscriberRow, subscriber_id)
            if row is None or row.email is None or row.email.lower() != email.lower():
                return False
            row.email_confirmed = True
            session.add(row)
            session.commit()
            return True

    def set_active(self, name: str, active: bool, *, now: datetime) -> bool:
        """Pause or resume a subscriber (config or database). False if unknown."""
        with self.session() as session:
            row = session.exec(select(SubscriberRow).where(SubscriberRow.name == name)).first()
            if row is None:
                return False
            row.active = active
            if active:
                row.paused_reason = None
            session.add(row)
            session.commit()
            return True

    def delete_subscriber(self, name: str) -> None:
        """Remove a database subscriber with its rules and delivery history."""
        with self.session() as session:
            row = self._database_subscriber(session, name)
            for model in (RuleRow, DeliveryRow, RuleCountRow):
                for item in session.exec(select(model).where(model.subscriber_id == row.id)):
                    session.delete(item)
            session.delete(row)
            session.commit()

    def slack_subscriber(
        self, *, user: str | None = None, channel: str | Sequence[str] | None = None
    ) -> SubscriberRow | None:
        """The subscriber a Slack user (their direct messages) or a channel is, if any; a
        channel may be given by its id and its "#name" (the config may use either)."""
        if (user is None) == (channel is None):
            raise ValueError("give one of user, channel")
        names = [channel] if isinstance(channel, str) else list(channel or ())
        with self.session() as session:
            if user is not None:
                query = select(SubscriberRow).where(
                    SubscriberRow.slack_user == user, col(SubscriberRow.slack_channel).is_(None)
                )
            else:
                query = select(SubscriberRow).where(col(SubscriberRow.slack_channel).in_(names))
            return session.exec(query.order_by(col(SubscriberRow.id))).first()

    def subscriber_row(self, name: str) -> SubscriberRow | None:
        with self.session() as session:
            return session.exec(select(SubscriberRow).where(SubscriberRow.name == name)).first()

    @staticmethod
    def _rules(session: Session, row: SubscriberRow) -> list[RuleRow]:
        """A subscriber's rules, in the order `list` numbers them."""
        query = select(RuleRow).where(RuleRow.subscriber_id == row.id).order_by(col(RuleRow.id))
        return list(session.exec(query).all())

    @staticmethod
    def _database_subscriber(session: Session, name: str) -> SubscriberRow:
        row = session.exec(select(SubscriberRow).where(SubscriberRow.name == name)).first()
        if row is None:
            raise StoreError(f"no subscriber named {name!r}", hint="see `paperbell list`")
        if row.origin == "config":
            raise StoreError(
                f"subscriber {name!r} is declared in the config file",
                hint="change it in the config file",
            )
        return row

    # -- deliveries -------------------------------------------------------------------------

    def delivered_versions(self, subscriber_id: int | None, channel: str) -> dict[str, int]:
        """paper id -> highest version already delivered (or omitted) to this subscriber."""
        if subscriber_id is None:
            return {}
        with self.session() as session:
            rows = session.exec(
                select(DeliveryRow.paper_id, func.max(DeliveryRow.paper_version))
                .where(DeliveryRow.subscriber_id == subscriber_id, DeliveryRow.channel == channel)
                .group_by(col(DeliveryRow.paper_id))
            ).all()
            return {paper_id: int(version) for paper_id, version in rows}

    # -- outbox -----------------------------------------------------------------------------

    def enqueue(
        self,
        subscriber_id: int,
        *,
        channel: str,
        period: str,
        digest_id: str,
        recipient: str,
        payload: bytes,
        sent: Sequence[Paper],
        omitted: Sequence[Paper] = (),
        now: datetime,
    ) -> int | None:
        """Queue a built digest and claim its papers for it, in one transaction.

        None when another run queued this period's digest, or one of these papers, first:
        nothing is written then (the unique keys decide; no lock is needed)."""
        try:
            with self.session() as session:
                row = OutboxRow(
                    subscriber_id=subscriber_id,
                    channel=channel,
                    period=period,
                    digest_id=digest_id,
                    recipient=recipient,
                    payload=payload,
                    papers=len(sent),
                    omitted=len(omitted),
                    next_attempt=now,
                    created_at=now,
                )
                session.add(row)
                session.flush()
                seen: set[tuple[str, int]] = set()
                for papers, status in ((sent, "queued"), (omitted, "omitted")):
                    for paper in papers:
                        if (paper.id, paper.version) in seen:
                            continue
                        seen.add((paper.id, paper.version))
                        session.add(
                            DeliveryRow(
                                subscriber_id=subscriber_id,
                                paper_id=paper.id,
                                paper_version=paper.version,
                                channel=channel,
                                status=status,
                                digest_id=digest_id,
                                outbox_id=row.id,
                                created_at=now,
                            )
                        )
                session.commit()
                return row.id
        except IntegrityError:
            return None
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot queue the digest: {_first_line(exc)}") from None

    def claim(
        self,
        owner: str,
        *,
        now: datetime,
        lease: timedelta,
        limit: int = 20,
        due_only: bool = True,
        exclude: Iterable[int] = (),
    ) -> list[OutboxItem]:
        """Lease up to `limit` pending records to `owner` until now + lease: records due
        (`due_only`: their retry time has come), not leased, or whose lease expired (a
        worker that died). Each claim is a conditional UPDATE: two workers never hold one
        record."""
        skip = set(exclude)
        claimable = (col(OutboxRow.lease_until).is_(None)) | (col(OutboxRow.lease_until) < now)
        query = select(OutboxRow.id).where(OutboxRow.status == "pending", claimable)
        if due_only:
            query = query.where(col(OutboxRow.next_attempt) <= now)
        claimed: list[OutboxItem] = []
        with self.session() as session:
            ids = [
                i for i in session.exec(query.order_by(col(OutboxRow.id))).all() if i not in skip
            ]
            for outbox_id in ids:
                result = session.execute(
                    update(OutboxRow)
                    .where(
                        col(OutboxRow.id) == outbox_id,
                        col(OutboxRow.status) == "pending",
                        claimable,
                    )
                    .values(lease_owner=owner, lease_until=now + lease)
                )
                session.commit()
                if result.rowcount != 1:  # type: ignore[attr-defined]
                    continue  # another worker took it first
                row = session.get(OutboxRow, outbox_id)
                sub = session.get(SubscriberRow, row.subscriber_id) if row else None
                if row is None or row.id is None:
                    continue
                claimed.append(
                    OutboxItem(
                        id=row.id,
                        subscriber_id=row.subscriber_id,
                        subscriber=sub.name if sub else str(row.subscriber_id),
                        channel=row.channel,
                        recipient=row.recipient,
                        digest_id=row.digest_id,
                        payload=row.payload,
                        papers=row.papers,
                        omitted=row.omitted,
                        attempts=row.attempts,
                        progress=row.progress,
                    )
                )
                if len(claimed) == limit:
                    break
        return claimed

    def release(self, owner: str, ids: Iterable[int] | None = None) -> int:
        """Give up `owner`'s leases on records it has not sent (a worker stopping; with
        `ids`, only those: a batch cut short), so the next worker takes them at once instead
        of when the leases expire."""
        query = update(OutboxRow).where(
            col(OutboxRow.lease_owner) == owner, col(OutboxRow.status) == "pending"
        )
        if ids is not None:
            query = query.where(col(OutboxRow.id).in_(list(ids)))
        try:
            with self.session() as session:
                result = session.execute(query.values(lease_owner=None, lease_until=None))
                session.commit()
                return int(result.rowcount)  # type: ignore[attr-defined]
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot release the claimed digests: {_first_line(exc)}") from None

    def renew(self, ids: Iterable[int], *, owner: str, lease_until: datetime) -> set[int]:
        """Extend `owner`'s lease on these pending records to `lease_until` (a worker about
        to send the next message of its batch); the ids it still holds. A record missing
        from the answer was taken over by another worker (its lease ran out) or is no
        longer pending: the worker must not send it."""
        wanted = list(ids)
        if not wanted:
            return set()
        mine = (
            col(OutboxRow.id).in_(wanted),
            col(OutboxRow.lease_owner) == owner,
            col(OutboxRow.status) == "pending",
        )
        try:
            with self.session() as session:
                result = session.execute(
                    update(OutboxRow).where(*mine).values(lease_until=lease_until)
                )
                if result.rowcount == len(wanted):  # type: ignore[attr-defined]
                    session.commit()
                    return set(wanted)
                held = set(session.exec(select(OutboxRow.id).where(*mine)).all())
                session.commit()
                return {i for i in held if i is not None}
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot renew the lease: {_first_line(exc)}") from None

    def mark_sent(self, outbox_id: int, *, owner: str, now: datetime) -> bool:
        """The channel accepted the message: record it, at once, in one transaction.

        False if `owner` no longer held the lease (it ran out and another worker took the
        record, which may be sending it too): the send is recorded all the same while the
        record is still pending, since the message did go out, so that the other worker
        does not send it again; a record already sent or given up is left as it is."""
        try:
            with self.session() as session:
                pending = (col(OutboxRow.id) == outbox_id, col(OutboxRow.status) == "pending")
                sent = dict(status="sent", sent_at=now, lease_owner=None, lease_until=None)
                mine = update(OutboxRow).where(*pending, col(OutboxRow.lease_owner) == owner)
                held = session.execute(mine.values(**sent)).rowcount  # type: ignore[attr-defined]
                if not held:
                    anyone = update(OutboxRow).where(*pending)
                    written = session.execute(anyone.values(**sent)).rowcount  # type: ignore[attr-defined]
                else:
                    written = held
                if written:
                    session.execute(
                        update(DeliveryRow)
                        .where(
                            col(DeliveryRow.outbox_id) == outbox_id,
                            col(DeliveryRow.status) == "queued",
                        )
                        .values(status="sent")
                    )
                session.commit()
                return bool(held)
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot record the delivery: {_first_line(exc)}") from None

    def mark_progress(
        self, outbox_id: int, progress: str, *, owner: str, lease_until: datetime
    ) -> bool:
        """Part of a digest was accepted (a Slack summary and some of its thread): remember
        how far, at once, so a retry does not post those messages again, and extend the
        lease of `owner`. False if the lease was lost (another worker took the record)."""
        return self._update_held(
            outbox_id, owner, "delivery", progress=progress, lease_until=lease_until
        )

    def mark_retry(self, outbox_id: int, *, owner: str, error: str, next_attempt: datetime) -> bool:
        """A transient failure: count it, release the lease, try again at `next_attempt`.
        False (nothing written) if `owner` lost the lease: the record is another worker's."""
        return self._update_held(
            outbox_id,
            owner,
            "failure",
            attempts=OutboxRow.attempts + 1,
            last_error=error,
            next_attempt=next_attempt,
            lease_owner=None,
            lease_until=None,
        )

    def _update_held(self, outbox_id: int, owner: str, what: str, **values: Any) -> bool:
        """Write `values` to a pending record `owner` holds; False if it holds it no more."""
        try:
            with self.session() as session:
                result = session.execute(
                    update(OutboxRow)
                    .where(
                        col(OutboxRow.id) == outbox_id,
                        col(OutboxRow.lease_owner) == owner,
                        col(OutboxRow.status) == "pending",
                    )
                    .values(**values)
                )
                session.commit()
                return bool(result.rowcount)  # type: ignore[attr-defined]
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot record the {what}: {_first_line(exc)}") from None

    def mark_failed(
        self, outbox_id: int, *, owner: str, error: str, sent: Iterable[str] = ()
    ) -> int | None:
        """Give up on a record (a permanent failure, or too many attempts) and release its
        papers, so the subscriber's next digest holds them: nothing is lost. The papers in
        `sent` ("id@version") reached the far end before it failed (a Slack thread cut off
        half-way): they are recorded as delivered, never sent again. Returns how
        many of the subscriber's latest records on this channel in a row have failed, or
        None (nothing written) if `owner` lost the lease: the record is another worker's."""
        with self.session() as session:
            row = session.exec(
                select(OutboxRow)
                .where(
                    OutboxRow.id == outbox_id,
                    OutboxRow.lease_owner == owner,
                    OutboxRow.status == "pending",
                )
                .with_for_update()
            ).first()
            if row is None:
                return None
            row.status, row.last_error = "failed", error
            # Free the period: the papers go back to the subscriber, whose next digest
            # (maybe the very same papers, the same digest id) must be able to queue.
            row.period = f"{row.period}#failed-{row.id}"[:128]
            row.attempts += 1
            row.lease_owner = row.lease_until = None
            session.add(row)
            reached = set(sent)
            for delivery in session.exec(
                select(DeliveryRow).where(DeliveryRow.outbox_id == outbox_id)
            ):
                if version_key(delivery.paper_id, delivery.paper_version) in reached:
                    delivery.status = "sent"
                    session.add(delivery)
                else:
                    session.delete(delivery)
            session.commit()
            statuses = session.exec(
                select(OutboxRow.status)
                .where(
                    OutboxRow.subscriber_id == row.subscriber_id,
                    OutboxRow.channel == row.channel,
                    OutboxRow.status != "pending",
                )
                .order_by(col(OutboxRow.id).desc())
                .limit(20)
            ).all()
        failed = 0
        for status in statuses:
            if status != "failed":
                break
            failed += 1
        return failed

    def pause(self, subscriber_id: int, reason: str) -> None:
        """Stop building digests for a subscriber, saying why (`status` shows it)."""
        with self.session() as session:
            row = session.get(SubscriberRow, subscriber_id)
            if row is not None:
                row.active, row.paused_reason = False, reason
                session.add(row)
                session.commit()

    def outbox_status(self) -> dict[int, OutboxStatus]:
        """subscriber id -> its outbox: pending and failed records, last sent, last error."""
        found: dict[int, OutboxStatus] = {}
        with self.session() as session:
            rows = session.exec(select(OutboxRow).order_by(col(OutboxRow.id))).all()
        by_sub: dict[int, list[OutboxRow]] = {}
        for row in rows:
            by_sub.setdefault(row.subscriber_id, []).append(row)
        for sid, items in by_sub.items():
            pending = [r for r in items if r.status == "pending"]
            sent = [r.sent_at for r in items if r.sent_at is not None]
            errors = [r for r in items if r.last_error]
            found[sid] = OutboxStatus(
                pending=len(pending),
                failed=sum(1 for r in items if r.status == "failed"),
                last_sent=max(sent) if sent else None,
                last_error=errors[-1].last_error if errors else None,
                next_attempt=min((r.next_attempt for r in pending), default=None),
            )
        return found

    def outbox_totals(self, *, now: datetime) -> dict[str, int]:
        """How many outbox records are pending, in flight (leased now), sent and failed."""
        with self.session() as session:
            counts = dict(
                session.exec(
                    select(OutboxRow.status, func.count()).group_by(col(OutboxRow.status))
                ).all()
            )
            leased = session.exec(
                select(func.count())
                .select_from(OutboxRow)
                .where(OutboxRow.status == "pending", col(OutboxRow.lease_until) > now)
            ).one()
        totals = {status: int(counts.get(status, 0)) for status in ("pending", "sent", "failed")}
        totals["in flight"] = int(leased)
        return totals

    # -- rule counts (the manage page's "recent matches") -----------------------------------------

    def save_rule_counts(self, subscriber_id: int, counts: Sequence[RuleCount]) -> None:
        """Replace the subscriber's stored rule counts with `counts`."""
        with self.session() as session:
            query = select(RuleCountRow).where(RuleCountRow.subscriber_id == subscriber_id)
            for row in session.exec(query):
                session.delete(row)
            for count in counts:
                session.add(
                    RuleCountRow(
                        subscriber_id=subscriber_id,
                        rule=count.rule,
                        matched=count.matched,
                        papers=count.papers,
                        first=count.first,
                        last=count.last,
                        examples=_dumps(count.examples),
                        counted_at=count.counted_at,
                    )
                )
            session.commit()

    def rule_counts(self, subscriber_id: int) -> dict[str, RuleCount]:
        """The subscriber's stored rule counts, by rule text."""
        with self.session() as session:
            query = select(RuleCountRow).where(RuleCountRow.subscriber_id == subscriber_id)
            return {row.rule: _count_from_row(row) for row in session.exec(query)}

    def rule_counts_times(self) -> dict[int, datetime]:
        """subscriber id -> when their rules were last counted."""
        with self.session() as session:
            rows = session.exec(
                select(RuleCountRow.subscriber_id, func.max(RuleCountRow.counted_at)).group_by(
                    col(RuleCountRow.subscriber_id)
                )
            ).all()
            return {sid: _aware(at) for sid, at in rows if at is not None}

    def papers_by_id(self, ids: Sequence[str]) -> dict[str, Paper]:
        """The stored papers with these (version-less) ids."""
        with self.session() as session:
            return {
                paper_id: _paper_from_row(row)
                for paper_id, row in self._paper_rows(session, list(ids)).items()
            }

    def delivery_counts(self) -> dict[int, tuple[int, datetime | None]]:
        """subscriber id -> (papers delivered, last delivery time)."""
        with self.session() as session:
            rows = session.exec(
                select(
                    DeliveryRow.subscriber_id,
                    func.count(),
                    func.max(DeliveryRow.created_at),
                )
                .where(DeliveryRow.status == "sent")
                .group_by(col(DeliveryRow.subscriber_id))
            ).all()
            return {sid: (int(count), last) for sid, count, last in rows}


def _count_from_row(row: RuleCountRow) -> RuleCount:
    return RuleCount(
        rule=row.rule,
        matched=row.matched,
        papers=row.papers,
        first=row.first,
        last=row.last,
        examples=tuple(json.loads(row.examples)),
        counted_at=_aware(row.counted_at),
    )


def _rows_where_in(
    session: Session, column: Any, values: Sequence[str], *, size: int = 500
) -> Iterator[Any]:
    """The rows of `column`'s table whose `column` is one of `values`, asked `size` at a
    time (databases limit the parameters of one statement)."""
    for start in range(0, len(values), size):
        chunk = values[start : start + size]
        yield from session.exec(select(column.class_).where(col(column).in_(chunk)))


def _too_many_rules(name: str, count: int, max_rules: int) -> StoreError:
    return StoreError(
        f"{name!r} would have {count} rules, more than the {max_rules} a subscriber may have",
        hint="remove a rule first, or join rules with OR ([digest] max_rules sets the limit)",
    )


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def _missing_columns(engine: Engine) -> dict[str, list[str]]:
    """Columns this version's tables have that the database's lack (an older schema)."""
    inspector = inspect(engine)
    missing = {}
    for table in SQLModel.metadata.sorted_tables:
        if not inspector.has_table(table.name):
            continue
        present = {column["name"] for column in inspector.get_columns(table.name)}
        lacking = [column.name for column in table.columns if column.name not in present]
        if lacking:
            missing[table.name] = lacking
    return missing


def _aware(moment: datetime) -> datetime:
    """A stored time as aware UTC (SQLite returns naive datetimes)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def utcnow() -> datetime:
    """The current time in UTC; only entry points call this, and pass it down."""
    return datetime.now(UTC)
