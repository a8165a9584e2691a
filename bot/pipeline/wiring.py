"""The config turned into the run's parts: sources, fetcher, channels, their settings.

Owns every `Config` -> part factory, once, so that the CLI, the daemon, the Slack app, the
pages and the demo build their parts alike; `wire` makes what delivery runs with (`Parts`)
at start, so that no delivery run reads the config again. It decides nothing about polling
or delivery (`poll`, `deliver` do) and does no I/O itself: the parts it builds do theirs
when used.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from bot.channels import (
    CHANNEL_KINDS,
    Channel,
    RenderContext,
    Target,
    load_builtin_channels,
    subscriber_targets,
)
from bot.channels.apprise import AppriseSettings, known_urls, url_secrets
from bot.channels.email import EmailChannelSettings, FileChannel, SmtpSettings
from bot.channels.limits import Limits, RelayLimiter
from bot.channels.linking import Linker
from bot.channels.outbox import RetryPolicy
from bot.channels.servers import Relay, RelayPool
from bot.channels.slack import SlackSettings
from bot.config import (
    SECRET_KEY,
    Config,
    DaemonConfig,
    DatabaseConfig,
    EmailConfig,
    EmailServerConfig,
)
from bot.config import load_config as load_config_file
from bot.config import parse_config as parse_config_data
from bot.core.calendar import eastern_date
from bot.core.errors import ConfigError
from bot.core.links import LinkSigner
from bot.core.schedule import Defaults
from bot.core.verp import MessageIds, Verp
from bot.pipeline.health import ListingChecks
from bot.pipeline.model_cache import fastembed_cache_dir
from bot.render.email import EmailSettings
from bot.similar.embeddings import EmbeddingsEndpoint
from bot.sources import SOURCE_KINDS, Source, load_builtin_sources
from bot.store.database import utcnow
from bot.texts.client import TextModel

if TYPE_CHECKING:
    import httpx

    from bot.pipeline.mailbox import MailboxReader
    from bot.sources.http import PoliteFetcher
    from bot.store import Store, SubscriberRecord

from bot.core.models import Subscriber

# The outbox's kind for the mails people ask for on the pages or in Slack (a confirmation
# link, a fresh manage link): sent by email, but counted apart from the digests, so a
# mistyped address never counts as a digest bounce (nor pauses anyone).
NOTICE_CHANNEL = "notice"


def channel_problems(raw: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """What each channel kind finds in the raw config data: its keys in each subscriber
    checked offline, and the sections they need ([email] for mail, [slack] for posts)."""
    load_builtin_channels()
    problems: list[str] = []
    for kind in CHANNEL_KINDS.values():
        problems += kind.config_problems(raw, environ)
    return problems


def load_config(path: str | Path, *, environ: Mapping[str, str] | None = None) -> Config:
    """Read and validate a config file, each channel kind's checks included (every problem
    at once, as `bot.config.load_config` reports them)."""
    return load_config_file(path, environ=environ, checks=[channel_problems])


def parse_config(data: Mapping[str, Any], **options: Any) -> Config:
    """Validate config data, each channel kind's checks included (`bot.config.parse_config`
    takes `options`)."""
    return parse_config_data(data, checks=[channel_problems], **options)


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


def channel_settings(config: Config, store: Store | None = None) -> dict[str, Any]:
    """Each channel kind's settings from its section of the config (a kind the config sets
    up nothing for is absent): what its targets, renderer and sender are given. `store`:
    where a sender finds what database subscribers gave (their Apprise destinations)."""
    load_builtin_channels()
    found: dict[str, Any] = {"apprise": apprise_settings(config, store)}
    if config.email is not None:
        found["email"] = email_channel_settings(config, store)
    # A webhook whose variable is not set still makes a channel: a dry run reports what
    # would go there; a send asks for the variable first (`bot.cli.secrets`).
    if config.slack is not None or any(s.webhook_url_env for s in config.subscribers):
        found["slack"] = slack_settings(config)
    return found


def email_channel_settings(config: Config, store: Store | None = None) -> EmailChannelSettings:
    """[email] as the email channel takes it: the SMTP connection, the messages' settings,
    the envelope senders (VERP), and [[email.servers]], each relay with its limits and
    slow-downs kept in `store` for every process (with no store: none kept, none limited)."""
    e = _email_section(config)
    senders = envelope_senders(config)

    def limiter(relay: str, limits: Limits) -> RelayLimiter | None:
        if store is None:
            return None
        return RelayLimiter(store.relays, relay, limits, clock=utcnow)

    relays = [
        Relay(
            _server_smtp(server, e.timeout),
            server.weight,
            limiter(server.relay, _server_limits(server)),
        )
        for server in e.servers
    ]
    return EmailChannelSettings(
        smtp_settings(config),
        email_settings(config),
        envelope_from=senders,
        limiter=limiter(relay_name(config), relay_limits(config)),
        pool=RelayPool(relays, envelope_from=senders) if relays else None,
    )


def apprise_settings(config: Config, store: Store | None = None) -> AppriseSettings:
    """How Apprise destinations are reached: [apprise], the environment the config was read
    from (the variables apprise_env names), and every URL a destination may be: the config
    subscribers' and, with `store`, the database subscribers' (asked before each batch);
    those given on the manage page go through the guard, where [apprise] lets them."""

    def urls() -> list[tuple[int | None, str]]:
        declared = config.declared_subscribers()
        if store is None:
            return known_urls(declared, config.environ)
        everyone = store.subscribers.all(declared, include_inactive=True)
        return known_urls(everyone, config.environ)

    def given_on_page() -> list[str]:
        return store.targets.given_on_page() if store is not None else []

    return AppriseSettings(
        environ=config.environ,
        urls=urls,
        deadline=config.apprise.deadline_seconds,
        pace=config.apprise.pace_seconds,
        given_on_page=given_on_page,
        reach=config.apprise.reach(),
    )


def channel_secrets(config: Config) -> list[str]:
    """The secrets of the channels the config's subscribers name, for the log filter: the
    Apprise URLs in their variables (apprise_env), whole and their secret parts."""
    urls = known_urls(config.declared_subscribers(), config.environ)
    return url_secrets(url for _, url in urls)


def build_channels(
    config: Config,
    *,
    out_dir: Path | None = None,
    store: Store | None = None,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Channel]:
    """The channels the config sets up, by kind (every registered kind's sender, from its
    `settings`: by default `channel_settings`, with `store`); with `out_dir`, one that
    writes files."""
    load_builtin_channels()
    if out_dir is not None:
        files = FileChannel(out_dir)
        return dict.fromkeys(CHANNEL_KINDS, files)
    settings = channel_settings(config, store) if settings is None else settings
    channels: dict[str, Channel] = {}
    for kind, registered in CHANNEL_KINDS.items():
        sender = registered.sender(settings.get(kind))
        if sender is not None:
            channels[kind] = sender
    if "email" in channels:
        channels[NOTICE_CHANNEL] = channels["email"]
    return channels


def targets(config: Config, subscriber: Subscriber) -> list[Target]:
    """Everywhere the subscriber's digests go (every registered kind's targets)."""
    return subscriber_targets(subscriber, channel_settings(config))


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


def relay_limits(config: Config) -> Limits:
    """[email] max_per_second, max_per_hour, max_per_day."""
    e = _email_section(config)
    return Limits(e.max_per_second, e.max_per_hour, e.max_per_day)


def relay_name(config: Config) -> str:
    """The relay as its limits are kept: "host:port"."""
    e = _email_section(config)
    return f"{e.host.lower()}:{e.effective_port}"


def relays_limits(config: Config) -> list[tuple[str, Limits, int]]:
    """Each relay email goes through: its name ("host:port"), limits and weight."""
    e = _email_section(config)
    if not e.servers:
        return [(relay_name(config), relay_limits(config), 1)]
    return [(s.relay, _server_limits(s), s.weight) for s in e.servers]


def _server_smtp(server: EmailServerConfig, timeout: float) -> SmtpSettings:
    """One of [[email.servers]]' connection settings ([email]'s timeout)."""
    return SmtpSettings(
        host=server.host,
        port=server.effective_port,
        security=server.security,
        username=server.username,
        password=server.password,
        timeout=timeout,
    )


def _server_limits(server: EmailServerConfig) -> Limits:
    """One of [[email.servers]]' max_per_second, max_per_hour, max_per_day."""
    return Limits(server.max_per_second, server.max_per_hour, server.max_per_day)


