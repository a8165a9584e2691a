"""The sections of the config file, one pydantic model each: [database], [digest],
[polling], [daemon], [delivery], [apprise], [[sources]], [email], [bounces], [slack],
[llm] and [embeddings] ([web] is bot.config.web's).

Each model owns its keys, their defaults and bounds, and what the section hands on (the
poll policy, the fetch limits, the link signer...). Must not read the environment (the
secret fields are filled by bot.config.environment), nor open the database, the network or
SMTP.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import date, timedelta
from email.utils import parseaddr
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.bounces.imap import ImapSettings, parse_imap_url
from bot.config.fields import (
    EmailAddress,
    EnvName,
    Every,
    FilePath,
    HeaderText,
    Section,
    SlackUser,
    TimeOfDay,
    TimeZoneName,
    Weekday,
    check_email,
)
from bot.config.servers import MAX_SERVERS, EmailServerConfig, servers_problem
from bot.config.web import WebConfig as WebConfig
from bot.config.web import web_link_problems as web_link_problems
from bot.core.addresses import MAX_REACH, Reach, parse_reach
from bot.core.calendar import ArxivCalendar, PollPolicy
from bot.core.schedule import Defaults, parse_time
from bot.sources import (
    MAX_BODY_MB_LIMIT,
    MEGABYTE,
    REQUEST_DEADLINE_LIMIT,
    SOURCE_KINDS,
    FetchLimits,
    load_builtin_sources,
)

DEFAULT_MAX_RULES = 50  # rules per subscriber ([digest] max_rules)
MAX_RULES = 1000  # the most [digest] max_rules may allow
DEFAULT_DATABASE_URL = "sqlite:///paperbell.sqlite"
MAX_DATABASE_URL = 4096  # characters: a longer URL is a mistake (or an attack)
SLACK_API_URL = "https://slack.com/api/"


def check_database_url(value: str) -> str:
    """A database URL paperbell can open: sqlite or postgresql, printable, not huge. The
    messages never repeat the value (it may hold a password)."""
    if len(value) > MAX_DATABASE_URL:
        raise ValueError(f"longer than {MAX_DATABASE_URL} characters: not a database URL")
    if not value.isprintable():
        raise ValueError("control or invisible characters in the database URL")
    if not value.startswith(("sqlite:", "postgresql:", "postgresql+", "postgres:")):
        raise ValueError("use a sqlite:///path or postgresql://user@host/db URL")
    if in_memory_sqlite(value):
        raise ValueError(
            "an in-memory SQLite database lasts one process only: each command, and the "
            "daemon's planner and senders, would get an empty one of its own; use a file, "
            'e.g. "sqlite:///paperbell.sqlite"'
        )
    return value


def in_memory_sqlite(url: str) -> bool:
    """Whether `url` names an in-memory SQLite database (`sqlite://`, `sqlite:///:memory:`),
    which SQLAlchemy opens anew, empty, in every process."""
    scheme, _, rest = url.partition("://")
    path = rest.removeprefix("/").partition("?")[0]
    return scheme == "sqlite" and path in ("", ":memory:")


class DatabaseConfig(Section):
    """`[database]`: where paperbell keeps everything (`url`, or `url_env`: the environment
    variable that holds it, so a password stays out of the file), whether an older
    schema is upgraded by the commands themselves (else they refuse it: `paperbell db
    upgrade`), and how long old messages, bounces and unconfirmed sign-ups are kept."""

    url: str = DEFAULT_DATABASE_URL
    url_env: EnvName | None = None
    auto_upgrade: bool = False
    # A digest's whole message is kept this many days after it went (the web archive shows
    # it as sent), then cut to its headers (the archive lists it and shows its papers);
    # bounces are deleted after keep_bounces_days; a sign-up whose address was never
    # confirmed, after keep_unconfirmed_days. 0: for ever. `paperbell run` prunes once a
    # day, `paperbell db prune` when asked.
    keep_sent_days: int = Field(90, ge=0, le=36500)
    keep_bounces_days: int = Field(365, ge=0, le=36500)
    keep_unconfirmed_days: int = Field(30, ge=0, le=36500)

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        return check_database_url(value)

    @model_validator(mode="after")
    def _one_url(self) -> DatabaseConfig:
        if self.url_env and "url" in self.model_fields_set:
            raise ValueError(
                "url and url_env both name the database: keep one (url_env keeps a "
                "password out of the file)"
            )
        return self


class DigestConfig(Section):
    """`[digest]`: what a digest takes, and when digests are due unless a subscriber says."""

    window_days: int = Field(7, ge=1, le=60)
    schedule: Every = "daily"
    day: Weekday = "monday"  # weekly digests
    time: TimeOfDay = "08:00"
    timezone: TimeZoneName = "UTC"
    notify_empty: bool = False
    max_rules: int = Field(DEFAULT_MAX_RULES, ge=1, le=MAX_RULES)  # per subscriber

    def defaults(self) -> Defaults:
        """The schedule of subscribers who do not set their own."""
        schedule = Defaults().resolve(self.schedule, self.day, self.time, self.timezone)
        return Defaults(schedule, self.notify_empty)


class PollingConfig(Section):
    """`[polling]`: when sources are polled (times for arXiv are US Eastern)."""

    start: TimeOfDay = "00:05"
    deadline: TimeOfDay = "06:00"
    retry_minutes: float = Field(10, gt=0, le=720)
    late_retry_minutes: float = Field(60, gt=0, le=1440)
    interval_minutes: float = Field(60, gt=0, le=1440)
    holidays: dict[date, str] = Field(default_factory=dict)
    # Every request's bounds (a source may set its own): the most body it may bring, and
    # how long one attempt may take from connecting to the last byte.
    max_body_mb: float = Field(50, gt=0, le=MAX_BODY_MB_LIMIT, allow_inf_nan=False)
    request_deadline_seconds: float = Field(
        60, gt=0, le=REQUEST_DEADLINE_LIMIT, allow_inf_nan=False
    )
    # An arXiv listing that came short (under a quarter of the same weekday's usual) or not
    # at all by the deadline is filled in from the arXiv API, within this many seconds.
    repair: bool = True
    repair_deadline_seconds: float = Field(
        120, gt=0, le=REQUEST_DEADLINE_LIMIT, allow_inf_nan=False
    )

    @model_validator(mode="after")
    def _deadline_after_start(self) -> PollingConfig:
        if parse_time(self.deadline) <= parse_time(self.start):
            raise ValueError(f"deadline {self.deadline} must come after start {self.start}")
        return self

    def policy(self) -> PollPolicy:
        return PollPolicy(
            start=parse_time(self.start),
            deadline=parse_time(self.deadline),
            retry=timedelta(minutes=self.retry_minutes),
            late_retry=timedelta(minutes=self.late_retry_minutes),
            interval=timedelta(minutes=self.interval_minutes),
        )

    def calendar(self) -> ArxivCalendar:
        return ArxivCalendar.default(self.holidays)

    def fetch_limits(self) -> FetchLimits:
        """The fetch limits of every source that does not set its own."""
        return FetchLimits(
            max_body=max(1, int(self.max_body_mb * MEGABYTE)),
            deadline=self.request_deadline_seconds,
        )


class DaemonConfig(Section):
    """`[daemon]`: the long-running `paperbell run`."""

    tick_seconds: float = Field(30, ge=1, le=600)
    shutdown_grace_seconds: float = Field(20, ge=0, le=600)
    # A tick (polls, then sending what is due) still running after this long makes
    # /healthz answer 503 "stuck".
    tick_deadline_seconds: float = Field(1800, ge=60, le=86400, allow_inf_nan=False)


class DeliveryConfig(Section):
    """`[delivery]`: how the outbox sends, retries and gives up."""

    lease_seconds: float = Field(300, gt=0, le=86400)
    batch: int = Field(20, ge=1, le=1000)
    connections: int = Field(4, ge=1, le=32)  # batches sent side by side, a connection each
    # At most 30: the retry delay doubles each time (86400 s * 2**29 still fits a timedelta;
    # 60 s * 2**41 did not, and the outbox crashed with OverflowError on the 42nd attempt).
    max_attempts: int = Field(8, ge=1, le=30)
    retry_first_seconds: float = Field(60, gt=0, le=86400)
    retry_max_seconds: float = Field(3 * 3600, gt=0, le=30 * 86400)
    bounce_limit: int = Field(3, ge=1, le=100)
    # Processes that render and send the queued digests: `run` starts this many, and one more
    # that plans, beside the one that serves the web app; `digest` starts them beside the one
    # that plans (with 1, it sends in its own). 0: no sender process; the process that plans
    # sends too.
    workers: int = Field(1, ge=0, le=64)


class AppriseConfig(Section):
    """`[apprise]`: how digests go to Apprise destinations (chat services, push servers)."""

    # One message (one part of a digest) may take this long, connection to answer; then it
    # is retried later, as a server error is.
    deadline_seconds: float = Field(60, gt=0, le=600)
    # Seconds between two messages to one service; unset: each service's own (Apprise's
    # pacing for it: ntfy 5.5 s, Discord none...).
    pace_seconds: float | None = Field(None, ge=0, le=600)
    # Destinations subscribers give on the manage page: taken (web services at public
    # addresses only), and where else they may go: host names, addresses, networks.
    self_service: bool = True
    self_service_allow: list[str] = Field(default_factory=list, max_length=MAX_REACH)

    @field_validator("self_service_allow")
    @classmethod
    def _allow(cls, value: list[str]) -> list[str]:
        parse_reach(value)
        return value

    def reach(self) -> Reach:
        """Where destinations given on the manage page may go (`bot.core.addresses`)."""
        return parse_reach(self.self_service_allow, on=self.self_service)


class SourceConfig(BaseModel):
    """One `[[sources]]` table: `kind`, `name`, and the options of that kind."""

    model_config = ConfigDict(extra="allow", str_strip_whitespace=True, allow_inf_nan=False)

    kind: str
    name: str = ""

    @model_validator(mode="after")
    def _known_kind(self) -> SourceConfig:
        load_builtin_sources()
        cls = SOURCE_KINDS.get(self.kind)
        if cls is None:
            known = ", ".join(sorted(SOURCE_KINDS))
            raise ValueError(f"unknown source kind {self.kind!r} (known: {known})")
        options_model = getattr(cls, "Options", None)
        if options_model is not None:  # each problem at its key (sources[0].max_body_mb)
            options_model.model_validate(self.options)
        # A kind whose options model lets one through (a third party's) still gets no inf.
        for key, value in self.options.items():
            values = value if isinstance(value, list) else [value]
            if any(isinstance(v, float) and not math.isfinite(v) for v in values):
                raise ValueError(f"{key}: {value!r} is not a finite number")
        if not self.name:
            self.name = self.kind
        return self

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @classmethod
    def keys_for(cls, table: Any) -> list[str]:
        """The keys a `[[sources]]` table may hold: `kind`, `name` and its kind's options
        (no kind, or an unknown one: the kinds' options all together)."""
        load_builtin_sources()
        kind = table.get("kind") if isinstance(table, dict) else None
        kinds = [SOURCE_KINDS[kind]] if kind in SOURCE_KINDS else list(SOURCE_KINDS.values())
        keys = dict.fromkeys(cls.model_fields)
        for source in kinds:
            options = getattr(source, "Options", None)
            if options is not None:
                keys.update(dict.fromkeys(options.model_fields))
        return list(keys)


class EmailConfig(Section):
    from_: HeaderText = Field(alias="from")
    host: str = "localhost"
    port: int | None = Field(None, ge=1, le=65535)
    security: Literal["starttls", "tls", "none"] = "starttls"
    username: str | None = None
    password_env: EnvName | None = None
    timeout: float = Field(30.0, gt=0, le=600)
    list_id: HeaderText = "paperbell digest"
    unsubscribe_mailto: EmailAddress | None = None
    # Where bounces go: each message's envelope sender becomes bounces+TOKEN@domain (VERP,
    # signed with [web]'s secret key), read back by `paperbell bounce`.
    bounce_address: EmailAddress | None = None
    # A bounce without that token changes nothing, unless this lets it act by the signed
    # Message-ID it quotes (a relay that rewrites the envelope sender, dropping the token).
    bounces_by_message_id: bool = False
    # The relay's limits, shared by every process sending through it (unset: none).
    max_per_second: int | None = Field(None, ge=1, le=100_000)
    max_per_hour: int | None = Field(None, ge=1, le=10_000_000)
    max_per_day: int | None = Field(None, ge=1, le=100_000_000)
    password: str | None = Field(None, exclude=True)  # filled from the environment only
    # Several relays, used by weight (bot.config.servers): then host ... max_per_day go
    # in each server, not here.
    servers: list[EmailServerConfig] = Field(default_factory=list, max_length=MAX_SERVERS)

    @model_validator(mode="after")
    def _servers(self) -> EmailConfig:
        problem = servers_problem(self.servers, self.model_fields_set)
        if problem:
            raise ValueError(problem)
        return self

    @field_validator("bounce_address")
    @classmethod
    def _bounce_address(cls, value: str | None) -> str | None:
        if value is not None and ("+" in value.partition("@")[0] or not value.isascii()):
            raise ValueError("a plain ASCII address with no '+' (paperbell adds +TOKEN to it)")
        return value

    @field_validator("from_")
    @classmethod
    def _from_address(cls, value: str) -> str:
        _, address = parseaddr(value)
        check_email(address)
        return value

    @property
    def from_address(self) -> str:
        return parseaddr(self.from_)[1]

    @property
    def from_name(self) -> str:
        return parseaddr(self.from_)[0] or "paperbell"

    @property
    def effective_port(self) -> int:
        return self.port or {"starttls": 587, "tls": 465, "none": 25}[self.security]


# arn:PARTITION:sns:REGION:ACCOUNT:TOPIC (partitions: aws, aws-cn, aws-us-gov).
SNS_TOPIC_ARN = re.compile(
    r"^arn:aws(?:-cn|-us-gov)?:sns:[a-z0-9-]{1,30}:\d{12}:[A-Za-z0-9_.-]{1,256}$"
)


class BouncesConfig(Section):
    """`[bounces]`: the ways bounces come in beside the pipe into `paperbell bounce`: the
    bounce mailbox read over IMAP (by `paperbell run` every `every_minutes`, and by
    `paperbell bounce --imap`), and the webhooks of Amazon SES (through SNS), Postmark and
    Mailgun, each mounted on the web app only when set."""

    imap_url: str | None = None  # imaps://USER@HOST[:PORT]/MAILBOX (a USER with "@": %40)
    password_env: EnvName | None = None
    processed_folder: str = Field("paperbell-processed", min_length=1, max_length=200)
    timeout: float = Field(30.0, gt=0, le=600)
    # `paperbell run` reads the mailbox this often, while it leads (0: it does not; cron
    # runs `paperbell bounce --imap`).
    every_minutes: float = Field(15, ge=0, le=1440, allow_inf_nan=False)
    # POST /bounces/ses: the SNS topics SES publishes bounces and complaints to (messages,
    # and subscription confirmations, of any other topic are refused).
    ses_topic_arns: list[str] = Field(default_factory=list, max_length=20)
    # POST /bounces/postmark: the password of the basic auth in the webhook's URL.
    postmark_secret_env: EnvName | None = None
    # POST /bounces/mailgun: the domain's HTTP webhook signing key.
    mailgun_signing_key_env: EnvName | None = None
    # Filled from the environment only.
    password: str | None = Field(None, exclude=True)
    postmark_secret: str | None = Field(None, exclude=True)
    mailgun_signing_key: str | None = Field(None, exclude=True)

    @field_validator("imap_url")
    @classmethod
    def _imap_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parse_imap_url(value)
        return value.strip()

    @field_validator("processed_folder")
    @classmethod
    def _folder(cls, value: str) -> str:
        if any(c in value for c in '\r\n"\\'):
            raise ValueError("a folder name without quotes, backslashes or line breaks")
        return value

    @field_validator("ses_topic_arns")
    @classmethod
    def _topics(cls, value: list[str]) -> list[str]:
        wrong = next((arn for arn in value if not SNS_TOPIC_ARN.match(arn)), None)
        if wrong is None:
            return value
        said = "arn:aws:sns:REGION:ACCOUNT:TOPIC, as the SNS console shows it"
        raise ValueError(f"{wrong[:100]!r} is not an SNS topic ARN ({said})")

    @model_validator(mode="after")
    def _some_way_in(self) -> BouncesConfig:
        if self.imap_url is None and not self.webhooks():
            raise ValueError(
                "[bounces] sets no way in: imap_url, ses_topic_arns, postmark_secret_env "
                "or mailgun_signing_key_env"
            )
        return self

    def webhooks(self) -> list[str]:
        """The providers whose webhook the config sets: "ses", "postmark", "mailgun"."""
        named = {
            "ses": bool(self.ses_topic_arns),
            "postmark": self.postmark_secret_env is not None,
            "mailgun": self.mailgun_signing_key_env is not None,
        }
        return [name for name, on in named.items() if on]

    def imap(self) -> ImapSettings:
        """Where the mailbox is, with the password and options."""
        if self.imap_url is None:
            raise ValueError("[bounces] names no imap_url")
        return replace(
            parse_imap_url(self.imap_url),
            password=self.password,
            processed_folder=self.processed_folder,
            timeout=self.timeout,
        )


class SlackConfig(Section):
    """`[slack]`: the Slack app (bot token, slash command) and how posts are paced."""

    bot_token_env: EnvName | None = None
    signing_secret_env: EnvName | None = None
    app_token_env: EnvName | None = None
    api_url: str = SLACK_API_URL
    command: str = "/papers"
    post_interval_seconds: float = Field(1.0, ge=0, le=60)
    timeout: float = Field(30.0, gt=0, le=600)
    channel_managers: list[SlackUser] = Field(default_factory=list)
    # Filled from the environment only.
    bot_token: str | None = Field(None, exclude=True)
    signing_secret: str | None = Field(None, exclude=True)
    app_token: str | None = Field(None, exclude=True)

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        loopback = ("http://127.0.0.1", "http://localhost", "http://[::1]")
        if not value.startswith(("https://", *loopback)):
            raise ValueError(
                "use an https:// URL, e.g. https://slack.com/api/ (http:// only on loopback: "
                "the bot token goes with every request)"
            )
        return value if value.endswith("/") else value + "/"

    @field_validator("command")
    @classmethod
    def _command(cls, value: str) -> str:
        if not re.match(r"^/[a-z0-9_\-]{1,31}$", value):
            raise ValueError("a slash command is '/' and up to 31 lower-case letters or digits")
        return value


class LlmConfig(Section):
    """`[llm]`: an OpenAI-compatible chat completions endpoint (a local Ollama, vLLM or
    llama.cpp server, or a provider) that writes the summaries and translations."""

    base_url: str
    model: str = Field(min_length=1, max_length=200)
    api_key_env: EnvName | None = None  # unset: no key (a local server)
    timeout: float = Field(60.0, gt=0, le=600)  # one request, connecting to last byte
    max_retries: int = Field(2, ge=0, le=10)  # of one request (429, 5xx, timeouts)
    concurrency: int = Field(4, ge=1, le=64)  # requests at once
    # A budget: past it, digests go out with abstracts until the next day (UTC). Unset: none.
    max_requests_per_day: int | None = Field(None, ge=0, le=10_000_000)
    temperature: float = Field(0.2, ge=0, le=2)
    # Every request of one digest run together: past it, the papers not written yet go out
    # with their abstracts (and are asked for again at the next run).
    deadline_seconds: float = Field(90.0, gt=0, le=3600)
    api_key: str | None = Field(None, exclude=True)  # filled from the environment only

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        return endpoint_url(value)

    @model_validator(mode="after")
    def _key_over_https(self) -> LlmConfig:
        key_over_https(self.base_url, self.api_key_env)
        return self


def endpoint_url(value: str) -> str:
    """An OpenAI-compatible endpoint's base URL, checked, without its trailing slash."""
    if not re.match(r"^https?://[^\s/?#]+", value):
        raise ValueError(
            "the endpoint's base URL, e.g. http://localhost:11434/v1 (Ollama) or "
            "https://api.openai.com/v1"
        )
    return value.rstrip("/")


def key_over_https(base_url: str | None, api_key_env: str | None) -> None:
    """An API key goes only over https://, or plain http:// on loopback."""
    loopback = ("http://127.0.0.1", "http://localhost", "http://[::1]")
    url = base_url or ""
    if api_key_env and url.startswith("http://") and not url.startswith(loopback):
        raise ValueError(
            "base_url: use https:// when an api_key_env is set (the key goes with "
            "every request); http:// only on loopback"
        )


class EmbeddingsConfig(Section):
    """`[embeddings]`: dense embeddings for papers like these, in place of the default
    TF-IDF ranking: an OpenAI-compatible `/v1/embeddings` endpoint (Ollama's
    nomic-embed-text, text-embeddings-inference, a provider), or a local model through
    fastembed (`provider = "fastembed"`, the optional extra; it downloads its model once,
    into `cache_dir`). Each paper is embedded once per model and kept; a failing endpoint
    leaves that run to the default ranking, and the digests say so."""

    provider: Literal["openai", "fastembed"] = "openai"
    base_url: str | None = None  # required for "openai"
    model: str = Field(min_length=1, max_length=200)
    api_key_env: EnvName | None = None  # unset: no key (a local server)
    timeout: float = Field(60.0, gt=0, le=600)  # one request, connecting to last byte
    max_retries: int = Field(2, ge=0, le=10)  # of one request (429, 5xx, timeouts)
    batch_size: int = Field(64, ge=1, le=2048)  # texts per request
    # Every request of one digest run together: past it, that run ranks by the default.
    deadline_seconds: float = Field(120.0, gt=0, le=3600)
    # Where fastembed keeps the model it downloads (a relative path is taken from the config
    # file's folder). Unset: a `fastembed` folder beside the SQLite database, else a cache
    # folder of the environment's (bot.pipeline.model_cache).
    cache_dir: FilePath | None = None
    api_key: str | None = Field(None, exclude=True)  # filled from the environment only

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return None if value is None else endpoint_url(value)

    @model_validator(mode="after")
    def _endpoint(self) -> EmbeddingsConfig:
        if self.provider == "openai" and not self.base_url:
            raise ValueError(
                'base_url is required (an OpenAI-compatible endpoint), or provider = "fastembed"'
            )
        if self.provider != "fastembed" and self.cache_dir is not None:
            raise ValueError(
                'cache_dir is fastembed\'s model folder: only with provider = "fastembed"'
            )
        key_over_https(self.base_url, self.api_key_env)
        return self

    @property
    def kind(self) -> str:
        """The vectors' name in the store: the provider and model (each model's own)."""
        return f"{self.provider}:{self.model}"
