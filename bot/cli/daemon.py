"""The long-running commands: `run` (the daemon: polls, scheduled digests, the web app
beside) and `serve` (the web app alone: the Slack slash command and the pages).

Options and checks only: what they start is wired in `bot.cli.wiring`, imported when one of
them runs (it brings the web stack, the Slack SDK and the pipeline, which the other
commands start without).
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from bot.cli.secrets import require_secrets, secrets_of
from bot.cli.shell import config_option, handle_errors, load_config, log_progress, open_store
from bot.config import DATABASE_URL
from bot.core.errors import ConfigError


@click.command()
@config_option
@click.option("--host", help="Address the web app listens on. [default: [web] host]")
@click.option("--port", type=click.IntRange(0, 65535), help="Its port. [default: [web] port]")
@click.option("--no-web", is_flag=True, help="Run without the web app.")
@click.option("--clock-start", type=click.DateTime(["%Y-%m-%dT%H:%M"]), hidden=True)
@click.option("--clock-speed", type=click.FloatRange(min=1), default=1.0, hidden=True)
@handle_errors
def run(
    config_path: Path,
    host: str | None,
    port: int | None,
    no_web: bool,
    clock_start: datetime | None,
    clock_speed: float,
) -> None:
    """Run the daemon: poll the sources, send each digest at its subscriber's time.

    arXiv listings are polled from 00:05 US Eastern on arXiv's feed days until the new
    listing is in ([polling]); each subscriber's digest is built at their `time` in their
    `timezone`, daily or weekly, and sent through the outbox (retries, leases). The web app
    ([web]) serves GET /healthz, GET /metrics, the Slack endpoints and the pages reached
    from emails (manage, unsubscribe, each subscriber's Atom feed and archive). Ctrl-C or
    SIGTERM stops it cleanly: the digest being sent is finished, nothing is lost.
    `paperbell digest` from cron can share its database without sending anything twice.
    Several `run` processes may share a PostgreSQL database: one of them polls and plans,
    every one sends (docs/workers.md); on SQLite a second `run` on one database
    is refused.
    Every secret the config names must be set (with --no-web, all but [slack]
    signing_secret_env's), but for a variable apprise_env names: its destinations wait.
    """
    # Testing aid (hidden): run on a clock that starts at --clock-start (UTC) and runs
    # --clock-speed times faster than real time.
    config = load_config(config_path)
    web = (
        None
        if no_web or not config.web.enabled
        else (
            host or config.web.host,
            config.web.port if port is None else port,
        )
    )
    require_secrets(config, DATABASE_URL, *secrets_of(config, "run", web=web is not None))
    log_progress(daemon=True)
    from bot.cli.wiring import run_daemon  # the web stack, Slack, the pipeline: `run` only
    from bot.store import utcnow

    clock = (
        utcnow
        if clock_start is None
        else FastClock(clock_start.replace(tzinfo=UTC), clock_speed, time.time())
    )
    store = open_store(config)

    workers = config.delivery.workers
    code = asyncio.run(
        run_daemon(config, store, clock=clock, web=web, speed=clock_speed, workers=workers)
    )
    sys.exit(code)


@dataclass(frozen=True)
class FastClock:
    """The testing aid's clock: `start` at the moment `origin` (wall time), running `speed`
    times faster. Read on the wall clock, so that the daemon and its senders agree."""

    start: datetime
    speed: float
    origin: float

    def __call__(self) -> datetime:
        return self.start + timedelta(seconds=(time.time() - self.origin) * self.speed)


@click.command()
@config_option
@click.option("--host", help="Address the web app listens on. [default: [web] host]")
@click.option("--port", type=click.IntRange(0, 65535), help="Its port. [default: [web] port]")
@handle_errors
def serve(config_path: Path, host: str | None, port: int | None) -> None:
    """Serve the web app alone: the Slack slash command and the pages reached from emails
    (no polling, no scheduled digests).

    POST /slack/commands (when [slack] signing_secret_env is set), Socket Mode (when [slack]
    app_token_env is set), and the manage, one-click unsubscribe and confirmation pages,
    each subscriber's Atom feed and archive of past digests (when [web] public_url and
    secret_key_env are set). `paperbell run` serves the same
    beside the daemon. Every secret the config names must be set, but the webhooks'.
    """
    config = load_config(config_path)
    require_secrets(config, DATABASE_URL, *secrets_of(config, "serve"))
    slack = config.slack
    has_slack = slack is not None and bool(slack.bot_token)
    has_pages = config.web.link_signer() is not None
    if slack is not None and slack.bot_token and not (slack.signing_secret or slack.app_token):
        raise ConfigError(
            [
                "slack: `serve` needs a way in for the slash command: signing_secret_env "
                "(POST /slack/commands) or app_token_env (Socket Mode)"
            ]
        )
    if not (has_slack or has_pages):
        raise ConfigError(
            [
                "`serve` has nothing to serve: set [slack] bot_token_env for the slash "
                "command, or [web] public_url and secret_key_env for the pages"
            ]
        )
    log_progress()
    store = open_store(config)
    where = (host or config.web.host, config.web.port if port is None else port)
    from bot.cli.wiring import serve_web  # the web stack and Slack: `serve` only

    sys.exit(asyncio.run(serve_web(config, store, where)))
