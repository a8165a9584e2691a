"""The Slack stand-in, driven by the real slack_sdk clients (sync, async and webhook)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.demo.slack_limits import mrkdwn_problems
from bot.demo.slack_standin import SlackStandIn


@pytest.fixture
def slack() -> Iterator[SlackStandIn]:
    with SlackStandIn() as standin:
        standin.add_channel("C001", "papers")
        standin.add_channel("C002", "elsewhere", member=False)
        standin.add_user(
            "U001", "ada", email="ada@lab.example", real_name="Ada L", tz="Europe/London"
        )
        yield standin


def aclient(slack: SlackStandIn, token: str | None = None, **kwargs: Any) -> AsyncWebClient:
    return AsyncWebClient(token=token or slack.token, base_url=slack.base_url, **kwargs)


def client(slack: SlackStandIn, token: str | None = None) -> WebClient:
    return WebClient(token=token or slack.token, base_url=slack.base_url)


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def error_of(call: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        call()
    return str(caught.value.response["error"])


def test_posts_to_a_channel_by_id_and_by_name_and_replies_in_a_thread(
    slack: SlackStandIn,
) -> None:
    async def scenario() -> tuple[Any, Any, Any, Any]:
        web = aclient(slack)
        auth = await web.auth_test()
        by_id = await web.chat_postMessage(
            channel="C001", text="two papers", blocks=[section("*two* papers")], unfurl_links=False
        )
        by_name = await web.chat_postMessage(channel="#papers", text="again")
        reply = await web.chat_postMessage(
            channel="papers", text="in thread", thread_ts=by_id["ts"]
        )
        return auth, by_id, by_name, reply

    auth, by_id, by_name, reply = asyncio.run(scenario())
    assert auth["user_id"] == "UBOT" and auth["team"]
    assert by_id["channel"] == by_name["channel"] == reply["channel"] == "C001"
    assert by_id["ts"] < by_name["ts"] < reply["ts"]
    assert by_id["ts"].startswith("17640") and len(by_id["ts"].split(".")[1]) == 6
    assert by_id["message"]["blocks"][0]["text"]["text"] == "*two* papers"

    posted = slack.messages("C001")
    assert [m["text"] for m in posted] == ["two papers", "again", "in thread"]
    assert posted[0]["blocks"] == [section("*two* papers")]  # JSON kept as parsed
    assert posted[0]["unfurl_links"] is False and posted[1]["unfurl_links"] is None
    assert slack.thread(by_id["ts"]) == [posted[2]]
    assert slack.messages("#papers") == posted and slack.messages("C002") == []
    assert slack.violations == []

    first = next(r for r in slack.requests if r.method == "chat.postMessage")
    assert first.args["blocks"] == [section("*two* papers")]
    assert first.headers["Authorization"] == f"Bearer {slack.token}"
    assert first.status == 200 and isinstance(first.response, dict) and first.response["ok"]


def test_a_thread_needs_a_top_level_message_of_the_same_channel(slack: SlackStandIn) -> None:
    web = client(slack)
    slack.add_channel("C003", "other")
    top = web.chat_postMessage(channel="C001", text="top")
    reply = web.chat_postMessage(channel="C001", text="reply", thread_ts=top["ts"])
    assert error_of(
        lambda: web.chat_postMessage(channel="C003", text="x", thread_ts=top["ts"])
    ) == ("thread_not_found")
    assert error_of(
        lambda: web.chat_postMessage(channel="C001", text="x", thread_ts=reply["ts"])
    ) == ("thread_not_found")
    assert error_of(lambda: web.chat_postMessage(channel="C001", text="x", thread_ts="1.2")) == (
        "thread_not_found"
    )


def test_a_dm_by_user_id_opens_the_conversation(slack: SlackStandIn) -> None:
    web = client(slack)  # the sync client sends form fields, not JSON, for most methods
    sent = web.chat_postMessage(channel="U001", text="hello ada")
    opened = web.conversations_open(users="U001")
    info = web.conversations_info(channel=sent["channel"])
    assert sent["channel"] == opened["channel"]["id"] == "DU001"
    assert info["channel"]["is_member"] and info["channel"]["is_private"]
    assert slack.messages("DU001") == [
        {
            "channel": "DU001",
            "ts": sent["ts"],
            "thread_ts": None,
            "text": "hello ada",
            "blocks": None,
            "unfurl_links": None,
            "unfurl_media": None,
            "via": "chat.postMessage",
            "user": "U001",
        }
    ]
    assert error_of(lambda: web.chat_postMessage(channel="U404", text="x")) == "channel_not_found"
    assert error_of(lambda: web.conversations_open(users="U404")) == "user_not_found"


def test_api_errors_are_the_ones_slack_answers(slack: SlackStandIn) -> None:
    async def errors() -> list[str]:
        found = []
        for web, channel in [
            (aclient(slack), "C002"),
            (aclient(slack), "C404"),
            (aclient(slack), "#nowhere"),
            (aclient(slack, token="xoxb-wrong"), "C001"),
            (AsyncWebClient(base_url=slack.base_url), "C001"),
        ]:
            try:
                await web.chat_postMessage(channel=channel, text="hi")
            except SlackApiError as error:
                found.append(error.response["error"])
        try:
            with pytest.warns(UserWarning, match="top-level `text`"):  # slack_sdk's own warning
                await aclient(slack).chat_postMessage(channel="C001")
        except SlackApiError as error:
            found.append(error.response["error"])
        try:
            await aclient(slack).api_call("chat.fly")
        except SlackApiError as error:
            found.append(error.response["error"])
        return found

    assert asyncio.run(errors()) == [
        "not_in_channel",
        "channel_not_found",
        "channel_not_found",
        "invalid_auth",
        "not_authed",
        "no_text",
        "unknown_method",
    ]
    assert slack.messages() == []
    assert all(r.status == 200 for r in slack.requests)


def test_a_429_is_waited_out_by_slack_sdks_retry_handler(slack: SlackStandIn) -> None:
    slack.fail_next("chat.postMessage", retry_after=1)

    async def post() -> Any:
        web = aclient(slack, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)])
        return await web.chat_postMessage(channel="C001", text="patient")

    sent = asyncio.run(post())
    first, second = slack.requests
    assert (first.status, second.status) == (429, 200)
    assert first.response == {"ok": False, "error": "ratelimited"}
    assert second.at - first.at >= 1.0
    assert sent["ok"] and [m["text"] for m in slack.messages()] == ["patient"]


def test_scripted_faults_are_consumed_in_order(slack: SlackStandIn) -> None:
    slack.fail_next("chat.postMessage", error="channel_not_found")
    slack.fail_next("chat.postMessage", status=503, times=2)
    web = client(slack)
    assert error_of(lambda: web.chat_postMessage(channel="C001", text="a")) == "channel_not_found"
    with pytest.raises(SlackApiError) as caught:
        web.chat_postMessage(channel="C001", text="b")
    assert caught.value.response.status_code == 503
    with pytest.raises(SlackApiError):
        web.chat_postMessage(channel="C001", text="c")
    web.chat_postMessage(channel="C001", text="d")
    assert [r.status for r in slack.requests] == [200, 503, 503, 200]
    assert [m["text"] for m in slack.messages()] == ["d"]
    with pytest.raises(ValueError):
        slack.fail_next("chat.postMessage")


def test_more_than_50_blocks_are_refused_and_recorded(slack: SlackStandIn) -> None:
    web = client(slack)
    blocks = [section(f"paper {n}") for n in range(51)]
    assert error_of(lambda: web.chat_postMessage(channel="C001", text="x", blocks=blocks)) == (
        "invalid_blocks"
    )
    assert slack.messages() == []
    assert len(slack.violations) == 1 and "51 blocks" in slack.violations[0]
    web.chat_postMessage(channel="C001", text="x", blocks=blocks[:50])
    assert len(slack.messages()) == 1 and len(slack.violations) == 1


@pytest.mark.parametrize(
    ("block", "what"),
    [
        ({"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}, "header text"),
        ({"type": "header", "text": {"type": "mrkdwn", "text": "*h*"}}, "plain_text"),
        (section("s" * 3001), "section text"),
        ({"type": "section", "text": "bare"}, "text object"),
        (
            {"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]},
            "section field 0",
        ),
        (
            {"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11},
            "11 elements",
        ),
        ({"type": "sectionn", "text": {"type": "mrkdwn", "text": "typo"}}, "'sectionn'"),
        ({"type": "section"}, "text or fields"),
        ({"type": "divider", "colour": "red"}, "unknown fields"),
    ],
)
def test_blocks_slack_refuses(slack: SlackStandIn, block: dict[str, Any], what: str) -> None:
    web = client(slack)
    assert error_of(lambda: web.chat_postMessage(channel="C001", text="t", blocks=[block])) == (
        "invalid_blocks"
    )
    assert slack.messages() == []
    assert slack.violations and what in slack.violations[0], slack.violations


def test_too_much_text_is_msg_too_long(slack: SlackStandIn) -> None:
    web = client(slack)
    blocks = [section("x" * 2900) for _ in range(5)]  # each fine, 14,500 together
    assert error_of(lambda: web.chat_postMessage(channel="C001", text="t", blocks=blocks)) == (
        "msg_too_long"
    )
    assert error_of(lambda: web.chat_postMessage(channel="C001", text="x" * 40_001)) == (
        "msg_too_long"
    )
    assert len(slack.violations) == 2 and all("msg_too_long" in v for v in slack.violations)
    web.chat_postMessage(channel="C001", text="x" * 40_000)
    web.chat_postMessage(channel="C001", text="t", blocks=blocks[:4])
    assert len(slack.messages()) == 2 and len(slack.violations) == 2


def test_what_slack_lets_through_with_a_warning_is_recorded(slack: SlackStandIn) -> None:
    web = client(slack)
    with pytest.warns(UserWarning, match="top-level `text`"):  # slack_sdk warns too
        web.chat_postMessage(channel="C001", blocks=[section("no fallback")])
    web.chat_postMessage(channel="C001", text="R&D <3", blocks=[section("a < b & c")])
    fine = (
        "<https://arxiv.org/abs/2411.1?a=1&b=2|Q&amp;A &lt;3> by <@U001> in <#C001> <!here>"
        " &gt; done"
    )
    web.chat_postMessage(channel="C001", text=fine, blocks=[section(fine)])
    assert len(slack.messages()) == 3
    assert len(slack.violations) == 5, slack.violations
    assert "fallback" in slack.violations[0]
    assert all("unescaped mrkdwn" in v for v in slack.violations[1:])


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("plain", True),
        ("&amp; &lt; &gt;", True),
        ("<https://x.org/a?b=1&c=2>", True),
        ("<mailto:a@b.org|mail me>", True),
        ("<!subteam^S123|@team> <!date^1392734382^{date}|Feb 18>", True),
        ("> a quote", True),
        ("<https://x.org|A & B>", False),
        ("1 < 2", False),
        ("<script>", False),
        ("fish & chips", False),
        ("&amp &nbsp;", False),
    ],
)
def test_mrkdwn_escaping(text: str, ok: bool) -> None:
    assert (mrkdwn_problems(text) == []) is ok


def test_users_info(slack: SlackStandIn) -> None:
    async def look() -> tuple[Any, str]:
        web = aclient(slack)
        found = await web.users_info(user="U001")
        try:
            await web.users_info(user="U404")
        except SlackApiError as error:
            return found, error.response["error"]
        return found, ""

    found, missing = asyncio.run(look())
    user = found["user"]
    assert (user["id"], user["name"], user["tz"], user["is_bot"]) == (
        "U001",
        "ada",
        "Europe/London",
        False,
    )
    assert user["profile"]["email"] == "ada@lab.example"
    assert user["profile"]["real_name"] == "Ada L"
    assert missing == "user_not_found"
    assert slack.requests[0].args == {"user": "U001"}  # a GET: the query string


def test_apps_connections_open_needs_the_app_token(slack: SlackStandIn) -> None:
    async def open_with(token: str) -> str:
        try:
            answer = await AsyncWebClient(base_url=slack.base_url).apps_connections_open(
                app_token=token
            )
        except SlackApiError as error:
            return str(error.response["error"])
        return str(answer["url"])

    assert asyncio.run(open_with(slack.app_token)) == "standin_socket_url_not_set"
    slack.socket_url = "ws://127.0.0.1:9/link"
    assert asyncio.run(open_with(slack.app_token)) == "ws://127.0.0.1:9/link"
    assert asyncio.run(open_with(slack.token)) == "not_allowed_token_type"
    assert asyncio.run(open_with("xapp-wrong")) == "invalid_auth"
    assert error_of(lambda: client(slack, token=slack.app_token).auth_test()) == (
        "not_allowed_token_type"
    )


def test_webhooks_and_response_urls(slack: SlackStandIn, tmp_path: Path) -> None:
    url = slack.add_webhook("digest", "C001")
    assert url == slack.webhook_url("digest")

    async def send() -> list[tuple[int, str]]:
        answers = []
        posts: list[tuple[str, dict[str, Any]]] = [
            (url, {"text": "via webhook", "blocks": [section("*hi*")]}),
            (url, {"text": "bad", "blocks": [section("s" * 3001)]}),
            (url, {}),
            (slack.webhook_url("gone"), {"text": "lost"}),
            (slack.response_url("r1"), {"text": "only you", "response_type": "ephemeral"}),
        ]
        for target, payload in posts:
            answer = await AsyncWebhookClient(target).send_dict(payload)
            answers.append((answer.status_code, answer.body))
        return answers

    assert asyncio.run(send()) == [
        (200, "ok"),
        (400, "invalid_blocks"),
        (400, "no_text"),
        (404, "no_service"),
        (200, "ok"),
    ]
    [posted] = slack.messages()
    assert (posted["channel"], posted["text"], posted["via"]) == (
        "C001",
        "via webhook",
        "webhook:digest",
    )
    assert slack.responses == [
        {"id": "r1", "text": "only you", "response_type": "ephemeral", "blocks": None}
    ]
    assert [r.method for r in slack.requests] == ["webhook:digest"] * 3 + [
        "webhook:gone",
        "response:r1",
    ]
    assert len(slack.violations) == 1 and "webhook digest" in slack.violations[0]

    slack.fail_next("webhook:digest", retry_after=1)
    answer = asyncio.run(AsyncWebhookClient(url).send(text="later"))
    assert (answer.status_code, answer.headers["Retry-After"]) == (429, "1")

    out = tmp_path / "slack.json"
    slack.save_json(out)
    saved = json.loads(out.read_text())
    assert saved["messages"][0]["text"] == "via webhook"
    assert saved["responses"][0]["text"] == "only you"
    assert saved["channels"]["C001"] == "papers"
    assert len(saved["violations"]) == 1
