"""Sender processes (`[delivery] workers`): `paperbell digest` plans in its own process while
its senders render and send; every digest goes once, each is reported, and no sender
outlives the command, even one killed with SIGKILL. A sender, like the planner, runs at a
lower CPU priority than the process that started it. (How the senders share the work, and
what it gains, is measured by bench/fanout.py --workers N, not here.)

Real parts: the command as a process (and its spawned senders), the database (SQLite file,
or PostgreSQL with PAPERBELL_TEST_DATABASE_URL), the bundled listing's first 100 papers
over HTTP on loopback, an SMTP server on loopback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path

import pytest
from support.cli import invoke, loaded, modules_after, run, start
from support.clock import Clock
from support.config import sink_email, toml_table
from support.database import dead_database
from support.servers import Route, feed_server, first_items, smtp_sink

from bot.channels.email import EmailChannel, SmtpSettings
from bot.channels.outbox import RetryPolicy
from bot.cli.planner import PlannerProcess
from bot.cli.senders import (
    NICENESS,
    RESTART_FIRST_SECONDS,
    SENDER_LIVED_SECONDS,
    send_until_stopped,
    start_senders,
)
from bot.core.models import Paper
from bot.store import Store
from bot.store.schema import head

pytestmark = pytest.mark.database

SUBSCRIBERS = 40
WORDS = ["quantum", "learning", "model", "network", "data"]


def queue_mail(
    store: Store, subscriber_id: int, name: str, papers: tuple[Paper, ...], *, now: datetime
) -> int | None:
    """A digest for `name` queued as its finished message (subject: the name), for "p1"."""
    mail = EmailMessage()
    mail["From"], mail["To"] = "papers@paperbell.example", f"{name}@lab.example"
    mail["Subject"] = name
    mail.set_content("a digest")
    return store.outbox.enqueue(
        subscriber_id,
        channel="email",
        period="p1",
        digest_id=f"d-{name}",
        recipient=f"{name}@lab.example",
        payload=bytes(mail),
        sent=papers,
        now=now,
    )


def config_text(database_url: str, feed_url: str, smtp_port: int, workers: int) -> str:
    head = f"""version = 1
