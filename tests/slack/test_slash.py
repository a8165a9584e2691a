"""The `/papers` slash command through its two ways in: `POST /slack/commands` on the real web
app (uvicorn on loopback), with requests signed exactly as Slack signs them, and Socket Mode
(slack-sdk's client over a real WebSocket). Slack itself is the local stand-in."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from aiohttp import WSMsgType, web
from support.clock import Clock
from support.config import WEB_SECRET, sink_email, slack_config
from support.paths import ROOT
from support.servers import smtp_sink
from support.slack import SIGNING_SECRET, signed, wired_front, wired_slack_app

from bot.config import Config, parse_config
from bot.core.models import Paper
from bot.demo import free_port
from bot.demo.slack_standin import SlackStandIn
from bot.pipeline import DeliveryRequest, build_channels, deliver
from bot.slack.app import (
    FAILED,
    SlackApp,
    SlackResponder,
    run_socket_mode,
    slack_routes,
)
from bot.slack.commands import EMAIL_LINKS_PER_DAY
from bot.store import Store
from bot.web.app import create_app, make_server

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
ADA, BOSS, ROBOTS = "U07ADA123", "U07BOSS01", "C07ROBOTS"
TRIGGERS = itertools.count(0x8088930838D88F008E0)


@pytest.fixture
def slack() -> Iterator[SlackStandIn]:
    with SlackStandIn() as standin:
        standin.add_channel(ROBOTS, "robot-learning")
        standin.add_channel("C07QUIET1", "quiet", member=False)
        standin.add_user(ADA, "ada", email="ada@lab.example", tz="Europe/London")
        standin.add_user(BOSS, "boss", is_admin=True)
        yield standin
        assert standin.violations == []


def make_config(
    slack: SlackStandIn, database_url: str, subscribers: list[dict[str, Any]] | None = None
) -> Config:
    return slack_config(slack, database_url, subscribers or [], signing_secret=SIGNING_SECRET)


def form(text: str, *, user: str = ADA, channel: str = ROBOTS, response: str = "r1") -> str:
    """A slash command's body, field for field as Slack posts it."""
    fields = {
        "token": "gIkuvaNzQIHg97ATvDxqgjtO",
        "team_id": "T0STANDIN",
        "team_domain": "lab",
        "channel_id": channel,
        "channel_name": "robot-learning",
        "user_id": user,
        "user_name": {ADA: "ada", BOSS: "boss"}.get(user, "someone"),
        "command": "/papers",
        "text": text,
        "api_app_id": "A0PAPERBELL",
        "is_enterprise_install": "false",
        "response_url": f"RESPONSE/{response}",
        "trigger_id": f"13345224609.738474920.{next(TRIGGERS):x}",  # unique per command
    }
    return urlencode(fields)


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The web app under uvicorn on a loopback port, and an HTTP client for it."""
    port = free_port()
    server = make_server(app, host="127.0.0.1", port=port)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            yield client
    finally:
        server.should_exit = True
        await task


class Session:
    """Types commands as a Slack user would, and reads the replies."""

    def __init__(
        self, client: httpx.AsyncClient, slack: SlackStandIn, responder: SlackResponder
    ) -> None:
        self.client, self.slack, self.responder = client, slack, responder

    async def post(self, body: str, headers: dict[str, str]) -> httpx.Response:
        body = body.replace("RESPONSE", self.slack.root_url + "/response")
        return await self.client.post("/slack/commands", content=body, headers=headers)

    async def say(self, text: str, *, user: str = ADA) -> dict[str, Any]:
        """The reply; for a slow command, the one that followed at response_url."""
        body = form(text, user=user).replace("RESPONSE", self.slack.root_url + "/response")
        response = await self.client.post("/slack/commands", content=body, headers=signed(body))
        assert response.status_code == 200, response.text
        reply = dict(response.json())
        if "Working on it" in reply["text"]:
            await self.responder.wait()
            reply = self.slack.responses[-1]
        return reply


def app_for(slack: SlackStandIn, store: Store, database_url: str) -> SlackApp:
    config = make_config(slack, database_url)
    built = wired_slack_app(config, store, clock=lambda: NOW)
    assert built is not None and built.http is not None
    return built


def test_every_subcommand_through_the_signed_http_endpoint(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    store.papers.upsert(full_feed_papers, now=NOW)
    built = app_for(slack, store, database_url)

    async def scenario() -> list[dict[str, Any]]:
        async with serving(create_app(routes=slack_routes(built))) as client:
            s = Session(client, slack, built.responder)
            replies = [
                await s.say(""),
                await s.say("help"),
                await s.say('subscribe "diffusion policy"'),
                await s.say('subscribe "unclosed phrase'),
                await s.say("subscribe robot cat:cs.RO"),
                await s.say("list"),
                await s.say("try robot"),
                await s.say("remove 1"),
                await s.say("pause"),
                await s.say("digest"),
                await s.say("resume"),
                await s.say("digest"),
                await s.say("digest"),
                await s.say("frobnicate"),
            ]
            await built.responder.wait()
            return replies

    replies = asyncio.run(scenario())
    texts = [r["text"] for r in replies]
    assert all(r["response_type"] == "ephemeral" for r in replies)
    usage, help_, welcome, bad, second, listed, tried, removed = texts[:8]
    paused, while_paused, resumed, sent, again, unknown = texts[8:]
    assert "/papers subscribe" in usage and "`au:`" in help_
    assert welcome.startswith('Welcome! Subscribed to `"diffusion policy"`')
    assert "Europe/London" in welcome  # the user's own time zone, from users.info
    assert "does not parse" in bad and "column" in bad and "```" in bad and "^" in bad
    assert "you have 2 rules" in second
    assert '1. `"diffusion policy"`' in listed and "2. `robot cat:cs.RO`" in listed
    assert "`robot` matches" in tried and "<https://arxiv.org/abs/" in tried
    assert 'Removed rule 1, `"diffusion policy"`' in removed
    assert "paused" in paused and "paused" in while_paused and "back on" in resumed
    assert sent.startswith("Sent ") and "your direct messages" in sent
    assert "Nothing new" in again
    assert "I do not know `frobnicate`" in unknown

    # The subscriber Slack made: the user's id, and their address, unconfirmed.
    row = store.subscribers.by_slack(user=ADA)
    assert row is not None and row.name == "slack.ada"
    assert row.email == "ada@lab.example" and row.email_confirmed is False
    # The digest went to Ada's direct messages, a summary and its thread.
    dm = slack.messages("D" + ADA)
    assert dm and dm[0]["thread_ts"] is None and all(m["thread_ts"] for m in dm[1:])


def test_a_channel_subscription_needs_an_admin_and_is_announced_in_the_channel(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    built = app_for(slack, store, database_url)
    channel = f"<#{ROBOTS}|robot-learning>"

    async def scenario() -> list[dict[str, Any]]:
        async with serving(create_app(routes=slack_routes(built))) as client:
            s = Session(client, slack, built.responder)
            return [
                await s.say(f"subscribe {channel} robot"),
                await s.say(f"subscribe {channel} robot", user=BOSS),
                await s.say(f"list {channel}"),
                await s.say("subscribe <#C07QUIET1|quiet> qubit", user=BOSS),
                await s.say(f"pause {channel}", user=BOSS),
            ]

    refused, done, listed, quiet, paused = asyncio.run(scenario())
    assert refused["response_type"] == "ephemeral" and "Only workspace admins" in refused["text"]
    assert done["response_type"] == "in_channel"
    assert done["text"].startswith(f"<@{BOSS}> subscribed <#{ROBOTS}> to `robot`")
    assert listed["response_type"] == "ephemeral" and "1. `robot`" in listed["text"]
    assert "Invite me" in quiet["text"]
    assert paused["response_type"] == "in_channel" and "paused" in paused["text"]
    row = store.subscribers.by_slack(channel=ROBOTS)
    assert row is not None and row.name == "channel.robot-learning" and row.active is False


def test_forged_unsigned_stale_replayed_and_oversized_requests_are_refused(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    built = app_for(slack, store, database_url)
    body = form("subscribe robot").replace("RESPONSE", slack.root_url + "/response")

    async def scenario() -> list[tuple[int, str]]:
        async with serving(create_app(routes=slack_routes(built))) as client:
            s = Session(client, slack, built.responder)
            good = signed(body)
            tries = [
                await s.post(body, signed(body, secret="not-the-secret")),  # forged
                await s.post(body, {"Content-Type": "application/x-www-form-urlencoded"}),
                await s.post(body, signed(body, at=time.time() - 301)),  # stale
                await s.post(body + "&text=pause", good),  # altered after signing
                await s.post(body, good),  # the genuine request
                await s.post(body, good),  # replayed
                await s.post("text=" + "x" * 20_000, signed("text=" + "x" * 20_000)),
            ]
            return [(r.status_code, r.text) for r in tries]

    (forged, unsigned, stale, altered, genuine, replayed, big) = asyncio.run(scenario())
    assert forged == (401, "bad signature")
    assert unsigned == (401, "unsigned request")
    assert stale[0] == 401 and "stale" in stale[1]
    assert altered == (401, "bad signature")
    assert genuine[0] == 200 and "Welcome" in genuine[1]
    assert replayed == (401, "replayed request")
    assert big[0] == 413
    [sub] = [s for s in store.subscribers.all() if s.slack_user == ADA]  # only the genuine one
    assert sub.rules == ("robot",)


def test_a_slow_command_is_acknowledged_at_once_and_answered_at_response_url(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """`try` and `digest` are always answered "working on it" first; any other command that
    outlasts the acknowledgement time (here 0 s) too."""
    store.papers.upsert(full_feed_papers, now=NOW)
    built = app_for(slack, store, database_url)
    impatient = SlackResponder(built.responder.commands, ack_within=0)
    assert built.checker is not None

    async def ask(responder: SlackResponder, text: str, response: str) -> dict[str, Any]:
        async with serving(
            create_app(routes=slack_routes(replace(built, responder=responder)))
        ) as client:
            body = form(text, response=response)
            body = body.replace("RESPONSE", slack.root_url + "/response")
            answer = await client.post("/slack/commands", content=body, headers=signed(body))
            await responder.wait()
            return dict(answer.json())

    tried = asyncio.run(ask(built.responder, "try learning", "r1"))
    helped = asyncio.run(ask(impatient, "help", "r2"))
    assert "Working on it" in tried["text"] and "Working on it" in helped["text"]
    later = {r["id"]: r for r in slack.responses}
    assert later["r1"]["response_type"] == "ephemeral"
    assert "`learning` matches" in later["r1"]["text"]
    assert "/papers subscribe" in later["r2"]["text"]


@contextmanager
def database_busy(store: Store, seconds: float) -> Iterator[None]:
    """Another writer holds the database for `seconds` (as a digest run's write does): on
    SQLite the whole file, on PostgreSQL the table of Slack requests."""
    held = threading.Event()

    def hold() -> None:
        if store.database.engine.dialect.name == "sqlite":
            raw = store.database.engine.raw_connection()
            sqlite = raw.driver_connection
            assert sqlite is not None
            try:
                sqlite.execute("BEGIN IMMEDIATE")  # the write lock, as a writer takes it
                held.set()
                time.sleep(seconds)
                sqlite.execute("ROLLBACK")
            finally:
                raw.close()
            return
        with store.database.engine.begin() as connection:
            connection.exec_driver_sql("LOCK TABLE slack_request IN EXCLUSIVE MODE")
            held.set()
            time.sleep(seconds)

    writer = threading.Thread(target=hold)
    writer.start()
    held.wait(5)
    try:
        yield
    finally:
        writer.join()


def test_slacks_three_seconds_count_from_the_request_not_from_its_check(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    """The replay check waited 2 s for the database, then a command that took 1-2 s more
    (users.info rate limited) was answered inline after Slack had given up: the user read
    a timeout, and the reply was lost. The check's time now counts: "working on it" comes
    in time, and the reply follows at response_url."""
    built = app_for(slack, store, database_url)
    slack.fail_next("users.info", retry_after=1)

    async def scenario() -> tuple[float, dict[str, Any]]:
        async with serving(create_app(routes=slack_routes(built))) as client:
            s = Session(client, slack, built.responder)
            body = form("subscribe robot", response="late")
            body = body.replace("RESPONSE", slack.root_url + "/response")
            with database_busy(store, 2.0):
                start = time.monotonic()
                response = await s.post(body, signed(body))
                took = time.monotonic() - start
            await built.responder.wait()
            return took, dict(response.json())

    took, answer = asyncio.run(scenario())
    assert took < 3.0, (took, answer["text"])
    assert "Working on it" in answer["text"]
    [reply] = [r for r in slack.responses if r["id"] == "late"]
    assert reply["text"].startswith("Welcome! Subscribed to `robot`")


def test_digest_says_a_digest_in_flight_is_on_its_way(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """The run queued Ada's digest and a sender process is sending it (as `paperbell run`
    does, with its default sender process): `/papers digest` said "Nothing new matched your
    rules", with 50 papers on their way."""
    store.papers.upsert(full_feed_papers, now=NOW)
    built = app_for(slack, store, database_url)

    async def scenario() -> dict[str, Any]:
        async with serving(create_app(routes=slack_routes(built))) as client:
            s = Session(client, slack, built.responder)
            await s.say("subscribe learning")
            parts = built.responder.commands.parts
            [queued] = await deliver(parts, DeliveryRequest(sends=False), now=NOW)
            assert (queued.status, queued.count) == ("queued", 50)
            [held] = store.outbox.claim("sender-1", now=NOW, lease=timedelta(minutes=5))
            assert held.subscriber == "slack.ada"
            return await s.say("digest")

    reply = asyncio.run(scenario())
    assert reply["text"] == "That digest is already on its way."
    assert slack.messages("D" + ADA) == []  # the sender has it: nothing sent twice


