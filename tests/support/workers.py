"""Real `paperbell run` workers on one database and the outbox they share: digests queued
and released at once, workers started and watched, what the SMTP sink received."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from email.message import EmailMessage
from pathlib import Path

import pytest
from sqlalchemy import text, update

from bot.core.models import Paper
from bot.demo import free_port
from bot.store import Store, utcnow, workers
from bot.store.bulk import NewSubscriber
from bot.store.tables import OutboxRow
from support.cli import INTERRUPTIBLE, clean_env
from support.config import local_feed_config, sink_email, toml_table
from support.servers import SinkHandler

POSTGRES = os.environ.get("PAPERBELL_TEST_DATABASE_URL", "").startswith("postgres")
on_postgres = pytest.mark.skipif(not POSTGRES, reason="needs PAPERBELL_TEST_DATABASE_URL")

LEASE_SECONDS = 2

# SMTP connections of each worker ([delivery] connections): at a kill, each may hold one
# message the server took and the worker had not recorded yet.
CONNECTIONS = 2


def message(name: str) -> bytes:
    msg = EmailMessage()
    msg["From"] = "papers@paperbell.example"
    msg["To"] = f"{name}@lab.example"
    msg["Subject"] = f"digest for {name}"
    msg["Message-ID"] = f"<{name}@paperbell.example>"
    msg.set_content(f"the digest of {name}\n" * 20)
    return bytes(msg)


def queue(store: Store, papers: tuple[Paper, ...], count: int) -> None:
    """`count` digests of three papers each, not due for an hour (`release` makes them due)."""
    later = utcnow() + timedelta(hours=1)
    names = [f"s{i:04d}" for i in range(count)]
    # Database subscribers: the workers' config file declares none, and a config file's
    # subscriber it does not declare gets nothing more. Their rule matches no paper, so the
    # workers plan nothing of their own beside these digests.
    store.subscribers.add_many(
        [NewSubscriber(name, f"{name}@lab.example", ["ti:zzqqxxnomatch"]) for name in names],
        now=utcnow(),
    )
    for i, name in enumerate(names):
        sub = store.subscribers.get(name)
        assert sub is not None
        store.outbox.enqueue(
            sub.id,
            channel="email",
            period="daily:2026-11-23",
            digest_id=f"d-{name}",
            recipient=f"{name}@lab.example",
            payload=message(name),
            sent=papers[i % 100 : i % 100 + 3],
            now=later,
        )


def release(store: Store) -> None:
    """Every queued digest is due now: the workers' next ticks send them."""
    with store.database.session() as session:
        session.execute(update(OutboxRow).values(next_attempt=utcnow() - timedelta(seconds=1)))
        session.commit()


def config_text(database_url: str, smtp_port: int) -> str:
    return (
        local_feed_config(database_url)
        + f"[daemon]\ntick_seconds = 1\nshutdown_grace_seconds = 5\n"
        # workers = 0: each `run` sends in its own process, the one these tests name and kill.
        f"[delivery]\nlease_seconds = {LEASE_SECONDS}\nbatch = 10\nconnections = {CONNECTIONS}\n"
        "workers = 0\n"
        + toml_table("email", sink_email(smtp_port, sender="papers@paperbell.example"))
    )


class Worker:
    """A `paperbell run` process, its log in a file (a pipe nobody reads would fill)."""

    def __init__(self, config: Path, folder: Path, number: int, *, web: bool) -> None:
        self.port = free_port() if web else None
        self.log = folder / f"worker{number}.log"
        where = ["--host", "127.0.0.1", "--port", str(self.port)] if web else ["--no-web"]
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [*INTERRUPTIBLE, "run", "-c", str(config), *where],
                cwd=folder,
                env=clean_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.pid = self.process.pid
        self.name = f"{os.uname().nodename}:{self.pid}"

    def health(self) -> dict[str, object]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5) as r:
            return json.load(r)  # type: ignore[no-any-return]

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)


@contextmanager
def workers_running(config: Path, count: int, folder: Path, *, web: bool) -> Iterator[list[Worker]]:
    started = [Worker(config, folder, n, web=web) for n in range(count)]
    try:
        yield started
    finally:
        for worker in started:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()


def up(store: Store, group: list[Worker]) -> bool:
    """Every worker of `group` is connected and answers, and one of them leads."""
    found = workers(store.database)
    if found.leader is None or not {w.name for w in group} <= set(found.running):
        return False
    try:
        return all(w.port is None or w.health() for w in group)
    except OSError:  # its web app is not listening yet
        return False


class Owners:
    """Who holds leases on the outbox, looked at every 20 ms while the workers send."""

    def __init__(self, store: Store) -> None:
        self.store, self.seen, self.stop = store, Counter[str](), threading.Event()
        self.names = frozenset[str]()  # who has held leases, replaced whole after each look
        self.thread = threading.Thread(target=self._watch)

    def _watch(self) -> None:
        query = text(
            "SELECT lease_owner, count(*) FROM outbox WHERE status = 'pending' "
            "AND lease_owner IS NOT NULL GROUP BY lease_owner"
        )
        while not self.stop.is_set():
            with self.store.database.engine.connect() as connection:
                for owner, count in connection.execute(query):
                    self.seen[owner] += count
            self.names = frozenset(self.seen)
            time.sleep(0.02)

    def __enter__(self) -> Owners:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def leased_by(store: Store, owner: str) -> int:
    """How many pending digests `owner` holds leases on."""
    with store.database.engine.connect() as connection:
        query = "SELECT count(*) FROM outbox WHERE status = 'pending' AND lease_owner = :owner"
        return int(connection.execute(text(query), {"owner": owner}).scalar_one())


def sent(store: Store) -> int:
    return store.outbox.totals(now=utcnow())["sent"]


def received(sink: SinkHandler) -> Counter[str]:
    return Counter(str(m["Message-ID"]) for m in sink.messages)
