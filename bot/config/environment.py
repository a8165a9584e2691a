"""The config's secrets: never in the file, read from the environment variables the file
names (`password_env`, `bot_token_env`, `secret_key_env`, a subscriber's
`webhook_url_env` and `apprise_env`, the database's `url_env`...). A value that is set is
checked (not empty, not a placeholder, the right shape): a wrong one is a problem of the config. A
variable that is not set is recorded as missing (`Config.missing_secrets`), for the
command that uses it to ask for. And the list of a loaded config's secret values, for
the log filter to hide.

The one module of bot.config that reads the environment. Must not read the file nor keep
a secret anywhere but in the loaded Config.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from bot.config.fields import ENV_NAME_RE, SECRET_KEYS
from bot.config.schema import Config
from bot.config.secrets import (
    APPRISE_URLS,
    DATABASE_URL,
    IMAP_PASSWORD,
    LLM_API_KEY,
    MAILGUN_SIGNING_KEY,
    POSTMARK_SECRET,
    SECRET_KEY,
    SLACK_APP_TOKEN,
    SLACK_BOT_TOKEN,
    SLACK_SIGNING_SECRET,
    SMTP_PASSWORD,
    WEBHOOK_URL,
    MissingSecret,
    SecretKind,
)
from bot.config.sections import EmbeddingsConfig, LlmConfig, check_database_url
from bot.config.subscribers import SubscriberConfig
from bot.core.links import MIN_SECRET

MAKE_SECRET = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
PLACEHOLDER_SECRETS = {"changeme", "change-me", "password", "secret", "xxx", "todo", "..."}
# What each Slack secret looks like: (config key, prefixes, what it is, its kind).
SLACK_SECRETS: tuple[tuple[str, tuple[str, ...], str, SecretKind], ...] = (
    ("bot_token_env", ("xoxb-",), "a bot token (xoxb-...)", SLACK_BOT_TOKEN),
    ("signing_secret_env", (), "the app's signing secret", SLACK_SIGNING_SECRET),
    ("app_token_env", ("xapp-",), "an app-level token (xapp-...)", SLACK_APP_TOKEN),
)


def strip_written_secrets(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The config data without the secrets written in the file, and a problem for each:
    the sections' secret fields are filled from the environment only (the value is dropped,
    so the schema does not report it twice)."""
    raw = dict(data)
    problems: list[str] = []
    secret_fields = (
        ("email", "password"),
        ("bounces", "password"),
        ("bounces", "postmark_secret"),
        ("bounces", "mailgun_signing_key"),
        *(("slack", k) for k in SECRET_KEYS[1:4]),
        ("web", "secret_key"),
        ("llm", "api_key"),
        ("embeddings", "api_key"),
    )
    problems += _strip_server_passwords(raw)
    for section, key in secret_fields:
        table = raw.get(section)
        if isinstance(table, dict) and key in table:
            raw[section] = {k: v for k, v in table.items() if k != key}
            problems.append(
                f"{section}.{key}: a secret does not belong in the file: set it in an "
                f"environment variable and name that variable in {key}_env"
            )
    return raw, problems


def _strip_server_passwords(raw: dict[str, Any]) -> list[str]:
    """A password written in an [[email.servers]] entry: dropped, and a problem (as above)."""
    email = raw.get("email")
    if not isinstance(email, dict) or not isinstance(email.get("servers"), list):
        return []
    servers = email["servers"]
    problems: list[str] = []
    kept: list[Any] = []
    for index, server in enumerate(servers):
        if isinstance(server, dict) and "password" in server:
            server = {k: v for k, v in server.items() if k != "password"}
            problems.append(
                f"email.servers[{index}].password: a secret does not belong in the file: set "
                "it in an environment variable and name that variable in password_env"
            )
        kept.append(server)
    if problems:
        raw["email"] = {**email, "servers": kept}
    return problems


class SecretReader:
    """Reads secrets from an environment (None: the process's): a value that is set but
    wrong is a problem of the config; a variable that is not set is recorded as missing,
    for the command that uses it to ask for (`bot.config.secrets`)."""

    def __init__(self, environ: Mapping[str, str] | None) -> None:
        self.env = os.environ if environ is None else environ
        self.problems: list[str] = []
        self.missing: dict[str, MissingSecret] = {}

    def read(self, label: str, name: str, *, what: str, kind: SecretKind, key: str) -> str | None:
        """The value of `name`; None when it is not set (recorded as missing at `key`) or
        holds a placeholder (a problem at `label`)."""
        value = self.env.get(name)
        if value is None:
            self.missing[key] = MissingSecret(kind, key, name)
            return None
        if not value.strip():
            self.problems.append(f"{label}: {name} is empty, not {what}")
            return None
        if value.strip().lower() in PLACEHOLDER_SECRETS:
            self.problems.append(f"{label}: {name} holds a placeholder, not {what}")
            return None
        return value

    def refuse(self, problem: str) -> None:
        """A value that is set but is not the secret it should be."""
        self.problems.append(problem)


