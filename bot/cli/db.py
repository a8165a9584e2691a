"""The `db` commands: the database's schema, its copies and what it keeps. `db current` says
which revision it is at (and whether that is the newest); `db upgrade` brings it to the
newest, in place (a SQLite file is copied to `NAME.bak-REVISION` first); `db backup` copies
a SQLite file while paperbell may be writing to it (PostgreSQL: it says how to call
`pg_dump`); `db prune` cuts old messages and deletes old bounces ([database] keep_*_days).

Plain wiring: bot.store knows the migrations and runs them; this module only words what
it did. The config's secrets are not needed here, only the database's URL.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bot.cli.secrets import database_url
from bot.cli.shell import (
    EXIT_USAGE,
    config_option,
    handle_errors,
    load_config,
    open_store,
    upgrade_command,
)
from bot.core.checks import redact_url


@click.group()
def db() -> None:
    """The database's schema (which revision it is at, upgrading it), backups, and pruning
    what it no longer needs to keep."""


@db.command()
@config_option
@handle_errors
def current(config_path: Path) -> None:
    """Show the database's schema revision, and whether it is the newest."""
    from bot.store import schema_state

    config = load_config(config_path)
    state = schema_state(database_url(config))
    line = f"{redact_url(config.database.url)}: schema {state.describe()}"
    if state.exists and state.known and not state.up_to_date:
        line += f": run `{upgrade_command(config)}`"
    click.echo(line)


@db.command()
@config_option
@handle_errors
def upgrade(config_path: Path) -> None:
    """Upgrade the database's schema to the newest revision, in place (a SQLite file is
    copied to NAME.bak-REVISION first)."""
    from bot.store import describe_upgrade, upgrade_schema

    config = load_config(config_path)
    where = redact_url(config.database.url)
    before, done = upgrade_schema(database_url(config))
    if done is None:
        click.echo(f"{where}: schema {before.describe()}: nothing to do")
        return
    if done.backup is not None:
        click.echo(f"copied the database, at schema {done.before}, to {done.backup}")
    click.echo(f"{where}: {describe_upgrade(done)}")


@db.command()
@config_option
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite an existing file at PATH.")
@handle_errors
def backup(config_path: Path, path: Path, force: bool) -> None:
    """Copy the SQLite database to PATH, safely while paperbell runs (SQLite's online
    backup). A PostgreSQL database is backed up with pg_dump: this says how."""
    from bot.store import backup_database

    config = load_config(config_path)
    if path.exists() and not force:
        click.echo(f"error: {path} exists; use --force to overwrite it", err=True)
        sys.exit(EXIT_USAGE)
    done = backup_database(database_url(config), path)
    click.echo(
        f"backed up {done.source} to {done.path}: "
        f"{megabytes(done.size)}, schema {done.state.describe()}"
    )


@db.command()
@config_option
@click.option("--dry-run", is_flag=True, help="Say what would be pruned; change nothing.")
@handle_errors
def prune(config_path: Path, dry_run: bool) -> None:
    """Cut the messages of digests sent over [database] keep_sent_days ago to their headers
    (the web archive then lists them and shows the papers they carried), delete the
    bounces over keep_bounces_days old and the sign-ups never confirmed in
    keep_unconfirmed_days. What was delivered to whom stays: no paper is ever sent twice.
    `paperbell run` does the same once a day. A SQLite file keeps its size (the space is
    reused; `VACUUM` gives it back)."""
    from bot.pipeline.retention import prune_old, pruned_line
    from bot.store import utcnow

    config = load_config(config_path)
    store = open_store(config, create=False)
    pruned = prune_old(config.database, store, now=utcnow(), dry_run=dry_run)
    click.echo(pruned_line(config.database, pruned, dry_run=dry_run))


def megabytes(size: int) -> str:
    """A file size for people: "0.3 MB (294,912 bytes)"."""
    return f"{size / 1_000_000:.1f} MB ({size:,} bytes)"
