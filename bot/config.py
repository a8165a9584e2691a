"""The configuration: TOML in, one validated `Config` out, every problem reported at once.

Owns the schema (pydantic), the defaults, and reading secrets from the environment (by the
variable *name* given in the file; secrets never live in the file). Must not open the
database, the network or SMTP: it only checks and describes.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from email.utils import parseaddr
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from bot.core.calendar import ArxivCalendar, PollPolicy
from bot.core.checks import canonical_category, check_address, check_header_text
from bot.core.errors import ConfigError, RuleError
from bot.core.links import MIN_SECRET, LinkSigner, check_public_url, max_ages
from bot.core.models import INCLUDE_CHOICES, Subscriber
from bot.core.schedule import (
    WEEKDAYS,
    Defaults,
    check_timezone,
    parse_time,
    parse_weekday,
)
from bot.rules import format_rule, parse_rule
from bot.sources import (
    MAX_BODY_MB_LIMIT,
    MEGABYTE,
    REQUEST_DEADLINE_LIMIT,
    SOURCE_KINDS,
    FetchLimits,
    load_builtin_sources,
)

CONFIG_VERSION = 1
MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config file larger than this is a mistake
DEFAULT_MAX_RULES = 50  # rules per subscriber ([digest] max_rules)
MAX_RULES = 1000  # the most [digest] max_rules may allow
DEFAULT_DATABASE_URL = "sqlite:///paperbell.sqlite"

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@\-]{0,63}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SLACK_CHANNEL_RE = re.compile(r"^(#[a-z0-9][a-z0-9_\-]{0,79}|[CG][A-Z0-9]{6,20})$")
SLACK_USER_RE = re.compile(r"^[UW][A-Z0-9]{6,20}$")
SLACK_API_URL = "https://slack.com/api/"
# Keys that would hold a secret in the file; each has a `<key>_env` naming its variable.
DOMAIN_RE = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+")
MAKE_SECRET = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
SECRET_KEYS = (
    "password",
    "bot_token",
    "signing_secret",
    "app_token",
    "webhook_url",
    "secret_key",
)
PLACEHOLDER_SECRETS = {"", "changeme", "change-me", "password", "secret", "xxx", "todo", "..."}


def _check_rule(text: str) -> str:
    try:
        parse_rule(text)
    except RuleError as exc:
        raise ValueError(
            f"{exc}\n      {exc.caret().replace(chr(10), chr(10) + '      ')}"
        ) from None
    return text


def _check_category(value: str) -> str:
    return canonical_category(value)


def _check_email(value: str) -> str:
    return check_address(value, what="")


def _check_header(value: str) -> str:
    return check_header_text(value, what="")


def _check_time(value: str) -> str:
    parse_time(value)
    return value.strip()


def _check_weekday(value: str) -> str:
    return WEEKDAYS[parse_weekday(value)]


RuleText = Annotated[str, AfterValidator(_check_rule)]
TimeOfDay = Annotated[str, AfterValidator(_check_time)]
Weekday = Annotated[str, AfterValidator(_check_weekday)]
TimeZoneName = Annotated[str, AfterValidator(check_timezone)]
Every = Literal["daily", "weekly"]
CategoryName = Annotated[str, AfterValidator(_check_category)]
EmailAddress = Annotated[str, AfterValidator(_check_email)]
HeaderText = Annotated[str, AfterValidator(_check_header)]


def _check_env_name(value: str) -> str:
    if not ENV_NAME_RE.match(value):
        raise ValueError(f"{value!r} is not an environment variable name")
    return value


def _check_slack_channel(value: str) -> str:
    if not SLACK_CHANNEL_RE.match(value):
        raise ValueError(
            f"{value!r} is not a Slack channel: write '#name' (lower case) or its id (C0123ABCD)"
        )
    return value


def _check_slack_user(value: str) -> str:
    if not SLACK_USER_RE.match(value):
        raise ValueError(
            f"{value!r} is not a Slack user id: use the member id (U0123ABCD), shown in the "
            "person's Slack profile under 'Copy member ID'"
        )
    return value


EnvName = Annotated[str, AfterValidator(_check_env_name)]
SlackChannel = Annotated[str, AfterValidator(_check_slack_channel)]
SlackUser = Annotated[str, AfterValidator(_check_slack_user)]


class _Section(BaseModel):
    # inf and nan pass every bound (nan compares false) and overflow later: refused here.
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, allow_inf_nan=False)


class DatabaseConfig(_Section):
    url: str = DEFAULT_DATABASE_URL

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if not value.startswith(("sqlite:", "postgresql:", "postgresql+", "postgres:")):
            raise ValueError("use a sqlite:///path or postgresql://user@host/db URL")
        return value


class DigestConfig(_Section):
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


class PollingConfig(_Section):
    """`[polling]`: when sources are polled (times for arXiv are US Eastern)."""

    start: TimeOfDay = "00:05"
    deadline: TimeOfDay = "06:00"
    retry_minutes: float = Field(10, gt=0, le=720)
    late_retry_minutes: float = Field(60, gt=0, le=1440)
    interval_minutes: float = Field(60, gt=0, le=1440)
    holidays: dict[date, str] = {}
    # Every request's bounds (a source may set its own): the most body it may bring, and
    # how long one attempt may take from connecting to the last byte.
    max_body_mb: float = Field(50, gt=0, le=MAX_BODY_MB_LIMIT, allow_inf_nan=False)
    request_deadline_seconds: float = Field(
        60, gt=0, le=REQUEST_DEADLINE_LIMIT, allow_inf_nan=False
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


class DaemonConfig(_Section):
    """`[daemon]`: the long-running `paperbell run`."""

    tick_seconds: float = Field(30, ge=1, le=600)
    shutdown_grace_seconds: float = Field(20, ge=0, le=600)
    # A tick (polls, then sending what is due) still running after this long makes
    # /healthz answer 503 "stuck".
    tick_deadline_seconds: float = Field(1800, ge=60, le=86400, allow_inf_nan=False)


class WebConfig(_Section):
    """`[web]`: the web app the daemon serves (health, metrics, Slack commands, and the
    pages reached from every email: one-click unsubscribe, manage, confirm, sign-up)."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(8025, ge=0, le=65535)
    # Where people reach the web app (a reverse proxy in front of host:port). With
    # secret_key_env, every email links to its manage and one-click unsubscribe pages.
    public_url: str | None = None
    secret_key_env: EnvName | None = None
    manage_link_days: float = Field(60, gt=0, le=3650)
    unsubscribe_link_days: float = Field(365, gt=0, le=3650)
    confirm_link_days: float = Field(7, gt=0, le=365)
    # A public sign-up page (/subscribe): anyone may ask for digests by email, after
    # confirming the address; `signup_domains` limits it to addresses at those domains.
    signup: bool = False
    signup_domains: list[str] = []
    secret_key: str | None = Field(None, exclude=True)  # filled from the environment only

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        return check_public_url(value) if value else None

    @field_validator("signup_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        domains = [d.strip().lower().lstrip("@") for d in value]
        for domain in domains:
            if not re.fullmatch(
                r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+", domain
            ):
                raise ValueError(f"{domain!r} is not a domain name")
        return domains

    @model_validator(mode="after")
    def _links(self) -> WebConfig:
        if self.secret_key_env and not self.public_url:
            raise ValueError("secret_key_env needs public_url: the address links point to")
        if self.signup and not self.secret_key_env:
            raise ValueError("signup needs public_url and secret_key_env (it mails a link)")
        return self

    def link_signer(self) -> LinkSigner | None:
        """The signer of the links in emails, when the site is set up for them."""
        if not (self.public_url and self.secret_key):
            return None
        ages = max_ages(
            manage_days=self.manage_link_days,
            unsubscribe_days=self.unsubscribe_link_days,
            confirm_days=self.confirm_link_days,
        )
        return LinkSigner(self.secret_key, self.public_url, max_age=ages)


class DeliveryConfig(_Section):
    """`[delivery]`: how the outbox sends, retries and gives up."""

    lease_seconds: float = Field(300, gt=0, le=86400)
    batch: int = Field(20, ge=1, le=1000)
    # At most 30: the retry delay doubles each time (86400 s * 2**29 still fits a timedelta;
    # 60 s * 2**41 did not, and the outbox crashed with OverflowError on the 42nd attempt).
    max_attempts: int = Field(8, ge=1, le=30)
    retry_first_seconds: float = Field(60, gt=0, le=86400)
    retry_max_seconds: float = Field(3 * 3600, gt=0, le=30 * 86400)
    bounce_limit: int = Field(3, ge=1, le=100)


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


class EmailConfig(_Section):
    from_: HeaderText = Field(alias="from")
    host: str = "localhost"
    port: int | None = Field(None, ge=1, le=65535)
    security: Literal["starttls", "tls", "none"] = "starttls"
    username: str | None = None
    password_env: EnvName | None = None
    timeout: float = Field(30.0, gt=0, le=600)
    list_id: HeaderText = "paperbell digest"
    unsubscribe_mailto: EmailAddress | None = None
    password: str | None = Field(None, exclude=True)  # filled from the environment only

    @field_validator("from_")
    @classmethod
    def _from_address(cls, value: str) -> str:
        _, address = parseaddr(value)
        _check_email(address)
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


class SlackConfig(_Section):
    """`[slack]`: the Slack app (bot token, slash command) and how posts are paced."""

    bot_token_env: EnvName | None = None
    signing_secret_env: EnvName | None = None
    app_token_env: EnvName | None = None
    api_url: str = SLACK_API_URL
    command: str = "/papers"
    post_interval_seconds: float = Field(1.0, ge=0, le=60)
    timeout: float = Field(30.0, gt=0, le=600)
    channel_managers: list[SlackUser] = []
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


class SubscriberConfig(_Section):
    name: str
    email: EmailAddress | None = None
    slack_channel: SlackChannel | None = None
    slack_user: SlackUser | None = None
    webhook_url_env: EnvName | None = None
    rules: list[RuleText] = Field(min_length=1, max_length=MAX_RULES)
    categories: list[CategoryName] = []
    max_papers: int = Field(50, ge=1, le=1000)
    include: list[Literal["new", "cross", "replace"]] = Field(["new", "cross"], min_length=1)
    # Unset: the [digest] defaults.
    schedule: Every | None = None
    day: Weekday | None = None
    time: TimeOfDay | None = None
    timezone: TimeZoneName | None = None
    notify_empty: bool | None = None
    email_format: Literal["html", "text"] = "html"
    abstracts: Literal["short", "full"] = "short"

    @model_validator(mode="after")
    def _somewhere(self) -> SubscriberConfig:
        if not (self.email or self.slack_channel or self.slack_user or self.webhook_url_env):
            raise ValueError(
                "say where the digests go: email, slack_channel, slack_user or webhook_url_env"
            )
        if self.slack_user and (self.slack_channel or self.webhook_url_env):
            raise ValueError(
                "slack_user (a direct message) and a channel (slack_channel, webhook_url_env) "
                "are two subscribers: declare the channel on its own"
            )
        return self

    @model_validator(mode="after")
    def _distinct_rules(self) -> SubscriberConfig:
        seen: dict[str, int] = {}
        for index, text in enumerate(self.rules):
            key = format_rule(parse_rule(text))
            if key in seen:
                raise ValueError(f"rules[{index}] repeats rules[{seen[key]}] ({text!r})")
            seen[key] = index
        return self

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError("use letters, digits, '.', '_', '-' or '@' (at most 64)")
        return value

    def to_subscriber(self, defaults: DigestConfig | None = None) -> Subscriber:
        base = (defaults or DigestConfig()).defaults()
        notify = self.notify_empty
        return Subscriber(
            name=self.name,
            email=self.email,
            rules=tuple(self.rules),
            categories=tuple(self.categories),
            max_papers=self.max_papers,
            include=frozenset(self.include),
            origin="config",
            schedule=base.resolve(self.schedule, self.day, self.time, self.timezone),
            notify_empty=base.notify_empty if notify is None else notify,
            slack_channel=self.slack_channel,
            slack_user=self.slack_user,
            slack_webhook=self.webhook_url_env,
            email_format=self.email_format,
            abstracts=self.abstracts,
        )


class Config(_Section):
    version: int
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    digest: DigestConfig = Field(default_factory=DigestConfig)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    polling: PollingConfig = Field(default_factory=PollingConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    sources: list[SourceConfig] = []
    email: EmailConfig | None = None
    slack: SlackConfig | None = None
    subscribers: list[SubscriberConfig] = []
    # Incoming webhook URLs by the environment variable that holds them (filled at load).
    webhooks: dict[str, str] = Field(default_factory=dict, exclude=True)
    path: Path | None = Field(None, exclude=True)

    @field_validator("version")
    @classmethod
    def _version(cls, value: int) -> int:
        if value != CONFIG_VERSION:
            raise ValueError(f"this paperbell reads config version {CONFIG_VERSION}, not {value}")
        return value

    def declared_subscribers(self) -> list[Subscriber]:
        """The subscribers the config file declares, as the pipeline sees them."""
        return [s.to_subscriber(self.digest) for s in self.subscribers]

    def database_url(self) -> str:
        """The database URL, a relative SQLite path taken from the config file's folder."""
        url = self.database.url
        prefix = "sqlite:///"
        if url.startswith(prefix) and self.path is not None:
            rest = url[len(prefix) :]
            if rest and not rest.startswith("/") and rest != ":memory:":
                return prefix + str((self.path.parent / rest).resolve())
        return url


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "from_":
            out += ".from"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _problems(error: ValidationError) -> list[str]:
    problems = []
    for item in error.errors():
        loc = tuple(p for p in item["loc"] if p not in ("function-after",))
        message = item["msg"]
        for prefix in ("Value error, ", "Assertion failed, "):
            message = message.removeprefix(prefix)
        if item["type"] == "extra_forbidden":
            key = str(loc[-1]) if loc else "?"
            message = (
                "a secret does not belong in the file: set it in an environment variable "
                f"and name that variable in {key}_env"
                if key in SECRET_KEYS
                else f"unknown key {key!r}"
            )
        elif item["type"] == "missing":
            message = "required key is missing"
        problems.append(f"{_format_loc(loc)}: {message}")
    return problems


def subscriber_problems(
    *,
    name: str,
    email: str | None,
    rules: Sequence[str],
    categories: Sequence[str] = (),
    settings: Mapping[str, Any] | None = None,
    max_rules: int | None = None,
) -> list[str]:
    """The problems with a subscriber given on the command line (or, later, Slack and web),
    checked by the same schema as the config file's `[[subscribers]]`; with `max_rules`,
    more rules than that is one ([digest] max_rules: count the ones it has already)."""
    data: dict[str, Any] = {"name": name, "rules": list(rules), "categories": list(categories)}
    data.update(settings or {})
    data["email"] = email if email is not None else "unknown@example.org"
    try:
        SubscriberConfig.model_validate(data)
    except ValidationError as exc:
        return _problems(exc)
    if max_rules is not None and (problem := too_many_rules(len(rules), max_rules)):
        return [f"rules: {problem}"]
    return []


def parse_config(
    data: Mapping[str, Any],
    *,
    source: str = "config",
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Validate a config mapping; raise ConfigError listing every problem at once."""
    raw = dict(data)
    problems: list[str] = []
    # The sections' secret fields are filled from the environment only: a value written in
    # the file is refused (and dropped, so the schema does not report it twice).
    secret_fields = (
        ("email", "password"),
        *(("slack", k) for k in SECRET_KEYS[1:4]),
        ("web", "secret_key"),
    )
    for section, key in secret_fields:
        table = raw.get(section)
        if isinstance(table, dict) and key in table:
            raw[section] = {k: v for k, v in table.items() if k != key}
            problems.append(
                f"{section}.{key}: a secret does not belong in the file: set it in an "
                f"environment variable and name that variable in {key}_env"
            )
    email = raw.get("email")
    # These checks read the raw data, so they are reported even when the schema fails too.
    problems += _duplicate_names(raw)
    password, secret_problems = _password(email, os.environ if environ is None else environ)
    problems += secret_problems
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_problems(exc) + problems, source=source) from None
    env = os.environ if environ is None else environ
    problems += _destination_problems(config)
    problems += _rule_count_problems(config)
    problems += _tick_deadline_problems(config)
    slack_problems, webhooks = _slack_secrets(config, env)
    problems += slack_problems
    problems += _web_secret(config, env)
    if problems:
        raise ConfigError(problems, source=source)
    config.path = path
    config.webhooks = webhooks
    if config.email is not None:
        config.email.password = password
    return config


def _tick_deadline_problems(config: Config) -> list[str]:
    """A tick must outlast any one request, or a slow but working source reads as stuck."""
    longest = config.polling.request_deadline_seconds
    for source in config.sources:
        own = source.options.get("request_deadline_seconds")
        if isinstance(own, int | float) and own > longest:
            longest = own
    if config.daemon.tick_deadline_seconds > longest:
        return []
    return [
        f"daemon.tick_deadline_seconds: {config.daemon.tick_deadline_seconds:g} must be longer "
        f"than the longest request_deadline_seconds ({longest:g})"
    ]


def _destination_problems(config: Config) -> list[str]:
    """Each subscriber's channels need their section: [email] for mail, [slack] for posts."""
    problems = []
    for index, sub in enumerate(config.subscribers):
        if sub.email and config.email is None:
            problems.append(
                f"subscribers[{index}].email: an [email] section is needed to send "
                f"{sub.name}'s digests by email"
            )
        if sub.slack_channel or sub.slack_user:
            if sub.webhook_url_env:
                continue  # the webhook posts; slack_channel only names it
            if config.slack is None or not config.slack.bot_token_env:
                key = "slack_channel" if sub.slack_channel else "slack_user"
                problems.append(
                    f"subscribers[{index}].{key}: posting to Slack needs [slack] bot_token_env "
                    "(or, for a channel, the subscriber's webhook_url_env)"
                )
    return problems


def too_many_rules(count: int, max_rules: int) -> str | None:
    """The problem with a subscriber having `count` rules, or None."""
    if count <= max_rules:
        return None
    return (
        f"{count} rules, more than the {max_rules} a subscriber may have ([digest] max_rules): "
        "remove some, or join them with OR"
    )


def _rule_count_problems(config: Config) -> list[str]:
    problems = []
    for index, sub in enumerate(config.subscribers):
        if problem := too_many_rules(len(sub.rules), config.digest.max_rules):
            problems.append(f"subscribers[{index}].rules: {problem}")
    return problems


def _web_secret(config: Config, env: Mapping[str, str]) -> list[str]:
    """The key that signs the links in emails, from the variable [web] names."""
    web = config.web
    if not web.secret_key_env:
        return []
    label = "web.secret_key_env"
    value, problem = _secret(label, web.secret_key_env, env, what="a secret key")
    if value is not None and len(value.strip()) < MIN_SECRET:
        value, problem = (
            None,
            (
                f"{label}: {web.secret_key_env} is too short for a secret key (at least "
                f"{MIN_SECRET} characters; make one with `{MAKE_SECRET}`)"
            ),
        )
    web.secret_key = value.strip() if value is not None else None
    return [problem] if problem else []


# What each Slack secret looks like: (config key, prefixes, what it is).
SLACK_SECRETS = (
    ("bot_token_env", ("xoxb-",), "a bot token (xoxb-...)"),
    ("signing_secret_env", (), "the app's signing secret"),
    ("app_token_env", ("xapp-",), "an app-level token (xapp-...)"),
)


def _slack_secrets(config: Config, env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """Read the Slack tokens and webhook URLs from the variables the config names."""
    problems: list[str] = []
    slack = config.slack
    if slack is not None:
        for key, prefixes, what in SLACK_SECRETS:
            name = getattr(slack, key)
            if not name:
                continue
            value, problem = _secret(f"slack.{key}", name, env, what=what)
            value = value.strip() if value is not None else None
            if value is not None and prefixes and not value.startswith(prefixes):
                value, problem = None, f"slack.{key}: {name} does not hold {what}"
            if problem:
                problems.append(problem)
            setattr(slack, key.removesuffix("_env"), value)
    webhooks: dict[str, str] = {}
    for index, sub in enumerate(config.subscribers):
        name = sub.webhook_url_env
        if not name or name in webhooks:
            continue
        label = f"subscribers[{index}].webhook_url_env"
        value, problem = _secret(label, name, env, what="a webhook URL")
        if value is not None and not value.startswith(("https://", "http://")):
            value, problem = None, f"{label}: {name} does not hold a webhook URL (https://...)"
        if problem:
            problems.append(problem)
        elif value is not None:
            webhooks[name] = value
    return problems, webhooks


def _secret(
    label: str, name: str, env: Mapping[str, str], *, what: str
) -> tuple[str | None, str | None]:
    """A secret from the environment variable `name`, or the problem with it."""
    value = env.get(name)
    if value is None:
        return None, f"{label}: the environment variable {name} is not set"
    if value.strip().lower() in PLACEHOLDER_SECRETS:
        return None, f"{label}: {name} holds a placeholder, not {what}"
    return value, None


def _duplicate_names(raw: Mapping[str, Any]) -> list[str]:
    problems = []
    for label in ("sources", "subscribers"):
        items = raw.get(label)
        if not isinstance(items, list):
            continue
        first: dict[str, int] = {}
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            name = item.get("name") or (item.get("kind") if label == "sources" else None)
            if not isinstance(name, str):
                continue
            if name in first:
                problems.append(
                    f"{label}[{index}].name: {name!r} is already used by {label}[{first[name]}]"
                )
            first.setdefault(name, index)
    return problems


def _password(email: Any, env: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """The SMTP password from the environment variable the config names, or the problem."""
    if not isinstance(email, dict):
        return None, []
    name = email.get("password_env")
    if not name:
        if email.get("username"):
            return None, ["email.password_env: a username is set, so name the password's variable"]
        return None, []
    if not isinstance(name, str) or not ENV_NAME_RE.match(name):
        return None, []  # the schema reports it
    value, problem = _secret("email.password_env", name, env, what="a password")
    return value, [problem] if problem else []


def load_config(path: str | Path, *, environ: Mapping[str, str] | None = None) -> Config:
    """Read and validate a TOML config file: whatever the file holds (too large, not UTF-8,
    a folder, TOML nested too deep), the outcome is a Config or a ConfigError."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(
            [f"no such file: {file}"], source=str(file), hint="create one with `paperbell init`"
        ) from None
    except OSError as exc:
        raise ConfigError(
            [f"cannot read the file: {exc.strerror or exc}"], source=str(file)
        ) from None
    if len(raw) > MAX_CONFIG_BYTES:
        limit = MAX_CONFIG_BYTES // (1024 * 1024)
        raise ConfigError([f"the file is larger than {limit} MB: not a config"], source=str(file))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"not UTF-8 text (byte {exc.start + 1}): save the file as UTF-8"], source=str(file)
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"not valid TOML: {exc}"], source=str(file)) from None
    except RecursionError:
        raise ConfigError(
            ["not valid TOML: arrays or tables nested too deep"], source=str(file)
        ) from None
    except ValueError:  # a number too long for Python (over 4,300 digits)
        raise ConfigError(
            ["not valid TOML: a number with too many digits"], source=str(file)
        ) from None
    return parse_config(data, source=str(file), path=file.resolve(), environ=environ)


def example_config_text() -> str:
    """The commented example config shipped with the package (same text as config.example.toml)."""
    from importlib.resources import files

    packaged = files("bot") / "config.example.toml"
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return (Path(__file__).resolve().parent.parent / "config.example.toml").read_text("utf-8")


__all__ = [
    "INCLUDE_CHOICES",
    "Config",
    "EmailConfig",
    "SourceConfig",
    "SubscriberConfig",
    "example_config_text",
    "load_config",
    "parse_config",
    "subscriber_problems",
    "too_many_rules",
]


def config_secrets(config: Config) -> list[str]:
    """The secret values of a loaded config: the Slack tokens and signing secret, the SMTP
    password, the web secret key, webhook URLs, the database URL's password."""
    found: list[str | None] = [config.web.secret_key, *config.webhooks.values()]
    if config.slack is not None:
        found += [config.slack.bot_token, config.slack.app_token, config.slack.signing_secret]
    if config.email is not None:
        found.append(config.email.password)
    with contextlib.suppress(ValueError):  # not a URL urlsplit reads: no password in it
        found.append(urlsplit(config.database.url).password)
    return [s for s in found if s]
