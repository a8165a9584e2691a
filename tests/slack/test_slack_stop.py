"""A stop cut off at its deadline while Socket Mode closes: nothing of it runs on. Socket
Mode is slack-sdk's client over a real WebSocket to a stand-in of Slack's endpoint; Slack
is the local stand-in."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest
from support.config import slack_config
from support.slack import SocketModeLink, wired_slack_app

from bot.demo.slack_standin import SlackStandIn
from bot.slack.app import run_socket_mode
from bot.store import Store

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
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
