"""The `db` commands: the database's schema. `db current` says which revision it is at (and
whether that is the newest); `db upgrade` brings it to the newest, in place (a SQLite file
is copied to `NAME.bak-REVISION` first).

Plain wiring: bot.store knows the migrations and runs them; this module only words what
it did. The config's secrets are not needed here, only the database's URL.
"""

from __future__ import annotations

from pathlib import Path

import click

from bot.cli.secrets import database_url
from bot.cli.shell import config_option, handle_errors, load_config, upgrade_command
from bot.core.checks import redact_url
from bot.store import describe_upgrade, schema_state, upgrade_schema


@click.group()
def db() -> None:
    """The database's schema: which revision it is at, and upgrading it."""


@db.command()
@config_option
@handle_errors
def current(config_path: Path) -> None:
    """Show the database's schema revision, and whether it is the newest."""
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
    config = load_config(config_path)
    where = redact_url(config.database.url)
    before, done = upgrade_schema(database_url(config))
    if done is None:
        click.echo(f"{where}: schema {before.describe()}: nothing to do")
        return
    if done.backup is not None:
        click.echo(f"copied the database, at schema {done.before}, to {done.backup}")
    click.echo(f"{where}: {describe_upgrade(done)}")
