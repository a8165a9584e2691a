"""A new address waits beside the confirmed one (`subscribers.pending_email`): the
confirmed address keeps getting digests until the new one is confirmed by its own link.
Every subscriber stored before this revision has none waiting.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ALTER TABLE on SQLite too: a nullable column copies no table.
    op.add_column("subscribers", sa.Column("pending_email", sa.String(320), nullable=True))


def downgrade() -> None:
    if sqlite3.sqlite_version_info >= (3, 35) or op.get_bind().dialect.name != "sqlite":
        op.drop_column("subscribers", "pending_email")
    else:  # an SQLite without DROP COLUMN: the table copied without it
        with op.batch_alter_table("subscribers") as batch:
            batch.drop_column("pending_email")
