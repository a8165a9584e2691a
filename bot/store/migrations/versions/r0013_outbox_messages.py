"""Outbox messages apart: each outbox record's finished message moves from `outbox.payload`
to its own table, `outbox_messages` (one row per record, keyed by its id). SQLite writes a
whole row again for any change to it, so a message kept beside the status was rewritten by
the claim, each lease renewal and "sent": 3-4 copies of 30-60 KB a digest, most of the
time a run spent committing. Every message is kept, byte for byte.

On SQLite the upgrade copies every message once (the file needs room for a second copy
of them for a while; the old pages are reused, or given back by `VACUUM`).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "outbox_messages",
        sa.Column(
            "outbox_id",
            sa.Integer(),
            sa.ForeignKey("outbox.id"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
    )
    op.execute("INSERT INTO outbox_messages (outbox_id, payload) SELECT id, payload FROM outbox")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("payload")


def downgrade() -> None:
    """Back to 0012: each message back in its outbox record (an empty one if it had none)."""
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("payload", sa.LargeBinary(), nullable=True))
    empty = "X''" if op.get_bind().dialect.name == "sqlite" else "''::bytea"
    op.execute(
        "UPDATE outbox SET payload = COALESCE((SELECT m.payload FROM outbox_messages m "
        f"WHERE m.outbox_id = outbox.id), {empty})"
    )
    with op.batch_alter_table("outbox") as batch:
        batch.alter_column("payload", existing_type=sa.LargeBinary(), nullable=False)
    op.drop_table("outbox_messages")
