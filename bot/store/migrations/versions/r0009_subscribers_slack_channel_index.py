"""An index on subscribers.slack_channel: `/papers list #channel` (and every command about
a channel) finds the channel's subscription through it, not by reading every subscriber.
No row changes.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_subscribers_slack_channel", "subscribers", ["slack_channel"])


def downgrade() -> None:
    op.drop_index("ix_subscribers_slack_channel", table_name="subscribers")
