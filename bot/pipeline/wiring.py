"""The config turned into the run's parts: sources, fetcher, channels, their settings.

Owns every `Config` -> part factory, once, so that the CLI, the daemon, the Slack app, the
pages and the demo build their parts alike. It decides nothing about polling or delivery
(`poll`, `deliver` do) and does no I/O itself: the parts it builds do theirs when used.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from bot.channels import Channel
from bot.channels.email import EmailChannel, FileChannel, SmtpSettings
from bot.channels.outbox import RetryPolicy
from bot.channels.slack import SlackChannel, SlackSettings
from bot.config import Config, EmailConfig
from bot.core.errors import ConfigError
from bot.pipeline.health import ListingChecks
from bot.render.email import EmailSettings
from bot.sources import SOURCE_KINDS, Source, load_builtin_sources

if TYPE_CHECKING:
    import httpx

    from bot.sources.http import PoliteFetcher

# The kinds of channel a digest goes out through (`bot.pipeline.payloads` renders a digest
# for each), in the order `build_channels` sets them up.
DIGEST_CHANNELS = ("email", "slack")
# The outbox's kind for the mails people ask for on the pages or in Slack (a confirmation
# link, a fresh manage link): sent by email, but counted apart from the digests, so a
# mistyped address never counts as a digest bounce (nor pauses anyone).
NOTICE_CHANNEL = "notice"


def build_sources(config: Config) -> list[Source]:
    """Instantiate every configured source through the registry."""
    load_builtin_sources()
    return [SOURCE_KINDS[s.kind](s.name, **s.options) for s in config.sources]


def listing_checks(config: Config) -> ListingChecks:
    """How listings are judged and repaired ([polling]: the calendar, the deadline, repair)."""
    polling = config.polling
    return ListingChecks(
        calendar=polling.calendar(),
        policy=polling.policy(),
        repair=polling.repair,
        deadline=polling.repair_deadline_seconds,
        deadline_text=polling.deadline,
    )


class FetcherOptions(TypedDict, total=False):
    """What a caller may set of `PoliteFetcher`'s spacing and retries (the tests: no wait)."""

    min_interval: float
    retries: int
    backoff: float
    max_retry_after: float


def build_fetcher(
    config: Config, client: httpx.AsyncClient, **options: Unpack[FetcherOptions]
) -> PoliteFetcher:
    """The run's polite fetcher over `client`: [polling]'s fetch limits, each source's own
    (`options` go to `PoliteFetcher`: spacing, retries)."""
    from bot.sources.http import PoliteFetcher

    defaults = config.polling.fetch_limits()
    own = {source.name: source.fetch_limits(defaults) for source in build_sources(config)}
    return PoliteFetcher(client, limits=defaults, source_limits=own, **options)


def build_channels(config: Config, *, out_dir: Path | None = None) -> dict[str, Channel]:
    """The channels the config sets up, by kind; with `out_dir`, one that writes files."""
    if out_dir is not None:
        files = FileChannel(out_dir)
        return {kind: files for kind in DIGEST_CHANNELS}
    channels: dict[str, Channel] = {}
    if config.email is not None:
        channels["email"] = channels[NOTICE_CHANNEL] = EmailChannel(smtp_settings(config))
    # A webhook whose variable is not set still makes a channel: a dry run reports what
    # would go there; a send asks for the variable first (`bot.cli.secrets`).
    if config.slack is not None or any(s.webhook_url_env for s in config.subscribers):
        channels["slack"] = SlackChannel(slack_settings(config))
    return channels


def smtp_settings(config: Config) -> SmtpSettings:
    """The SMTP connection settings from [email]."""
    e = _email_section(config)
    return SmtpSettings(
        host=e.host,
        port=e.effective_port,
        security=e.security,
        username=e.username,
        password=e.password,
        timeout=e.timeout,
    )


def email_settings(config: Config) -> EmailSettings:
    """The message-building settings from [email]."""
    e = _email_section(config)
    return EmailSettings(
        from_addr=e.from_address,
        from_name=e.from_name,
        list_id=e.list_id,
        unsubscribe_mailto=e.unsubscribe_mailto or "",
    )


def slack_settings(config: Config) -> SlackSettings:
    """How to reach Slack, from [slack] and the subscribers' webhook variables."""
    slack = config.slack
    if slack is None:
        return SlackSettings(token=None, webhooks=dict(config.webhooks))
    return SlackSettings(
        token=slack.bot_token,
        api_url=slack.api_url,
        post_interval=slack.post_interval_seconds,
        timeout=slack.timeout,
        webhooks=dict(config.webhooks),
    )


def retry_policy(config: Config) -> RetryPolicy:
    """The outbox's leases and retries from [delivery]."""
    d = config.delivery
    return RetryPolicy(
        lease=timedelta(seconds=d.lease_seconds),
        batch=d.batch,
        max_attempts=d.max_attempts,
        first_delay=timedelta(seconds=d.retry_first_seconds),
        max_delay=timedelta(seconds=d.retry_max_seconds),
        bounce_limit=d.bounce_limit,
    )


def _email_section(config: Config) -> EmailConfig:
    if config.email is None:
        raise ConfigError(["email: the [email] section is missing"], source=str(config.path))
    return config.email
