"""Which `paperbell run` leads: the one process that polls the sources and plans and queues
the digests. Every process sends what the outbox holds (`Outbox.claim`); only the leader
polls and plans, so arXiv is asked once and each digest is built once, however many
processes run.

PostgreSQL: the leader holds a session-level advisory lock (`pg_try_advisory_lock`) on a
connection of its own, in autocommit (never "idle in transaction"). When the process dies,
or its connection does, the server ends the session and the lock is free: the next process
that asks (each asks at every tick) takes it over. A leader whose connection ended has lost
the lock and knows it at its next look. The session asks the server to probe it with TCP
keepalives (30 s, then every 10 s, 3 times), so the lock of a machine that vanished (power
lost, network cut) is freed in about a minute, not after the system's two hours. Each
process's connection is named `paperbell run HOST:PID` (`application_name`), so `workers`
(for `paperbell status`) tells who runs and who leads. Leading is an economy, not what
keeps a digest from going twice: two processes that planned at once (a leader cut off and
its successor) still queue each digest once, the outbox being unique per slot. A pooler
that hands a session to several clients (PgBouncer in transaction mode) breaks session
locks: connect `paperbell run` to PostgreSQL directly.

SQLite: one `paperbell run` per database file. It holds a lock on a file beside the
database (`NAME.lock`, flock) for as long as it runs and always leads; a second `run` on
the same file is refused with the first one's name (`paperbell digest` from cron is no
`run`, and may share the file).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from sqlalchemy import Connection, text
from sqlalchemy.exc import SQLAlchemyError

from bot.core.errors import StoreError
from bot.store.database import Database, database_file, first_line

try:
    import fcntl
except ImportError:  # Windows: no flock; a second `run` on one SQLite file is not caught
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

# The advisory lock's key: "paperbel" as a 64-bit number. Advisory locks are per database,
# so two sites on one PostgreSQL server, each in its own database, do not meet.
LEADER_KEY = int.from_bytes(b"paperbel", "big")
APPLICATION = "paperbell run"  # + " HOST:PID": how each process's lock session is named
KEEPALIVES = {
    "tcp_keepalives_idle": "30",
    "tcp_keepalives_interval": "10",
    "tcp_keepalives_count": "3",
}


@dataclass(frozen=True, slots=True)
class Workers:
    """The `paperbell run` processes on a database, as it sees them (for `status`)."""

    leader: str | None  # HOST:PID of the one that leads (None: none does)
    running: tuple[str, ...]  # HOST:PID of each, the leader included


class Leadership:
    """This process's claim to lead (`take`, `resign`). Build one per `paperbell run`."""

    def __init__(self, database: Database, *, name: str) -> None:
        self.database = database
        self.name = name  # HOST:PID
        self.leading = False
        self.postgres = database.engine.dialect.name == "postgresql"
        self._connection: Connection | None = None
        self._file: IO[str] | None = None

    def take(self) -> bool:
        """Take the lead if it is free, or make sure it is still this process's: True while
        this process leads. A database that cannot be reached leaves it not leading (no
        error: the sends fail on their own). On SQLite a file another `run` holds is
        refused (StoreError)."""
        if self.postgres:
            self.leading = self._take_postgres()
        else:
            self.leading = self._take_file()
        return self.leading

    def resign(self) -> None:
        """Give the lead up (a process stopping): another takes it at its next look."""
        if self.leading and self._connection is not None:
            with contextlib.suppress(SQLAlchemyError):  # closing the session frees it anyway
                self._connection.execute(
                    text("SELECT pg_advisory_unlock(:key)"), {"key": LEADER_KEY}
                )
        self.leading = False
        self._close_connection()
        if self._file is not None:
            self._file.close()  # the flock goes with it
            self._file = None

    # -- PostgreSQL --------------------------------------------------------------------------

    def _take_postgres(self) -> bool:
        try:
            connection = self._session()
            if self.leading:  # held as long as the session lives: is it alive?
                connection.execute(text("SELECT 1"))
                return True
            return bool(
                connection.execute(
                    text("SELECT pg_try_advisory_lock(:key)"), {"key": LEADER_KEY}
                ).scalar()
            )
        except SQLAlchemyError as exc:
            if self.leading:
                log.warning("lost the lead: its database session ended (%s)", first_line(exc))
            else:
                log.warning("cannot ask for the lead: %s", first_line(exc))
            self._close_connection(broken=True)
            return False

    def _session(self) -> Connection:
        """This process's own connection for the lock, opened (and named) at first use."""
        if self._connection is None:
            connection = self.database.engine.connect().execution_options(
                isolation_level="AUTOCOMMIT"
            )
            connection.detach()  # out of the pool: closing it ends the session (and the lock)
            name = f"{APPLICATION} {self.name}"[:63]  # PostgreSQL keeps 63 bytes of it
            _set(connection, "application_name", name)
            for setting, value in KEEPALIVES.items():
                try:
                    _set(connection, setting, value)
                except SQLAlchemyError as exc:  # a server that cannot: the system's own
                    log.debug("cannot set %s: %s", setting, first_line(exc))
            self._connection = connection
        return self._connection

    def _close_connection(self, *, broken: bool = False) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        with contextlib.suppress(SQLAlchemyError):
            if broken:
                connection.invalidate()
            connection.close()  # the session ends: a lock it held is free

    # -- SQLite ------------------------------------------------------------------------------

    def _take_file(self) -> bool:
        if self._file is not None or fcntl is None:
            return True
        path = lock_file(self.database)
        if path is None:  # in memory: nothing else can open it
            return True
        try:
            handle = path.open("a+")
        except OSError as exc:
            raise StoreError(
                f"cannot open {path}: {exc.strerror or exc}",
                hint="the database's folder must be writable",
            ) from None
        # A moment's patience: `status` peeks at the lock (a shared lock, at once let go).
        for _ in range(20):
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                time.sleep(0.05)
        else:
            other = _holder_named(handle)
            handle.close()
            raise StoreError(
                f"another `paperbell run` ({other or 'its name unknown'}) uses the SQLite "
                f"database {lock_target(path)}",
                hint="run one `paperbell run` per SQLite database; for several, use PostgreSQL "
                "(docs/workers.md)",
            )
        handle.seek(0)
        handle.truncate()
        handle.write(f"{self.name}\n")
        handle.flush()
        self._file = handle
        return True


