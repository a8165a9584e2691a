"""How a subscriber takes a digest too long for one email (`long_emails`): in numbered
parts, each within what mail apps show whole ("parts"), or as one email ("one"). Every
subscriber stored before this revision gets parts, the default.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("subscribers") as batch:
        batch.add_column(
            sa.Column("long_emails", sa.String(8), nullable=False, server_default="parts")
        )


def downgrade() -> None:
    with op.batch_alter_table("subscribers") as batch:
        batch.drop_column("long_emails")
