"""A failed digest says whether its recipient refused it (`outbox.refused`): only refusals
count toward pausing a subscriber or a destination ("3 digests in a row refused"), not a
digest given up after its retries (a relay that never answered) or one that could not be
rendered. Records failed before this revision are taken as refusals unless their error
says they were given up, as the count read them before.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ALTER TABLE on SQLite too: no table is copied (its default fills the rows).
    op.add_column(
        "outbox", sa.Column("refused", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    outbox = sa.table(
        "outbox",
        sa.column("refused", sa.Boolean()),
        sa.column("status", sa.String()),
        sa.column("last_error", sa.String()),
    )
    error = outbox.c.last_error
    op.execute(
        outbox.update()
        .where(outbox.c.status == "failed")
        .where(sa.or_(error.is_(None), sa.not_(error.like("gave up after%"))))
        .values(refused=True)
    )


def downgrade() -> None:
    if sqlite3.sqlite_version_info >= (3, 35) or op.get_bind().dialect.name != "sqlite":
        op.drop_column("outbox", "refused")
    else:  # an SQLite without DROP COLUMN: the table copied without it
        with op.batch_alter_table("outbox") as batch:
            batch.drop_column("refused")
