"""Delivery channels: one module per kind (email, Slack, Apprise), all registered in one
registry; each moves rendered digests to people, and `send_all` is the only I/O.

This is the package's face: the shared types (`bot.channels.base`), the registry
(`bot.channels.registry`) and `load_builtin_channels`, the one place that imports every
built-in kind. The outbox worker that sends what is queued is `bot.channels.outbox`.
"""

from __future__ import annotations

import importlib

from bot.channels.base import (
    Channel,
    OnProgress,
    OnSent,
    RenderContext,
    Rendered,
    SendOutcome,
    ShouldStop,
    Target,
    describe,
    failed,
    notify,
)
from bot.channels.registry import (
    CHANNEL_KINDS,
    ChannelKind,
    channel_kind,
    kind_of,
    register,
    subscriber_targets,
    where,
)

__all__ = [
    "BUILTIN_CHANNELS",
    "CHANNEL_KINDS",
    "Channel",
    "ChannelKind",
    "OnProgress",
    "OnSent",
    "RenderContext",
    "Rendered",
    "SendOutcome",
    "ShouldStop",
    "Target",
    "channel_kind",
    "describe",
    "failed",
    "kind_of",
    "load_builtin_channels",
    "notify",
    "register",
    "subscriber_targets",
    "where",
]


# The built-in kinds, in the order they register: the order a subscriber's targets are
# listed and delivered in.
BUILTIN_CHANNELS = ("email", "slack", "apprise")


def load_builtin_channels() -> None:
    """Import the built-in channel modules so they register themselves, and keep the
    registry in `BUILTIN_CHANNELS`' order (another kind after them), whichever module was
    imported first: a subscriber's targets are listed and delivered in that order."""
    for name in BUILTIN_CHANNELS:
        importlib.import_module(f"bot.channels.{name}")
    order = {name: n for n, name in enumerate(BUILTIN_CHANNELS)}
    if list(CHANNEL_KINDS) != sorted(CHANNEL_KINDS, key=lambda k: order.get(k, len(order))):
        kinds = sorted(CHANNEL_KINDS.items(), key=lambda item: order.get(item[0], len(order)))
        CHANNEL_KINDS.clear()
        CHANNEL_KINDS.update(kinds)
