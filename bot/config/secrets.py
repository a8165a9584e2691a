"""The secrets a loaded config names but the environment lacks: one `MissingSecret` per
variable, what kind of secret it is, and what a command does with it, in the words an
operator acts on ("[email] password_env names PAPERBELL_SMTP_PASSWORD, which is not set").

A variable that is not set is no fault of the file: a command that does not use it (`list`,
`status`, `digest --dry-run` ...) runs without it; a command that uses it asks for it (the
CLI's `require_secrets`). Pure data: reads neither the environment nor the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SecretKind = Literal[
    "database_url",
    "smtp_password",
    "secret_key",
    "slack_bot_token",
    "slack_signing_secret",
    "slack_app_token",
    "webhook_url",
    "apprise_urls",
    "llm_api_key",
    "imap_password",
    "postmark_secret",
    "mailgun_signing_key",
]
DATABASE_URL: SecretKind = "database_url"
SMTP_PASSWORD: SecretKind = "smtp_password"
SECRET_KEY: SecretKind = "secret_key"
SLACK_BOT_TOKEN: SecretKind = "slack_bot_token"
SLACK_SIGNING_SECRET: SecretKind = "slack_signing_secret"
SLACK_APP_TOKEN: SecretKind = "slack_app_token"
WEBHOOK_URL: SecretKind = "webhook_url"
APPRISE_URLS: SecretKind = "apprise_urls"
LLM_API_KEY: SecretKind = "llm_api_key"
IMAP_PASSWORD: SecretKind = "imap_password"
POSTMARK_SECRET: SecretKind = "postmark_secret"
MAILGUN_SIGNING_KEY: SecretKind = "mailgun_signing_key"
SECRET_KINDS: tuple[SecretKind, ...] = (
    DATABASE_URL,
    SMTP_PASSWORD,
    SECRET_KEY,
    SLACK_BOT_TOKEN,
    SLACK_SIGNING_SECRET,
    SLACK_APP_TOKEN,
    WEBHOOK_URL,
    APPRISE_URLS,
    LLM_API_KEY,
    IMAP_PASSWORD,
    POSTMARK_SECRET,
    MAILGUN_SIGNING_KEY,
)

# What a command does with each kind: "`paperbell digest` sends email and needs it".
USES: dict[SecretKind, str] = {
    DATABASE_URL: "opens the database",
    SMTP_PASSWORD: "sends email",
    SECRET_KEY: "signs the manage and unsubscribe links",
    SLACK_BOT_TOKEN: "posts to Slack",
    SLACK_SIGNING_SECRET: "checks Slack's slash-command requests (POST /slack/commands)",
    SLACK_APP_TOKEN: "connects to Slack in Socket Mode",
    WEBHOOK_URL: "posts to that Slack webhook",
    APPRISE_URLS: "sends to that subscriber's Apprise destinations",
    LLM_API_KEY: "asks the [llm] model for summaries and translations",
    IMAP_PASSWORD: "reads the bounce mailbox ([bounces] imap_url)",
    POSTMARK_SECRET: "checks Postmark's bounce webhook (POST /bounces/postmark)",
    MAILGUN_SIGNING_KEY: "checks Mailgun's bounce webhook (POST /bounces/mailgun)",
}


@dataclass(frozen=True, slots=True)
class MissingSecret:
    """A secret's variable, named in the file at `key`, that the environment lacks."""

    kind: SecretKind
    key: str  # where the file names it: "[email] password_env"
    variable: str  # the environment variable: "PAPERBELL_SMTP_PASSWORD"

    def line(self, command: str | None = None) -> str:
        """The one line that says what to set (and, given the command, why it is needed)."""
        unset = f"{self.key} names {self.variable}, which is not set"
        if command is None:
            return unset
        return f"{unset}: `{command}` {USES[self.kind]} and needs it"