[database]
url = "{database_url}"
[delivery]
workers = {workers}
batch = 4
lease_seconds = 2
[[sources]]
kind = "arxiv"
categories = ["cs", "physics", "quant-ph", "math"]
url = "{feed_url}"
"""
    head += toml_table("email", sink_email(smtp_port, sender="papers@paperbell.example"))
    return head + "\n".join(
        f'[[subscribers]]\nname = "s{i:02d}"\nemail = "s{i:02d}@lab.example"\n'
        f'rules = ["{WORDS[i % len(WORDS)]}"]\nmax_papers = 5\n'
        for i in range(SUBSCRIBERS)
    )


def processes_marked(marker: str) -> list[int]:
    """The processes whose environment holds `marker` (a command and the senders it
    spawned inherit it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
def test_three_senders_send_each_digest_once_and_the_command_reports_each(
    tmp_path: Path, database_url: str, full_feed_bytes: bytes
) -> None:
    marker = f"TEST_SENDERS_MARK={uuid.uuid4().hex}"
    with feed_server() as feed, smtp_sink() as (sink, port):
        feed.routes["/rss/all"] = Route(first_items(full_feed_bytes, 100))
        config = tmp_path / "config.toml"
        config.write_text(config_text(database_url, feed.url("/rss/all"), port, workers=3))
        assert invoke("poll", config=config).exit_code == 0
        sink.delay = 0.01  # each message takes a while: the senders share the work
        name, value = marker.split("=")
        done = run(
            "digest",
            "-v",
            "-c",
            str(config),
            "--since",
            "2024-11-28",
            cwd=tmp_path,
            env={name: value},
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(": sent ") == SUBSCRIBERS, done.stdout
    received = Counter(str(m["Message-ID"]) for m in sink.messages)
    assert len(received) == SUBSCRIBERS and set(received.values()) == {1}
    # Sent by the senders, not by the command (which only planned): their lines add up.
    sent = [
        int(n) for n in re.findall(r"paperbell-sender-\d bot.cli.senders: sent (\d+)", done.stderr)
    ]
    assert sum(sent) == SUBSCRIBERS, done.stderr
    assert processes_marked(marker) == []  # none outlived the command


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
def test_senders_die_with_a_command_killed_by_sigkill_and_nothing_is_lost(
    tmp_path: Path, database_url: str, full_feed_bytes: bytes
) -> None:
    marker = uuid.uuid4().hex
    with feed_server() as feed, smtp_sink() as (sink, port):
        feed.routes["/rss/all"] = Route(first_items(full_feed_bytes, 100))
        config = tmp_path / "config.toml"
        config.write_text(config_text(database_url, feed.url("/rss/all"), port, workers=2))
        assert invoke("poll", config=config).exit_code == 0
        sink.delay = 0.05
        os.environ["TEST_SENDERS_MARK"] = marker  # inherited by the command's senders
        try:
            process = start("digest", "-c", str(config), "--since", "2024-11-28")
        finally:
            del os.environ["TEST_SENDERS_MARK"]
        deadline = time.monotonic() + 30
        while len(sink.messages) < 5:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the delivery stalled"
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.communicate()
        deadline = time.monotonic() + 5
        while processes_marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_marked(marker) == []  # the senders died with it
        time.sleep(2.1)  # their leases run out
        sink.delay = 0
        final = invoke("digest", "--since", "2024-11-28", config=config)
        assert final.exit_code == 0, final.output
    received = Counter(str(m["Message-ID"]) for m in sink.messages)
    assert len(received) == SUBSCRIBERS  # every digest arrived
    # Only a message in flight at the kill may come twice: one per connection of each sender.
    assert sum(n - 1 for n in received.values()) <= 2 * 4


def senders_of(pid: int) -> list[int]:
    """The processes `pid` spawned (its senders), by their parent and command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            spawned = b"spawn_main" in (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid and spawned:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
def test_the_command_fails_when_a_sender_dies(
    tmp_path: Path, database_url: str, full_feed_bytes: bytes
) -> None:
    """A sender killed mid-run (the OOM killer): the command says so and exits 1, as a
    single process that met an error would; its digests are not silently left queued."""
    with feed_server() as feed, smtp_sink() as (sink, port):
        feed.routes["/rss/all"] = Route(first_items(full_feed_bytes, 100))
        config = tmp_path / "config.toml"
        config.write_text(config_text(database_url, feed.url("/rss/all"), port, workers=2))
        assert invoke("poll", config=config).exit_code == 0
        sink.delay = 0.05
        process = start("digest", "-c", str(config), "--since", "2024-11-28")
        deadline = time.monotonic() + 15
        while len(sink.messages) < 3:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the delivery stalled"
            time.sleep(0.01)
        os.kill(senders_of(process.pid)[0], signal.SIGKILL)
        out, err = process.communicate(timeout=15)
    assert process.returncode == 1, out + err
    said = r"error: paperbell-sender-\d ended with an error \(killed by SIGKILL\)"
    assert re.search(said, err), err


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
def test_a_daemon_starts_another_sender_in_place_of_one_killed(
    tmp_path: Path, database_url: str, store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """`paperbell run`'s sender killed with SIGKILL (the OOM killer), and its planner with
    it: both are started again at the next tick, and a digest queued after they died is
    sent."""
    now = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)
    ada, _ = store.subscribers.add("ada", email="ada@lab.example", rules=["robot"], now=now)
    assert ada.id is not None
    with smtp_sink() as (sink, port):
        config = tmp_path / "config.toml"
        config.write_text(
            f'version = 1\n[database]\nurl = "{database_url}"\n[delivery]\nworkers = 1\n'
            "[daemon]\ntick_seconds = 1\nshutdown_grace_seconds = 5\n"
            + toml_table("email", sink_email(port, sender="papers@paperbell.example"))
        )
        process = start(
            "run", "-c", str(config), "--no-web", "--clock-start", f"{now:%Y-%m-%dT%H:%M}"
        )
        try:
            deadline = time.monotonic() + 15
            while len(children := senders_of(process.pid)) < 2:  # its sender and planner
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the daemon started no sender"
                time.sleep(0.05)
            for pid in children:
                os.kill(pid, signal.SIGKILL)
            queue_mail(store, ada.id, "ada", full_feed_papers[:1], now=now)
            while not sink.messages:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "no sender sent the digest"
                time.sleep(0.05)
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=15)
    assert [m["Subject"] for m in sink.messages] == ["ada"]
    assert "paperbell-sender-1 ended (killed by SIGKILL): starting another" in err, err


# Each is loaded only where its channel or feature is used: a sender of an email-only site
# holds none of them (each sender is a whole interpreter, and its imports its weight).
# Nor the migrations' (Alembic, Mako, Pygments: the parent checked the schema), language
# data (no subscriber reads another language) or a reference library's readers.
NOT_FOR_EMAIL = ("apprise", "slack_sdk", "aiohttp", "feedparser", "requests")
NOT_FOR_A_SENDER = ("alembic", "mako", "pygments", "langcodes", "bibtexparser", "rispy")


def sender_life(config: Path, revision: str) -> str:
    """A sender's life in a fresh interpreter, as `spawn` starts it, over a database at
    `revision`: told planning is done, it finds nothing queued and ends."""
    return (
        "import multiprocessing\n"
        "from bot.cli.senders import _send\n"
        "spawn = multiprocessing.get_context('spawn')\n"
        "planned, stopping = spawn.Event(), spawn.Event()\n"
        "planned.set()\n"
        f"_send(None, {str(config)!r}, {revision!r}, planned, stopping, True, 30)"
    )


def test_a_sender_of_an_email_only_site_loads_no_chat_feed_or_migration_library(
    tmp_path: Path, database_url: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(config_text(database_url, "http://127.0.0.1:9/rss", 25, workers=2))
    assert invoke("db", "upgrade", "-c", str(config)).exit_code == 0
    modules = modules_after(sender_life(config, head()), cwd=tmp_path)
    assert "bot.channels.email" in modules  # it did set up its channels
    assert loaded(modules, NOT_FOR_EMAIL + NOT_FOR_A_SENDER) == []


def niceness_once_set(pid: int, parent: int) -> int:
    """The niceness of process `pid` once it differs from its parent's (a child lowers its
    priority first thing; it is read until it did, for at most 20 seconds)."""
    deadline = time.monotonic() + 20
    while (value := os.getpriority(os.PRIO_PROCESS, pid)) == parent:
        assert time.monotonic() < deadline, "the child kept its parent's priority"
        time.sleep(0.01)
    return value


@pytest.mark.skipif(os.nice(0) >= 19, reason="this process has the lowest priority already")
def test_a_daemons_sender_and_planner_yield_the_cpu_to_the_process_that_started_them(
    tmp_path: Path, database_url: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'version = 1\n[database]\nurl = "{database_url}"\n')
    assert invoke("db", "upgrade", "-c", str(config)).exit_code == 0
    ours = os.nice(0)
    senders = start_senders(config, 1, until_idle=False)
    planner = PlannerProcess(config)
    try:
        # The planner answered a run (nothing is due): it lowered its priority before.
        assert asyncio.run(planner.plan(datetime(2024, 11, 28, tzinfo=UTC), lambda: False)) == []
        assert planner.process is not None and planner.process.pid is not None
        planned_at = os.getpriority(os.PRIO_PROCESS, planner.process.pid)
        (sender,) = senders.processes
        assert sender.pid is not None
        sends_at = niceness_once_set(sender.pid, ours)
    finally:
        senders.stop(5)
        planner.stop(5)
    assert planned_at == sends_at == min(ours + NICENESS, 19)


def test_a_daemons_sender_outlives_a_database_outage(
    store: Store,
    database_url: str,
    full_feed_papers: tuple[Paper, ...],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The database is gone when the sender looks at the outbox (a PostgreSQL restart): it
    says so and looks again, and sends the digest once the database is back, instead of
    ending and leaving the daemon with no one to send."""
    now = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)
    ada, _ = store.subscribers.add("ada", email="ada@lab.example", rules=["robot"], now=now)
    assert ada.id is not None
    queue_mail(store, ada.id, "ada", full_feed_papers[:1], now=now)
    alive, dead = store.database.engine, dead_database(database_url, tmp_path)
    store.database.engine = dead
    planned, stopping = threading.Event(), threading.Event()
    with smtp_sink() as (sink, port), caplog.at_level(logging.ERROR, "bot.cli.senders"):
        channel = EmailChannel(SmtpSettings("127.0.0.1", port, security="none", timeout=5))
        sender = threading.Thread(
            target=send_until_stopped,
            args=(store, {"email": channel}),
            kwargs={
                "retry": RetryPolicy(),
                "render": None,
                "clock": Clock(now),
                "planned": planned,
                "stopping": stopping,
                "until_idle": False,
                "pause": 0.05,
            },
        )
        sender.start()
        try:
            deadline = time.monotonic() + 10
            while sender.is_alive() and not caplog.records:
                assert time.monotonic() < deadline, "the sender never looked at the outbox"
                time.sleep(0.01)
            store.database.engine = alive  # the database is back
            while sender.is_alive() and not sink.messages:
                assert time.monotonic() < deadline, "the digest was not sent"
                time.sleep(0.01)
            assert sender.is_alive(), "the sender ended at the outage"
        finally:
            stopping.set()
            sender.join(10)
            dead.dispose()
    assert [m["Subject"] for m in sink.messages] == ["ada"]
    assert "database error" in caplog.records[0].getMessage()
    assert store.outbox.totals(now=now)["sent"] == 1