def test_digest_sends_the_askers_digest_and_no_one_elses(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """The boss's digest is queued for the sender processes. Ada's `/papers digest` sent
    it too, from the web process: everyone's queued digests went with hers (and hers
    waited for them all)."""
    store.papers.upsert(full_feed_papers, now=NOW)
    built = app_for(slack, store, database_url)

    async def scenario() -> dict[str, Any]:
        async with serving(create_app(routes=slack_routes(built))) as client:
            s = Session(client, slack, built.responder)
            await s.say("subscribe learning", user=BOSS)
            parts = built.responder.commands.parts
            [queued] = await deliver(parts, DeliveryRequest(sends=False), now=NOW)
            assert queued.subscriber == "slack.boss" and queued.status == "queued"
            await s.say("subscribe learning")
            return await s.say("digest")

    reply = asyncio.run(scenario())
    assert "50 papers" in reply["text"], reply["text"]
    assert len(slack.messages("D" + ADA)) >= 1
    assert slack.messages("D" + BOSS) == []  # the senders' to send
    boss = store.subscribers.get("slack.boss")
    assert boss is not None and store.outbox.pending(boss.id, "slack") == 1


def test_the_endpoint_says_when_slack_is_not_set_up(slack: SlackStandIn) -> None:
    async def scenario() -> httpx.Response:
        async with serving(create_app(routes=slack_routes(None))) as client:
            return await client.post("/slack/commands", content="text=help")

    response = asyncio.run(scenario())
    assert response.status_code == 404 and "signing_secret_env" in response.text


SLACK_WAITS = 3.0  # seconds: Slack's wait for a Socket Mode ack before the user sees a timeout


def socket_mode_acks(
    built: SlackApp, slack: SlackStandIn, commands: list[str]
) -> list[dict[str, Any] | None]:
    """Each command's ack, as slack-sdk's Socket Mode client sends it over a real WebSocket
    to a stand-in of Slack's Socket Mode endpoint; None where none came in Slack's time."""
    acks: list[dict[str, Any] | None] = []
    done = asyncio.Event()

    async def socket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"type": "hello", "num_connections": 1})
        for number, text in enumerate(commands):
            payload = dict(item.split("=", 1) for item in form(text).split("&"))
            payload = {k: httpx.QueryParams(f"v={v}")["v"] for k, v in payload.items()}
            await ws.send_json(
                {
                    "envelope_id": f"env-{number}",
                    "type": "slash_commands",
                    "accepts_response_payload": True,
                    "payload": payload,
                }
            )
            try:
                message = await ws.receive(timeout=SLACK_WAITS)
            except TimeoutError:
                acks.append(None)
                continue
            assert message.type == WSMsgType.TEXT, message
            acks.append(json.loads(message.data))
        done.set()
        async for _ in ws:  # until the client closes
            pass
        return ws

    async def scenario() -> None:
        app = web.Application()
        app.router.add_get("/link", socket)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        slack.socket_url = f"ws://127.0.0.1:{port}/link"
        stop = asyncio.Event()
        client = asyncio.create_task(
            run_socket_mode(
                built.responder, app_token=slack.app_token, api_url=slack.base_url, stop=stop
            )
        )
        await asyncio.wait_for(done.wait(), 10 + SLACK_WAITS * len(commands))
        stop.set()
        await client
        await runner.cleanup()

    asyncio.run(scenario())
    return acks


