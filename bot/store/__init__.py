"""The store: everything paperbell keeps, and the only package that opens a database session.

`Store.open(url)` opens the database (bot.store.database; tables: bot.store.tables; their
migrations and the schema's version: bot.store.schema, `schema_state`, `upgrade_schema`;
a copy of a SQLite file while it is in use: `backup_database`; `Store.open_at`, a child
process's way in, confirms the revision its parent checked) and
hands out one repository per kind of data: `store.papers`, `store.sources` (their polls),
`store.subscribers` (with their rules; read: bot.store.subscriber_queries; many added or
mirrored at once: bot.store.bulk),
`store.feedback` (verdicts on papers), `store.vectors` (texts' embeddings),
`store.ranking_models`, `store.rule_counts`,
`store.outbox` (digests to send, deliveries), `store.archive` (what each subscriber was
sent, read back: their feed and archive), `store.targets` (destinations subscribers gave,
paused targets), `store.bounces` (what came back to the bounce address, and the messages
it answers), `store.slack_requests` (replays refused) and
`store.texts` (summaries and translations, and each model's daily use). Callers get plain
data (bot.core.models classes, or the frozen records below), never a table row.
`Leadership` (bot.store.leader) says which `paperbell run` leads; `workers`, which run.
"""

from __future__ import annotations

from bot.store.archive import Archive, DeliveredPaper, SentDigest
from bot.store.bounces import Bounce, BounceDay, Bounces, SentMessage
from bot.store.bulk import Added, NewSubscriber
from bot.store.database import (
    Backup,
    Database,
    backup_database,
    database_file,
    describe_upgrade,
    normalize_url,
    pg_dump_command,
    schema_state,
    upgrade_schema,
    utcnow,
)
from bot.store.feedback import FeedbackStore, RankingModel, RankingModels, Vectors
from bot.store.leader import Leadership, Workers, workers
from bot.store.lookups import SubscriberRecord
from bot.store.outbox import (
    Outbox,
    OutboxItem,
    OutboxStatus,
    Queued,
    RenderedJob,
    RenderedPart,
)
from bot.store.papers import Papers, UpsertCounts
from bot.store.relays import Relays, RelayState
from bot.store.retention import Pruned, Retention
from bot.store.rule_counts import RuleCount, RuleCounts
from bot.store.schema import SchemaState, Upgrade
from bot.store.slack_requests import SlackRequests
from bot.store.sources import LeftOut, Sources, SourceState
from bot.store.subscribers import Subscribers
from bot.store.targets import TargetPause, Targets
from bot.store.texts import ModelDay, TextKey, Texts

__all__ = [
    "Added",
    "Archive",
    "Backup",
    "Bounce",
    "BounceDay",
    "DeliveredPaper",
    "Leadership",
    "LeftOut",
    "ModelDay",
    "NewSubscriber",
    "OutboxItem",
    "OutboxStatus",
    "Pruned",
    "Queued",
    "RankingModel",
    "RelayState",
    "Relays",
    "RenderedJob",
    "RenderedPart",
    "RuleCount",
    "SchemaState",
    "SentDigest",
    "SentMessage",
    "SourceState",
    "Store",
    "SubscriberRecord",
    "TargetPause",
    "TextKey",
    "Upgrade",
    "UpsertCounts",
    "Workers",
    "backup_database",
    "database_file",
    "describe_upgrade",
    "normalize_url",
    "pg_dump_command",
    "schema_state",
    "upgrade_schema",
    "utcnow",
    "workers",
]


class Store:
    """An open database and its repositories. Build with `Store.open(url)`."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.papers = Papers(database)
        self.sources = Sources(database)
        self.subscribers = Subscribers(database)
        self.rule_counts = RuleCounts(database)
        self.outbox = Outbox(database)
        self.archive = Archive(database)
        self.targets = Targets(database)
        self.slack_requests = SlackRequests(database)
        self.texts = Texts(database)
        self.feedback = FeedbackStore(database)
        self.vectors = Vectors(database)
        self.ranking_models = RankingModels(database)
        self.bounces = Bounces(database)
        self.relays = Relays(database)
        self.retention = Retention(database)

    @classmethod
    def open(cls, url: str, *, upgrade: bool = False) -> Store:
        """Connect (a new database is made by the migrations); a database at an older
        schema is upgraded when `upgrade` is true, else refused (OutdatedSchema)."""
        return cls(Database.open(url, upgrade=upgrade))

    @classmethod
    def open_at(cls, url: str, revision: str) -> Store:
        """Connect to a database whose schema this process's parent checked: it must be at
        `revision` (one query confirms it), else refused (StoreError)."""
        return cls(Database.open_at(url, revision))

    def close(self) -> None:
        self.database.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
