"""A stop (SIGTERM) ends `paperbell run` within `[daemon] shutdown_grace_seconds`, whatever
the daemon waits for at that moment: systemd kills a daemon that takes longer."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from sqlmodel import col, select
from support.cli import start
from support.config import sink_email, toml_table
from support.servers import SinkHandler, http_serving, smtp_sink
from support.slack import SIGNING_SECRET, SocketModeLink, signed

from bot.cli.shell import EXIT_INTERRUPTED
from bot.demo import free_port
from bot.demo.slack_standin import SlackStandIn
from bot.slack.app import WORKING
from bot.store import Store
from bot.store.tables import OutboxRow

GRACE = 1
REQUEST_DEADLINE = 10  # how long the slow server could hold a request
STOP_MARGIN = 1.5  # seconds a stop may take past the grace: killing, closing, exiting


@contextmanager
def slow_server() -> Iterator[tuple[int, threading.Event]]:
    """A server that answers no request until the test ends (its port, and an event set
    once a request came)."""
    asked, done = threading.Event(), threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.set()
            done.wait(REQUEST_DEADLINE)
            self.send_response(503)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    with http_serving(Slow) as port:
        try:
            yield port, asked
        finally:
            done.set()


def start_liking(
    tmp_path: Path,
    api_port: int,
    *,
    web_port: int | None,
    grace: float = GRACE,
    more: str = "",
) -> subprocess.Popen[str]:
    """`paperbell run` for one subscriber with a liked paper, its sources on `api_port` (the
    leader asks the arXiv API for the liked papers at start), its web app on `web_port`
    (None: no web app); `more`: TOML tables added to its config."""
    web = f"[web]\nport = {web_port}\n" if web_port is not None else ""
    config = tmp_path / "config.toml"
    config.write_text(
        f"""version = 1
