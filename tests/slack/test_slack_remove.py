"""`/papers remove N` says whether the digests stop as the removal found the rules, not as
they were read before it: a rule added meanwhile (on the manage page) keeps them going; a
rule removed meanwhile makes this one the last."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from support.config import slack_config
from support.slack import wired_slack_app

from bot.demo.slack_standin import SlackStandIn
from bot.slack.messages import CommandRequest
from bot.store import Store

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
ADA = "U07ADA123"
LAST = "That was the last rule"


def added_meanwhile(store: Store, name: str) -> None:
    store.subscribers.add_rule(name, "drone", now=NOW)


def removed_meanwhile(store: Store, name: str) -> None:
    store.subscribers.remove_rule_text(name, "qubit")


@pytest.mark.parametrize(
    ("rules", "meanwhile", "stops"),
    [(["robot"], added_meanwhile, False), (["robot", "qubit"], removed_meanwhile, True)],
    ids=["added", "removed"],
)
def test_remove_says_the_digests_stop_only_when_they_do(
    store: Store,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    rules: list[str],
    meanwhile: Callable[[Store, str], None],
    stops: bool,
) -> None:
    with SlackStandIn() as standin:
        standin.add_user(ADA, "ada", email="ada@lab.example")
        slack = wired_slack_app(slack_config(standin, database_url, []), store, clock=lambda: NOW)
        assert slack is not None
        commands = slack.responder.commands
        for rule in rules:
            asyncio.run(commands.handle(CommandRequest(text=f"subscribe {rule}", user_id=ADA)))
        remove = store.subscribers.remove_rule

        def remove_after_another_change(name: str, number: int, **options: bool) -> object:
            meanwhile(store, name)  # another request's, after this one read Ada's rules
            return remove(name, number, **options)

        monkeypatch.setattr(store.subscribers, "remove_rule", remove_after_another_change)
        reply = asyncio.run(commands.handle(CommandRequest(text="remove 1", user_id=ADA)))
    (now,) = store.subscribers.all(include_inactive=True)
    assert now.active is not stops, now
    assert (LAST in reply.text) is stops, reply.text
