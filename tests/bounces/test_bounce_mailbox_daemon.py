"""The daemon reads the bounce mailbox ([bounces] every_minutes): against a real dovecot
started by the test (support.imap), a Postfix DSN in the mailbox pauses that subscriber's
email with no cron job; a wrong password is logged once, counted at each read, and the
daemon goes on; a server that accepts and never answers blocks neither the ticks nor the
shutdown (the read is in a thread, each IMAP command has its timeout)."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.bounces import ENV, postfix_dsn, write_config
from support.cli import invoke
from support.imap import dovecot, mailbox_config, send_digests
from support.servers import smtp_sink

from bot.cli.secrets import secrets_of
from bot.config import IMAP_PASSWORD, load_config
from bot.demo import free_port
from bot.pipeline import wire, wire_daemon
from bot.pipeline.mailbox import MailboxCounters
from bot.pipeline.scheduler import Daemon
from bot.store import Store, utcnow


def every(config: Path, minutes: float, *, timeout: float | None = None) -> None:
    """[bounces] (the last table of the file) read this often, IMAP commands waiting this long."""
    with config.open("a") as file:
        file.write(f"every_minutes = {minutes}\n")
        if timeout is not None:
            file.write(f"timeout = {timeout}\n")


async def serve_until(daemon: Daemon, done: Any, *, limit: float = 20) -> int:
    """Run `daemon` (its ticks counted, nothing polled) until `done()`; the ticks."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        ticks += 1

    daemon.tick = tick  # type: ignore[method-assign,assignment]
    stop = asyncio.Event()

    async def watch() -> None:
        while not done():
            await asyncio.sleep(0.02)
        stop.set()

    watcher = asyncio.create_task(watch())
    await asyncio.wait_for(daemon.serve(stop, interval=0.05), timeout=limit)
    await watcher
    return ticks


def daemon_of(config: Path, env: dict[str, str], store: Store) -> Daemon:
    loaded = load_config(config, environ=env)
    parts = wire(loaded, store, {})
    return Daemon(parts, wire_daemon(loaded, parts, clock=utcnow), fetcher=None, clock=utcnow)


def read_once(config: Path, env: dict[str, str], store: Store) -> tuple[MailboxCounters, int]:
    """Run the daemon of `config` until its first read of the mailbox: its counters, and
    how many ticks went by meanwhile."""
    daemon = daemon_of(config, env, store)
    assert daemon.mailbox is not None
    counters = daemon.mailbox.counters
    return counters, asyncio.run(serve_until(daemon, lambda: counters.reads))


def loopback_mailbox(folder: Path, url: str, port: int) -> tuple[Path, dict[str, str]]:
    """A config whose [bounces] mailbox is on `port` of loopback, and its environment."""
    config = write_config(folder, url, 9)
    with config.open("a") as file:
        file.write(
            f'[bounces]\nimap_url = "imap://bounces@127.0.0.1:{port}/INBOX"\n'
            'password_env = "PB_IMAP_PASSWORD"\n'
        )
    return config, {**ENV, "PB_IMAP_PASSWORD": "pw"}


@pytest.mark.database
def test_the_daemon_reads_the_mailbox_and_a_dsn_pauses_that_subscriber(
    tmp_path: Path, database_url: str
) -> None:
    with smtp_sink() as (sink, port), dovecot() as server:
        config, env = mailbox_config(tmp_path, database_url, port, server)
        every(config, 15)
        sent = send_digests(config, env, sink)
        ada_from, ada_raw = sent["ada@example.org"]
        server.append(postfix_dsn(ada_raw, envelope_from=ada_from, recipient="ada@example.org"))
        server.append(b"Subject: about nothing\r\n\r\nhello\r\n")

        with Store.open(database_url) as store:
            counters, _ = read_once(config, env, store)
            assert counters.reads == {"ok": 1}
            assert counters.messages == {"paused": 1, "tokenless": 1}
            ada = store.subscribers.get("ada")
            assert ada is not None and ada.id is not None
            assert store.targets.paused(ada.id)
        assert len(server.messages("paperbell-processed")) == 1
        assert len(server.messages("INBOX")) == 1  # about no message sent: left as it was
        listed = invoke("list", config=config, env=env).output
        assert "email paused since" in listed and listed.count("paused") == 1


@pytest.mark.database
def test_a_wrong_password_is_said_once_counted_each_time_and_the_daemon_goes_on(
    tmp_path: Path, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with dovecot() as server:
        config, env = mailbox_config(tmp_path, database_url, 9, server)
        env["PB_IMAP_PASSWORD"] = "wrong"
        every(config, 0.001)  # 60 ms
        caplog.set_level(logging.DEBUG, logger="bot.pipeline.mailbox")
        with Store.open(database_url) as store:
            daemon = daemon_of(config, env, store)
            assert daemon.mailbox is not None
            counters = daemon.mailbox.counters
            ticks = asyncio.run(serve_until(daemon, lambda: counters.reads.get("error", 0) >= 2))
    assert ticks >= 1 and counters.reads.get("ok") is None
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    said = errors[0].getMessage()
    assert "cannot read the bounce mailbox bounces@127.0.0.1" in said
    assert "hint: check [bounces] imap_url and the password variable" in said
    assert counters.last_error is not None and "cannot read" in counters.last_error


@contextmanager
def silent_server() -> Iterator[int]:
    """A TCP server on loopback that accepts connections and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []
    closing = threading.Event()

    def accept() -> None:
        while not closing.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        closing.set()
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        thread.join()
        listener.close()
        for each in held:
            each.close()


def test_a_server_that_never_answers_blocks_neither_ticks_nor_shutdown(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with silent_server() as port:
        config, env = loopback_mailbox(tmp_path, url, port)
        every(config, 15, timeout=1.5)
        with Store.open(url) as store:
            counters, ticks = read_once(config, env, store)
    assert counters.reads == {"error": 1}
    assert ticks >= 10  # 50 ms ticks went on through the 1.5 s the read waited
    assert (
        counters.last_error is not None and "cannot read the bounce mailbox" in counters.last_error
    )


def test_a_closed_port_is_an_error_counted_and_every_minutes_0_reads_nothing(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    config, env = loopback_mailbox(tmp_path, url, free_port())  # nothing listens there
    with Store.open(url) as store:
        counters, _ = read_once(config, env, store)
        assert counters.reads == {"error": 1}
        every(config, 0)
        assert daemon_of(config, env, store).mailbox is None


def test_run_asks_for_the_mailbox_password_only_when_it_reads_the_mailbox(tmp_path: Path) -> None:
    config, _ = loopback_mailbox(tmp_path, f"sqlite:///{tmp_path / 'db.sqlite'}", 1143)
    reading = load_config(config, environ=ENV)
    assert IMAP_PASSWORD in secrets_of(reading, "run")
    every(config, 0)
    assert IMAP_PASSWORD not in secrets_of(load_config(config, environ=ENV), "run")