def email_settings(config: Config) -> EmailSettings:
    """The message-building settings from [email] (the key that signs the Message-IDs,
    when the site has a secret key)."""
    e = _email_section(config)
    signer = config.web.link_signer()
    return EmailSettings(
        from_addr=e.from_address,
        from_name=e.from_name,
        list_id=e.list_id,
        unsubscribe_mailto=e.unsubscribe_mailto or "",
        message_id_key=signer.derived_key("message-id") if signer is not None else "",
    )


def verp(config: Config) -> Verp | None:
    """The signer of the envelope senders ([email] bounce_address, keyed by [web]'s secret
    key), when bounces are set up."""
    if config.email is None or config.email.bounce_address is None:
        return None
    signer = config.web.link_signer()
    if signer is None:
        return None
    return Verp(signer.derived_key("verp"), config.email.bounce_address)


def message_ids(config: Config, *, authenticated: bool = False) -> MessageIds | None:
    """The reader of the digests' signed Message-IDs, when a report without the envelope's
    token may be tied to its digest by one: a provider's webhook call (`authenticated`),
    or any report when [email] bounces_by_message_id says so (a relay that rewrites the
    envelope sender); else None."""
    signer = config.web.link_signer()
    if signer is None or config.email is None:
        return None
    if not (authenticated or config.email.bounces_by_message_id):
        return None
    return MessageIds(signer.derived_key("message-id"))


