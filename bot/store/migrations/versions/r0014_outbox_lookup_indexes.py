"""Two indexes on the outbox, for lookups that read every record without them (a year of
daily digests for 100,000 subscribers is tens of millions of records):

- `ix_outbox_recipient_lower` on lower(recipient): a bounce that names no message of ours
  is matched to the latest email sent to its address (`Bounces.latest_to`), once per
  bounce;
- `ix_outbox_sent_at` on sent_at: the emails sent on a day (`Bounces.day`, in `paperbell
  status` and the metrics).

No row changes. Built on a large outbox, each takes seconds to a minute once. SQLAlchemy
does not reflect an expression index on SQLite: a later batch migration of `outbox`
(`batch_alter_table`, which copies the table) must create `ix_outbox_recipient_lower`
again (tests/store/test_migrations.py's `differences` would say it is missing).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_outbox_recipient_lower", "outbox", [sa.text("lower(recipient)")])
    op.create_index("ix_outbox_sent_at", "outbox", ["sent_at"])


def downgrade() -> None:
    op.drop_index("ix_outbox_sent_at", table_name="outbox")
    op.drop_index("ix_outbox_recipient_lower", table_name="outbox")
