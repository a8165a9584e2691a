"""Bounces: every message that comes back to the bounce address (a DSN, a complaint, an
auto-reply, or something unreadable), what it said, what was done and where it was read
(an IMAP message, so that it is recorded once) (`bounces`); and an
index on outbox.digest_id, through which a bounce without a VERP token finds the message
it answers (its Message-ID). No row changes.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "bounces",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outbox_id", sa.Integer(), sa.ForeignKey("outbox.id"), nullable=True),
        sa.Column("subscriber_id", sa.Integer(), sa.ForeignKey("subscribers.id"), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=True),
        sa.Column("diagnostic", sa.String(500), nullable=True),
        sa.Column("recipient", sa.String(320), nullable=True),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("source", sa.String(256), nullable=True),
    )
    op.create_index("ix_bounces_source", "bounces", ["source"], unique=True)
    op.create_index("ix_bounces_received_at", "bounces", ["received_at"])
    op.create_index("ix_bounces_subscriber_id", "bounces", ["subscriber_id"])
    op.create_index("ix_outbox_digest_id", "outbox", ["digest_id"])


def downgrade() -> None:
    """Back to 0009: the bounces recorded go (nothing else refers to them)."""
    op.drop_index("ix_outbox_digest_id", table_name="outbox")
    op.drop_index("ix_bounces_source", table_name="bounces")
    op.drop_index("ix_bounces_subscriber_id", table_name="bounces")
    op.drop_index("ix_bounces_received_at", table_name="bounces")
    op.drop_table("bounces")