def envelope_senders(config: Config) -> Callable[[Any], str | None] | None:
    """Each queued message's envelope sender: the VERP address naming its outbox record
    (a message sent from anything but the outbox keeps its From address)."""
    signer = verp(config)
    if signer is None:
        return None
    from bot.store import OutboxItem

    def envelope_from(item: Any) -> str | None:
        return signer.address(item.id) if isinstance(item, OutboxItem) else None

    return envelope_from


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
        connections=d.connections,
        max_attempts=d.max_attempts,
        first_delay=timedelta(seconds=d.retry_first_seconds),
        max_delay=timedelta(seconds=d.retry_max_seconds),
        bounce_limit=d.bounce_limit,
    )


def text_model(config: Config) -> TextModel | None:
    """The model that writes summaries and translations ([llm]), or None without it."""
    llm = config.llm
    if llm is None:
        return None
    return TextModel(
        base_url=llm.base_url,
        model=llm.model,
        api_key=llm.api_key,
        api_key_env=llm.api_key_env,
        timeout=llm.timeout,
        max_retries=llm.max_retries,
        temperature=llm.temperature,
        concurrency=llm.concurrency,
        max_requests_per_day=llm.max_requests_per_day,
        deadline_seconds=llm.deadline_seconds,
        capped_client=_capped_client,
    )


def embeddings_endpoint(config: Config) -> EmbeddingsEndpoint | None:
    """Where papers like these get their vectors ([embeddings]), or None: the default
    space."""
    e = config.embeddings
    if e is None:
        return None
    return EmbeddingsEndpoint(
        provider=e.provider,
        model=e.model,
        base_url=e.base_url,
        api_key=e.api_key,
        timeout=e.timeout,
        max_retries=e.max_retries,
        batch_size=e.batch_size,
        deadline_seconds=e.deadline_seconds,
        capped_client=_capped_client,
        cache_dir=fastembed_cache_dir(config),
    )


def _capped_client(max_body: int) -> httpx.AsyncClient:
    """An HTTP client that reads no answer past `max_body` bytes, for the model endpoints'
    clients (httpx is imported only by a run that asks one)."""
    from bot.sources.http import capped_client

    return capped_client(max_body)


def _email_section(config: Config) -> EmailConfig:
    if config.email is None:
        raise ConfigError(["email: the [email] section is missing"], source=str(config.path))
    return config.email


@dataclass(frozen=True)
class Parts:
    """What delivery and the ways in run with, made from the config once at start (`wire`):
    the store, the channels by kind (with their relays and limits), each kind's settings
    (what targets and renderers read), the outbox's retry policy, the link, envelope and
    Message-ID signers, the model endpoints, and the config's own subscribers (`declared`,
    synced into the store by `declare`)."""

    store: Store
    channels: Mapping[str, Channel]
    settings: Mapping[str, Any]
    retry: RetryPolicy
    signer: LinkSigner | None  # signs the emails' links; None: [web] is not set up for them
    verp: Verp | None  # signs the envelope senders, read back from bounces; None: not set up
    # Reads the digests' signed Message-IDs back from a provider's (authenticated) bounce
    # report; None: no [email] or no secret key.
    message_ids: MessageIds | None
    placeholders: str | None  # the site's address when its key is not set: a preview's links
    unsigned: tuple[str, ...]  # why emails cannot be sent with signed links (missing keys)
    declared: Callable[[], list[Subscriber]]  # the config file's subscribers
    declared_named: Callable[[str], Subscriber | None]  # one of them by name, made alone
    declare: Callable[[datetime], None]  # the config's subscribers and verdicts into the store
    defaults: Defaults  # the schedule of subscribers who do not set their own
    window_days: int  # [digest] window_days
    text_model: TextModel | None  # writes summaries and translations; None: no [llm]
    embeddings: EmbeddingsEndpoint | None  # papers like these; None: the default space

    def stored(self, record: SubscriberRecord) -> Subscriber | None:
        """The subscriber a stored record stands for, read alone: a config file's with its
        settings from the file (None: the file has it no more), with the site's default
        schedule."""
        return self.store.subscribers.stored(
            record, declared=self.declared_named, defaults=self.defaults
        )

    def render_context(self, now: datetime) -> RenderContext:
        """What every renderer is given for a run at `now`: each kind's settings, the
        subscribers' links (signed; a preview's placeholders; else none) and the values of
        the 👍 / 👎 buttons."""
        links = Linker(now, self.signer, self.placeholders)
        return RenderContext(now=now, settings=self.settings, links=links.links, votes=links.votes)

    def window_start(self, now: datetime) -> date:
        """The first announcement day the default digest window takes: `window_days` days,
        today (US Eastern, arXiv's calendar) included."""
        return eastern_date(now) - timedelta(days=self.window_days - 1)