def test_a_digest_refused_for_now_is_tried_once_by_a_run_whatever_its_senders(
    store: Store, full_feed_papers: tuple[Paper, ...]
) -> None:
    """`paperbell digest` with two senders: a digest greylisted (451) by one is left to its
    retry time, not tried again at once by the other (an attempt spent without the wait);
    one that waits for a retry since an earlier run is still tried now."""
    now = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)
    ids = {}
    for n, name in enumerate(("bob", "ada")):
        sub, _ = store.subscribers.add(name, email=f"{name}@lab.example", rules=["x"], now=now)
        assert sub.id is not None
        ids[name] = queue_mail(store, sub.id, name, full_feed_papers[n : n + 1], now=now)
    # bob's failed in an earlier run, and waits for its retry time.
    (bob,) = store.outbox.claim("earlier", now=now, lease=timedelta(minutes=5), limit=1)
    later = now + timedelta(minutes=30)
    assert store.outbox.mark_retry(bob.id, owner="earlier", error="451", next_attempt=later)
    at_start = store.outbox.attempts_pending()
    assert at_start == {bob.id: 1}
    planned, stopping = threading.Event(), threading.Event()
    planned.set()
    with smtp_sink() as (sink, port):
        sink.transient["ada@lab.example"] = 5
        channel = EmailChannel(SmtpSettings("127.0.0.1", port, security="none", timeout=5))
        for _ in range(2):  # one sender after the other, each with what it tried
            send_until_stopped(
                store,
                {"email": channel},
                retry=RetryPolicy(),
                render=None,
                clock=Clock(now),
                planned=planned,
                stopping=stopping,
                until_idle=True,
                attempts_before=at_start,
            )
    assert [m["Subject"] for m in sink.messages] == ["bob"]
    ada = ids["ada"]
    assert ada is not None and store.outbox.records([ada])[ada].attempts == 1


