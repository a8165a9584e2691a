"""Relay failures: a relay of [[email.servers]] that could not be reached (or refused
paperbell as it connected) is skipped by every process until `failing_until`, `failure`
saying why (shown by `paperbell status`). No row changes.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("relays") as batch:
        batch.add_column(sa.Column("failing_until", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("failure", sa.String(500), nullable=True))


def downgrade() -> None:
    """Back to 0011: the failures go (a relay is tried again at once)."""
    with op.batch_alter_table("relays") as batch:
        batch.drop_column("failure")
        batch.drop_column("failing_until")
