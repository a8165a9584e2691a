"""The database: its engine and sessions, opening and closing it (a new one made, an older
schema refused or upgraded: bot.store.schema), and how a database failure becomes a
StoreError (shared by every repository of bot.store).

It knows no table's meaning: the repositories (papers, subscribers, outbox, ...) ask the
tables through `Database.session`. SQLite by default, PostgreSQL through the same code.
"""

from __future__ import annotations

import logging
import shlex
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Connection, Engine, event, inspect, make_url
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlmodel import Session, col, create_engine, select

from bot.core.checks import redact_url
from bot.core.errors import OutdatedSchema, StoreError
from bot.store.schema import (
    SchemaState,
    Upgrade,
    baseline_columns,
    copy_sqlite,
    current_revision,
    migrate,
    read_state,
    sqlite_file,
)

log = logging.getLogger(__name__)


class Database:
    """An open database. Build with `Database.open(url)`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str, *, upgrade: bool = False) -> Database:
        """Connect. A new database is made by running the migrations; one at an older
        revision is upgraded when `upgrade` is true, else refused (OutdatedSchema)."""
        url = normalize_url(url)
        with opening(url) as engine:
            state = read_state(engine)
            if not state.exists:
                create(engine, state)
            elif not state.up_to_date:
                check_upgradable(url, engine, state)
                if not upgrade:
                    raise OutdatedSchema(
                        f"the database {redact_url(url)} {state.behind()}",
                        current=state.current,
                        head=state.head,
                    )
                done = migrate(engine, state)
                copied = f" (the file before it: {done.backup})" if done.backup else ""
                log.warning("%s: %s%s", redact_url(url), describe_upgrade(done), copied)
            write_ahead(engine)
        return cls(engine)

    @classmethod
    def open_at(cls, url: str, revision: str) -> Database:
        """Connect to a database whose schema another process checked (`open`), as its
        sender or planner: it must be at `revision`, confirmed with one query (none of the
        migrations' checks, no Alembic), else refused. Makes no database."""
        url = normalize_url(url)
        with opening(url) as engine:
            path = sqlite_file(engine.url)
            current = None
            if path is None or path.exists():  # connecting would make the SQLite file
                with engine.connect() as connection:
                    current = current_revision(connection)
            if current != revision:
                raise StoreError(
                    f"the database {redact_url(url)} is at schema {current or 'none'}, "
                    f"not {revision}: the one it was at when this paperbell started",
                    hint="another paperbell changed it (`paperbell db current` says how): "
                    "restart this one",
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

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection in a transaction, committed at the end (rolled back on an error),
        for Core statements alone: what a run does thousands of times (recording each
        send) without a session's bookkeeping; a lost or refused connection becomes a
        StoreError."""
        try:
            with self.engine.begin() as connection:
                yield connection
        except OperationalError as exc:
            raise StoreError(f"database error: {first_line(exc)}") from None


@contextmanager
def opening(url: str) -> Iterator[Engine]:
    """An engine for `url`, disposed of if opening it fails; a database failure (a missing
    driver, a path the system refuses) inside becomes "cannot open the database"."""
    engine = None
    try:
        engine = create_engine(url)
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_settings)
        yield engine
    except BaseException as exc:
        if engine is not None:
            engine.dispose()
        if isinstance(exc, OSError):  # a SQLite path the system refuses (a name too long)
            raise StoreError(
                f"cannot open the database {redact_url(url)[:200]}: {exc.strerror or exc}",
                hint="check [database] url",
            ) from None
        if isinstance(exc, SQLAlchemyError | ModuleNotFoundError):
            raise StoreError(
                f"cannot open the database {redact_url(url)}: {first_line(exc)}",
                hint="check [database] url; PostgreSQL needs `pip install 'paperbell[postgres]'`",
            ) from None
        raise


def _sqlite_settings(connection: sqlite3.Connection, _record: Any) -> None:
    """Each SQLite connection commits with `synchronous=NORMAL`: in write-ahead-log mode
    (`write_ahead`) a commit is then one append to the log, not a sync of the file, and a
    crash of paperbell (not of the machine) still loses no commit."""
    connection.execute("PRAGMA synchronous=NORMAL")


def write_ahead(engine: Engine) -> None:
    """Put a SQLite file in write-ahead-log mode (kept in the file): readers never wait
    for a writer, and a commit appends to the log instead of rewriting a journal, so the
    web app's lookups go on while a digest run writes. Only once the schema is known good:
    a database refused for its schema is left exactly as it was. Left as it is when
    another connection holds the file locked (it is tried again at the next start).
    `paperbell db backup` copies it safely while paperbell runs."""
    if engine.dialect.name != "sqlite" or sqlite_file(engine.url) is None:
        return
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA journal_mode=WAL")
    except OperationalError as exc:
        log.warning("SQLite stays in its journal mode: %s", first_line(exc))


def create(engine: Engine, state: SchemaState) -> None:
    """Make a new database by running every migration. Another process creating it at the
    same moment is no failure: it is then up to date."""
    try:
        migrate(engine, state)
    except SQLAlchemyError:
        if not read_state(engine).up_to_date:
            raise


def check_upgradable(url: str, engine: Engine, state: SchemaState) -> None:
    """Refuse to upgrade a database at a revision this paperbell does not know (a newer one
    wrote it), or an unversioned one older than the baseline (columns missing)."""
    if not state.known:
        raise StoreError(
            f"the database {redact_url(url)} has schema {state.describe()}",
            hint="run the paperbell that upgraded it, or a newer one",
        )
    missing = _missing_columns(engine) if state.unversioned else {}
    if missing:
        raise StoreError(
            f"the database {redact_url(url)} was made by a paperbell older than 0d0a80b: "
            + "; ".join(f"table {t} lacks {', '.join(c)}" for t, c in missing.items()),
            hint="paperbell upgrades databases made by 0d0a80b or later: point [database] url "
            "at a new one (subscribers in the config file come back on their own)",
        )


def schema_state(url: str) -> SchemaState:
    """Where the database at `url` stands (a SQLite file that does not exist is not
    created)."""
    url = normalize_url(url)
    with opening(url) as engine:
        state = read_state(engine)
    engine.dispose()
    return state


def upgrade_schema(url: str) -> tuple[SchemaState, Upgrade | None]:
    """Bring the database at `url` to the newest revision (create it if it does not exist):
    its state before, and what was done (None: it was up to date)."""
    url = normalize_url(url)
    done = None
    with opening(url) as engine:
        state = read_state(engine)
        if not state.up_to_date:
            check_upgradable(url, engine, state)
            done = migrate(engine, state)
    engine.dispose()
    return state, done


@dataclass(frozen=True)
class Backup:
    """A copy of a SQLite database: of which file, where, its size in bytes, its schema."""

    source: Path
    path: Path
    size: int
    state: SchemaState


def backup_database(url: str, target: Path, *, timeout: float = 30) -> Backup:
    """Copy the SQLite database at `url` to `target` (replacing a file there: the caller
    asks first), consistent even while paperbell writes to it (waiting at most `timeout`
    seconds for a write to end). Another database is refused with the `pg_dump` command
    that backs it up."""
    parts = make_url(normalize_url(url))
    if parts.get_backend_name() != "sqlite":
        raise StoreError(
            f"paperbell backs up SQLite files only, not {redact_url(url)}",
            hint=f"back PostgreSQL up with pg_dump (the password from PGPASSWORD or ~/.pgpass): "
            f"{pg_dump_command(url, target)}",
        )
    path = database_file(url)
    if path is None or not path.is_file():
        raise StoreError(f"no database to back up: {path or url} does not exist")
    try:
        size = copy_sqlite(path, target, timeout=timeout)
    except sqlite3.Error as exc:
        busy = "locked" in str(exc)
        raise StoreError(
            f"cannot back up {path} to {target}: {exc}"
            + (f" (a write held it for over {timeout:g} s)" if busy else ""),
            hint="run it again in a moment" if busy else None,
        ) from None
    with opening(f"sqlite:///{target.resolve()}") as copy:
        state = read_state(copy)
    copy.dispose()
    return Backup(source=path, path=target, size=size, state=state)


def database_file(url: str) -> Path | None:
    """The file of the SQLite database at `url` (None: another database, or in memory)."""
    return sqlite_file(make_url(normalize_url(url)))


def pg_dump_command(url: str, target: Path) -> str:
    """The pg_dump command line that backs up the PostgreSQL database at `url` to `target`,
    without the password (pg_dump reads it from PGPASSWORD or ~/.pgpass)."""
    parts = make_url(url)
    where = URL.create(
        "postgresql",
        username=parts.username,
        host=parts.host,
        port=parts.port,
        database=parts.database,
        query=parts.query,
    ).render_as_string(hide_password=False)
    return shlex.join(["pg_dump", "--format=custom", f"--file={target}", where])


def describe_upgrade(done: Upgrade) -> str:
    """What an upgrade did, in one line."""
    if done.before is None:
        return f"created at schema {done.after} (newest)"
    return f"upgraded schema {done.before} -> {done.after} (newest)"


def _missing_columns(engine: Engine) -> dict[str, list[str]]:
    """Columns the baseline's tables have that the database's lack (a schema older than
    the baseline: the migrations cannot start from it)."""
    inspector = inspect(engine)
    missing = {}
    for table, columns in baseline_columns().items():
        if not inspector.has_table(table):
            continue
        present = {column["name"] for column in inspector.get_columns(table)}
        lacking = sorted(columns - present)
        if lacking:
            missing[table] = lacking
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
