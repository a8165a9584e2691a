"""Requests as Slack sends them to the app, signed with the app's signing secret; the app
set up as `paperbell run` sets it up; Slack's Socket Mode endpoint for an app in another
process (`SocketModeLink`)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from aiohttp import WSMsgType, web

from bot.channels import Channel
from bot.cli.wiring import Front
from bot.config import Config
from bot.pipeline import build_channels, wire
from bot.slack.app import SlackApp
from bot.store import Store

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def signed(
    body: bytes | str, *, secret: str = SIGNING_SECRET, at: float | None = None
) -> dict[str, str]:
    """The headers of a slash command's POST: Slack's v0 signature over the raw body,
    HMAC-SHA256 of `v0:{timestamp}:{body}` with the signing secret, made now or `at`."""
    raw = body.encode() if isinstance(body, str) else body
    stamp = str(int(at if at is not None else time.time()))
    digest = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + raw, hashlib.sha256)
    return {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest.hexdigest()}",
        "Content-Type": "application/x-www-form-urlencoded",
    }


def wired_front(
    config: Config,
    store: Store,
    channels: Mapping[str, Channel] | None = None,
    *,
    clock: Callable[[], datetime],
) -> Front:
    """The Slack app and the pages as `paperbell run` sets them up (`bot.cli.wiring.Front`),
    over parts wired from `config` with `channels` (default: the config's, with no store):
    the config's subscribers synced, one `Manager` for both when [web] signs links."""
    parts = wire(config, store, build_channels(config) if channels is None else channels)
    return Front(config, parts, clock=clock, stop=asyncio.Event())


def wired_slack_app(
    config: Config,
    store: Store,
    channels: Mapping[str, Channel] | None = None,
    *,
    clock: Callable[[], datetime],
) -> SlackApp | None:
    """The Slack app as `paperbell run` sets it up (`wired_front`)."""
    return wired_front(config, store, channels, clock=clock).slack


class SocketModeLink:
    """A stand-in of Slack's Socket Mode endpoint (a WebSocket, in a thread of its own) for
    an app in another process: give `url` to the Slack stand-in (`socket_url`), `send` a
    slash command's fields once `connected` is set, read the app's `acks`. `close_delay`:
    seconds it takes to answer the app's close frame (Slack far away, or slow), so that the
    app's close takes that long; until the stand-in ends, at most."""

    def __init__(self, *, close_delay: float = 0.0) -> None:
        self.acks: list[dict[str, Any]] = []
        self.close_delay = close_delay
        self.connected = threading.Event()
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._socket: web.WebSocketResponse | None = None
        self._runner: web.AppRunner | None = None
        self._sent = 0
        self._ending: asyncio.Event | None = None  # set as the stand-in ends (its loop's)

    def __enter__(self) -> SocketModeLink:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ending is not None:
            self._loop.call_soon_threadsafe(self._ending.set)
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def send(self, fields: dict[str, str]) -> str:
        """Send a slash command (its form's `fields`) to the connected app; its envelope id."""
        envelope = f"env-{self._sent}"
        self._sent += 1
        message = {
            "envelope_id": envelope,
            "type": "slash_commands",
            "accepts_response_payload": True,
            "payload": fields,
        }
        assert self._socket is not None, "no app connected"
        asyncio.run_coroutine_threadsafe(self._socket.send_json(message), self._loop).result(5)
        return envelope

    async def _serve(self) -> None:
        self._ending = asyncio.Event()
        app = web.Application()
        app.router.add_get("/link", self._connect)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"ws://{host}:{port}/link"

    async def _connect(self, request: web.Request) -> web.WebSocketResponse:
        # The close frame answered here, not by aiohttp at once, when it is to be slow.
        socket = web.WebSocketResponse(autoclose=not self.close_delay)
        await socket.prepare(request)
        await socket.send_json({"type": "hello", "num_connections": 1})
        self._socket = socket
        self.connected.set()
        while True:  # until the app closes it
            message = await socket.receive()
            if message.type == WSMsgType.TEXT:
                self.acks.append(json.loads(message.data))
                continue
            if message.type == WSMsgType.CLOSE and self.close_delay:
                assert self._ending is not None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._ending.wait(), self.close_delay)
                await socket.close()
            if message.type in (
                WSMsgType.CLOSE,
                WSMsgType.CLOSING,
                WSMsgType.CLOSED,
                WSMsgType.ERROR,
            ):
                return socket
