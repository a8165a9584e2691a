"""Configs for the tests: sections that point at the servers of support.servers (the SMTP
sink, the Slack stand-in), whole configs for the pages and Slack, and TOML text for the tests
that write a config file as a user would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.config import Config, parse_config
from support.paths import FULL_FEED

SENDER = "paperbell <papers@paperbell.example>"
WEB_SECRET = "test-secret-key-that-is-long-enough-0123456789"


def sink_email(port: int, *, sender: str = SENDER, timeout: float | None = None) -> dict[str, Any]:
    """The [email] section that sends to the SMTP sink on `port`: loopback, no TLS."""
    section: dict[str, Any] = {
        "from": sender,
        "host": "127.0.0.1",
        "port": port,
        "security": "none",
    }
    if timeout is not None:
        section["timeout"] = timeout
    return section


def toml_table(name: str, values: dict[str, Any]) -> str:
    """`[name]` and its keys (strings, booleans and numbers) as the lines of a config
    file."""
    lines = [f"[{name}]"]
    for key, value in values.items():
        text = json.dumps(value) if isinstance(value, str | bool) else str(value)
        lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"


def local_feed_config(database_url: str, listing: Path = FULL_FEED) -> str:
    """A config file's start: the database and one arxiv source read from the real listing
    of 28 Nov 2024 on disk (a file:// URL; `listing`: another file of it, such as a part),
    so a poll needs no server."""
    return f"""version = 1
[database]
url = "{database_url}"
[[sources]]
kind = "arxiv"
categories = ["cs"]
url = "{listing.as_uri()}"
"""


def slack_config(
    slack: Any,
    database_url: str,
    subscribers: list[dict[str, Any]],
    *,
    interval: float = 0.0,
    signing_secret: str | None = None,
    socket_mode: bool = False,
    web: bool = False,
) -> Config:
    """A config whose [slack] points at the stand-in `slack` (bot token from the stand-in;
    with `signing_secret`, the slash command's endpoint too; `socket_mode`: the stand-in's
    app token, for Socket Mode; `web`: [web] with its public URL and secret key, which
    signs the 👍 / 👎 buttons' values)."""
    section: dict[str, Any] = {
        "bot_token_env": "SLACK_BOT_TOKEN",
        "api_url": slack.base_url,
        "post_interval_seconds": interval,
    }
    environ = {"SLACK_BOT_TOKEN": slack.token}
    if signing_secret is not None:
        section["signing_secret_env"] = "SLACK_SIGNING_SECRET"
        environ["SLACK_SIGNING_SECRET"] = signing_secret
    if socket_mode:
        section["app_token_env"] = "SLACK_APP_TOKEN"
        environ["SLACK_APP_TOKEN"] = slack.app_token
    data: dict[str, Any] = {
        "version": 1,
        "database": {"url": database_url},
        "slack": section,
        "subscribers": subscribers,
    }
    if web:
        data["web"] = {
            "public_url": "https://papers.lab.example",
            "secret_key_env": "PAPERBELL_SECRET_KEY",
        }
        environ["PAPERBELL_SECRET_KEY"] = WEB_SECRET
    return parse_config(data, environ=environ)


def web_config(
    database_url: str,
    smtp_port: int,
    *,
    subscribers: list[dict[str, Any]] | None = None,
    web: dict[str, Any] | None = None,
    apprise: dict[str, Any] | None = None,
    digest: dict[str, Any] | None = None,
) -> Config:
    """A config with [email] to the SMTP sink on `smtp_port` and [web] set up for the pages
    (public_url https://papers.lab.example, a secret key from the environment); `apprise`,
    `digest`: those sections, if any."""
    data: dict[str, Any] = {
        "version": 1,
        "database": {"url": database_url},
        "email": sink_email(smtp_port, sender="paperbell <digest@papers.lab.example>"),
        "web": {
            "public_url": "https://papers.lab.example",
            "secret_key_env": "PAPERBELL_SECRET_KEY",
            **(web or {}),
        },
        "subscribers": subscribers or [],
    }
    if apprise is not None:
        data["apprise"] = apprise
    if digest is not None:
        data["digest"] = digest
    return parse_config(data, environ={"PAPERBELL_SECRET_KEY": WEB_SECRET})
