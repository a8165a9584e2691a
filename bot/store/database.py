"""The database: its engine and sessions, opening and closing it, creating its tables, and
how a database failure becomes a StoreError (shared by every repository of bot.store).

It knows no table's meaning: the repositories (papers, subscribers, outbox, ...) ask the
tables through `Database.session`. SQLite by default, PostgreSQL through the same code.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, inspect
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlmodel import Session, col, create_engine, select

from bot.core.checks import redact_url
from bot.core.errors import StoreError
from bot.store.tables import SCHEMA


class Database:
    """An open database. Build with `Database.open(url)`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str, *, create: bool = True) -> Database:
        """Connect, and create missing tables unless `create` is false."""
        url = normalize_url(url)
        try:
            engine = create_engine(url)
            prepare(engine, create=create)
            missing = _missing_columns(engine)
        except (SQLAlchemyError, ModuleNotFoundError) as exc:
            raise StoreError(
                f"cannot open the database {redact_url(url)}: {first_line(exc)}",
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

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose objects stay readable after a commit; a lost or refused
        connection becomes a StoreError."""
        try:
            with Session(self.engine, expire_on_commit=False) as session:
                yield session
        except OperationalError as exc:
            raise StoreError(f"database error: {first_line(exc)}") from None


def prepare(engine: Engine, *, create: bool) -> None:
    """Make the database ready for this version's tables: create the missing ones (unless
    `create` is false: then only check that it answers)."""
    if create:
        SCHEMA.create_all(engine)
    else:
        with engine.connect():
            pass


def _missing_columns(engine: Engine) -> dict[str, list[str]]:
    """Columns this version's tables have that the database's lack (an older schema)."""
    inspector = inspect(engine)
    missing = {}
    for table in SCHEMA.sorted_tables:
        if not inspector.has_table(table.name):
            continue
        present = {column["name"] for column in inspector.get_columns(table.name)}
        lacking = [column.name for column in table.columns if column.name not in present]
        if lacking:
            missing[table.name] = lacking
    return missing


@contextmanager
def failing_as(what: str) -> Iterator[None]:
    """A database failure inside becomes the StoreError "cannot `what`: <why>"."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot {what}: {first_line(exc)}") from None


def first_line(exc: BaseException) -> str:
    """The first line of a database error: the driver's own words when it has them."""
    text = str(getattr(exc, "orig", None) or exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def normalize_url(url: str) -> str:
    """Use the psycopg 3 driver for plain postgresql:// URLs."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def rows_where_in(
    session: Session, column: Any, values: Sequence[str], *, size: int = 500
) -> Iterator[Any]:
    """The rows of `column`'s table whose `column` is one of `values`, asked `size` at a
    time (databases limit the parameters of one statement)."""
    for start in range(0, len(values), size):
        chunk = values[start : start + size]
        yield from session.exec(select(column.class_).where(col(column).in_(chunk)))


def aware(moment: datetime) -> datetime:
    """A stored time as aware UTC (SQLite returns naive datetimes)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def utcnow() -> datetime:
    """The current time in UTC; only entry points call this, and pass it down."""
    return datetime.now(UTC)


class Repository:
    """One kind of data of bot.store (papers, subscribers, the outbox, ...): the database
    it asks."""

    def __init__(self, database: Database) -> None:
        self.database = database
