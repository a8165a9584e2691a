"""Several relays ([[email.servers]], bot.channels.servers): messages spread by weight, a
relay that cannot be reached skipped (by every process, through the database) while the
others take its share, a digest a relay refused for now (4xx, "slow down") retried on
another in the same run, a permanent refusal of the recipient not retried anywhere; each
relay within its own limits; `paperbell status` showing each.

Real parts: SMTP servers on loopback (aiosmtpd sinks, Postfix's smtp-sink answering 421),
the database (SQLite, and PostgreSQL when PAPERBELL_TEST_DATABASE_URL is set), the outbox;
the weighted choice itself with no server at all.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from aiosmtpd.controller import Controller
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from support.cli import outcome
from support.clock import Clock
from support.config import local_feed_config
from support.database import dead_database
from support.servers import POSTFIX_SINK, SinkHandler, postfix_sink, smtp_sink
from support.workers import queue, received, release

from bot.channels.email import SmtpSettings
from bot.channels.limits import Limits, RelayLimiter
from bot.channels.outbox import RetryPolicy, drain
from bot.channels.servers import Relay, RelayPool, WeightedRoundRobin
from bot.config import Config, load_config
from bot.core.models import Paper
from bot.demo import free_port
from bot.pipeline.wiring import build_channels
from bot.store import Store, utcnow
from bot.store.tables import OutboxRow

pytestmark = pytest.mark.database

SENDER = "papers@paperbell.example"


def servers_config(
    tmp_path: Path, database_url: str, servers: list[dict[str, object]], **delivery: int
) -> tuple[Path, Config]:
    """A config file whose [email] sends through `servers` (loopback, no TLS)."""
    lines = [local_feed_config(database_url)]
    if delivery:
        lines.append("[delivery]\n" + "".join(f"{k} = {v}\n" for k, v in delivery.items()))
    lines.append(f'[email]\nfrom = "{SENDER}"\n')
    for server in servers:
        entry = {"host": "127.0.0.1", "security": "none", **server}
        lines.append(
            "[[email.servers]]\n"
            + "".join(
                f'{k} = "{v}"\n' if isinstance(v, str) else f"{k} = {v}\n" for k, v in entry.items()
            )
        )
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines))
    return path, load_config(path)


@contextmanager
def queued(database_url: str, papers: tuple[Paper, ...], count: int) -> Iterator[Store]:
    """The store at `database_url` with `count` digests due."""
    with Store.open(database_url) as store:
        queue(store, papers, count)
        release(store)
        yield store


def send(store: Store, config: Config, **options: object) -> list[str]:
    """One run's statuses: every due digest through the config's channels."""
    channels = build_channels(config, store=store)
    attempts = asyncio.run(drain(store, channels, clock=utcnow, owner="w", **options))  # type: ignore[arg-type]
    return [a.status for a in attempts]


def attempts(store: Store) -> set[int]:
    """The attempts counted against every queued digest."""
    with store.database.session() as session:
        return set(session.execute(select(OutboxRow.attempts)).scalars())


def recipients(sink: SinkHandler) -> set[str]:
    return {str(m["To"]) for m in sink.messages}


# -- the weighted choice ---------------------------------------------------------------------


def test_smooth_weighted_round_robin_interleaves_and_keeps_the_shares() -> None:
    order = WeightedRoundRobin({"a": 3, "b": 1})
    assert [order.pick(["a", "b"]) for _ in range(8)] == list("aaba" * 2)
    order = WeightedRoundRobin({"a": 5, "b": 1, "c": 1})
    picks = [order.pick(["a", "b", "c"]) for _ in range(7)]
    assert picks == ["a", "a", "b", "a", "c", "a", "a"]  # nginx's example
    assert Counter(order.pick(["b", "c"]) for _ in range(10)) == {"b": 5, "c": 5}  # a skipped


@settings(max_examples=200)
@given(st.lists(st.integers(1, 1000), min_size=1, max_size=8), st.integers(1, 3))
def test_any_weights_give_each_relay_exactly_its_share_of_each_round(
    weights: list[int], rounds: int
) -> None:
    names = [f"r{i}" for i in range(len(weights))]
    order = WeightedRoundRobin(dict(zip(names, weights, strict=True)))
    picks = Counter(order.pick(names) for _ in range(rounds * sum(weights)))
    assert picks == {name: rounds * weight for name, weight in zip(names, weights, strict=True)}


def test_a_pool_needs_a_relay() -> None:
    with pytest.raises(ValueError, match="needs a relay"):
        RelayPool([])


# -- sending through real SMTP servers -------------------------------------------------------


def test_weights_three_to_one_share_four_hundred_digests_three_to_one(
    tmp_path: Path, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    with smtp_sink() as (heavy, heavy_port), smtp_sink() as (light, light_port):
        path, config = servers_config(
            tmp_path,
            database_url,
            [{"port": heavy_port, "weight": 3}, {"port": light_port, "weight": 1}],
            batch=25,
            connections=2,
        )
        with queued(database_url, full_feed_papers, 400) as store:
            assert isinstance(build_channels(config, store=store)["email"], RelayPool)
            statuses = send(store, config)
            assert store.outbox.totals(now=utcnow())["sent"] == 400
        code, output = outcome("status", config=path)
    assert statuses == ["sent"] * 400
    both = received(heavy) + received(light)
    assert sorted(both.values()) == [1] * 400  # each digest once, none lost
    assert not recipients(heavy) & recipients(light)
    assert 285 <= len(heavy.messages) <= 315 and 85 <= len(light.messages) <= 115
    assert code == 0, output
    lines = [x for x in output.splitlines() if x.startswith("email relay")]
    assert lines == [
        f"email relay 127.0.0.1:{heavy_port}: weight 3; no limits",
        f"email relay 127.0.0.1:{light_port}: weight 1; no limits",
    ]


@contextmanager
def hanging_up() -> Iterator[tuple[list[int], int]]:
    """A relay that cannot be used: it accepts each connection and closes it at once (no
    greeting), counting them."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    accepted: list[int] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            accepted.append(1)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield accepted, listener.getsockname()[1]
    finally:
        done.set()
        thread.join()
        listener.close()


