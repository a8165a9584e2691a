"""The configuration: TOML in, one validated `Config` out, every problem reported at once.

Owns the schema (pydantic), the defaults, and reading secrets from the environment (by the
variable *name* given in the file; secrets never live in the file). Must not open the
database, the network or SMTP: it only checks and describes.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from email.utils import parseaddr
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from bot.calendar import ArxivCalendar, PollPolicy
from bot.checks import canonical_category, check_address, check_header_text
from bot.errors import ConfigError, RuleError
from bot.models import INCLUDE_CHOICES, Subscriber
from bot.rules import format_rule, parse_rule
from bot.schedule import (
    WEEKDAYS,
    Defaults,
    check_timezone,
    parse_time,
    parse_weekday,
)
from bot.sources import SOURCE_KINDS, load_builtin_sources

CONFIG_VERSION = 1
DEFAULT_DATABASE_URL = "sqlite:///paperbell.sqlite"

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@\-]{0,63}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
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


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


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


class DaemonConfig(_Section):
    """`[daemon]`: the long-running `paperbell run`."""

    tick_seconds: float = Field(30, ge=1, le=600)
    shutdown_grace_seconds: float = Field(20, ge=0, le=600)


class WebConfig(_Section):
    """`[web]`: the web app the daemon serves (health, metrics)."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(8025, ge=0, le=65535)


class DeliveryConfig(_Section):
    """`[delivery]`: how the outbox sends, retries and gives up."""

    lease_seconds: float = Field(300, gt=0, le=86400)
    batch: int = Field(20, ge=1, le=1000)
    max_attempts: int = Field(8, ge=1, le=100)
    retry_first_seconds: float = Field(60, gt=0)
    retry_max_seconds: float = Field(3 * 3600, gt=0)
    bounce_limit: int = Field(3, ge=1, le=100)


class SourceConfig(BaseModel):
    """One `[[sources]]` table: `kind`, `name`, and the options of that kind."""

    model_config = ConfigDict(extra="allow", str_strip_whitespace=True)

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
        if options_model is not None:
            options_model.model_validate(self.options)
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
    password_env: str | None = None
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

    @field_validator("password_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME_RE.match(value):
            raise ValueError(f"{value!r} is not an environment variable name")
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


class SubscriberConfig(_Section):
    name: str
    email: EmailAddress
    rules: list[RuleText] = Field(min_length=1)
    categories: list[CategoryName] = []
    max_papers: int = Field(50, ge=1, le=1000)
    include: list[Literal["new", "cross", "replace"]] = Field(["new", "cross"], min_length=1)
    # Unset: the [digest] defaults.
    schedule: Every | None = None
    day: Weekday | None = None
    time: TimeOfDay | None = None
    timezone: TimeZoneName | None = None
    notify_empty: bool | None = None

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
    subscribers: list[SubscriberConfig] = []
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
                "and name that variable in password_env"
                if key == "password"
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
) -> list[str]:
    """The problems with a subscriber given on the command line (or, later, Slack and web),
    checked by the same schema as the config file's `[[subscribers]]`."""
    data: dict[str, Any] = {"name": name, "rules": list(rules), "categories": list(categories)}
    data.update(settings or {})
    data["email"] = email if email is not None else "unknown@example.org"
    try:
        SubscriberConfig.model_validate(data)
    except ValidationError as exc:
        return _problems(exc)
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
    email = raw.get("email")
    if isinstance(email, dict) and "password" in email:
        raw["email"] = email = {k: v for k, v in email.items() if k != "password"}
        problems.append(
            "email.password: a secret does not belong in the file: set it in an environment "
            "variable and name that variable in password_env"
        )
    # These checks read the raw data, so they are reported even when the schema fails too.
    problems += _duplicate_names(raw)
    password, secret_problems = _password(email, os.environ if environ is None else environ)
    problems += secret_problems
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_problems(exc) + problems, source=source) from None
    if config.subscribers and config.email is None:
        problems.append("email: an [email] section is needed to send the subscribers' digests")
    if problems:
        raise ConfigError(problems, source=source)
    config.path = path
    if config.email is not None:
        config.email.password = password
    return config


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
    value = env.get(name)
    if value is None:
        return None, [f"email.password_env: the environment variable {name} is not set"]
    if value.strip().lower() in PLACEHOLDER_SECRETS:
        return None, [f"email.password_env: {name} holds a placeholder, not a password"]
    return value, []


def load_config(path: str | Path, *, environ: Mapping[str, str] | None = None) -> Config:
    """Read and validate a TOML config file."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            [f"no such file: {file}"], source=str(file), hint="create one with `paperbell init`"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"cannot read the file: {exc}"], source=str(file)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"not valid TOML: {exc}"], source=str(file)) from None
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
]
