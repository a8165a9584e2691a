"""Rule labels: each rule may have a short name (rules.label) that the digests show in
place of the rule; every rule stored before has none, and is shown as itself.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("rules") as batch:
        batch.add_column(sa.Column("label", sa.String(100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rules") as batch:
        batch.drop_column("label")