def test_a_dead_relay_is_skipped_and_the_others_take_every_digest_once(
    tmp_path: Path, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Three relays; the first (weight 9) hangs up on every connection: its share goes to
    the other two (weights 2 and 1) in the same run, no attempt counted against anyone; the
    run's later batches skip it at once (every process reads that it fails: one connection
    in all), and `status` says it is skipped and why."""
    with (
        hanging_up() as (accepted, dead),
        smtp_sink() as (two, port_two),
        smtp_sink() as (one, port_one),
    ):
        path, config = servers_config(
            tmp_path,
            database_url,
            [{"port": dead, "weight": 9}, {"port": port_two, "weight": 2}, {"port": port_one}],
            batch=10,
        )
        with queued(database_url, full_feed_papers, 60) as store:
            assert send(store, config) == ["sent"] * 60
            state = store.relays.state(f"127.0.0.1:{dead}", now=utcnow())
            assert state.failing_until is not None and state.failing_until > utcnow()
            assert state.failure is not None and "cannot connect" in state.failure
            assert attempts(store) == {0}
            assert store.outbox.totals(now=utcnow())["sent"] == 60
        code, output = outcome("status", config=path)
    assert len(accepted) == 1
    assert sorted((received(two) + received(one)).values()) == [1] * 60
    assert 35 <= len(two.messages) <= 45 and 15 <= len(one.messages) <= 25  # 2:1
    assert code == 0, output
    line = next(x for x in output.splitlines() if f"127.0.0.1:{dead}" in x)
    assert "skipped as failing until" in line and "cannot connect" in line


class Asked(SinkHandler):
    """The sink, noting every recipient it was asked to take (RCPT), taken or not."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        self.asked.append(address)
        return await super().handle_RCPT(server, session, envelope, address, options)