def test_socket_mode_acknowledges_each_command_with_its_reply(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    """slack-sdk's Socket Mode client, connected over a real WebSocket to a stand-in of
    Slack's Socket Mode endpoint, receives slash commands and acks each with the reply."""
    built = app_for(slack, store, database_url)
    acks = socket_mode_acks(built, slack, ["help", "subscribe robot", "list"])
    assert [a and a["envelope_id"] for a in acks] == ["env-0", "env-1", "env-2"]
    help_, subscribed, listed = (a["payload"] for a in acks if a is not None)
    assert "/papers subscribe" in help_["text"]
    assert subscribed["text"].startswith("Welcome!")
    assert "1. `robot`" in listed["text"]
    assert any(r.method == "apps.connections.open" for r in slack.requests)


def refuse_subscriber_changes(store: Store) -> None:
    """A trigger that refuses every change to a subscriber: the database's error is one the
    store does not expect (a constraint, not a lost connection)."""
    with store.database.engine.begin() as connection:
        if store.database.engine.dialect.name == "sqlite":
            connection.exec_driver_sql(
                "CREATE TRIGGER refuse BEFORE UPDATE ON subscribers "
                "BEGIN SELECT RAISE(ABORT, 'subscribers are read-only'); END"
            )
            return
        connection.exec_driver_sql(
            "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'subscribers are read-only' USING ERRCODE = 'check_violation'; "
            "END $$ LANGUAGE plpgsql"
        )
        connection.exec_driver_sql(
            "CREATE TRIGGER refuse BEFORE UPDATE ON subscribers "
            "FOR EACH ROW EXECUTE FUNCTION refuse()"
        )


def test_socket_mode_acks_a_command_that_fails_unexpectedly_with_the_failure(
    slack: SlackStandIn, store: Store, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A command that raised an error its handler did not expect got "Something went wrong"
    over HTTP, but no ack at all over Socket Mode: the user saw Slack's timeout, and the
    reason went to slack-sdk's log alone. It is acked with the same words, and logged."""
    built = app_for(slack, store, database_url)
    store.subscribers.add("slack.ada", email=None, rules=["robot"], now=NOW, slack_user=ADA)
    refuse_subscriber_changes(store)

    with caplog.at_level(logging.ERROR, logger="bot.slack.app"):
        acks = socket_mode_acks(built, slack, ["pause", "list"])

    assert acks[0] is not None, "no ack: Slack shows the user a timeout"
    failed, listed = (a["payload"] for a in acks if a is not None)
    assert failed["text"] == FAILED.text
    assert "1. `robot`" in listed["text"]  # the next command is answered as usual
    assert any("slash command failed" in r.getMessage() for r in caplog.records)


def test_the_app_manifest_declares_the_command_and_the_scopes_paperbell_uses() -> None:
    import yaml

    from bot.config import SlackConfig

    manifest = yaml.safe_load((ROOT / "slack-app-manifest.yml").read_text())
    [command] = manifest["features"]["slash_commands"]
    assert command["command"] == SlackConfig().command
    assert command["url"].endswith("/slack/commands") and command["should_escape"] is True
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    # chat.postMessage, users.info (+ email), conversations.info, the command itself
    assert {"chat:write", "im:write", "users:read", "users:read.email", "commands"} <= scopes
    assert {"channels:read", "groups:read"} <= scopes
    # conversations.history and .replies: was a post that got no answer posted after all?
    assert {"channels:history", "groups:history", "im:history"} <= scopes


def test_config_subscribers_are_found_and_the_last_rule_can_go(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    """A person or channel declared in the config file is the same subscriber in Slack
    (by member id, by channel id or #name); removing the last rule stops the digests."""
    config = make_config(
        slack,
        database_url,
        [
            {"name": "ada", "slack_user": ADA, "rules": ["qubit"]},
            {"name": "lab", "slack_channel": "#robot-learning", "rules": ["robot"]},
        ],
    )
    built = wired_slack_app(config, store, clock=lambda: NOW)
    assert built is not None

    async def scenario() -> list[str]:
        async with serving(create_app(routes=slack_routes(built))) as client:
            s = Session(client, slack, built.responder)
            return [
                (await s.say(text, user=user))["text"]
                for text, user in [
                    ("list", ADA),
                    ("subscribe robot", ADA),
                    (f"list <#{ROBOTS}|robot-learning>", ADA),
                    ("subscribe diffusion", BOSS),
                    ("remove 1", BOSS),
                    ("list", BOSS),
                    ("subscribe manipulation", BOSS),
                    ("list", BOSS),
                ]
            ]

    (mine, refused, lab, boss, removed, empty, again, listed) = asyncio.run(scenario())
    assert "1. `qubit`" in mine and "config file" in mine
    assert "config file" in refused
    assert "1. `robot`" in lab and "config file" in lab
    assert {s.name for s in store.subscribers.all(include_inactive=True)} == {"slack.boss"}
    assert "Welcome" in boss and "the digests stop" in removed
    assert "no subscription" in empty or "(paused)" in empty
    assert "1. `manipulation`" in listed and "diffusion" not in listed and "Welcome" not in again


def test_a_rule_number_in_superscript_digits_gets_the_usage_not_a_crash(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    """`"²".isdigit()` is True, but int() refuses it: `remove ²` and `label ² x` raised, so
    the user read "something went wrong" (over Socket Mode: no answer at all)."""
    built = app_for(slack, store, database_url)

    async def scenario() -> list[str]:
        async with serving(create_app(routes=slack_routes(built))) as client:
            s = Session(client, slack, built.responder)
            await s.say("subscribe robot")
            return [(await s.say(text))["text"] for text in ("remove ²", "label ² multi-agent")]

    removed, labelled = asyncio.run(scenario())
    assert removed.startswith(":warning: Say which rule: `/papers remove 2`"), removed
    assert labelled.startswith(":warning: Say which rule and its label"), labelled
    assert store.subscribers.rule_texts("slack.ada") == ["robot"]


def mailing_config(
    slack: SlackStandIn, database_url: str, smtp_port: int, *, email: bool = True
) -> Config:
    """A config with Slack, email through the SMTP server on `smtp_port` (none: no [email]
    section), and the pages (which confirm the addresses `/papers email` is given)."""
    sections = {"email": sink_email(smtp_port, sender="paperbell <digest@papers.lab.example>")}
    return parse_config(
        {
            **(sections if email else {}),
            "version": 1,
            "database": {"url": database_url},
            "slack": {
                "bot_token_env": "SLACK_BOT_TOKEN",
                "signing_secret_env": "SLACK_SIGNING_SECRET",
                "api_url": slack.base_url,
                "post_interval_seconds": 0,
            },
            "web": {"public_url": "https://papers.lab.example", "secret_key_env": "KEY"},
        },
        environ={
            "SLACK_BOT_TOKEN": slack.token,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "KEY": WEB_SECRET,
        },
    )


def test_email_digests_from_slack_wait_for_the_address_to_be_confirmed(
    slack: SlackStandIn, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    from bot.pipeline import DeliveryRequest, deliver, wire

    with smtp_sink() as (sink, port):
        config = mailing_config(slack, database_url, port)
        store = Store.open(config.database_url())
        store.papers.upsert(full_feed_papers, now=NOW)
        channels = build_channels(config)
        front = wired_front(config, store, channels, clock=lambda: NOW)
        built = front.slack
        assert built is not None and built.http is not None
        app = create_app(routes=[*(front.pages or []), *slack_routes(built)])

        def emails() -> list[str]:
            reports = asyncio.run(
                deliver(
                    wire(config, store, channels), DeliveryRequest(), now=NOW, clock=lambda: NOW
                )
            )
            return [r.status for r in reports if r.channel == "email"]

        async def scenario() -> list[str]:
            async with serving(app) as client:
                s = Session(client, slack, built.responder)
                texts = [(await s.say('subscribe "diffusion policy"'))["text"]]
                texts.append((await s.say("email not-an-address"))["text"])
                texts.append((await s.say("email"))["text"])  # the Slack profile's address
                texts.append((await s.say("email"))["text"])  # again: nothing more is sent
                texts.append((await s.say("manage"))["text"])
                await built.responder.wait()
                return texts

        subscribed, bad, asked, again, manage = asyncio.run(scenario())
        assert "Welcome!" in subscribed
        assert ":warning:" in bad
        assert "I sent a link to ada@lab.example" in asked
        assert "went to ada@lab.example today already" in again
        assert "https://papers.lab.example/manage/" in manage
        (confirmation,) = sink.messages
        assert confirmation["To"] == "ada@lab.example"
        assert "from Slack" in confirmation.get_content()
        assert emails() == []  # not confirmed: Slack digests only
        link = re.search(r"https://papers\.lab\.example(/confirm/\S+)", confirmation.get_content())
        assert link

        async def confirm() -> int:
            async with serving(app) as client:
                page = await client.get(link.group(1))
                token = re.search(r'name="csrf" value="([^"]+)"', page.text)
                assert token
                done = await client.post(link.group(1), data={"csrf": token.group(1)})
                return done.status_code

        assert asyncio.run(confirm()) == 303
        assert emails() == ["sent"]
        assert sink.messages[-1]["To"] == "ada@lab.example"
        assert sink.messages[-1]["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        store.close()


def test_a_new_address_from_slack_waits_while_the_confirmed_one_gets_digests(
    slack: SlackStandIn, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """`/papers email NEW` by a subscriber whose address is confirmed: digests go on to
    that address until NEW's own link confirms it, then NEW replaces it; the link mailed to
    an address asked for before (a typo) confirms nothing."""
    from bot.pipeline import DeliveryRequest, deliver, wire

    with smtp_sink() as (sink, port):
        config = mailing_config(slack, database_url, port)
        store = Store.open(config.database_url())
        store.papers.upsert(full_feed_papers, now=NOW)
        channels = build_channels(config)
        front = wired_front(config, store, channels, clock=lambda: NOW)
        built = front.slack
        assert built is not None and built.http is not None
        app = create_app(routes=[*(front.pages or []), *slack_routes(built)])

        async def scenario() -> list[str]:
            async with serving(app) as client:
                s = Session(client, slack, built.responder)
                await s.say('subscribe "diffusion policy"')
                store.subscribers.set_email("slack.ada", "ada@lab.example", confirmed=True)
                asked = ("ada@typo.example", "ada@home.example")
                texts = [(await s.say(f"email {address}"))["text"] for address in asked]
                texts.append((await s.say("manage"))["text"])
                found = re.search(r"https://papers\.lab\.example(/manage/[^\s>|]+)", texts[-1])
                assert found
                texts.append((await client.get(found.group(1))).text)
                await built.responder.wait()
                return texts

        typo, home, _, page = asyncio.run(scenario())
        typo_mail, home_mail = sink.messages
        assert (typo_mail["To"], home_mail["To"]) == ("ada@typo.example", "ada@home.example")
        reports = asyncio.run(
            deliver(wire(config, store, channels), DeliveryRequest(), now=NOW, clock=lambda: NOW)
        )
        assert [(r.channel, r.status) for r in reports if r.channel == "email"] == [
            ("email", "sent")
        ]
        assert sink.messages[-1]["To"] == "ada@lab.example"
        assert "keep coming to ada@lab.example" in typo, typo
        assert "ada@lab.example" in home and "ada@home.example" in home, home
        assert "ada@lab.example" in page and "ada@home.example" in page

        def link(mail: Any) -> str:
            found = re.search(r"https://papers\.lab\.example(/confirm/\S+)", mail.get_content())
            assert found
            return found.group(1)

        async def confirm(path: str) -> int:
            async with serving(app) as client:
                page = await client.get(path)
                token = re.search(r'name="csrf" value="([^"]+)"', page.text)
                if token is None:
                    return page.status_code
                done = await client.post(path, data={"csrf": token.group(1)})
                return done.status_code

        assert asyncio.run(confirm(link(typo_mail))) == 404
        assert store.subscribers.get("slack.ada").email == "ada@lab.example"  # type: ignore[union-attr]
        assert asyncio.run(confirm(link(home_mail))) == 303
        ada = store.subscribers.get("slack.ada")
        assert ada is not None and (ada.email, ada.email_confirmed) == ("ada@home.example", True)
        store.close()


def test_email_from_slack_mails_few_confirmation_links_a_day_per_user(
    slack: SlackStandIn, database_url: str
) -> None:
    """Each address got at most one confirmation a day, but one member could have one
    mailed to any number of addresses. A member now has at most EMAIL_LINKS_PER_DAY mailed
    a day; a link not mailed (its mailbox had one today) does not count."""
    clock = Clock(NOW)
    with smtp_sink() as (sink, port):
        config = mailing_config(slack, database_url, port)
        store = Store.open(config.database_url())
        front = wired_front(config, store, build_channels(config), clock=clock)
        built = front.slack
        assert built is not None

        async def say(texts: list[str], user: str = ADA) -> list[str]:
            async with serving(create_app(routes=slack_routes(built))) as client:
                s = Session(client, slack, built.responder)
                return [(await s.say(text, user=user))["text"] for text in texts]

        asyncio.run(say(["subscribe robot"]))
        asyncio.run(say(["subscribe robot"], user=BOSS))
        addresses = [f"someone{n}@victim.example" for n in range(EMAIL_LINKS_PER_DAY + 1)]
        again = asyncio.run(say([f"email {addresses[0]}"]))  # counted once, not twice
        asked = asyncio.run(say([f"email {address}" for address in addresses]))
        boss = asyncio.run(say(["email boss@lab.example"], user=BOSS))
        clock.advance(days=1)
        next_day = asyncio.run(say([f"email {addresses[-1]}"]))
        store.close()

    mailed = [m["To"] for m in sink.messages]
    assert mailed == [*addresses[:-1], "boss@lab.example", addresses[-1]], mailed
    assert "I sent a link" in again[0] and "today already" in asked[0]
    assert all("I sent a link" in text for text in asked[1:-1])
    refused = asked[-1]
    assert refused.startswith(f":hourglass: You had {EMAIL_LINKS_PER_DAY} confirmation"), refused
    assert "I sent a link to boss@lab.example" in boss[0]
    assert f"I sent a link to {addresses[-1]}" in next_day[0]


def test_summaries_and_a_language_are_set_from_slack_for_oneself_and_for_a_channel(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    """`summaries on|off` and `language TAG|off`, for the user's own subscription and (by
    an admin) a channel's; a bad tag is a clear refusal; `list` and `help` show them."""
    config = make_config(
        slack, database_url, [{"name": "boss", "slack_user": BOSS, "rules": ["qubit"]}]
    )
    built = wired_slack_app(config, store, clock=lambda: NOW)
    assert built is not None
    channel = f"<#{ROBOTS}|robot-learning>"

    async def scenario() -> list[dict[str, Any]]:
        async with serving(create_app(routes=slack_routes(built))) as client:
            s = Session(client, slack, built.responder)
            return [
                await s.say("summaries on"),
                await s.say("subscribe robot"),
                await s.say("summaries"),
                await s.say("summaries on"),
                await s.say("language zh-cn"),
                await s.say("language"),
                await s.say("language xx"),
                await s.say("language " + "zh" * 40),
                await s.say("list"),
                await s.say("help"),
                await s.say(f"subscribe {channel} robot", user=BOSS),
                await s.say(f"language {channel} ja"),  # Ada may not
                await s.say(f"language {channel} ja", user=BOSS),
                await s.say(f"summaries {channel} on", user=BOSS),
                await s.say(f"list {channel}"),
                await s.say("summaries on", user=BOSS),  # Boss's own: the config file's
                await s.say("summaries off"),
                await s.say("language off"),
            ]

    replies = asyncio.run(scenario())
    texts = [r["text"] for r in replies]
    (nobody, _, asked, on, zh, which, unknown, huge, listed, help_) = texts[:10]
    (_, refused, ja, channel_on, channel_list, config_file, off, english) = texts[10:]
    assert nobody.startswith(":warning: You have no subscription")
    assert asked.startswith("Summaries are off. `/papers summaries on` puts a short summary")
    assert on.startswith("Summaries on: your digests give a short summary in place of each")
    assert "Hugging Face's where a paper has one" in on  # no [llm] here
    assert zh.startswith(
        "From now on your digests show each title and abstract in Chinese (China) beside the "
        "English."
    )
    assert "until your paperbell admin adds one, the digests stay in English" in zh
    assert which.startswith("Digests come in Chinese (China) beside English.")
    assert unknown.startswith(
        ":warning: language 'xx': no language paperbell knows by that tag. Give a language tag"
    )
    assert huge.startswith(":warning: language 'zhzh") and "not a BCP 47 language tag" in huge
    assert "With summaries, in Chinese (China) beside the English." in listed
    assert "`/papers summaries on|off`" in help_ and "`/papers language zh|off`" in help_
    assert "Only workspace admins" in refused
    assert replies[12]["response_type"] == "in_channel"
    assert ja.startswith(
        f"From now on <#{ROBOTS}>'s digests show each title and abstract in Japanese beside"
    )
    assert replies[13]["response_type"] == "in_channel"
    assert channel_on.startswith(f"Summaries on: <#{ROBOTS}>'s digests give a short summary")
    assert "With summaries, in Japanese beside the English." in channel_list
    assert "config file" in config_file
    assert off == "Summaries off: your digests show each paper's abstract."
    assert english == "From now on your digests are in English only."
    found = {s.name: s for s in store.subscribers.all(include_inactive=True)}
    assert (found["slack.ada"].summaries, found["slack.ada"].language) == (False, None)
    lab = found["channel.robot-learning"]
    assert (lab.summaries, lab.language) == (True, "ja")


def test_with_a_model_set_up_slack_says_nothing_of_its_absence(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    from bot.config import LlmConfig
    from bot.slack.messages import CommandRequest

    config = make_config(slack, database_url)
    config.llm = LlmConfig(base_url="http://localhost:11434/v1", model="qwen2.5:7b-instruct")
    built = wired_slack_app(config, store, clock=lambda: NOW)
    assert built is not None

    def say(text: str) -> str:
        request = CommandRequest(text=text, user_id=ADA)
        return asyncio.run(built.responder.commands.handle(request)).text

    assert say("subscribe robot").startswith("Welcome!")
    assert say("summaries on").endswith("(the abstract is a click away).")
    assert say("language de").endswith("in German beside the English.")
    assert say("language EN").endswith("in English only.")


def test_papers_are_liked_disliked_unliked_and_listed_from_slack(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """`/papers like|dislike|unlike ID…` and `likes`, signed as Slack signs them: a user's own
    verdicts and a channel's (its managers only); ids as people paste them; a config file's
    subscription listed, and changed in the file."""
    store.papers.upsert(full_feed_papers, now=NOW)
    config = make_config(
        slack,
        database_url,
        [
            {
                "name": "lab",
                "slack_channel": "#robot-learning",
                "rules": ["robot"],
                "like": ["2411.17703"],
            }
        ],
    )
    store.subscribers.sync_config(config.declared_subscribers(), now=NOW)
    from bot.pipeline.likes import sync_declared_likes

    sync_declared_likes(config, store, now=NOW)
    built = wired_slack_app(config, store, clock=lambda: NOW)
    assert built is not None

    async def scenario() -> list[str]:
        async with serving(create_app(routes=slack_routes(built))) as client:
            s = Session(client, slack, built.responder)
            return [
                (await s.say(text, user=user))["text"]
                for text, user in [
                    ("likes", ADA),
                    ("subscribe robot", ADA),
                    ("like https://arxiv.org/abs/2411.17703v1 2411.17705", ADA),
                    ("dislike doi:10.1016/j.segan.2024.101477", ADA),
                    ("like nonsense", ADA),
                    ("like", ADA),
                    ("likes", ADA),
                    ("unlike 2411.17705 2411.17706", ADA),
                    (f"like <#{ROBOTS}|robot-learning> 2411.17704", BOSS),
                    (f"likes <#{ROBOTS}|robot-learning>", ADA),
                    ("help", ADA),
                ]
            ]

    (none, _, liked, disliked, bad, empty, listed, unliked, channel, lab, help_) = asyncio.run(
        scenario()
    )
    assert "You have no subscription" in none
    assert liked.startswith("Liked 2 papers: digests add papers like these.")
    assert "`2411.17703` Probabilistic Forecasting of Radiation Exposure" in liked
    assert "`2411.17758` PP-LEM" in disliked and "rank lower" in disliked
    assert "'nonsense' is not an arXiv id (2411.18179)" in bad
    assert "Give the papers" in empty
    assert listed.startswith("2 liked, 1 disliked:") and "(from Slack)" in listed
    assert "Forgot your verdict on 2411.17705." in unliked
    assert "No verdict on 2411.17706" in unliked
    assert "config file" in channel and "`like`" in channel  # the lab is the file's
    assert "1 liked, 0 disliked" in lab and "(from the config file)" in lab
    assert "/papers like 2411.18179" in help_
    ada = store.subscribers.by_slack(user=ADA)
    assert ada is not None
    assert {f.key: f.verdict for f in store.feedback.of(ada.id)} == {
        "2411.17703": "like",
        "2411.17758": "dislike",
    }


def test_likes_of_a_config_subscription_without_any_point_at_the_config_file(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    config = make_config(
        slack, database_url, [{"name": "lab", "slack_channel": "#robot-learning", "rules": ["x"]}]
    )
    store.subscribers.sync_config(config.declared_subscribers(), now=NOW)
    built = wired_slack_app(config, store, clock=lambda: NOW)
    assert built is not None

    async def scenario() -> str:
        async with serving(create_app(routes=slack_routes(built))) as client:
            s = Session(client, slack, built.responder)
            said = await s.say(f"likes <#{ROBOTS}|robot-learning>", user=ADA)
            return str(said["text"])

    said = asyncio.run(scenario())
    assert "No papers liked or disliked yet" in said and "config file" in said, said
    assert "/papers like" not in said  # refused for a config file's subscription


def test_email_from_slack_without_an_email_section_says_nothing_can_be_mailed(
    slack: SlackStandIn, database_url: str
) -> None:
    # With the pages but no [email], the confirmation was never queued, yet the answer said
    # one "went to the address today already", and the address was kept.
    config = mailing_config(slack, database_url, 0, email=False)
    store = Store.open(config.database_url())
    front = wired_front(config, store, build_channels(config), clock=lambda: NOW)
    built = front.slack
    assert built is not None

    async def say(texts: list[str]) -> list[str]:
        async with serving(create_app(routes=slack_routes(built))) as client:
            s = Session(client, slack, built.responder)
            return [(await s.say(text))["text"] for text in texts]

    _, answer = asyncio.run(say(["subscribe robot", "email ada@home.example"]))
    row = store.subscribers.get("slack.ada")
    store.close()
    assert answer.startswith(":warning:") and "[email]" in answer, answer
    assert "today already" not in answer
    assert row is not None and row.email != "ada@home.example"
