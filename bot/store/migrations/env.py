"""Alembic's environment for paperbell's migrations: run them on the connection it is handed.

bot.store.schema runs Alembic programmatically and passes its open connection in
`config.attributes["connection"]`; there is no alembic.ini and no URL here. SQLite alters
tables in batch mode (copy and move), so the same migrations run on SQLite and PostgreSQL.
Must not open a database of its own, nor read the environment.
"""

from __future__ import annotations

from alembic import context

from bot.store.tables import SCHEMA

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=SCHEMA,
    render_as_batch=True,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