def test_a_4xx_for_one_recipient_is_retried_on_the_other_relay_and_a_5xx_is_not(
    tmp_path: Path, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """The first relay (weight 1000: it gets them all) answers 550 to s0000's RCPT and 451
    to s0002's (greylisted: a slow-down too): s0000's is the recipient's failure, tried
    nowhere else; s0002's digest goes through the second relay in the same run, and so
    does s0003's (the first, slowed down, hands the rest of its share over)."""
    with smtp_sink(Asked()) as (first, first_port), smtp_sink(Asked()) as (second, second_port):
        first.refuse["s0000@lab.example"] = "550 5.1.1 no such mailbox"
        first.refuse["s0002@lab.example"] = "451 4.7.1 greylisted, try again later"
        _, config = servers_config(
            tmp_path,
            database_url,
            [{"port": first_port, "weight": 1000}, {"port": second_port}],
            batch=4,
        )
        with queued(database_url, full_feed_papers, 4) as store:
            statuses = send(store, config)
            slowed = store.relays.state(f"127.0.0.1:{first_port}", now=utcnow())
    assert sorted(statuses) == ["failed", "sent", "sent", "sent"]
    assert cast(Asked, first).asked == [f"s000{i}@lab.example" for i in range(3)]
    assert recipients(first) == {"s0001@lab.example"}
    assert sorted(cast(Asked, second).asked) == ["s0002@lab.example", "s0003@lab.example"]
    assert recipients(second) == {"s0002@lab.example", "s0003@lab.example"}
    assert sorted((received(first) + received(second)).values()) == [1] * 3
    assert slowed.slow_until is not None  # the 451 slowed the first relay for every process


def test_a_recipient_one_relay_will_not_relay_for_goes_through_the_other(
    tmp_path: Path, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """The first relay does not relay to s0001's domain ("554 5.7.1 Relay access denied"):
    its policy toward paperbell, not her mailbox. Her digest goes through the second relay
    in the same run."""
    with smtp_sink(Asked()) as (first, first_port), smtp_sink(Asked()) as (second, second_port):
        first.refuse["s0001@lab.example"] = "554 5.7.1 <s0001@lab.example>: Relay access denied"
        _, config = servers_config(
            tmp_path,
            database_url,
            [{"port": first_port, "weight": 1000}, {"port": second_port}],
            batch=3,
        )
        with queued(database_url, full_feed_papers, 3) as store:
            statuses = send(store, config)
    assert statuses == ["sent"] * 3
    assert recipients(first) == {"s0000@lab.example", "s0002@lab.example"}
    assert recipients(second) == {"s0001@lab.example"}


def test_each_relay_keeps_its_own_limits_and_a_full_one_hands_over(
    tmp_path: Path, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """The heavy relay allows 3 an hour: its other digests go through the light one."""
    with smtp_sink() as (heavy, heavy_port), smtp_sink() as (light, light_port):
        _, config = servers_config(
            tmp_path,
            database_url,
            [{"port": heavy_port, "weight": 5, "max_per_hour": 3}, {"port": light_port}],
            batch=20,
        )
        with queued(database_url, full_feed_papers, 20) as store:
            assert send(store, config) == ["sent"] * 20
    assert len(heavy.messages) == 3 and len(light.messages) == 17
    assert sorted((received(heavy) + received(light)).values()) == [1] * 20


@pytest.mark.skipif(not POSTFIX_SINK.exists(), reason="needs Postfix's smtp-sink")
def test_a_relay_answering_421_to_every_rcpt_slows_and_the_other_sends_everything(
    tmp_path: Path, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Postfix's smtp-sink answering 421 to each RCPT (-Q RCPT): the first digest it refused
    goes through the other relay, the relay is slowed for every process and its share
    handed over; nothing is lost, failed or counted as an attempt."""
    port = free_port()
    with postfix_sink(tmp_path, port, "-Q", "RCPT"), smtp_sink() as (sink, other):
        path, config = servers_config(
            tmp_path,
            database_url,
            [{"port": port, "weight": 3, "max_per_second": 8}, {"port": other}],
            batch=12,
        )
        with queued(database_url, full_feed_papers, 12) as store:
            assert send(store, config) == ["sent"] * 12
            assert attempts(store) == {0}
            state = store.relays.state(f"127.0.0.1:{port}", now=utcnow())
        _, output = outcome("status", config=path)
    assert sorted(received(sink).values()) == [1] * 12
    assert state.slow_until is not None and state.slow_seconds == 0.25  # half of 8 a second
    line = next(x for x in output.splitlines() if f"127.0.0.1:{port}" in x)
    assert "limits 8 a second" in line and "slowed to one message every 0.25 s" in line


def test_a_relay_that_refuses_the_login_is_skipped_not_the_recipients_fault(
    database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """A relay that refuses paperbell as it connects (here: no AUTH offered, a username
    set) fails as a whole, permanently for that relay, never for the recipients: the
    other relay takes its digests."""
    with Store.open(database_url) as store, smtp_sink() as (sink, port), smtp_sink() as (_, bad):
        queue(store, full_feed_papers, 6)
        release(store)

        def relay(at: int, weight: int, user: str | None) -> Relay:
            smtp = SmtpSettings("127.0.0.1", at, security="none", username=user, password="pw")
            limiter = RelayLimiter(store.relays, f"127.0.0.1:{at}", Limits(), clock=utcnow)
            return Relay(smtp, weight, limiter)

        pool = RelayPool([relay(bad, 5, "someone"), relay(port, 1, None)])
        attempts = asyncio.run(drain(store, pool, clock=utcnow, owner="w", retry=RetryPolicy()))
    assert [a.status for a in attempts] == ["sent"] * 6
    assert sorted(received(sink).values()) == [1] * 6


def test_a_batch_stopped_midway_leaves_the_rest_untried_and_sends_nothing_twice(
    database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """A daemon shutting down (`should_stop`) after five messages: five digests sent across
    both relays, once each; the rest get no outcome (handed back, claimable again)."""
    with (
        Store.open(database_url) as store,
        smtp_sink() as (first, first_port),
        smtp_sink() as (second, second_port),
    ):
        queue(store, full_feed_papers, 12)
        release(store)
        relays = [
            Relay(SmtpSettings("127.0.0.1", port, security="none"), weight)
            for port, weight in ((first_port, 2), (second_port, 1))
        ]

        def should_stop() -> bool:
            return len(first.messages) + len(second.messages) >= 5

        items = store.outbox.claim("w", now=utcnow(), lease=timedelta(minutes=5), limit=12)
        sent: list[int] = []
        pool = RelayPool(relays)
        outcomes = asyncio.run(
            pool.send_all(
                [(item, item.payload) for item in items],
                lambda item: sent.append(item.id),
                should_stop=should_stop,
            )
        )
    got = received(first) + received(second)
    assert sorted(got.values()) == [1] * len(got) and 5 <= len(got) < 12
    assert sorted(o.item.id for o in outcomes if o.ok) == sorted(sent)
    assert len(sent) == len(got) and len(outcomes) == len(got)


class TakesThenHangsUp(SinkHandler):
    """A relay that keeps each message and then, in place of its "250", hangs up (or
    answers only after `late` seconds): the message may well be on its way, and paperbell
    cannot know."""

    def __init__(self, late: float = 0.0) -> None:
        super().__init__()
        self.late = late

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        answer = await super().handle_DATA(server, session, envelope)
        if self.late:
            await asyncio.sleep(self.late)
        else:
            server.transport.close()
        return answer


@pytest.mark.parametrize(("late", "copies"), [(0.0, 2), (2.0, 1)], ids=["hangs-up", "too-late"])
def test_a_digest_a_relay_may_have_taken_is_not_sent_through_another(
    database_url: str, full_feed_papers: tuple[Paper, ...], late: float, copies: int
) -> None:
    """The first relay takes the message, then hangs up (it is sent once more, on a new
    connection, as with one relay) or answers after the timeout: whether it went is not
    known, so the other relay does not send it too in the same run; it waits for its
    retry, counted as an attempt."""
    with (
        Store.open(database_url) as store,
        smtp_sink(TakesThenHangsUp(late)) as (first, first_port),
        smtp_sink() as (second, second_port),
    ):
        queue(store, full_feed_papers, 1)
        release(store)
        relays = [
            Relay(SmtpSettings("127.0.0.1", port, security="none", timeout=0.5), weight)
            for port, weight in ((first_port, 1000), (second_port, 1))
        ]
        done = asyncio.run(drain(store, RelayPool(relays), clock=utcnow, owner="w"))
        counted = attempts(store)
    assert (len(first.messages), len(second.messages)) == (copies, 0)
    assert [a.status for a in done] == ["retry"] and counted == {1}


class TakesThenGoesDown(SinkHandler):
    """A relay that keeps the first message, then hangs up in place of its "250" and stops
    listening (it is restarting): the reconnection is refused."""

    listener: Any = None

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        answer = await super().handle_DATA(server, session, envelope)
        self.listener.close()
        server.transport.close()
        return answer


def test_a_digest_a_relay_may_have_taken_before_it_went_down_goes_through_no_other(
    database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """The first relay takes the message, hangs up and refuses the reconnection: the
    message may have gone, so the other relay does not send it too; it waits for its
    retry, counted. The first relay's other digest goes through the other."""
    handler = TakesThenGoesDown()
    with (
        Store.open(database_url) as store,
        smtp_sink() as (second, second_port),
    ):
        queue(store, full_feed_papers, 2)
        release(store)
        first_port = free_port()
        controller = Controller(handler, hostname="127.0.0.1", port=first_port)
        controller.start()
        handler.listener = controller.server
        try:
            relays = [
                Relay(SmtpSettings("127.0.0.1", port, security="none", timeout=5), weight)
                for port, weight in ((first_port, 1000), (second_port, 1))
            ]
            done = asyncio.run(drain(store, RelayPool(relays), clock=utcnow, owner="w"))
        finally:
            controller.stop()
    assert recipients(handler) == {"s0000@lab.example"}
    assert recipients(second) == {"s0001@lab.example"}
    assert sorted(a.status for a in done) == ["retry", "sent"]


def test_a_pool_whose_limits_cannot_be_read_stops_and_hands_the_rest_back(
    database_url: str, full_feed_papers: tuple[Paper, ...], tmp_path: Path
) -> None:
    """The relays' limits live in a database that goes away after the second message: the
    run stops there, the rest handed back untried (nothing failed, nothing counted), and
    the next run sends them, each once."""
    with Store.open(database_url) as store, Store.open(database_url) as limits_store:
        queue(store, full_feed_papers, 6)
        release(store)
        clock = Clock(utcnow())
        alive, dead = limits_store.database.engine, dead_database(database_url, tmp_path)
        handler = SinkHandler()

        def outage(_: Any) -> None:
            if len(handler.messages) == 2:  # the second message, as it is accepted
                limits_store.database.engine = dead
                clock.now += timedelta(minutes=1)  # the limiters look again

        handler.on_accept = outage
        with smtp_sink(handler) as (_, first_port), smtp_sink() as (other, other_port):

            def relay(port: int, weight: int) -> Relay:
                smtp = SmtpSettings("127.0.0.1", port, security="none", timeout=5)
                limiter = RelayLimiter(
                    limits_store.relays, f"127.0.0.1:{port}", Limits(), clock=clock
                )
                return Relay(smtp, weight, limiter)

            pool = RelayPool([relay(first_port, 1000), relay(other_port, 1)])
            first = asyncio.run(drain(store, pool, clock=clock, owner="w"))
            limits_store.database.engine = alive
            second = asyncio.run(drain(store, pool, clock=clock, owner="w"))
        dead.dispose()
        counted = attempts(store)
    assert [a.status for a in first] == ["sent", "sent"]
    assert [a.status for a in second] == ["sent"] * 4
    assert sorted((received(handler) + received(other)).values()) == [1] * 6
    assert counted == {0}


def test_a_send_cancelled_while_a_relay_hangs_ends_at_once_and_leaves_nothing_running() -> None:
    """A daemon past its grace cancels the send under way: the pool's sends over every
    relay end at once, the hung relay's connection closed rather than told QUIT (whose
    answer would be waited for up to the SMTP timeout), and no task is left behind."""
    hung = SinkHandler()
    hung.stall = 20  # never answers DATA within the test
    with smtp_sink() as (fast, fast_port), smtp_sink(hung) as (_, hung_port):
        pool = RelayPool(
            [
                Relay(SmtpSettings("127.0.0.1", port, security="none", timeout=10))
                for port in (fast_port, hung_port)
            ]
        )
        head = f"From: {SENDER}\r\nSubject: hi\r\n"
        batch = [(n, f"{head}To: s{n}@lab.example\r\n\r\nhello\r\n".encode()) for n in range(6)]

        async def cancel_midway() -> tuple[float, list[asyncio.Task[Any]]]:
            sending = asyncio.create_task(pool.send_all(batch, lambda item: None))
            async with asyncio.timeout(10):
                while hung.data_started == 0 or len(fast.messages) < 3:
                    await asyncio.sleep(0.01)
            cancelled_at = asyncio.get_running_loop().time()
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)
            took = asyncio.get_running_loop().time() - cancelled_at
            return took, [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

        took, left = asyncio.run(cancel_midway())
    assert left == []
    assert took < 2, f"the cancelled send ended {took:.1f} s later"
