"""Which secrets each command uses, and `require_secrets`, which a command calls to ask
for the ones it uses: one line per variable that is not set ("[email] password_env names
PAPERBELL_SMTP_PASSWORD, which is not set: `paperbell digest` sends email and needs it").

Loading the config does not ask for secrets: a variable that is not set is recorded
(`Config.missing_secrets`), so `list`, `status`, `try`, `db`, `digest --dry-run` ... run
without the Slack token, the SMTP password or the secret key. `check-config` reports from
`COMMAND_SECRETS` which commands need a variable that is not set.
"""

from __future__ import annotations

import click

from bot.config import (
    APPRISE_URLS,
    DATABASE_URL,
    IMAP_PASSWORD,
    LLM_API_KEY,
    MAILGUN_SIGNING_KEY,
    POSTMARK_SECRET,
    SECRET_KEY,
    SECRET_KINDS,
    SLACK_BOT_TOKEN,
    SLACK_SIGNING_SECRET,
    SMTP_PASSWORD,
    WEBHOOK_URL,
    Config,
    MissingSecret,
    SecretKind,
)
from bot.core.errors import MissingSecrets

# The secrets each command uses, besides the database's URL ([database] url_env), which
# every command that opens the database needs. The others use none: `digest --dry-run` and
# `--out` neither (their links are placeholders: `bot.pipeline.wiring.Parts`).
COMMAND_SECRETS: dict[str, tuple[SecretKind, ...]] = {
    "digest": (SMTP_PASSWORD, SECRET_KEY, SLACK_BOT_TOKEN, WEBHOOK_URL, LLM_API_KEY),
    "summarize": (LLM_API_KEY,),
    "bounce": (IMAP_PASSWORD,),  # with --imap; from a pipe, none (the secret key: if set)
    # An Apprise variable that is not set is no reason to stop: its destinations wait (the
    # others go, `status` says why), in the daemon as in `digest`; `serve` sends none. The
    # daemon reads the bounce mailbox unless [bounces] every_minutes = 0.
    "run": tuple(k for k in SECRET_KINDS if k not in (DATABASE_URL, APPRISE_URLS)),
    "serve": tuple(
        k for k in SECRET_KINDS if k not in (DATABASE_URL, WEBHOOK_URL, APPRISE_URLS, IMAP_PASSWORD)
    ),
}


def secrets_of(config: Config, command: str, *, web: bool = True) -> tuple[SecretKind, ...]:
    """The secrets `command` uses with this config: `digest` signs links only in emails,
    and without the web app nothing checks Slack's requests nor the bounce webhooks'."""
    kinds = COMMAND_SECRETS[command]
    if command == "digest" and config.email is None:
        kinds = tuple(k for k in kinds if k != SECRET_KEY)
    if not web:
        checks = (SLACK_SIGNING_SECRET, POSTMARK_SECRET, MAILGUN_SIGNING_KEY)
        kinds = tuple(k for k in kinds if k not in checks)
    reads = config.bounces is not None and config.bounces.imap_url and config.bounces.every_minutes
    if command == "run" and not reads:
        kinds = tuple(k for k in kinds if k != IMAP_PASSWORD)
    return kinds


def require_secrets(config: Config, *kinds: SecretKind) -> None:
    """Stop this command, with one line per variable to set, when the config names a
    secret of one of these kinds whose variable is not set."""
    missing = config.missing(*kinds)
    if missing:
        raise MissingSecrets([m.line(command_name()) for m in missing])


def who_needs(config: Config, missing: MissingSecret) -> str:
    """Which commands need a variable that is not set, for `check-config`."""
    if missing.kind == DATABASE_URL:
        return "every command that opens the database needs it"
    if missing.kind == APPRISE_URLS:
        return "the digests to those Apprise destinations wait until it is set (the others go)"
    names = [f"`{c}`" for c in COMMAND_SECRETS if missing.kind in secrets_of(config, c)]
    if not names:
        return "no command uses it with this config"
    said = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    if "`digest`" in names:
        said = said.replace("`digest`", "`digest` (to send; not --dry-run or --out)")
    return f"{said} {'needs' if len(names) == 1 else 'need'} it"


def command_name() -> str:
    """The running command as a user types it: `paperbell db upgrade`."""
    names: list[str] = []
    context: click.Context | None = click.get_current_context()
    while context is not None and context.parent is not None:  # the group's own name varies
        names.insert(0, context.info_name or "")
        context = context.parent
    return " ".join(["paperbell", *names])


def database_url(config: Config) -> str:
    """The config's database URL, for a command that opens the database."""
    require_secrets(config, DATABASE_URL)
    return config.database_url()
