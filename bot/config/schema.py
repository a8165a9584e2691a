"""The whole file's schema: `Config`, its sections put together, and the checks that read
more than one section (a subscriber's channel needs its section; a tick outlasts any
request; names are not used twice).

Must not read the environment (bot.config.environment fills the secrets) nor the file
(bot.config.load does).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from bot.config.fields import Section
from bot.config.secrets import DATABASE_URL, SECRET_KINDS, MissingSecret, SecretKind
from bot.config.sections import (
    AppriseConfig,
    BouncesConfig,
    DaemonConfig,
    DatabaseConfig,
    DeliveryConfig,
    DigestConfig,
    EmailConfig,
    EmbeddingsConfig,
    LlmConfig,
    PollingConfig,
    SlackConfig,
    SourceConfig,
    WebConfig,
)
from bot.config.subscribers import SubscriberConfig, too_many_rules
from bot.core.errors import MissingSecrets
from bot.core.models import Subscriber

CONFIG_VERSION = 1


class Config(Section):
    version: int
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    digest: DigestConfig = Field(default_factory=DigestConfig)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    polling: PollingConfig = Field(default_factory=PollingConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    sources: list[SourceConfig] = Field(default_factory=list)
    email: EmailConfig | None = None
    slack: SlackConfig | None = None
    apprise: AppriseConfig = Field(default_factory=AppriseConfig)
    llm: LlmConfig | None = None
    embeddings: EmbeddingsConfig | None = None
    bounces: BouncesConfig | None = None
    subscribers: list[SubscriberConfig] = Field(default_factory=list)
    # Incoming webhook URLs by the environment variable that holds them (filled at load).
    webhooks: dict[str, str] = Field(default_factory=dict, exclude=True)
    # The environment the secrets were read from (filled at load): a database subscriber's
    # secret is named by its variable too (apprise_env), and looked up there.
    environ: Mapping[str, str] = Field(default_factory=dict, exclude=True)
    # The secrets whose variables are not set, by the key that names them (filled at
    # load): the commands that use one ask for it.
    missing_secrets: dict[str, MissingSecret] = Field(default_factory=dict, exclude=True)
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

    def declared_subscriber(self, name: str) -> Subscriber | None:
        """The subscriber the config file declares under `name`, if any (only that one
        made: a lookup does not build every declared subscriber)."""
        found = next((s for s in self.subscribers if s.name == name), None)
        return found.to_subscriber(self.digest) if found is not None else None

    def missing(self, *kinds: SecretKind) -> list[MissingSecret]:
        """The secrets of these kinds whose variables are not set, the database's first."""
        found = [m for m in self.missing_secrets.values() if m.kind in kinds]
        return sorted(found, key=lambda m: SECRET_KINDS.index(m.kind))

    def secret_variables(self) -> list[tuple[str, str]]:
        """The environment variables the file names for its secrets (every `*_env` key
        set), each with its key path, in the file's order; each variable once."""
        found: dict[str, str] = {}
        sections: list[tuple[str, Section | None]] = [
            (name, getattr(self, name)) for name in type(self).model_fields
        ]
        sections += [(f"subscribers[{i}]", sub) for i, sub in enumerate(self.subscribers)]
        for label, section in sections:
            if not isinstance(section, Section):
                continue
            for key in type(section).model_fields:
                name = getattr(section, key)
                if key.endswith("_env") and isinstance(name, str) and name not in found:
                    found[name] = f"{label}.{key}"
        return [(label, name) for name, label in found.items()]

    def database_url(self) -> str:
        """The database URL, a relative SQLite path taken from the config file's folder.
        Raises MissingSecrets when [database] url_env names a variable that is not set."""
        if missing := self.missing(DATABASE_URL):
            raise MissingSecrets([m.line() for m in missing])
        url = self.database.url
        prefix = "sqlite:///"
        if url.startswith(prefix) and self.path is not None:
            rest = url[len(prefix) :]
            if rest and not rest.startswith("/"):
                return prefix + str((self.path.parent / rest).resolve())
        return url


