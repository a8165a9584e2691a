"""Who gave each Apprise destination: the subscriber on the manage page (`self_service`:
sent through the guard, to public addresses only) or the operator on the command line.
Every destination kept before this revision counts as the page's: which of them the
operator gave is not known, and guarding one of the operator's too is the safe mistake
(`paperbell subscribe NAME --apprise URL` gives it again as the operator's).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("destinations") as batch:
        batch.add_column(
            sa.Column("self_service", sa.Boolean(), nullable=False, server_default=sa.true())
        )


def downgrade() -> None:
    with op.batch_alter_table("destinations") as batch:
        batch.drop_column("self_service")