def wire(
    config: Config,
    store: Store,
    channels: Mapping[str, Channel] | Channel | None = None,
    *,
    out_dir: Path | None = None,
) -> Parts:
    """The config's delivery parts over `store`: its channels (`build_channels`; with
    `out_dir`, files; or those given: one channel serves every kind)."""
    from bot.pipeline.likes import sync_declared_likes

    settings = channel_settings(config, store)
    if channels is None:
        channels = build_channels(config, out_dir=out_dir, store=store, settings=settings)
    elif not isinstance(channels, Mapping):
        load_builtin_channels()
        channels = dict.fromkeys(CHANNEL_KINDS, channels)
    signer = config.web.link_signer()
    missing = config.missing(SECRET_KEY) if config.web.public_url else []

    def declare(now: datetime) -> None:
        store.subscribers.sync_config(config.declared_subscribers(), now=now)
        sync_declared_likes(config, store, now=now)

    return Parts(
        store=store,
        channels=channels,
        settings=settings,
        retry=retry_policy(config),
        signer=signer,
        verp=verp(config),
        message_ids=message_ids(config, authenticated=True),
        placeholders=config.web.public_url or None if signer is None and missing else None,
        unsigned=tuple(m.line() for m in missing),
        declared=config.declared_subscribers,
        declared_named=config.declared_subscriber,
        declare=declare,
        defaults=config.digest.defaults(),
        window_days=config.digest.window_days,
        text_model=text_model(config),
        embeddings=embeddings_endpoint(config),
    )


@dataclass(frozen=True)
class DaemonParts:
    """What the daemon runs with beside delivery's `Parts`, made from the config once at
    start (`wire_daemon`): the sources and how their listings are judged, the config's
    verdicts to mirror when it starts to lead, the bounce mailbox, how long old messages
    and bounces are kept, and its timings."""

    sources: list[Source]
    checks: ListingChecks  # [polling]: the calendar, the deadline, repair
    # The config's 👍 / 👎 into the store, over the fetcher: the arXiv API (the sources'
    # address for it) is asked for the texts of liked papers it does not hold.
    mirror_likes: Callable[[Any, datetime], Awaitable[object]]
    mailbox: MailboxReader | None  # reads [bounces] imap_url; None: no mailbox to read
    keep: DatabaseConfig  # [database] keep_sent_days, keep_bounces_days
    timings: DaemonConfig  # [daemon]: every how long it ticks, how long a tick and a stop take


def wire_daemon(config: Config, parts: Parts, *, clock: Callable[[], datetime]) -> DaemonParts:
    """The daemon's own parts of the config, over the store of `parts`; `clock`: what its
    mailbox reads the time on."""
    from bot.pipeline.likes import sync_declared_likes_online

    sources = build_sources(config)

    async def mirror_likes(fetcher: Any, now: datetime) -> object:
        return await sync_declared_likes_online(config, parts.store, fetcher, sources, now=now)

    return DaemonParts(
        sources=sources,
        checks=listing_checks(config),
        mirror_likes=mirror_likes,
        mailbox=mailbox_reader(config, parts.store, clock=clock),
        keep=config.database,
        timings=config.daemon,
    )


def mailbox_reader(
    config: Config, store: Store, *, clock: Callable[[], datetime]
) -> MailboxReader | None:
    """The daemon's reader of the bounce mailbox: None without [bounces] imap_url or with
    every_minutes = 0 (bounces come by webhook or pipe alone)."""
    from bot.pipeline.mailbox import MailboxReader

    bounces = config.bounces
    if bounces is None or not bounces.every_minutes or bounces.imap_url is None:
        return None
    return MailboxReader(
        bounces.imap(),
        store,
        every=bounces.every_minutes * 60,
        verp=verp(config),
        message_ids=message_ids(config),
        bounce_limit=config.delivery.bounce_limit,
        clock=clock,
    )
