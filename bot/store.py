"""The subscription store: the only module that opens a database session.

Tables (created on first use): papers (one row per version-less arXiv id, holding the latest
version), subscribers and their rules, deliveries (unique per subscriber, paper, version and
channel, so a re-run can never send a paper twice), and per-source fetch state for
conditional GET. SQLite by default, PostgreSQL through the same code.

Deliveries are recorded only after the channel accepted the message (see bot.pipeline).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime

from sqlalchemy import Engine, UniqueConstraint, func
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, col, create_engine, select

from bot.checks import redact_url
from bot.errors import StoreError
from bot.models import DEFAULT_INCLUDE, Paper, Subscriber
from bot.sources import FetchState

log = logging.getLogger(__name__)


class PaperRow(SQLModel, table=True):
    __tablename__ = "papers"

    id: str = Field(primary_key=True, max_length=64)
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
    paper_id: str = Field(max_length=64)
    paper_version: int
    channel: str = Field(max_length=16)
    status: str = Field(max_length=16)  # "sent", or "omitted" (over the subscriber's max_papers)
    digest_id: str = Field(max_length=128)
    created_at: datetime


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


@dataclass(frozen=True, slots=True)
class UpsertCounts:
    new: int
    updated: int
    unchanged: int


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
    )


def _fill_paper_row(row: PaperRow, paper: Paper) -> None:
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
        except (SQLAlchemyError, ModuleNotFoundError) as exc:
            raise StoreError(
                f"cannot open the database {redact_url(url)}: {_first_line(exc)}",
                hint="check [database] url; PostgreSQL needs `pip install 'paperbell[postgres]'`",
            ) from None
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

    def upsert_papers(self, papers: Sequence[Paper], *, now: datetime) -> UpsertCounts:
        """Store papers, keeping the latest version of each id; count new/updated/unchanged."""

        new = updated = unchanged = 0
        latest: dict[str, Paper] = {}
        for paper in papers:  # a feed may list an id twice; keep its highest version
            kept = latest.get(paper.id)
            if kept is None or paper.version > kept.version:
                latest[paper.id] = paper
        with self.session() as session:
            ids = list(latest)
            existing: dict[str, PaperRow] = {}
            for chunk in _chunks(ids, 500):
                rows = session.exec(select(PaperRow).where(col(PaperRow.id).in_(chunk)))
                existing.update({row.id: row for row in rows})
            for paper in latest.values():
                row = existing.get(paper.id)
                if row is None:
                    row = PaperRow(
                        id=paper.id,
                        version=paper.version,
                        title="",
                        abstract="",
                        authors="[]",
                        categories="[]",
                        announce_type=paper.announce_type,
                        first_seen=now,
                        first_announced=paper.announced,
                        first_type=paper.announce_type,
                        updated_at=now,
                    )
                    _fill_paper_row(row, paper)
                    session.add(row)
                    new += 1
                elif paper.version > row.version:
                    _fill_paper_row(row, paper)
                    row.updated_at = now
                    session.add(row)
                    updated += 1
                else:
                    unchanged += 1
            session.commit()
        unchanged += len(papers) - len(latest)
        return UpsertCounts(new=new, updated=updated, unchanged=unchanged)

    def papers_announced_since(self, since: date) -> list[Paper]:
        """Stored papers whose (latest) announcement is on or after `since`, newest first."""
        with self.session() as session:
            rows = session.exec(
                select(PaperRow)
                .where(col(PaperRow.announced) >= since)
                .order_by(col(PaperRow.announced).desc(), col(PaperRow.id))
            ).all()
            return [_paper_from_row(row) for row in rows]

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
    ) -> None:
        """Remember a poll's outcome; the validators only when the body was stored."""

        with self.session() as session:
            row = session.get(SourceStateRow, name) or SourceStateRow(name=name)
            row.url = url
            row.last_poll = now
            row.last_result = result
            row.last_error = error
            if result != "error":
                row.items, row.new, row.updated = items, new, updated
            if announced is not None:
                row.announced = announced
            if state is not None:
                row.etag, row.last_modified = state.etag, state.last_modified
            session.add(row)
            session.commit()

    def source_states(self) -> list[SourceStateRow]:
        with self.session() as session:
            return list(session.exec(select(SourceStateRow).order_by(SourceStateRow.name)).all())

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
                found.categories = _dumps(sub.categories)
                found.max_papers = sub.max_papers
                found.include = _dumps(sorted(sub.include))
                session.add(found)
            session.commit()

    def subscribers(
        self, config_subscribers: Sequence[Subscriber] = (), *, include_inactive: bool = False
    ) -> list[Subscriber]:
        """Every subscriber: the config file's (with their ids, if stored) and the database's."""
        with self.session() as session:
            rows = {r.name: r for r in session.exec(select(SubscriberRow)).all()}
            rules: dict[int, list[str]] = {}
            for rule in session.exec(select(RuleRow).order_by(col(RuleRow.id))).all():
                rules.setdefault(rule.subscriber_id, []).append(rule.text)
        result: list[Subscriber] = []
        for sub in config_subscribers:
            row = rows.get(sub.name)
            active = row.active if row is not None else True
            stored = replace(sub, id=row.id if row else None, active=active)
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
                )
            )
        return result

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
    ) -> tuple[Subscriber, bool]:
        """Create a subscriber, or add rules to an existing one (and reactivate it).
        Returns the subscriber and whether it was created."""

        with self.session() as session:
            row = session.exec(select(SubscriberRow).where(SubscriberRow.name == name)).first()
            created = row is None
            if row is None:
                row = SubscriberRow(name=name, email=email, origin="database", created_at=now)
            elif row.origin == "config":
                raise StoreError(
                    f"subscriber {name!r} is declared in the config file",
                    hint="change its rules in the config file",
                )
            if email is not None:
                row.email = email
            if categories:
                row.categories = _dumps(categories)
            if max_papers is not None:
                row.max_papers = max_papers
            if include is not None:
                row.include = _dumps(sorted(set(include)))
            row.active = True
            session.add(row)
            session.flush()
            assert row.id is not None
            known = set(
                session.exec(select(RuleRow.text).where(RuleRow.subscriber_id == row.id)).all()
            )
            for text in rules:
                if text not in known:
                    session.add(RuleRow(subscriber_id=row.id, text=text, created_at=now))
                    known.add(text)
            session.commit()
        subscriber = next(s for s in self.subscribers(include_inactive=True) if s.name == name)
        return subscriber, created

    def remove_rule(self, name: str, number: int) -> str:
        """Delete the subscriber's rule number `number` (1-based, as `list` shows it)."""
        with self.session() as session:
            row = self._database_subscriber(session, name)
            rules = session.exec(
                select(RuleRow).where(RuleRow.subscriber_id == row.id).order_by(col(RuleRow.id))
            ).all()
            if not 1 <= number <= len(rules):
                raise StoreError(f"{name!r} has no rule {number} (it has {len(rules)})")
            if len(rules) == 1:
                raise StoreError(
                    f"rule {number} is the last rule of {name!r}",
                    hint=f"to stop the digests, `paperbell unsubscribe {name}`",
                )
            text = rules[number - 1].text
            session.delete(rules[number - 1])
            session.commit()
            return text

    def set_active(self, name: str, active: bool, *, now: datetime) -> bool:
        """Pause or resume a subscriber (config or database). False if unknown."""
        with self.session() as session:
            row = session.exec(select(SubscriberRow).where(SubscriberRow.name == name)).first()
            if row is None:
                return False
            row.active = active
            session.add(row)
            session.commit()
            return True

    def delete_subscriber(self, name: str) -> None:
        """Remove a database subscriber with its rules and delivery history."""
        with self.session() as session:
            row = self._database_subscriber(session, name)
            for model in (RuleRow, DeliveryRow):
                for item in session.exec(select(model).where(model.subscriber_id == row.id)):
                    session.delete(item)
            session.delete(row)
            session.commit()

    def subscriber_row(self, name: str) -> SubscriberRow | None:
        with self.session() as session:
            return session.exec(select(SubscriberRow).where(SubscriberRow.name == name)).first()

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

    def record_delivery(
        self,
        subscriber_id: int,
        *,
        channel: str,
        digest_id: str,
        sent: Sequence[Paper],
        omitted: Sequence[Paper] = (),
        now: datetime,
    ) -> int:
        """Record a digest the channel accepted, in one transaction. A row that already exists
        (a re-run after a crash, or two runs at once) is left as it is. Returns the number of
        rows added."""
        rows: dict[tuple[str, int], dict[str, object]] = {}
        for papers, status in ((sent, "sent"), (omitted, "omitted")):
            for paper in papers:
                rows.setdefault(
                    (paper.id, paper.version),
                    {
                        "subscriber_id": subscriber_id,
                        "paper_id": paper.id,
                        "paper_version": paper.version,
                        "channel": channel,
                        "status": status,
                        "digest_id": digest_id,
                        "created_at": now,
                    },
                )
        if not rows:
            return 0
        insert = postgresql_insert if self.engine.dialect.name == "postgresql" else sqlite_insert
        statement = (
            insert(DeliveryRow)
            .values(list(rows.values()))
            .on_conflict_do_nothing(
                index_elements=["subscriber_id", "paper_id", "paper_version", "channel"]
            )
            .returning(col(DeliveryRow.id))
        )
        try:
            with self.session() as session:
                added = len(session.execute(statement).all())
                session.commit()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot record the delivery: {_first_line(exc)}") from None
        return added

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


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def utcnow() -> datetime:
    """The current time in UTC; only entry points call this, and pass it down."""
    return datetime.now(UTC)
