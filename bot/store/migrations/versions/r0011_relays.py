"""Relays: the SMTP relays paperbell sends through, each with how long it asked paperbell to
slow down (`relays`: the row every process locks while it takes a place in the relay's
limits), and every message handed to one in the last day (`relay_sends`: the sliding
windows of [email] max_per_second, max_per_hour, max_per_day). No row changes.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "relays",
        sa.Column("relay", sa.String(255), primary_key=True),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("slow_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("slow_seconds", sa.Float(), nullable=True),
    )
    op.create_table(
        "relay_sends",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("relay", sa.String(255), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_relay_sends_relay_sent_at", "relay_sends", ["relay", "sent_at"])


def downgrade() -> None:
    """Back to 0010: the relays' windows and slow-downs go (nothing refers to them)."""
    op.drop_index("ix_relay_sends_relay_sent_at", table_name="relay_sends")
    op.drop_table("relay_sends")
    op.drop_table("relays")
