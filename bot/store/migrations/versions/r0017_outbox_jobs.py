"""A queued digest may wait as a job: the digest itself (`outbox_messages.job`), rendered
into its message by the worker that claims it. Going back, the jobs not yet rendered are
taken out of the outbox with their papers' deliveries: the older paperbell cannot render
them, and builds those digests again at its next run.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ALTER TABLE on SQLite too: no table is copied (a nullable column, no default).
    op.add_column("outbox_messages", sa.Column("job", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    connection = op.get_bind()
    unrendered = [
        row[0]
        for row in connection.execute(
            sa.text("SELECT outbox_id FROM outbox_messages WHERE job IS NOT NULL")
        )
    ]
    for table, column in (
        ("deliveries", "outbox_id"),
        ("outbox_messages", "outbox_id"),
        ("outbox", "id"),
    ):
        statement = sa.text(f"DELETE FROM {table} WHERE {column} IN :ids").bindparams(
            sa.bindparam("ids", expanding=True)
        )
        if unrendered:
            connection.execute(statement, {"ids": unrendered})
    if sqlite3.sqlite_version_info >= (3, 35) or op.get_bind().dialect.name != "sqlite":
        op.drop_column("outbox_messages", "job")
    else:  # an SQLite without DROP COLUMN: the table copied without it
        with op.batch_alter_table("outbox_messages") as batch:
            batch.drop_column("job")
