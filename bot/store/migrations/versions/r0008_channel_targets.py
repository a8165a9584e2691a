"""Channel targets: a digest's channel is its target's key, a kind and a key for an Apprise
destination ("apprise:1a2b3c4d5e6f"), so outbox.channel and deliveries.channel widen from
16 to 64; a database subscriber may name an environment variable holding Apprise URLs
(subscribers.apprise_env) and keep URLs given on the manage page (destinations); a target
that keeps refusing is paused alone (target_pauses). Every row kept as it was: "email" and
"slack" are their own targets' keys.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ("outbox", "deliveries"):
        with op.batch_alter_table(table) as batch:
            batch.alter_column(
                "channel", existing_type=sa.String(16), type_=sa.String(64), existing_nullable=False
            )
    with op.batch_alter_table("subscribers") as batch:
        batch.add_column(sa.Column("apprise_env", sa.String(128), nullable=True))
    op.create_table(
        "destinations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("subscriber_id", sa.Integer(), sa.ForeignKey("subscribers.id"), nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("subscriber_id", "channel"),
    )
    op.create_index("ix_destinations_subscriber_id", "destinations", ["subscriber_id"])
    op.create_table(
        "target_pauses",
        sa.Column("subscriber_id", sa.Integer(), sa.ForeignKey("subscribers.id"), primary_key=True),
        sa.Column("channel", sa.String(64), primary_key=True),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    """Back to 0006: the Apprise destinations and their history go (a 16-character channel
    holds none of their keys); email and Slack keep theirs."""
    op.drop_table("target_pauses")
    op.drop_index("ix_destinations_subscriber_id", table_name="destinations")
    op.drop_table("destinations")
    with op.batch_alter_table("subscribers") as batch:
        batch.drop_column("apprise_env")
    op.execute("DELETE FROM deliveries WHERE length(channel) > 16")
    op.execute(
        "DELETE FROM deliveries WHERE outbox_id IN "
        "(SELECT id FROM outbox WHERE length(channel) > 16)"
    )
    op.execute("DELETE FROM outbox WHERE length(channel) > 16")
    for table in ("outbox", "deliveries"):
        with op.batch_alter_table(table) as batch:
            batch.alter_column(
                "channel", existing_type=sa.String(64), type_=sa.String(16), existing_nullable=False
            )
