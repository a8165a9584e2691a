"""Baseline: the schema of paperbell 0d0a80b, the last version without migrations.

A database that version made has these tables and no `alembic_version`: bot.store.schema
recognises it and stamps it at this revision, then upgrades it. A new database is made by
running this revision and every later one.

Revision ID: 0001
Revises:
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 255  # bot.core.models.MAX_ID_LENGTH at 0d0a80b


def moment() -> sa.DateTime:
    """A point in time (aware, kept in UTC)."""
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "papers",
        sa.Column("id", sa.String(ID), primary_key=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("abstract", sa.String(), nullable=False),
        sa.Column("authors", sa.String(), nullable=False),
        sa.Column("categories", sa.String(), nullable=False),
        sa.Column("announce_type", sa.String(16), nullable=False),
        sa.Column("announced", sa.Date(), nullable=True),
        sa.Column("dois", sa.String(), nullable=False),
        sa.Column("journal_ref", sa.String(), nullable=True),
        sa.Column("license", sa.String(), nullable=True),
        sa.Column("source", sa.String(128), nullable=False),
        sa.Column("first_seen", moment(), nullable=False),
        sa.Column("first_announced", sa.Date(), nullable=True),
        sa.Column("first_type", sa.String(16), nullable=False),
        sa.Column("updated_at", moment(), nullable=False),
        sa.Column("sources", sa.String(), nullable=False),
        sa.Column("authority", sa.Integer(), nullable=False),
        sa.Column("link", sa.String(), nullable=True),
        sa.Column("upvotes", sa.Integer(), nullable=True),
        sa.Column("hf_rank", sa.Integer(), nullable=True),
        sa.Column("hf_day", sa.Date(), nullable=True),
        sa.Column("comments", sa.Integer(), nullable=True),
        sa.Column("keywords", sa.String(), nullable=False),
        sa.Column("ai_summary", sa.String(), nullable=True),
        sa.Column("github", sa.String(), nullable=True),
        sa.Column("github_stars", sa.Integer(), nullable=True),
        sa.Column("organization", sa.String(), nullable=True),
    )
    op.create_index("ix_papers_announced", "papers", ["announced"])

    op.create_table(
        "paper_keys",
        sa.Column("key", sa.String(ID), primary_key=True),
        sa.Column("paper_id", sa.String(ID), nullable=False),
    )
    op.create_index("ix_paper_keys_paper_id", "paper_keys", ["paper_id"])

    op.create_table(
        "subscribers",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("email", sa.String(320), nullable=True),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("categories", sa.String(), nullable=False),
        sa.Column("max_papers", sa.Integer(), nullable=False),
        sa.Column("include", sa.String(), nullable=False),
        sa.Column("created_at", moment(), nullable=False),
        sa.Column("paused_reason", sa.String(), nullable=True),
        sa.Column("schedule", sa.String(8), nullable=True),
        sa.Column("day", sa.String(9), nullable=True),
        sa.Column("time", sa.String(5), nullable=True),
        sa.Column("timezone", sa.String(64), nullable=True),
        sa.Column("notify_empty", sa.Boolean(), nullable=True),
        sa.Column("last_slot", sa.String(32), nullable=True),
        sa.Column("slack_channel", sa.String(82), nullable=True),
        sa.Column("slack_user", sa.String(32), nullable=True),
        sa.Column("slack_webhook", sa.String(128), nullable=True),
        sa.Column("email_confirmed", sa.Boolean(), nullable=False),
        sa.Column("email_format", sa.String(8), nullable=False),
        sa.Column("abstracts", sa.String(8), nullable=False),
    )
    op.create_index("ix_subscribers_slack_user", "subscribers", ["slack_user"])

    op.create_table(
        "source_state",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("etag", sa.String(), nullable=True),
        sa.Column("last_modified", sa.String(), nullable=True),
        sa.Column("last_poll", moment(), nullable=True),
        sa.Column("last_result", sa.String(), nullable=False),
        sa.Column("last_error", sa.String(), nullable=True),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("new", sa.Integer(), nullable=False),
        sa.Column("updated", sa.Integer(), nullable=False),
        sa.Column("announced", sa.Date(), nullable=True),
        sa.Column("batch", sa.String(64), nullable=True),
        sa.Column("last_new", moment(), nullable=True),
        sa.Column("last_new_day", sa.Date(), nullable=True),
    )

    op.create_table(
        "backfill",
        sa.Column("source", sa.String(128), primary_key=True),
        sa.Column("chunk", sa.String(64), primary_key=True),
        sa.Column("papers", sa.Integer(), nullable=False),
        sa.Column("done_at", moment(), nullable=False),
    )

    op.create_table(
        "rules",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("subscriber_id", sa.Integer(), sa.ForeignKey("subscribers.id"), nullable=False),
        sa.Column("text", sa.String(1000), nullable=False),
        sa.Column("created_at", moment(), nullable=False),
    )
    op.create_index("ix_rules_subscriber_id", "rules", ["subscriber_id"])

    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("subscriber_id", sa.Integer(), sa.ForeignKey("subscribers.id"), nullable=False),
        sa.Column("channel", sa.String(16), nullable=False),
        sa.Column("period", sa.String(128), nullable=False),
        sa.Column("digest_id", sa.String(128), nullable=False),
        sa.Column("recipient", sa.String(320), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("papers", sa.Integer(), nullable=False),
        sa.Column("omitted", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt", moment(), nullable=False),
        sa.Column("lease_owner", sa.String(128), nullable=True),
        sa.Column("lease_until", moment(), nullable=True),
        sa.Column("last_error", sa.String(), nullable=True),
        sa.Column("created_at", moment(), nullable=False),
        sa.Column("sent_at", moment(), nullable=True),
        sa.Column("progress", sa.String(), nullable=True),
        sa.UniqueConstraint("subscriber_id", "channel", "period"),
    )
    op.create_index("ix_outbox_status", "outbox", ["status"])
    op.create_index("ix_outbox_subscriber_id", "outbox", ["subscriber_id"])

    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("subscriber_id", sa.Integer(), sa.ForeignKey("subscribers.id"), nullable=False),
        sa.Column("paper_id", sa.String(ID), nullable=False),
        sa.Column("paper_version", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("digest_id", sa.String(128), nullable=False),
        sa.Column("outbox_id", sa.Integer(), sa.ForeignKey("outbox.id"), nullable=True),
        sa.Column("created_at", moment(), nullable=False),
        sa.UniqueConstraint("subscriber_id", "paper_id", "paper_version", "channel"),
    )
    op.create_index("ix_deliveries_outbox_id", "deliveries", ["outbox_id"])
    op.create_index("ix_deliveries_subscriber_id", "deliveries", ["subscriber_id"])


def downgrade() -> None:
    for table in (
        "deliveries",
        "outbox",
        "rules",
        "backfill",
        "source_state",
        "subscribers",
        "paper_keys",
        "papers",
    ):
        op.drop_table(table)
