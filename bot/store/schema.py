"""The schema's version: which migration a database is at, and bringing it to the newest.

The migrations (Alembic) ship inside the package, in bot/store/migrations/; they run here,
programmatically, on a connection of the engine handed in (no alembic.ini, no URL of their
own). A new database is made by running every migration; a database made by paperbell
before it had migrations (0d0a80b: its tables, no `alembic_version`) is recognised, stamped
at the baseline, then upgraded. Before an upgrade writes to a SQLite file, the file is
copied to `NAME.bak-REVISION` (the revision it was at). Knows no table's meaning, and
opens no database itself: bot.store.database does.

Alembic (and Mako, its templates' library) is imported by the functions that read the
migrations or run them, not with this module: a process that only confirms a revision its
parent checked (`current_revision`: a sender) never loads them.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
import stat
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import URL, Connection, Engine, create_engine, inspect

from bot.store.tables import SCHEMA

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).with_name("migrations")
BASELINE = "0001"  # the schema of 0d0a80b, the last paperbell without migrations


@dataclass(frozen=True)
class SchemaState:
    """Where a database stands: its revision (None: no `alembic_version`), the newest this
    paperbell knows, and whether it holds paperbell's tables at all."""

    current: str | None
    head: str
    exists: bool

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head

    @property
    def unversioned(self) -> bool:
        """Made before paperbell had migrations: its tables, no revision."""
        return self.exists and self.current is None

    @property
    def known(self) -> bool:
        """Whether this paperbell knows the revision (a newer one may have written it)."""
        return self.current is None or self.current in revisions()

    @property
    def starting_point(self) -> str | None:
        """The revision an upgrade starts from (an unversioned database: the baseline)."""
        return BASELINE if self.unversioned else self.current

    def describe(self) -> str:
        """The revision in a few words: "0002 (newest)", "0001 (older; newest 0002)", ..."""
        if not self.exists:
            return f"no database yet (it is created at {self.head}, the newest, on first use)"
        if self.unversioned:
            return f"none: made before migrations (0d0a80b's schema); newest {self.head}"
        if not self.known:
            return f"{self.current}, unknown to this paperbell (a newer one wrote it)"
        if self.up_to_date:
            return f"{self.current} (newest)"
        return f"{self.current} (older; newest {self.head})"

    def behind(self) -> str:
        """Why a database this far behind is refused, in a few words."""
        made = (
            "was made before migrations (0d0a80b's schema)"
            if self.unversioned
            else f"is at schema {self.current}"
        )
        return f"{made}, older than this paperbell's {self.head}"


@dataclass(frozen=True)
class Upgrade:
    """What an upgrade did: from which revision (None: a new database) to which, and the
    copy of the SQLite file it made first (None: PostgreSQL, or nothing to copy)."""

    before: str | None
    after: str
    backup: Path | None


@cache
def scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


@cache
def revisions() -> frozenset[str]:
    return frozenset(script.revision for script in scripts().walk_revisions())


def head() -> str:
    """The newest revision this paperbell knows."""
    found = scripts().get_current_head()
    assert found is not None, "bot/store/migrations/versions/ holds no revision"
    return found


@cache
def baseline_columns() -> dict[str, frozenset[str]]:
    """The baseline's tables and their columns (0d0a80b's schema), read off a database in
    memory migrated to it: what an unversioned database must have to be upgraded."""
    from alembic import command

    engine = create_engine("sqlite://")
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), BASELINE)
            inspector = inspect(connection)
            return {
                table: frozenset(column["name"] for column in inspector.get_columns(table))
                for table in inspector.get_table_names()
                if table != "alembic_version"
            }
    finally:
        engine.dispose()


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's config for the migrations shipped in the package, run on `connection`."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("file_template", "r%%(rev)s_%%(slug)s")  # a module name
    config.attributes["connection"] = connection
    return config


def read_state(engine: Engine) -> SchemaState:
    """Where the database stands. A SQLite file that does not exist is not created."""
    from alembic.migration import MigrationContext

    path = sqlite_file(engine.url)
    if path is not None and not path.exists():
        return SchemaState(current=None, head=head(), exists=False)
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
        tables = set(inspect(connection).get_table_names())
    exists = current is not None or bool(tables & set(SCHEMA.tables))
    return SchemaState(current=current, head=head(), exists=exists)


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at, read with one plain query and no Alembic: what a
    process confirms when its parent checked the schema (None: no `alembic_version`)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    found = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalars()
    return " ".join(sorted(found)) or None  # two rows: a branched history, never one revision


def migrate(engine: Engine, state: SchemaState) -> Upgrade:
    """Bring the database at `state` to the newest revision: create a new one, stamp an
    unversioned one at the baseline, copy a SQLite file first. The caller checked that
    `state` is known and not up to date."""
    from alembic import command

    backup = None
    path = sqlite_file(engine.url)
    if state.exists and path is not None:
        backup = path.with_name(f"{path.name}.bak-{state.starting_point}")
        copy_sqlite(path, backup)
    with engine.begin() as connection:
        config = alembic_config(connection)
        if state.unversioned:
            command.stamp(config, BASELINE)
        command.upgrade(config, "head")
    before = state.starting_point if state.exists else None
    return Upgrade(before=before, after=head(), backup=backup)


def sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite database (None: another database, or one in memory)."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database)  # type: ignore[arg-type]


def copy_sqlite(path: Path, target: Path, *, timeout: float = 30) -> int:
    """A consistent copy of a SQLite file, even while another process writes to it
    (SQLite's online backup), with the file's permissions; its size in bytes. The copy is
    written beside `target` and renamed into place (replacing a file of that name), so a
    copy cut short leaves nothing under the name. A writer holding the file locked for
    longer than `timeout` seconds makes it fail ("database is locked")."""
    if not path.is_file():
        raise FileNotFoundError(errno.ENOENT, "no such database file", str(path))
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    try:
        source = sqlite3.connect(path, timeout=timeout, isolation_level=None)
        try:
            # A read transaction first: it waits for a writer at most `timeout` (the backup's
            # own wait has no end), then holds writers' commits off until the copy is made.
            source.execute("BEGIN")
            source.execute("SELECT count(*) FROM sqlite_master")
            copy = sqlite3.connect(partial)
            try:
                with copy:
                    source.backup(copy)  # every page in one step
            finally:
                copy.close()
        finally:
            source.close()
        partial.chmod(stat.S_IMODE(path.stat().st_mode))
        partial.replace(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    log.info("copied %s to %s", path, target)
    return target.stat().st_size
