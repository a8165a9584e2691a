"""Summaries and translations: each subscriber's `summaries` and `language`, the texts a
model wrote for each paper version (paper_text), and each day's use of each model
(llm_day: requests against the daily budget, failures, tokens).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("subscribers") as batch:
        batch.add_column(
            sa.Column("summaries", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("language", sa.String(35), nullable=True))
    op.create_table(
        "paper_text",
        sa.Column("paper_id", sa.String(255), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("language", sa.String(35), primary_key=True),
        sa.Column("model", sa.String(200), primary_key=True),
        sa.Column("source_hash", sa.String(16), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
    )
    op.create_table(
        "llm_day",
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("model", sa.String(200), primary_key=True),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("written", sa.Integer(), nullable=False),
        sa.Column("cached", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("over_budget", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("failures", sa.String(), nullable=False),
        sa.Column("last_error", sa.String(), nullable=True),
        sa.Column("last_error_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("llm_day")
    op.drop_table("paper_text")
    with op.batch_alter_table("subscribers") as batch:
        batch.drop_column("language")
        batch.drop_column("summaries")
