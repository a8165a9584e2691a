"""Undo puts back the verdict a click replaced: each verdict keeps the one it took the
place of (feedback.earlier_verdict, earlier_via, earlier_at). Every verdict stored before
has none, and its Undo removes it, as before.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("feedback") as batch:
        batch.add_column(sa.Column("earlier_verdict", sa.String(8), nullable=True))
        batch.add_column(sa.Column("earlier_via", sa.String(16), nullable=True))
        batch.add_column(sa.Column("earlier_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("feedback") as batch:
        batch.drop_column("earlier_at")
        batch.drop_column("earlier_via")
        batch.drop_column("earlier_verdict")