[database]
url = "sqlite:///paperbell.sqlite"
[daemon]
shutdown_grace_seconds = {grace}
[delivery]
workers = 0
{web}[polling]
request_deadline_seconds = {REQUEST_DEADLINE}
[[sources]]
kind = "arxiv"
categories = ["cs"]
url = "http://127.0.0.1:{api_port}/rss/cs"
api_url = "http://127.0.0.1:{api_port}/api"
[[subscribers]]
name = "ada"
rules = ["qubit"]
like = ["2411.17703"]
apprise = ["json://127.0.0.1:9/digests"]
{more}"""
    )
    options = () if web_port is not None else ("--no-web",)
    return start("run", "-c", str(config), *options, cwd=tmp_path)


def stop_and_wait(process: subprocess.Popen[str]) -> tuple[str, float]:
    """SIGTERM the daemon and wait for it: its standard error, and the seconds it took."""
    stopping = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=REQUEST_DEADLINE + 10)
    return err, time.monotonic() - stopping


def ended(process: subprocess.Popen[str]) -> None:
    """Kill the daemon if a test left it running."""
    if process.poll() is None:
        process.kill()
        process.communicate()


def test_a_stop_at_start_while_likes_are_asked_of_a_slow_api_keeps_the_grace(
    tmp_path: Path,
) -> None:
    """At start, the leader asks the arXiv API for its subscribers' liked papers; a stop
    then abandons the request after the grace, and the likes are asked again next start."""
    with slow_server() as (port, asked):
        process = start_liking(tmp_path, port, web_port=None)
        try:
            assert asked.wait(15), "the daemon never asked the API"
            err, took = stop_and_wait(process)
        finally:
            ended(process)
    assert process.returncode == 0, err
    assert "Traceback" not in err, err
    assert took < GRACE + 4, f"stopped {took:.1f} s after SIGTERM (grace {GRACE} s)\n{err}"
    assert "stopped" in err


def test_the_web_app_answers_while_the_start_up_work_waits_on_a_slow_api(
    tmp_path: Path,
) -> None:
    """While the leader asks a slow arXiv API for its subscribers' liked papers at start,
    the web app already answers (a container's health check, Slack's 3 seconds): healthy,
    "starting"; a stop then still keeps the grace."""
    web_port = free_port()
    with slow_server() as (port, asked):
        process = start_liking(tmp_path, port, web_port=web_port)
        try:
            assert asked.wait(15), "the daemon never asked the API"
            deadline = time.monotonic() + 5
            while True:  # the web app is started beside the request, not after it
                try:
                    url = f"http://127.0.0.1:{web_port}/healthz"
                    with urllib.request.urlopen(url, timeout=3) as response:
                        health = json.load(response)
                    break
                except OSError as exc:
                    assert time.monotonic() < deadline, f"no answer at /healthz: {exc}"
                    time.sleep(0.1)
            err, took = stop_and_wait(process)
        finally:
            ended(process)
    assert health["status"] == "starting", health
    assert process.returncode == 0, err
    assert "Traceback" not in err, err
    assert took < GRACE + 4, f"stopped {took:.1f} s after SIGTERM (grace {GRACE} s)\n{err}"


def queue_mail(store: Store, name: str, *, now: datetime) -> int:
    """A digest for a new subscriber `name`, queued as its finished message."""
    subscriber, _ = store.subscribers.add(name, email=f"{name}@lab.example", rules=["x"], now=now)
    assert subscriber.id is not None
    mail = EmailMessage()
    mail["From"], mail["To"] = "papers@paperbell.example", f"{name}@lab.example"
    mail["Subject"] = name
    mail.set_content("a digest")
    record = store.outbox.enqueue(
        subscriber.id,
        channel="email",
        period="p1",
        digest_id=f"d-{name}",
        recipient=f"{name}@lab.example",
        payload=bytes(mail),
        sent=(),
        now=now,
    )
    assert record is not None
    return record


class HeldMessages(SinkHandler):
    """An SMTP server that holds each message in DATA for `REQUEST_DEADLINE` seconds;
    `holding`: the connections (their client's address) whose message it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.delay = REQUEST_DEADLINE
        self.holding: set[tuple[str, int]] = set()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.holding.add(session.peer)
        return await super().handle_DATA(server, session, envelope)


def test_a_stop_with_a_tick_polling_and_senders_sending_ends_within_one_grace(
    tmp_path: Path, database_url: str, store: Store
) -> None:
    """A stop while the tick polls a slow source and two senders each hold a message on a
    slow SMTP server: the tick, the planner and the senders share one grace period (the
    senders told at once, and killed together); the messages stay queued."""
    grace = 2
    now = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)
    records = [queue_mail(store, name, now=now) for name in ("ada", "bob")]
    held = HeldMessages()
    with slow_server() as (port, asked), smtp_sink(held) as (sink, smtp_port):
        config = tmp_path / "config.toml"
        config.write_text(
            f"""version = 1
[database]
url = "{database_url}"
[daemon]
shutdown_grace_seconds = {grace}
[delivery]
workers = 2
batch = 1
connections = 1
[polling]
request_deadline_seconds = {REQUEST_DEADLINE}
[[sources]]
kind = "feed"
name = "journal"
url = "http://127.0.0.1:{port}/journal.rss"
"""
            + toml_table("email", sink_email(smtp_port, sender="papers@paperbell.example"))
        )
        process = start(
            "run", "-c", str(config), "--no-web", "--clock-start", f"{now:%Y-%m-%dT%H:%M}"
        )
        try:
            assert asked.wait(15), "the daemon never polled the source"
            wait_until_sending(process, held, 2)
            err, took = stop_and_wait(process)
        finally:
            ended(process)
    assert process.returncode == 0, err
    assert "Traceback" not in err, err
    assert took < grace + STOP_MARGIN, (
        f"stopped {took:.1f} s after SIGTERM (grace {grace} s)\n{err}"
    )
    assert not sink.messages
    states = store.outbox.records(records)
    assert [state.status for state in states.values()] == ["pending", "pending"], states


ADA, ROBOTS = "U07ADA123", "C07ROBOTS"


def slack_table(slack: SlackStandIn, monkeypatch: pytest.MonkeyPatch, *, way_in: str) -> str:
    """The [slack] table of a daemon that answers the slash command through the stand-in
    `slack`, its secrets in the environment it inherits; `way_in`: "signing_secret_env"
    (POST /slack/commands) or "app_token_env" (Socket Mode)."""
    slack.add_channel(ROBOTS, "robot-learning")
    slack.add_user(ADA, "ada", email="ada@lab.example")
    monkeypatch.setenv("SLACK_BOT_TOKEN", slack.token)
    monkeypatch.setenv("SLACK_SECRET", SIGNING_SECRET if "signing" in way_in else slack.app_token)
    return (
        f'[slack]\nbot_token_env = "SLACK_BOT_TOKEN"\n{way_in} = "SLACK_SECRET"\n'
        f'api_url = "{slack.base_url}"\n'
    )


def command(slack: SlackStandIn, text: str) -> dict[str, str]:
    """A slash command's fields as Slack sends them, its late reply to response URL "r1"."""
    return {
        "team_id": "T0STANDIN",
        "channel_id": ROBOTS,
        "channel_name": "robot-learning",
        "user_id": ADA,
        "user_name": "ada",
        "command": "/papers",
        "text": text,
        "response_url": slack.response_url("r1"),
    }


