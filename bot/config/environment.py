"""The config's secrets: never in the file, read from the environment variables the file
names (`password_env`, `bot_token_env`, `secret_key_env`, a subscriber's
`webhook_url_env`...), each checked for being set and not a placeholder; and the list of a
loaded config's secret values, for the log filter to hide.

The one module of bot.config that reads the environment. Must not read the file nor keep
a secret anywhere but in the loaded Config.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from bot.config.fields import ENV_NAME_RE, SECRET_KEYS
from bot.config.schema import Config
from bot.core.links import MIN_SECRET

MAKE_SECRET = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
PLACEHOLDER_SECRETS = {"", "changeme", "change-me", "password", "secret", "xxx", "todo", "..."}
# What each Slack secret looks like: (config key, prefixes, what it is).
SLACK_SECRETS = (
    ("bot_token_env", ("xoxb-",), "a bot token (xoxb-...)"),
    ("signing_secret_env", (), "the app's signing secret"),
    ("app_token_env", ("xapp-",), "an app-level token (xapp-...)"),
)


def strip_written_secrets(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The config data without the secrets written in the file, and a problem for each:
    the sections' secret fields are filled from the environment only (the value is dropped,
    so the schema does not report it twice)."""
    raw = dict(data)
    problems: list[str] = []
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
    return raw, problems


def read_password(email: Any, environ: Mapping[str, str] | None) -> tuple[str | None, list[str]]:
    """The SMTP password from the environment variable the raw [email] table names (None:
    the process's environment), or the problem."""
    env = os.environ if environ is None else environ
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


def read_secrets(
    config: Config, environ: Mapping[str, str] | None
) -> tuple[list[str], dict[str, str]]:
    """Fill the Slack tokens and the web secret key of a validated config from the variables
    it names (None: the process's environment); the problems, and the webhook URLs by the
    variable that holds them."""
    env = os.environ if environ is None else environ
    problems, webhooks = _slack_secrets(config, env)
    problems += _web_secret(config, env)
    return problems, webhooks


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