def read_password(email: Any, secrets: SecretReader, where: str = "email") -> str | None:
    """The SMTP password from the environment variable the raw [email] table names (or
    one of its [[email.servers]]: `where` is "email.servers[0]")."""
    if not isinstance(email, dict):
        return None
    name = email.get("password_env")
    if not name:
        if email.get("username"):
            secrets.refuse(
                f"{where}.password_env: a username is set, so name the password's variable"
            )
        return None
    if not isinstance(name, str) or not ENV_NAME_RE.match(name):
        return None  # the schema reports it
    key = "[email] password_env" if where == "email" else f"{where}.password_env"
    return secrets.read(
        f"{where}.password_env", name, what="a password", kind=SMTP_PASSWORD, key=key
    )


def read_server_passwords(email: Any, secrets: SecretReader) -> list[str | None]:
    """Each [[email.servers]] entry's SMTP password, from the variable it names."""
    servers = email.get("servers") if isinstance(email, dict) else None
    if not isinstance(servers, list):
        return []
    return [
        read_password(server, secrets, f"email.servers[{index}]")
        for index, server in enumerate(servers)
    ]


def read_imap_password(bounces: Any, secrets: SecretReader) -> str | None:
    """The bounce mailbox's password from the variable the raw [bounces] table names."""
    if not isinstance(bounces, dict):
        return None
    name = _named(bounces, "password_env")
    if name is None:
        if not bounces.get("password_env") and bounces.get("imap_url"):
            secrets.refuse("bounces.password_env: name the variable that holds the password")
        return None
    return secrets.read(
        "bounces.password_env",
        name,
        what="a password",
        kind=IMAP_PASSWORD,
        key="[bounces] password_env",
    )


# The webhooks' secrets: (key, what it is, its kind).
WEBHOOK_SECRETS: tuple[tuple[str, str, SecretKind], ...] = (
    ("postmark_secret_env", "a webhook password", POSTMARK_SECRET),
    ("mailgun_signing_key_env", "a webhook signing key", MAILGUN_SIGNING_KEY),
)
MIN_WEBHOOK_SECRET = 16  # characters of a Postmark password (docs/bounces.md)


def read_webhook_secrets(bounces: Any, secrets: SecretReader) -> dict[str, str | None]:
    """The webhooks' secrets from the variables the raw [bounces] table names, by field
    (`postmark_secret`, `mailgun_signing_key`)."""
    found: dict[str, str | None] = {}
    for key, what, kind in WEBHOOK_SECRETS:
        read = _read_named(bounces, "bounces", key, what=what, kind=kind, secrets=secrets)
        if read is None:
            continue
        name, value = read
        if value is not None and kind == POSTMARK_SECRET and len(value) < MIN_WEBHOOK_SECRET:
            secrets.refuse(
                f"bounces.{key}: {name} is too short for a webhook password (at least "
                f"{MIN_WEBHOOK_SECRET} characters; make one with `{MAKE_SECRET}`)"
            )
            value = None
        found[key.removesuffix("_env")] = value
    return found


def _read_named(
    table: Any, section: str, key: str, *, what: str, kind: SecretKind, secrets: SecretReader
) -> tuple[str, str | None] | None:
    """The variable `key` of a raw table names and its value, stripped (None: the key
    names no variable; the value None: not set, or refused)."""
    name = _named(table, key)
    if name is None:
        return None
    value = secrets.read(f"{section}.{key}", name, what=what, kind=kind, key=f"[{section}] {key}")
    return name, value.strip() if value is not None else None


def _named(table: Any, key: str) -> str | None:
    """The variable a raw table's `key` names, if it is a variable's name (else the schema
    reports it)."""
    name = table.get(key) if isinstance(table, dict) else None
    if not isinstance(name, str) or not ENV_NAME_RE.match(name.strip()):
        return None
    return name.strip()


def read_slack_secrets(slack: Any, secrets: SecretReader) -> dict[str, str | None]:
    """The Slack tokens and signing secret from the variables the raw [slack] table names,
    by field (`bot_token` ...). Read before the schema checks the file, so that their
    problems come with every other one."""
    found: dict[str, str | None] = {}
    for key, prefixes, what, kind in SLACK_SECRETS:
        read = _read_named(slack, "slack", key, what=what, kind=kind, secrets=secrets)
        if read is None:
            continue
        name, value = read
        if value is not None and prefixes and not value.startswith(prefixes):
            secrets.refuse(f"slack.{key}: {name} does not hold {what}")
            value = None
        found[key.removesuffix("_env")] = value
    return found