def cross_section_problems(config: Config) -> list[str]:
    """The problems no one section sees: how many rules subscribers have ([digest]
    max_rules), and the tick deadline against the request deadlines. (Where their digests go
    is each channel kind's to check: the `checks` of `bot.config.load.parse_config`.)"""
    return _rule_count_problems(config) + _tick_deadline_problems(config) + _bounce_problems(config)


def _bounce_problems(config: Config) -> list[str]:
    """VERP addresses and Message-IDs are signed with the site's secret key."""
    if config.email is None or config.web.secret_key_env:
        return []
    problems = []
    if config.email.bounce_address is not None:
        problems.append(
            "email.bounce_address: needs [web] secret_key_env (and public_url): the key signs "
            "the address each message is sent from"
        )
    if config.email.bounces_by_message_id:
        problems.append(
            "email.bounces_by_message_id: needs [web] secret_key_env (and public_url): the "
            "key signs each digest's Message-ID"
        )
    return problems


def config_notes(config: Config) -> list[str]:
    """What `check-config` points out in a file that is right: subscribers who ask for
    what only an [llm] section writes get less until there is one (not a problem: the
    digests still go out)."""
    if config.llm is not None:
        return []
    notes = []
    for index, sub in enumerate(config.subscribers):
        who = f"subscribers[{index}] {sub.name}"
        if sub.language is not None:
            notes.append(
                f'{who}: language = "{sub.language}" needs an [llm] section; until there is '
                "one, digests are in English"
            )
        if sub.summaries:
            notes.append(
                f"{who}: summaries without [llm]: Hugging Face's AI summaries where a paper "
                "has one, else the abstract"
            )
    return notes


def _tick_deadline_problems(config: Config) -> list[str]:
    """A tick must outlast any one request, or a slow but working source reads as stuck;
    and the summaries of a digest run, which a tick waits for."""
    longest = config.polling.request_deadline_seconds
    for source in config.sources:
        own = source.options.get("request_deadline_seconds")
        if isinstance(own, int | float) and own > longest:
            longest = own
    problems = []
    if config.daemon.tick_deadline_seconds <= longest:
        problems.append(
            f"daemon.tick_deadline_seconds: {config.daemon.tick_deadline_seconds:g} must be "
            f"longer than the longest request_deadline_seconds ({longest:g})"
        )
    llm = config.llm
    if llm is not None and config.daemon.tick_deadline_seconds <= llm.deadline_seconds:
        problems.append(
            f"daemon.tick_deadline_seconds: {config.daemon.tick_deadline_seconds:g} must be "
            f"longer than llm.deadline_seconds ({llm.deadline_seconds:g}): a tick writes "
            "the summaries of the digests it sends"
        )
    embeddings = config.embeddings
    if embeddings is not None and config.daemon.tick_deadline_seconds <= (
        embeddings.deadline_seconds + (llm.deadline_seconds if llm is not None else 0)
    ):
        problems.append(
            f"daemon.tick_deadline_seconds: {config.daemon.tick_deadline_seconds:g} must be "
            f"longer than embeddings.deadline_seconds ({embeddings.deadline_seconds:g})"
            + (" and llm.deadline_seconds together" if llm is not None else "")
            + ": a tick embeds the papers of the digests it ranks"
        )
    return problems


def _rule_count_problems(config: Config) -> list[str]:
    problems = []
    for index, sub in enumerate(config.subscribers):
        if problem := too_many_rules(len(sub.rules), config.digest.max_rules):
            problems.append(f"subscribers[{index}].rules: {problem}")
    return problems


def duplicate_name_problems(raw: Mapping[str, Any]) -> list[str]:
    """Two [[sources]] or two [[subscribers]] of one name, read from the raw data (so they
    are reported even when the schema fails too)."""
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
