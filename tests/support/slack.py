"""Requests as Slack sends them to the app, signed with the app's signing secret; the app
set up as `paperbell run` sets it up."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from datetime import datetime

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