def read_web_secret(web: Any, secrets: SecretReader) -> str | None:
    """The key that signs the links in emails, from the variable the raw [web] table
    names. Read before the schema checks the file, as the Slack secrets are."""
    name = _named(web, "secret_key_env")
    if name is None:
        return None
    label = "web.secret_key_env"
    value = secrets.read(
        label, name, what="a secret key", kind=SECRET_KEY, key="[web] secret_key_env"
    )
    value = value.strip() if value is not None else None
    if value is not None and len(value) < MIN_SECRET:
        secrets.refuse(
            f"{label}: {name} is too short for a secret key (at least {MIN_SECRET} "
            f"characters; make one with `{MAKE_SECRET}`)"
        )
        value = None
    return value


def read_secrets(config: Config, secrets: SecretReader) -> dict[str, str]:
    """Fill the database URL (from [database] url_env) and the [llm] key of a validated
    config from the variables it names; the webhook URLs by the variable that holds them.
    (The SMTP password, the Slack secrets and the web key are read from the raw tables.)"""
    _database_url(config, secrets)
    webhooks = _webhooks(config, secrets)
    _apprise_variables(config, secrets)
    _llm_key(config, secrets)
    _embeddings_key(config, secrets)
    return webhooks


def _llm_key(config: Config, secrets: SecretReader) -> None:
    """The [llm] endpoint's API key, from the variable it names."""
    _endpoint_key(config.llm, "llm", secrets)


def _embeddings_key(config: Config, secrets: SecretReader) -> None:
    """The [embeddings] endpoint's API key, from the variable it names."""
    _endpoint_key(config.embeddings, "embeddings", secrets)


def _endpoint_key(
    section: LlmConfig | EmbeddingsConfig | None, name: str, secrets: SecretReader
) -> None:
    if section is None or not section.api_key_env:
        return
    value = secrets.read(
        f"{name}.api_key_env",
        section.api_key_env,
        what="an API key",
        kind=LLM_API_KEY,
        key=f"[{name}] api_key_env",
    )
    section.api_key = value.strip() if value is not None else None


def _database_url(config: Config, secrets: SecretReader) -> None:
    """The database URL from the variable [database] url_env names, checked as the file's."""
    name = config.database.url_env
    if not name:
        return
    label = "database.url_env"
    value = secrets.read(
        label, name, what="a database URL", kind=DATABASE_URL, key="[database] url_env"
    )
    if value is None:
        return
    try:
        config.database.url = check_database_url(value.strip())
    except ValueError as exc:
        secrets.refuse(f"{label}: {name} does not hold a database URL: {exc}")


def _variables_named(
    config: Config, key: Literal["webhook_url_env", "apprise_env"]
) -> Iterator[tuple[int, SubscriberConfig, str]]:
    """Each variable the subscribers name under `key`, once (the first subscriber that
    names it, and its index): several may share one."""
    seen: set[str] = set()
    for index, sub in enumerate(config.subscribers):
        name = getattr(sub, key)
        if name and name not in seen:
            seen.add(name)
            yield index, sub, name


def _webhooks(config: Config, secrets: SecretReader) -> dict[str, str]:
    """The subscribers' incoming webhook URLs, by the variable that holds each."""
    webhooks: dict[str, str] = {}
    for index, sub, name in _variables_named(config, "webhook_url_env"):
        label = f"subscribers[{index}].webhook_url_env"
        key = f"[[subscribers]] {sub.name}: webhook_url_env"
        value = secrets.read(label, name, what="a webhook URL", kind=WEBHOOK_URL, key=key)
        if value is not None and not value.startswith(("https://", "http://")):
            secrets.refuse(f"{label}: {name} does not hold a webhook URL (https://...)")
        elif value is not None:
            webhooks[name] = value
    return webhooks


def _apprise_variables(config: Config, secrets: SecretReader) -> None:
    """Each variable a subscriber's apprise_env names: not set, recorded as missing (its
    Apprise digests wait for it; nothing else does); set but empty or a placeholder, a
    problem. What the URLs in it name is the Apprise channel kind's to check."""
    for index, sub, name in _variables_named(config, "apprise_env"):
        secrets.read(
            f"subscribers[{index}].apprise_env",
            name,
            what="Apprise URLs",
            kind=APPRISE_URLS,
            key=f"[[subscribers]] {sub.name}: apprise_env",
        )


def config_secrets(config: Config) -> list[str]:
    """The secret values of a loaded config: the Slack tokens and signing secret, the SMTP
    password, the web secret key, webhook URLs, the database URL's password."""
    found: list[str | None] = [config.web.secret_key, *config.webhooks.values()]
    if config.slack is not None:
        found += [config.slack.bot_token, config.slack.app_token, config.slack.signing_secret]
    if config.email is not None:
        found += [config.email.password, *(s.password for s in config.email.servers)]
    if config.bounces is not None:
        found += [
            config.bounces.password,
            config.bounces.postmark_secret,
            config.bounces.mailgun_signing_key,
        ]
    if config.llm is not None:
        found.append(config.llm.api_key)
    with contextlib.suppress(ValueError):  # not a URL urlsplit reads: no password in it
        password = urlsplit(config.database.url).password
        found += [password, unquote(password or "")]  # as written, and as a driver reads it
    return [s for s in found if s]
