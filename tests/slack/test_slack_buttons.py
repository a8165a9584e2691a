"""The 👍 / 👎 buttons of a Slack digest: posted on each paper of the thread (to the local
Slack stand-in, through the real slack-sdk), pressed as Slack sends a press (`POST
/slack/actions` on the real web app under uvicorn, its form field `payload` signed exactly
as Slack signs it), recorded for the digest's subscriber (a channel subscriber: the
channel's), answered at the press's `response_url` with an ephemeral note and Undo.

Forged and altered values, another subscriber's, unsigned, stale and replayed requests
change nothing; hostile payloads (not JSON, nested deep, huge, wrong types) get a 4xx,
never a 500, and `parse_actions` never raises on any string (Hypothesis)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.config import slack_config
from support.paths import ROOT
from support.slack import SIGNING_SECRET, signed, wired_slack_app

from bot.demo import bundled_papers, free_port
from bot.demo.slack_standin import SlackStandIn
from bot.pipeline import DeliveryRequest, build_channels, deliver, wire
from bot.render.slack import DISLIKE_ACTION, LIKE_ACTION, UNDO_ACTION
from bot.slack.actions import parse_actions
from bot.slack.app import SlackApp, slack_routes
from bot.store import Store
from bot.web.app import create_app, make_server

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 28, 15, 0, tzinfo=UTC)
ADA, ROBOTS, QUIET = "U07ADA123", "C07ROBOTS", "C07QUIET1"
SUBSCRIBERS = [
    {"name": "robots", "slack_channel": ROBOTS, "rules": ["robot cat:cs.RO"]},
    {"name": "quiet", "slack_channel": QUIET, "rules": ["robot cat:cs.RO"]},
]


@pytest.fixture
def slack() -> Iterator[SlackStandIn]:
    with SlackStandIn() as standin:
        standin.add_channel(ROBOTS, "robot-learning")
        standin.add_channel(QUIET, "quiet")
        standin.add_user(ADA, "ada", email="ada@lab.example", tz="Europe/London")
        yield standin
        assert standin.violations == []


class World:
    """The stand-in with two channels' digests posted, the store, the Slack app."""

    def __init__(self, slack: SlackStandIn, store: Store, app: SlackApp) -> None:
        self.slack, self.store, self.app = slack, store, app
        self.client: httpx.AsyncClient | None = None

    def subscriber_id(self, name: str) -> int:
        record = self.store.subscribers.get(name)
        assert record is not None
        return int(record.id)

    def buttons(self, channel: str) -> list[dict[str, Any]]:
        """The 👍 / 👎 buttons of the channel's digest thread, paper by paper."""
        (top,) = [m for m in self.slack.messages(channel) if not m["thread_ts"]]
        found = []
        for message in self.slack.thread(top["ts"]):
            for block in message["blocks"]:
                if block["type"] == "actions":
                    found.append({"message": message, "block": block})
        return found

    async def press(
        self,
        message: dict[str, Any],
        block: dict[str, Any],
        element: dict[str, Any],
        *,
        response: str = "r1",
        channel: str = ROBOTS,
        headers: dict[str, str] | None = None,
        body: str | None = None,
    ) -> httpx.Response:
        """Press a button, as Slack posts the press."""
        payload = {
            "type": "block_actions",
            "user": {"id": ADA, "username": "ada", "name": "ada", "team_id": "T0STANDIN"},
            "api_app_id": "A0PAPERBELL",
            "token": "gIkuvaNzQIHg97ATvDxqgjtO",
            "container": {
                "type": "message",
                "message_ts": message.get("ts", ""),
                "channel_id": channel,
                "is_ephemeral": False,
            },
            "trigger_id": f"13345224609.738474920.{time.monotonic_ns():x}",
            "team": {"id": "T0STANDIN", "domain": "lab"},
            "channel": {"id": channel, "name": "robot-learning"},
            "message": {k: message.get(k) for k in ("type", "text", "ts", "blocks")},
            "response_url": f"{self.slack.root_url}/response/{response}",
            "actions": [
                {
                    "action_id": element["action_id"],
                    "block_id": block.get("block_id", "x"),
                    "text": element.get("text"),
                    "value": element.get("value"),
                    "type": "button",
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
        body = body if body is not None else urlencode({"payload": json.dumps(payload)})
        assert self.client is not None
        answer = await self.client.post(
            "/slack/actions", content=body, headers=headers if headers is not None else signed(body)
        )
        if self.app.buttons is not None:
            await self.app.buttons.wait()
        return answer


@asynccontextmanager
async def world(slack: SlackStandIn, database_url: str) -> AsyncIterator[World]:
    config = slack_config(slack, database_url, SUBSCRIBERS, signing_secret=SIGNING_SECRET, web=True)
    with Store.open(config.database_url()) as store:
        store.papers.upsert(bundled_papers(), now=NOW)
        channels = build_channels(config)
        reports = await deliver(
            wire(config, store, channels), DeliveryRequest(since=date(2024, 11, 28)), now=NOW
        )
        assert {r.subscriber: r.status for r in reports} == {"robots": "sent", "quiet": "sent"}
        app = wired_slack_app(config, store, channels, clock=lambda: NOW)
        assert app is not None and app.buttons is not None
        port = free_port()
        server = make_server(create_app(routes=slack_routes(app)), host="127.0.0.1", port=port)
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                made = World(slack, store, app)
                made.client = client
                yield made
        finally:
            server.should_exit = True
            await task


def element(found: dict[str, Any], action: str) -> dict[str, Any]:
    return next(e for e in found["block"]["elements"] if e["action_id"] == action)


def test_every_paper_in_the_thread_has_its_buttons(slack: SlackStandIn, database_url: str) -> None:
    async def scenario() -> None:
        async with world(slack, database_url) as w:
            (top,) = [m for m in slack.messages(ROBOTS) if not m["thread_ts"]]
            thread = slack.thread(top["ts"])
            titles = sum(
                1
                for m in thread
                for b in m["blocks"]
                if b["type"] == "section"
                and b["text"]["text"].startswith("*")
                and ". <" in b["text"]["text"]
            )
            buttons = w.buttons(ROBOTS)
            assert titles > 10 and len(buttons) == titles
            for found in buttons:
                like, dislike = found["block"]["elements"]
                assert (like["action_id"], dislike["action_id"]) == (LIKE_ACTION, DISLIKE_ACTION)
                assert like["text"]["text"] == "👍" and dislike["text"]["text"] == "👎"
                assert like["value"] != dislike["value"] and len(like["value"]) < 200
            assert all(len(m["blocks"]) <= 50 for m in thread)

    asyncio.run(scenario())


def test_a_press_records_the_channels_verdict_once_and_undo_takes_it_back(
    slack: SlackStandIn, database_url: str
) -> None:
    async def scenario() -> None:
        async with world(slack, database_url) as w:
            first = w.buttons(ROBOTS)[0]
            like = element(first, LIKE_ACTION)
            answer = await w.press(first["message"], first["block"], like)
            assert answer.status_code == 200 and answer.text == ""
            robots = w.subscriber_id("robots")
            (given,) = w.store.feedback.of(robots)
            assert (given.verdict, given.via) == ("like", "slack")
            paper = w.store.papers.by_id([given.key])[given.key]
            assert given.text == f"{paper.title}\n\n{paper.abstract}"
            assert w.store.feedback.of(w.subscriber_id("quiet")) == []
            said = slack.responses[-1]
            assert said["response_type"] == "ephemeral" and said["replace_original"] is False
            assert "Noted: you like" in said["text"]
            (undo,) = said["blocks"][1]["elements"]
            assert undo["action_id"] == UNDO_ACTION

            # Pressed again: nothing changes, not even when.
            await w.press(first["message"], first["block"], like, response="r2")
            assert w.store.feedback.of(robots) == [given]

            # Undo, from the ephemeral answer.
            await w.press({"ts": ""}, said["blocks"][1], undo, response="r3")
            assert w.store.feedback.of(robots) == []
            assert "Taken back" in slack.responses[-1]["text"]
            assert slack.responses[-1]["replace_original"] is True

            # 👎 on another paper.
            second = w.buttons(ROBOTS)[1]
            await w.press(second["message"], second["block"], element(second, DISLIKE_ACTION))
            assert [f.verdict for f in w.store.feedback.of(robots)] == ["dislike"]
            (disliked,) = w.store.feedback.of(robots)

            # Then 👍 on it, and Undo: the 👎 stands again.
            await w.press(second["message"], second["block"], element(second, LIKE_ACTION))
            assert [f.verdict for f in w.store.feedback.of(robots)] == ["like"]
            (undo,) = slack.responses[-1]["blocks"][1]["elements"]
            await w.press({"ts": ""}, slack.responses[-1]["blocks"][1], undo, response="r4")
            assert w.store.feedback.of(robots) == [disliked]
            assert "Taken back: your :-1: on" in slack.responses[-1]["text"]

    asyncio.run(scenario())


def _other_subscriber(token: str, subscriber_id: int) -> str:
    body, _, rest = token.partition(".")
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
    _, tail = raw.split("\n", 1)
    changed = base64.urlsafe_b64encode(f"{subscriber_id}\n{tail}".encode()).decode().rstrip("=")
    return f"{changed}.{rest}"


@pytest.mark.parametrize("change", ["flip", "cut", "other-subscriber", "swapped", "garbage"])
def test_forged_button_values_change_nothing(
    slack: SlackStandIn, database_url: str, change: str
) -> None:
    async def scenario() -> None:
        async with world(slack, database_url) as w:
            first = w.buttons(ROBOTS)[0]
            like = dict(element(first, LIKE_ACTION))
            value = like["value"]
            if change == "flip":
                like["value"] = value[:-2] + ("AA" if not value.endswith("AA") else "BB")
            elif change == "cut":
                like["value"] = value[: len(value) // 2]
            elif change == "other-subscriber":  # robots' button made to name quiet
                like["value"] = _other_subscriber(value, w.subscriber_id("quiet"))
            elif change == "swapped":  # a 👎 token under the 👍 button
                like["value"] = element(first, DISLIKE_ACTION)["value"]
            else:
                like["value"] = "\x00" * 300
            answer = await w.press(first["message"], first["block"], like)
            assert answer.status_code == 200
            assert w.store.feedback.of(w.subscriber_id("robots")) == []
            assert w.store.feedback.of(w.subscriber_id("quiet")) == []
            assert "nothing was recorded" in slack.responses[-1]["text"]

    asyncio.run(scenario())


def test_unsigned_stale_replayed_and_hostile_requests_are_refused(
    slack: SlackStandIn, database_url: str
) -> None:
    async def scenario() -> list[int]:
        async with world(slack, database_url) as w:
            first = w.buttons(ROBOTS)[0]
            like = element(first, LIKE_ACTION)
            statuses = []
            nothing = {"type": "block_actions", "user": {"id": ADA}, "actions": []}
            body = urlencode({"payload": json.dumps(nothing)})
            statuses.append(
                (
                    await w.press(
                        first["message"],
                        first["block"],
                        like,
                        headers={"Content-Type": "application/x-www-form-urlencoded"},
                    )
                ).status_code
            )
            stale = signed("x", at=time.time() - 600)
            statuses.append(
                (await w.press(first["message"], first["block"], like, headers=stale)).status_code
            )
            wrong = signed("x", secret="not-the-signing-secret")
            statuses.append(
                (await w.press(first["message"], first["block"], like, headers=wrong)).status_code
            )
            headers = signed(body)
            statuses.append((await w.press({}, {}, like, body=body, headers=headers)).status_code)
            statuses.append((await w.press({}, {}, like, body=body, headers=headers)).status_code)
            hostile = [
                "payload=" + "%5B" * 100_000,  # nested 100,000 deep
                "payload=%00%00",
                "payload=" + json.dumps([1, 2]),
                "payload=" + json.dumps({"type": "block_actions", "user": {"id": 7}}),
                "payload="
                + json.dumps({"type": "block_actions", "user": {"id": "U1"}, "actions": "no"}),
                "payload=" + "x" * 2_000_000,  # over the size cap
                "nothing=here",
            ]
            for hostile_body in hostile:
                answer = await w.press(
                    {}, {}, like, body=hostile_body, headers=signed(hostile_body)
                )
                statuses.append(answer.status_code)
            assert w.store.feedback.of(w.subscriber_id("robots")) == []
            return statuses

    assert asyncio.run(scenario()) == [401, 401, 401, 200, 401, 400, 400, 400, 400, 400, 413, 400]


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=2000),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
            lambda inner: (
                st.lists(inner, max_size=5)
                | st.dictionaries(
                    st.sampled_from(
                        ["type", "user", "id", "actions", "action_id", "value", "response_url"]
                    )
                    | st.text(max_size=5),
                    inner,
                    max_size=6,
                )
            ),
            max_leaves=30,
        ).map(json.dumps),
    )
)
def test_parse_actions_never_raises(payload: str) -> None:
    found = parse_actions(payload)
    assert isinstance(found, (str, list))
    if isinstance(found, list):
        assert all(p.action in (LIKE_ACTION, DISLIKE_ACTION, UNDO_ACTION) for p in found)


def test_a_real_press_is_read() -> None:
    payload = json.dumps(
        {
            "type": "block_actions",
            "user": {"id": ADA},
            "response_url": "https://hooks.slack.com/actions/T0/1/abc",
            "actions": [
                {"action_id": LIKE_ACTION, "value": "v1"},
                {"action_id": "someone_elses", "value": "v2"},
                {"action_id": DISLIKE_ACTION, "value": 7},
            ],
        }
    )
    (press,) = parse_actions(payload)  # type: ignore[misc]
    assert (press.action, press.value, press.user_id) == (LIKE_ACTION, "v1", ADA)
    assert press.response_url == "https://hooks.slack.com/actions/T0/1/abc"
    bad_url = json.loads(payload)
    bad_url["response_url"] = "javascript:alert(1)"
    (press,) = parse_actions(json.dumps(bad_url))  # type: ignore[misc]
    assert press.response_url is None


def test_the_manifest_sends_button_presses_to_the_actions_endpoint() -> None:
    import yaml

    manifest = yaml.safe_load((ROOT / "slack-app-manifest.yml").read_text())
    interactivity = manifest["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    assert interactivity["request_url"].endswith("/slack/actions")
