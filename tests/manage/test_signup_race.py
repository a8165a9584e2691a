"""Two sign-ups at once (the page's, Slack's subscribe) whose names would be one: each gets
a subscriber of its own.

A sign-up picks a free name, then adds the subscriber under it. The second of two that
picked the same name used to find the first one's row and update it: its address replaced
the first person's (whose digests and manage links then went to a stranger), or it joined
their subscription; or, both inserting it, it failed on the unique name.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event
from support.config import slack_config, web_config
from support.slack import wired_slack_app

from bot.core.models import Subscriber
from bot.demo.slack_standin import SlackStandIn
from bot.manage import Manager, SiteChoices
from bot.pipeline import wire
from bot.pipeline.wiring import NOTICE_CHANNEL
from bot.slack.messages import CommandRequest
from bot.store import Store

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
WAIT = 10  # seconds: a thread waiting longer has lost its partner; the test then fails
KIM = "U07KIM123"
# Which side of the race a database call is on: "first" or "second".
ROLE: ContextVar[str] = ContextVar("ROLE", default="")


class PickedBeforeAdded:
    """Holds two sign-ups on the store's engine in the order of the race: the "second"
    picks its name (its first look-up by name), then waits until the "first" has added
    its subscriber under that name and committed."""

    def __init__(self, store: Store) -> None:
        self.second_picked = threading.Event()
        self.first_added = threading.Event()
        self.first_inserted = self.first_committing = False
        engine = store.database.engine
        event.listen(engine, "before_cursor_execute", self.before)
        event.listen(engine, "after_cursor_execute", self.after)
        event.listen(engine, "commit", self.committed)

    def before(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if _role() != "first":
            return
        if self.first_committing:  # its next statement comes after the commit returned
            self.first_added.set()
        if statement.startswith("INSERT INTO subscribers "):
            self.first_inserted = True
            self.second_picked.wait(WAIT)

    def after(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        by_name = "FROM subscribers" in statement and "WHERE subscribers.name =" in statement
        if _role() == "second" and by_name and not self.second_picked.is_set():
            self.second_picked.set()
            self.first_added.wait(WAIT)

    def committed(self, _conn: Any) -> None:
        # The event comes before the database commits: wait for the next statement.
        if _role() == "first" and self.first_inserted:
            self.first_committing = True


class InsertedTogether:
    """Holds each of two sign-ups before it inserts its subscriber until both are there:
    both have found the name free, and both insert it."""

    def __init__(self, store: Store) -> None:
        self.both = threading.Barrier(2, timeout=WAIT)
        self.waited: set[str] = set()
        event.listen(store.database.engine, "before_cursor_execute", self.before)

    def before(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.startswith("INSERT INTO subscribers ") and _role() not in self.waited:
            self.waited.add(_role())
            self.both.wait()


def _role() -> str:
    return ROLE.get()


def run_together(first: Callable[[], object], second: Callable[[], object]) -> list[BaseException]:
    """Run `first` and `second` in two threads, each in its role (the Slack command's
    database calls, in threads of their own, keep it); what they raised."""
    errors: list[BaseException] = []

    def run(role: str, work: Callable[[], object]) -> None:
        ROLE.set(role)
        try:
            work()
        except BaseException as exc:  # reported by the caller's assertion
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=("first", first)),
        threading.Thread(target=run, args=("second", second)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(3 * WAIT)
    return errors


@pytest.mark.parametrize("race", [PickedBeforeAdded, InsertedTogether])
def test_two_sign_ups_of_one_name_make_two_subscribers(
    store: Store, database_url: str, race: type[PickedBeforeAdded | InsertedTogether]
) -> None:
    config = web_config(database_url, 2525, web={"signup": True})
    manager = Manager(SiteChoices.of(config), wire(config, store), clock=lambda: NOW)
    race(store)
    errors = run_together(
        lambda: manager.signup("kim@one.example", "robot"),
        lambda: manager.signup("kim@two.example", "robot"),
    )
    assert errors == []
    everyone = store.subscribers.all(include_inactive=True)
    assert sorted((s.email, s.name) for s in everyone) in (
        [("kim@one.example", "kim"), ("kim@two.example", "kim-2")],
        [("kim@one.example", "kim-2"), ("kim@two.example", "kim")],  # the second won the race
    )


@pytest.mark.parametrize("slack_first", [False, True], ids=["sign-up first", "Slack first"])
def test_a_sign_up_and_a_slack_subscribe_of_one_name_make_two_subscribers(
    store: Store, database_url: str, slack_first: bool
) -> None:
    with SlackStandIn() as standin:
        standin.add_user(KIM, "kim", email="kim@lab.example")
        config = slack_config(standin, database_url, [], web=True)
        slack = wired_slack_app(config, store, clock=lambda: NOW)
        assert slack is not None
        commands = slack.responder.commands
        assert commands.manager is not None
        manager = commands.manager
        PickedBeforeAdded(store)

        def subscribe() -> None:
            request = CommandRequest(text="subscribe drone", user_id=KIM)
            reply = asyncio.run(commands.handle(request))
            assert reply.text.startswith("Welcome!"), reply.text

        def sign_up() -> None:  # an address whose local part is the Slack user's name
            manager.signup("slack.kim@elsewhere.example", "robot")

        errors = run_together(*((subscribe, sign_up) if slack_first else (sign_up, subscribe)))
    assert errors == []
    everyone = store.subscribers.all(include_inactive=True)
    by_place = sorted((s.slack_user or "", s.email or "", s.name) for s in everyone)
    first, second = ("slack.kim", "slack.kim-2")
    signed_up, subscribed = (second, first) if slack_first else (first, second)
    assert by_place == [
        ("", "slack.kim@elsewhere.example", signed_up),
        (KIM, "kim@lab.example", subscribed),
    ]


class FoundNoOneFirst:
    """Holds each of two sign-ups after it looked for a subscriber with its address (its
    first look), until both have: neither found the other's."""

    def __init__(self, manager: Manager) -> None:
        self.both = threading.Barrier(2, timeout=WAIT)
        self.looked: set[str] = set()
        look = manager._by_email

        def looked_up(email: str) -> Subscriber | None:
            found = look(email)
            if _role() not in self.looked:
                self.looked.add(_role())
                self.both.wait()
            return found

        manager._by_email = looked_up  # type: ignore[method-assign]


@pytest.mark.parametrize(
    "second", ["kim@lab.example", "Kim+papers@Lab.example"], ids=["same", "same mailbox"]
)
def test_two_sign_ups_of_one_address_at_once_make_one_subscriber(
    store: Store, database_url: str, second: str
) -> None:
    """A double click on the sign-up page's button, or a form sent twice: the two requests
    made two subscribers of one address, each with its confirmation mail, and once
    confirmed, two digests a day. The second finds the first's, as it would a moment later."""
    config = web_config(database_url, 2525, web={"signup": True})
    manager = Manager(SiteChoices.of(config), wire(config, store), clock=lambda: NOW)
    FoundNoOneFirst(manager)
    errors = run_together(
        lambda: manager.signup("kim@lab.example", "robot"),
        lambda: manager.signup(second, "robot"),
    )
    assert errors == []
    everyone = store.subscribers.all(include_inactive=True)
    assert sorted((s.name, s.email) for s in everyone) in (
        [("kim", "kim@lab.example")],
        [(second.partition("@")[0].replace("+", "-"), second)],  # the second won the race
    )
    (kim,) = everyone
    assert kim.id is not None and not kim.email_confirmed
    assert store.outbox.pending(kim.id, NOTICE_CHANNEL) == 1  # one confirmation mail
