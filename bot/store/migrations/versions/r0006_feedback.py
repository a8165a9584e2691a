"""Papers like these: each subscriber's verdicts on papers (feedback), texts' vectors per
embedding model (text_vectors), each subscriber's fitted ranking model (ranking_models), and
how many similar papers a digest may add (subscribers.similar_max, similar_min). Every
subscriber stored before has no verdicts, and so digests exactly as before.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("subscribers") as batch:
        batch.add_column(sa.Column("similar_max", sa.Integer(), nullable=False, server_default="5"))
        batch.add_column(sa.Column("similar_min", sa.Float(), nullable=True))
    op.create_table(
        "feedback",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("subscriber_id", sa.Integer(), sa.ForeignKey("subscribers.id"), nullable=False),
        sa.Column("paper_key", sa.String(255), nullable=False),
        sa.Column("verdict", sa.String(8), nullable=False),
        sa.Column("via", sa.String(16), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("subscriber_id", "paper_key"),
    )
    op.create_index("ix_feedback_subscriber_id", "feedback", ["subscriber_id"])
    op.create_table(
        "text_vectors",
        sa.Column("model", sa.String(200), primary_key=True),
        sa.Column("text_hash", sa.String(64), primary_key=True),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "ranking_models",
        sa.Column("subscriber_id", sa.Integer(), sa.ForeignKey("subscribers.id"), primary_key=True),
        sa.Column("kind", sa.String(200), nullable=False),
        sa.Column("feedback_hash", sa.String(64), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("fitted_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ranking_models")
    op.drop_table("text_vectors")
    op.drop_index("ix_feedback_subscriber_id", table_name="feedback")
    op.drop_table("feedback")
    with op.batch_alter_table("subscribers") as batch:
        batch.drop_column("similar_min")
        batch.drop_column("similar_max")
