"""A stop cut off at its deadline while Socket Mode closes: the slash commands' late replies
end with it, before the daemon hands its claimed digests back. Socket Mode is slack-sdk's
client over a real WebSocket to a stand-in of Slack's endpoint; Slack is the local stand-in."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest
from support.config import slack_config
from support.slack import SocketModeLink, wired_front, wired_slack_app

from bot.channels.outbox import worker_name
from bot.core.models import Paper
from bot.demo.slack_standin import SlackStandIn
from bot.slack.app import WORKING, run_socket_mode
from bot.store import Store

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
ADA, ROBOTS = "U07ADA123", "C07ROBOTS"
SLACK_SLOW = 3.0  # seconds Slack takes to answer the digest's first message
CLOSE_SLOW = 10.0  # seconds Slack takes to answer the WebSocket's close frame
DEADLINE = 0.5  # seconds left of the stop's grace


def test_socket_mode_cut_off_while_slack_is_slow_to_close_leaves_nothing_running(
    store: Store, database_url: str
) -> None:
    """The stop's deadline came while Socket Mode waited for Slack to answer its close
    frame: slack-sdk's tasks ran on, and its connection was left open. It is dropped at
    once instead: nothing of it is left running."""
    with SlackStandIn() as slack, SocketModeLink(close_delay=CLOSE_SLOW) as link:
        slack.socket_url = link.url
        config = slack_config(slack, database_url, [], socket_mode=True)
        built = wired_slack_app(config, store, clock=lambda: NOW)
        assert built is not None

        async def scenario() -> tuple[float, list[str]]:
            stop = asyncio.Event()
            socket = asyncio.create_task(
                run_socket_mode(
                    built.responder, app_token=slack.app_token, api_url=slack.base_url, stop=stop
                )
            )
            assert await asyncio.to_thread(link.connected.wait, 10), "never connected"
            stop.set()
            stopping = time.monotonic()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(socket, DEADLINE)
            took = time.monotonic() - stopping
            await asyncio.sleep(0.1)  # what was cancelled ends
            left = [
                repr(t.get_coro()) for t in asyncio.all_tasks() if t is not asyncio.current_task()
            ]
            return took, left

        took, left = asyncio.run(scenario())
    assert took < DEADLINE + 1, f"the stop took {took:.1f} s"
    assert left == [], left


def test_late_replies_end_when_the_stop_deadline_cuts_socket_modes_close(
    store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Ada's `/papers digest` came over Socket Mode; its late reply is sending her digest
    when the daemon stops. Slack is slow to close the WebSocket, and the stop's deadline
    comes first: the late reply kept sending after the daemon handed its claimed digests
    back (another process could take and send them too). It ends with the deadline."""
    store.papers.upsert(full_feed_papers, now=NOW)
    store.subscribers.add("slack.ada", email=None, rules=["learning"], now=NOW, slack_user=ADA)
    with SlackStandIn() as slack, SocketModeLink(close_delay=CLOSE_SLOW) as link:
        slack.add_channel(ROBOTS, "robot-learning")
        slack.add_user(ADA, "ada", email="ada@lab.example")
        slack.socket_url = link.url
        config = slack_config(slack, database_url, [], socket_mode=True)
        front = wired_front(config, store, clock=lambda: NOW)
        fields = {
            "team_id": "T0STANDIN",
            "channel_id": ROBOTS,
            "user_id": ADA,
            "user_name": "ada",
            "command": "/papers",
            "text": "digest",
            "response_url": slack.response_url("r1"),
        }
        slack.answer_late("chat.postMessage", delay=SLACK_SLOW)

        def posting() -> bool:
            return any(r.method == "chat.postMessage" for r in slack.requests)

        async def scenario() -> tuple[bool, int, list[str]]:
            front.start_socket_mode()
            assert await asyncio.to_thread(link.connected.wait, 10), "never connected"
            await asyncio.to_thread(link.send, fields)
            while not posting():  # the digest claimed, and being sent
                await asyncio.sleep(0.05)
            stopping = time.monotonic()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(front.replies(), DEADLINE)
            cut_off = time.monotonic() - stopping < DEADLINE + 1
            released = store.outbox.release(worker_name())  # as the daemon does next
            handed_back = len(slack.requests)
            await asyncio.sleep(SLACK_SLOW + 1)  # the post answered, had the reply gone on
            after = [r.method for r in slack.requests[handed_back:]]
            await front.close(0)
            return cut_off, released, after

        cut_off, released, after = asyncio.run(scenario())
        acks = [ack.get("payload") for ack in link.acks]
    assert acks == [WORKING.to_slack()]
    assert cut_off, "the stop outlasted its deadline"
    assert released == 1  # Ada's digest, claimed by the late reply
    assert after == [], "sent after the claimed digests were handed back"
    assert len(slack.messages()) == 1 and slack.responses == []  # the post cut off
