"""A rule removed or changed by the rule a page showed, not by its place: two "Remove this
rule" posts of one rule at once (a double click: each request read the rules before either
removed one) removed it and the rule after it; an edit posted after a removal changed the
rule that moved into the edited one's place.

A request reads the subscriber, finds the number the shown rule has, then removes by that
number; the other request's removal, between the two, moved the next rule into its place.
And two removals at once, each of one of the last two rules, each counted a rule to spare;
two additions at once each counted a rule free under the limit, or each found the rule new;
an edit or a label of a rule by its number beside an addition each found its text or label free.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event
from support.config import web_config

from bot.config import Config
from bot.core.errors import StoreError
from bot.core.models import Subscriber
from bot.manage import Manager, SiteChoices
from bot.pipeline import wire
from bot.store import Store

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)


def read_twice(
    store: Store, config: Config, rules: list[str]
) -> tuple[Manager, Subscriber, Subscriber]:
    """The manager of `config`'s pages and Ada, with `rules`, as two requests read her
    before either changes her."""
    manager = Manager(SiteChoices.of(config), wire(config, store), clock=lambda: NOW)
    ada, _ = store.subscribers.add("ada", email="ada@lab.example", rules=rules, now=NOW)
    assert ada.id is not None
    first, second = manager.subscriber(ada.id), manager.subscriber(ada.id)
    assert first is not None and second is not None
    return manager, first, second


def test_two_removals_of_one_rule_at_once_remove_that_rule_alone(
    store: Store, database_url: str
) -> None:
    config = web_config(database_url, 2525, web={"signup": True})
    # Both requests read Ada before either removed "robot", her rule 1.
    manager, first, second = read_twice(store, config, ["robot", "qubit", "drone"])
    assert manager.remove_rule(first, 1, was="robot") is None
    assert manager.remove_rule(second, 1, was="robot") is None
    assert store.subscribers.rule_texts("ada") == ["qubit", "drone"]


def test_an_edit_posted_after_a_removal_moved_the_numbers_changes_the_rule_shown(
    store: Store, database_url: str
) -> None:
    """The edit form of "qubit" (rule 2) posted by a request that read Ada before another
    removed "robot": "qubit" is rule 1 now, and rule 2 is "drone"."""
    config = web_config(database_url, 2525, web={"signup": True})
    manager, removing, editing = read_twice(store, config, ["robot", "qubit", "drone"])
    assert manager.remove_rule(removing, 1, was="robot") is None
    assert manager.edit_rule(editing, 2, "qubit*", was="qubit") is None
    assert store.subscribers.rule_texts("ada") == ["qubit*", "drone"]


WAIT = 3  # seconds: less than SQLite's wait for its write lock (5 s)
# Which side of the race a database call is on: "first" or "second".
ROLE: ContextVar[str] = ContextVar("ROLE", default="")


class ReadBeforeRemoved:
    """Holds the "second" of two changes after it read the rules (its first read of
    them), until the "first", started only then, has made its change and returned. At
    most WAIT seconds: a change that reads under a lock holds the first back instead."""

    def __init__(self, store: Store) -> None:
        self.first_done = threading.Event()
        self.second_read = threading.Event()
        event.listen(store.database.engine, "after_cursor_execute", self.after)

    def after(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if ROLE.get() == "second" and "FROM rules" in statement and not self.second_read.is_set():
            self.second_read.set()
            self.first_done.wait(WAIT)

    def run(self, first: Callable[[], object], second: Callable[[], object]) -> None:
        """Run `first` and `second` in two threads. One may be refused (a StoreError):
        the caller looks at what they left."""

        def run(role: str, work: Callable[[], object]) -> None:
            ROLE.set(role)
            if role == "first":
                self.second_read.wait(WAIT)
            try:
                work()
            except StoreError:
                pass
            finally:
                if role == "first":
                    self.first_done.set()

        threads = [
            threading.Thread(target=run, args=("first", first)),
            threading.Thread(target=run, args=("second", second)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(4 * WAIT)


@pytest.mark.parametrize("way", ["page", "number", "slack"])
def test_two_removals_of_the_last_two_rules_at_once_leave_one(
    store: Store, database_url: str, way: str
) -> None:
    """Ada has two rules; two removals at once, one of each, both counted two rules and
    both went: an active subscriber with no rule. One must be refused (or, as Slack's
    does, stop her digests)."""
    config = web_config(database_url, 2525, web={"signup": True})
    manager, first, second = read_twice(store, config, ["robot", "qubit"])
    race = ReadBeforeRemoved(store)
    if way == "page":
        race.run(
            lambda: manager.remove_rule(first, 1, was="robot"),
            lambda: manager.remove_rule(second, 2, was="qubit"),
        )
    else:
        pauses = way == "slack"
        race.run(
            lambda: store.subscribers.remove_rule("ada", 1, last_pauses=pauses),
            lambda: store.subscribers.remove_rule("ada", 2, last_pauses=pauses),
        )
    (now,) = store.subscribers.all(include_inactive=True)
    left = {(1, True), (0, False)} if way == "slack" else {(1, True)}
    assert (len(now.rules), now.active) in left, now


@pytest.mark.parametrize("way", ["page", "add"])
@pytest.mark.parametrize("added", [("qubit", "drone"), ("qubit", "qubit")])
def test_two_additions_at_once_keep_the_limit_and_add_a_rule_once(
    store: Store, database_url: str, way: str, added: tuple[str, str]
) -> None:
    """Ada has one rule of two allowed; two additions at once (the page's form, or
    `Subscribers.add` as Slack's `/papers add` and `paperbell subscribe` reach it) each
    counted one rule: she had three, or one rule twice. One must be refused."""
    config = web_config(database_url, 2525, web={"signup": True}, digest={"max_rules": 2})
    manager, first, second = read_twice(store, config, ["robot"])
    race = ReadBeforeRemoved(store)
    if way == "page":
        race.run(
            lambda: manager.add_rule(first, added[0]),
            lambda: manager.add_rule(second, added[1]),
        )
    else:
        race.run(
            lambda: store.subscribers.add(
                "ada", email=None, rules=[added[0]], now=NOW, max_rules=2
            ),
            lambda: store.subscribers.add(
                "ada", email=None, rules=[added[1]], now=NOW, max_rules=2
            ),
        )
    assert store.subscribers.rule_texts("ada") in (["robot", added[0]], ["robot", added[1]])


def test_an_edit_by_number_and_an_addition_of_its_text_at_once_store_it_once(
    store: Store,
) -> None:
    """Ada's rule 1 changed into "qubit" (`replace_rule`, as the manage page's edit of a
    rule shown by number reaches it) while "qubit" is added: each read the rules before
    the other wrote, and Ada had "qubit" twice. One must be refused."""
    store.subscribers.add("ada", email="ada@lab.example", rules=["robot", "drone"], now=NOW)
    ReadBeforeRemoved(store).run(
        lambda: store.subscribers.add_rule("ada", "qubit", now=NOW),
        lambda: store.subscribers.replace_rule("ada", 1, "qubit"),
    )
    assert store.subscribers.rule_texts("ada") in (
        ["qubit", "drone"],
        ["robot", "drone", "qubit"],
    )


def test_a_label_by_number_and_an_addition_with_that_label_at_once_label_one_rule(
    store: Store,
) -> None:
    """Ada's rule 1 labelled "bots" (`set_label`, as Slack's `/papers label` reaches it)
    while "drone" is added labelled "bots": each checked the labels before the other
    wrote, and two rules had one label. One must be refused."""
    store.subscribers.add("ada", email="ada@lab.example", rules=["robot", "qubit"], now=NOW)
    ReadBeforeRemoved(store).run(
        lambda: store.subscribers.add_rule("ada", "drone", now=NOW, label="bots"),
        lambda: store.subscribers.set_label("ada", 1, "bots"),
    )
    (ada,) = store.subscribers.all(include_inactive=True)
    assert dict(ada.labels) in ({"robot": "bots"}, {"drone": "bots"}), ada
