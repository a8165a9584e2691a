"""Three tables added after 0d0a80b: source_left_out, slack_request, rule_counts.

paperbell created them on first use before it had migrations, so a database stamped at the
baseline may already hold some of them: each is created only where it is missing. No
column of the baseline's tables changed.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def missing(table: str) -> bool:
    """Whether the database lacks `table` (an unversioned database may have it already)."""
    return not sa.inspect(op.get_bind()).has_table(table)


def upgrade() -> None:
    if missing("source_left_out"):
        op.create_table(
            "source_left_out",
            sa.Column("name", sa.String(128), primary_key=True),
            sa.Column("count", sa.Integer(), nullable=False),
            sa.Column("first", sa.String(), nullable=True),
            sa.Column("at", sa.DateTime(timezone=True), nullable=True),
        )
    if missing("slack_request"):
        op.create_table(
            "slack_request",
            sa.Column("signature", sa.String(128), primary_key=True),
            sa.Column("seen", sa.DateTime(timezone=True), nullable=False),
        )
        op.create_index("ix_slack_request_seen", "slack_request", ["seen"])
    if missing("rule_counts"):
        op.create_table(
            "rule_counts",
            sa.Column("id", sa.Integer(), primary_key=True),
            sa.Column(
                "subscriber_id", sa.Integer(), sa.ForeignKey("subscribers.id"), nullable=False
            ),
            sa.Column("rule", sa.String(1000), nullable=False),
            sa.Column("matched", sa.Integer(), nullable=False),
            sa.Column("papers", sa.Integer(), nullable=False),
            sa.Column("first", sa.Date(), nullable=True),
            sa.Column("last", sa.Date(), nullable=True),
            sa.Column("examples", sa.String(), nullable=False),
            sa.Column("counted_at", sa.DateTime(timezone=True), nullable=False),
        )
        op.create_index("ix_rule_counts_subscriber_id", "rule_counts", ["subscriber_id"])


def downgrade() -> None:
    op.drop_table("rule_counts")
    op.drop_table("slack_request")
    op.drop_table("source_left_out")