def _set(connection: Connection, setting: str, value: str) -> None:
    """Set a PostgreSQL setting for the session (SET takes no parameters: set_config does)."""
    connection.execute(
        text("SELECT set_config(:setting, :value, false)"), {"setting": setting, "value": value}
    )


def lock_file(database: Database) -> Path | None:
    """The file a SQLite database's `run` locks (None: a database in memory, or not SQLite)."""
    path = database_file(database.engine.url.render_as_string(hide_password=False))
    return None if path is None else path.with_name(path.name + ".lock")


def lock_target(lock: Path) -> Path:
    return lock.with_name(lock.name.removesuffix(".lock"))


def _holder_named(handle: IO[str]) -> str | None:
    handle.seek(0)
    return handle.read().strip() or None


def workers(database: Database) -> Workers:
    """The `paperbell run` processes on this database and the one that leads: on
    PostgreSQL the sessions named `paperbell run HOST:PID` and the one holding the lock;
    on SQLite the process holding the lock file, if one does."""
    if database.engine.dialect.name == "postgresql":
        return _postgres_workers(database)
    path = lock_file(database)
    if path is None or fcntl is None or not path.exists():
        return Workers(None, ())
    with path.open("r") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # held: a `run` is on it
            name = _holder_named(handle) or "?"
            return Workers(name, (name,))
        fcntl.flock(handle, fcntl.LOCK_UN)
    return Workers(None, ())


def _postgres_workers(database: Database) -> Workers:
    prefix = APPLICATION + " "
    with database.engine.connect() as connection:
        running = connection.execute(
            text(
                "SELECT application_name FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name LIKE :pattern "
                "ORDER BY backend_start"
            ),
            {"pattern": prefix.replace("_", r"\_") + "%"},
        ).scalars()
        names = tuple(name.removeprefix(prefix) for name in running)
        # A bigint key shows in pg_locks as its high half (classid) and its low half (objid).
        leader = connection.execute(
            text(
                "SELECT a.application_name FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND l.classid::bigint = :high AND l.objid::bigint = :low"
            ),
            {"high": LEADER_KEY >> 32, "low": LEADER_KEY & 0xFFFFFFFF},
        ).scalar()
    return Workers(leader.removeprefix(prefix) if leader is not None else None, names)
