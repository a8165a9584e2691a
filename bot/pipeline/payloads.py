"""How a digest becomes the bytes queued for each of its targets (delivery's render step).

Owns what a renderer is given from the config (`render_context`: each kind's settings,
the subscriber's signed links, the 👍 / 👎 buttons' values); the renderer itself is the
target's channel kind's (`bot.channels.registry`), the sending the channels'; nothing here
queues or sends.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from bot.channels import RenderContext, Rendered, Target, channel_kind
from bot.channels.email import EmailChannelSettings
from bot.channels.linking import Linker
from bot.config import SECRET_KEY, Config
from bot.core.models import Digest
from bot.pipeline.wiring import channel_settings


def linker(config: Config, now: datetime) -> Linker:
    """The run's links (`Linker`): signed when [web] has its public_url and secret key;
    placeholders when the key's variable is not set (a preview: `digest --out`,
    `--dry-run`); else none."""
    signer = config.web.link_signer()
    site = config.web.public_url if signer is None and config.missing(SECRET_KEY) else None
    return Linker(now, signer, site or None)


def render_context(
    config: Config, now: datetime, settings: Mapping[str, Any] | None = None
) -> RenderContext:
    """What every renderer is given for a run at `now`: each kind's settings (by default
    `channel_settings`), the subscribers' signed links and vote buttons' values."""
    links = linker(config, now)
    return RenderContext(
        now=now,
        settings=channel_settings(config) if settings is None else settings,
        links=links.links,
        votes=links.votes,
    )


# A run with fewer digests than this renders in its own process: starting the workers
# (a second or so each) would cost more than it saves.
POOL_FROM = 300


def render_processes(config: Config, digests: int, *, pool_from: int = POOL_FROM) -> int:
    """How many worker processes a run of `digests` digests renders with
    (bot.channels.renderpool): none below `pool_from`; else [delivery] render_processes,
    or, unset, one fewer than the machine has cores (this process builds, queues and
    sends on the last one; a worker holds ~100 MB, so more would cost memory for
    little)."""
    if digests < pool_from:
        return 0
    wanted = config.delivery.render_processes
    if wanted is None:
        wanted = max((os.cpu_count() or 1) - 1, 0)
    return wanted


def render_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """What of each kind's settings its renderer reads, for a render worker: the email's
    message settings (its server's credentials, connections and limits stay here); the
    other kinds render from the digest and the links alone."""
    email = settings.get("email")
    if isinstance(email, EmailChannelSettings):
        smtp = replace(email.smtp, username=None, password=None)
        return {"email": EmailChannelSettings(smtp, email.message)}
    return {}


def render_for(digest: Digest, target: Target, context: RenderContext) -> Rendered:
    """The digest rendered for `target` by its channel kind. Raises ValueError when it
    cannot be (its kind is not registered, or refuses the digest)."""
    kind = channel_kind(target.channel)
    if kind is None:
        raise ValueError(f"no channel kind {target.kind!r} is known")
    return kind.render(digest, target, context)
