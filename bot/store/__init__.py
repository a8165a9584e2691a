"""The store: everything paperbell keeps, and the only package that opens a database session.

`Store.open(url)` opens the database (bot.store.database; tables: bot.store.tables) and
hands out one repository per kind of data: `store.papers`, `store.sources` (their polls),
`store.subscribers` (with their rules), `store.rule_counts`, `store.outbox` (digests to
send, deliveries) and `store.slack_requests` (replays refused). Callers get plain data
(bot.core.models classes, or the frozen records below), never a table row.
"""

from __future__ import annotations

from bot.store.database import Database, normalize_url, utcnow
from bot.store.outbox import Outbox, OutboxItem, OutboxStatus
from bot.store.papers import Papers, UpsertCounts
from bot.store.rule_counts import RuleCount, RuleCounts
from bot.store.slack_requests import SlackRequests
from bot.store.sources import LeftOut, Sources, SourceState
from bot.store.subscribers import SubscriberRecord, Subscribers

__all__ = [
    "LeftOut",
    "OutboxItem",
    "OutboxStatus",
    "RuleCount",
    "SourceState",
    "Store",
    "SubscriberRecord",
    "UpsertCounts",
    "normalize_url",
    "utcnow",
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
        self.slack_requests = SlackRequests(database)

    @classmethod
    def open(cls, url: str, *, create: bool = True) -> Store:
        """Connect, and create missing tables unless `create` is false."""
        return cls(Database.open(url, create=create))

    def close(self) -> None:
        self.database.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
