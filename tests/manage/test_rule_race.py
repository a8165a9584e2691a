"""A rule removed by the rule a page showed, not by its place: two "Remove this rule" posts
of one rule at once (a double click: each request read the rules before either removed
one) removed it and the rule after it.

A request reads the subscriber, finds the number the shown rule has, then removes by that
number; the other request's removal, between the two, moved the next rule into its place.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from support.config import web_config

from bot.manage import Manager, SiteChoices
from bot.pipeline import wire
from bot.store import Store

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)


def test_two_removals_of_one_rule_at_once_remove_that_rule_alone(
    store: Store, database_url: str
) -> None:
    config = web_config(database_url, 2525, web={"signup": True})
    manager = Manager(SiteChoices.of(config), wire(config, store), clock=lambda: NOW)
    ada, _ = store.subscribers.add(
        "ada", email="ada@lab.example", rules=["robot", "qubit", "drone"], now=NOW
    )
    assert ada.id is not None
    # Both requests read Ada before either removed "robot", her rule 1.
    first, second = manager.subscriber(ada.id), manager.subscriber(ada.id)
    assert first is not None and second is not None
    assert manager.remove_rule(first, 1, was="robot") is None
    assert manager.remove_rule(second, 1, was="robot") is None
    assert store.subscribers.rule_texts("ada") == ["qubit", "drone"]