def post_command(web_port: int, fields: dict[str, str]) -> dict[str, Any]:
    """POST a signed slash command to the daemon's web app once it listens; its answer."""
    body = urlencode(fields).encode()
    deadline = time.monotonic() + 5
    while True:
        request = urllib.request.Request(
            f"http://127.0.0.1:{web_port}/slack/commands", data=body, headers=signed(body)
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                answer: dict[str, Any] = json.load(response)
                return answer
        except OSError as exc:  # refused until it listens
            assert time.monotonic() < deadline, f"no answer at /slack/commands: {exc}"
            time.sleep(0.1)


def test_a_second_signal_ends_the_daemon_at_once_with_a_slash_command_reply_under_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second SIGTERM a moment after the first stops the daemon at once (the start-up
    work still waiting on a slow API), though a slash command's late reply is under way:
    the reply is abandoned, and the log says so."""
    grace = 5
    web_port = free_port()
    with SlackStandIn() as slack, slow_server() as (port, asked):
        more = slack_table(slack, monkeypatch, way_in="signing_secret_env")
        slack.answer_late("users.info", delay=REQUEST_DEADLINE)  # the command takes long
        process = start_liking(tmp_path, port, web_port=web_port, grace=grace, more=more)
        try:
            assert asked.wait(15), "the daemon never asked the API"
            answer = post_command(web_port, command(slack, "subscribe robot"))
            assert answer["text"] == WORKING.text, answer
            process.send_signal(signal.SIGTERM)
            time.sleep(1.3)  # Ctrl-C pressed again, a moment later
            err, took = stop_and_wait(process)
        finally:
            ended(process)
    assert "stopping now" in err, err
    assert took < STOP_MARGIN, f"stopped {took:.1f} s after the second SIGTERM\n{err}"
    assert "abandoned the slash commands' work under way" in err, err
    assert slack.responses == []


def test_a_stop_gives_a_socket_mode_command_caught_mid_reply_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop while a slash command that came over Socket Mode is being answered: the
    command is acknowledged over the WebSocket and its late reply sent, within the grace,
    as one that came over HTTP would be."""
    grace = 6
    with SlackStandIn() as slack, SocketModeLink() as link:
        slack.socket_url = link.url
        more = slack_table(slack, monkeypatch, way_in="app_token_env")
        slack.answer_late("users.info", delay=3.5)  # longer than Slack's 3 seconds
        config = tmp_path / "config.toml"
        config.write_text(
            f'version = 1\n[database]\nurl = "sqlite:///paperbell.sqlite"\n'
            f"[daemon]\nshutdown_grace_seconds = {grace}\n[delivery]\nworkers = 0\n{more}"
        )
        process = start("run", "-c", str(config), "--no-web", cwd=tmp_path)
        try:
            assert link.connected.wait(15), process.poll() or "Socket Mode never connected"
            envelope = link.send(command(slack, "subscribe robot"))
            time.sleep(0.5)  # the command is being answered
            err, took = stop_and_wait(process)
        finally:
            ended(process)
        acks = {ack["envelope_id"]: ack.get("payload") for ack in link.acks}
    assert process.returncode == 0, err
    assert "Traceback" not in err, err
    assert took < grace + STOP_MARGIN, f"stopped {took:.1f} s after SIGTERM\n{err}"
    assert acks.get(envelope) == WORKING.to_slack(), (acks, err)
    replies = [reply["text"] for reply in slack.responses]
    assert len(replies) == 1 and replies[0].startswith("Welcome!"), (replies, err)


def test_serve_stops_within_the_grace_with_a_slash_command_reply_under_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`paperbell serve` (the web app alone) keeps the same grace for the slash commands'
    late replies: one still under way then is abandoned, and the log says so."""
    web_port = free_port()
    with SlackStandIn() as slack:
        more = slack_table(slack, monkeypatch, way_in="signing_secret_env")
        slack.answer_late("users.info", delay=REQUEST_DEADLINE)  # the command takes long
        config = tmp_path / "config.toml"
        config.write_text(
            f'version = 1\n[database]\nurl = "sqlite:///paperbell.sqlite"\n'
            f"[daemon]\nshutdown_grace_seconds = {GRACE}\n[web]\nport = {web_port}\n{more}"
        )
        process = start("serve", "-c", str(config), cwd=tmp_path)
        try:
            answer = post_command(web_port, command(slack, "subscribe robot"))
            assert answer["text"] == WORKING.text, answer
            err, took = stop_and_wait(process)
        finally:
            ended(process)
    assert process.returncode == 0, err
    assert took < GRACE + STOP_MARGIN, f"stopped {took:.1f} s after SIGTERM\n{err}"
    assert "abandoned the slash commands' work under way" in err, err


def wait_until_sending(process: subprocess.Popen[str], held: HeldMessages, count: int) -> None:
    """Wait until the relay `held` holds `count` messages of the daemon `process` (15 s)."""
    deadline = time.monotonic() + 15
    while len(held.holding) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the senders never sent"
        time.sleep(0.05)


def leases(store: Store, records: list[int]) -> list[str | None]:
    """Who holds the lease on each of `records` (None: nobody, it is free to be taken)."""
    with store.database.engine.connect() as connection:
        rows = connection.execute(
            select(OutboxRow.id, OutboxRow.lease_owner).where(col(OutboxRow.id).in_(records))
        )
        owners = {record: owner for record, owner in rows}
    return [owners[record] for record in records]


def sending_config(
    tmp_path: Path, database_url: str, smtp_port: int, *, grace: float, workers: int
) -> Path:
    """The config of a daemon with no source that sends the queued mail to `smtp_port`, one
    message a batch, through `workers` sender processes (0: its own)."""
    config = tmp_path / "config.toml"
    config.write_text(
        f'version = 1\n[database]\nurl = "{database_url}"\n'
        f"[daemon]\nshutdown_grace_seconds = {grace}\n"
        f"[delivery]\nworkers = {workers}\nbatch = 1\nconnections = 1\n"
        + toml_table("email", sink_email(smtp_port, sender="papers@paperbell.example"))
    )
    return config


def stop_twice(process: subprocess.Popen[str]) -> tuple[str, float]:
    """SIGTERM the daemon, and again a moment later (Ctrl-C pressed twice); its standard
    error, and the seconds it took after the second signal."""
    process.send_signal(signal.SIGTERM)
    time.sleep(1.3)
    return stop_and_wait(process)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_second_signal_stops_the_senders_at_once_and_hands_their_digests_back(
    tmp_path: Path, database_url: str, store: Store, workers: int
) -> None:
    """A second SIGTERM while each message is held by a slow SMTP server, sent by two sender
    processes or by the daemon itself: the daemon ends at once, not at the grace's end, and
    the digests stay queued, handed back for the next worker to take at once."""
    grace = 5
    now = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)
    records = [queue_mail(store, name, now=now) for name in ("ada", "bob")[: workers or 1]]
    held = HeldMessages()
    with smtp_sink(held) as (_, smtp_port):
        config = sending_config(tmp_path, database_url, smtp_port, grace=grace, workers=workers)
        process = start(
            "run", "-c", str(config), "--no-web", "--clock-start", f"{now:%Y-%m-%dT%H:%M}"
        )
        try:
            wait_until_sending(process, held, len(records))
            err, took = stop_twice(process)
        finally:
            ended(process)
    assert "stopping now" in err, err
    assert took < STOP_MARGIN, f"stopped {took:.1f} s after the second SIGTERM\n{err}"
    assert process.returncode == EXIT_INTERRUPTED, err
    assert "Traceback" not in err, err
    states = store.outbox.records(records)
    assert {state.status for state in states.values()} == {"pending"}, states
    assert leases(store, records) == [None] * len(records), err


@pytest.mark.parametrize("command_name", ["serve", "run"])
def test_the_web_app_stops_within_the_grace_with_a_request_whose_body_never_comes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command_name: str
) -> None:
    """A client that opened a slash command's request and never sends its body holds the
    connection open: `paperbell serve`, or `run`, closes it at the grace's end."""
    web_port = free_port()
    with SlackStandIn() as slack:
        more = slack_table(slack, monkeypatch, way_in="signing_secret_env")
        config = tmp_path / "config.toml"
        config.write_text(
            f'version = 1\n[database]\nurl = "sqlite:///paperbell.sqlite"\n'
            f"[daemon]\nshutdown_grace_seconds = {GRACE}\n[delivery]\nworkers = 0\n"
            f"[web]\nport = {web_port}\n{more}"
        )
        process = start(command_name, "-c", str(config), cwd=tmp_path)
        try:
            post_command(web_port, command(slack, "help"))  # it listens
            with socket.create_connection(("127.0.0.1", web_port), timeout=5) as client:
                client.sendall(
                    b"POST /slack/commands HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/x-www-form-urlencoded\r\n"
                    b"Content-Length: 100\r\n\r\nteam_id="
                )
                time.sleep(0.3)  # the request is being read
                err, took = stop_and_wait(process)
        finally:
            ended(process)
    assert process.returncode == 0, err
    assert took < GRACE + STOP_MARGIN, f"stopped {took:.1f} s after SIGTERM\n{err}"
