"""Databases for the tests: a new PostgreSQL database for each test (`scratch_database`), and
the schema and failure tests' views of one: what the migrations left out (`differences`), a
database migrated to an older revision (`migrate_to`), its tables, and one that is gone
(`dead_database`)."""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Column, Connection, Engine, MetaData, create_engine, make_url, text
from sqlalchemy import inspect as sqlalchemy_inspect
from sqlalchemy.exc import SAWarning

from bot.demo import free_port
from bot.store import normalize_url
from bot.store.schema import alembic_config
from bot.store.tables import SCHEMA

# Databases made by this process are named for it, so that parallel test processes (and
# parallel runs on one server) never share one, and what a killed run left is known.
SCRATCH_PREFIX = "paperbell_test_"
_made = itertools.count()


@contextmanager
def scratch_database(server_url: str) -> Iterator[str]:
    """A new, empty PostgreSQL database on the server of `server_url` (which names a
    database to connect to for the CREATE), dropped afterwards: one test's own database,
    its advisory locks and connections its own too."""
    server = make_url(normalize_url(server_url))
    number = next(_made)
    name = f"{SCRATCH_PREFIX}{os.getpid()}_{number}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            if number == 0:  # this process's first: clear what killed runs left
                _drop_leftovers(connection)
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            yield server.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()


def _drop_leftovers(connection: Connection) -> None:
    """Drop the scratch databases of test processes that are gone (a run killed mid-test)."""
    names = connection.exec_driver_sql(
        "SELECT datname FROM pg_database WHERE datname LIKE %s", (SCRATCH_PREFIX + "%",)
    ).scalars()
    for name in list(names):
        pid = name.removeprefix(SCRATCH_PREFIX).split("_")[0]
        if pid.isdigit() and not _running(int(pid)):
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def tables(url: str) -> set[str]:
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as connection:
            return set(sqlalchemy_inspect(connection).get_table_names())
    finally:
        engine.dispose()


def differences(url: str, metadata: MetaData = SCHEMA) -> list[Any]:
    """What Alembic's autogenerate would change to make the database at `url` `metadata`,
    and the expression indexes (on lower(recipient), ...) it lacks: autogenerate skips
    those (SQLAlchemy reflects none of them on SQLite), so their names are compared."""
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as connection, warnings.catch_warnings():
            warnings.filterwarnings("ignore", ".*expression-based index", SAWarning)
            warnings.filterwarnings("ignore", ".*expression-based index", UserWarning)
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            found = list(compare_metadata(context, metadata))
            present = index_names(connection)
    finally:
        engine.dispose()
    wanted = {
        (table.name, str(index.name))
        for table in metadata.tables.values()
        for index in table.indexes
        if any(not isinstance(part, Column) for part in index.expressions)
    }
    return found + [("missing expression index", *pair) for pair in sorted(wanted - present)]


def index_names(connection: Connection) -> set[tuple[str, str]]:
    """Every index of the database (table, name), read off the catalog, expression
    indexes too."""
    if connection.dialect.name == "postgresql":
        query = "SELECT tablename, indexname FROM pg_indexes WHERE schemaname = current_schema()"
    else:
        query = "SELECT tbl_name, name FROM sqlite_master WHERE type = 'index'"
    return {(str(table), str(name)) for table, name in connection.execute(text(query))}


def migrate_to(url: str, revision: str) -> None:
    engine = create_engine(normalize_url(url))
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), revision)
    finally:
        engine.dispose()


def dead_database(url: str, tmp_path: Path) -> Engine:
    """An engine for a database that is not there (the server or the disk went away)."""
    if url.startswith("sqlite"):
        return create_engine(f"sqlite:///{tmp_path / 'gone' / 'paperbell.sqlite'}")
    dead = make_url(normalize_url(url)).set(host="127.0.0.1", port=free_port())
    return create_engine(dead)
