"""Source health: each listing's size and repair (source_listing), when a source last
worked and since when it fails (source_state.last_success, failing_since), and why a
subscriber's last digest slot sent nothing (subscribers.last_slot_note).

A source's last poll that did not fail is its last success, and one that failed is the
start of its failures (at least): both copied from last_poll.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "source_listing",
        sa.Column("source", sa.String(128), primary_key=True),
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("repair_reason", sa.String(16), nullable=True),
        sa.Column("repair_tried", sa.DateTime(timezone=True), nullable=True),
        sa.Column("repaired", sa.Integer(), nullable=True),
        sa.Column("repaired_new", sa.Integer(), nullable=False),
        sa.Column("repair_error", sa.String(), nullable=True),
    )
    with op.batch_alter_table("source_state") as batch:
        batch.add_column(sa.Column("last_success", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("failing_since", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("subscribers") as batch:
        batch.add_column(sa.Column("last_slot_note", sa.String(), nullable=True))
    state = sa.table(
        "source_state",
        sa.column("last_poll", sa.DateTime(timezone=True)),
        sa.column("last_result", sa.String()),
        sa.column("last_success", sa.DateTime(timezone=True)),
        sa.column("failing_since", sa.DateTime(timezone=True)),
    )
    op.execute(
        state.update().where(state.c.last_result != "error").values(last_success=state.c.last_poll)
    )
    # A source whose last poll failed fails since then at least.
    op.execute(
        state.update().where(state.c.last_result == "error").values(failing_since=state.c.last_poll)
    )


def downgrade() -> None:
    with op.batch_alter_table("subscribers") as batch:
        batch.drop_column("last_slot_note")
    with op.batch_alter_table("source_state") as batch:
        batch.drop_column("failing_since")
        batch.drop_column("last_success")
    op.drop_table("source_listing")