def test_a_sender_that_dies_at_once_is_started_again_after_longer_and_longer_waits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A sender the database refuses dies as it starts: it is started again once at the
    next tick, then after a wait that doubles, said once a wait, not at each tick with a
    traceback each time; one that lived a while is started again at once."""
    config = tmp_path / "config.toml"
    config.write_text(
        f'version = 1\n[database]\nurl = "sqlite:///{tmp_path}/none.sqlite"\n'
        "[delivery]\nworkers = 1\n"
    )
    first = RESTART_FIRST_SECONDS
    senders = start_senders(config, 1, until_idle=False)

    def restarts(ticks: list[float]) -> int:
        """How many times the sender was started again at ticks at these moments."""
        count = 0
        for now in ticks:
            process = senders.processes[0]
            process.join(15)
            assert process.exitcode == 1, "the sender did not die at once"
            senders.revive(now)
            count += senders.processes[0] is not process
        return count

    try:
        with caplog.at_level(logging.ERROR, logger="bot.cli.senders"):
            at_once = restarts([100.0] * 4)  # four ticks at one moment: found dead at the 2nd
            after_first = restarts([100.0 + first - 1, 100.0 + first])
            found = 100.0 + first + 1
            after_double = restarts([found, found + 2 * first - 1, found + 2 * first])
            after_living = restarts([found + 2 * first + SENDER_LIVED_SECONDS])
    finally:
        senders.stop(0)
    assert (at_once, after_first, after_double, after_living) == (1, 1, 1, 1)
    said = [r.getMessage().split(": ", 1)[1] for r in caplog.records if "ended" in r.getMessage()]
    assert said == [
        "starting another",
        f"starting another in {first:.0f}s",
        f"starting another in {2 * first:.0f}s",
        "starting another",
    ], said
