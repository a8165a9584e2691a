"""The configuration: TOML in, one validated `Config` out, every problem reported at once.

Owns the schema (pydantic), the defaults, and reading secrets from the environment (by the
variable *name* given in the file; secrets never live in the file). Must not open the
database, the network or SMTP: it only checks and describes. May use core, rules and
sources; nothing above them.

- fields: the base of every section and the checked field types;
- sections: [database], [digest], [polling], [daemon], [web], [delivery], [[sources]],
  [email], [slack], [apprise], [llm];
- subscribers: [[subscribers]], and checking a subscriber given elsewhere;
- people: subscribers listed in a CSV file (`subscribe --from-file`), each row checked;
- schema: `Config`, the sections together, and the checks across them;
- problems: how a validation failure reads, one line per problem;
- environment: the secrets, read from the variables the file names;
- secrets: the secrets whose variables are not set, and what each is used for;
- load: reading the file, and the example config.
"""

from bot.config.environment import config_secrets
from bot.config.load import MAX_CONFIG_BYTES, example_config_text, load_config, parse_config
from bot.config.people import BadRow, PeopleFile, Person, read_people
from bot.config.schema import Config, config_notes
from bot.config.secrets import (
    APPRISE_URLS,
    DATABASE_URL,
    IMAP_PASSWORD,
    LLM_API_KEY,
    MAILGUN_SIGNING_KEY,
    POSTMARK_SECRET,
    SECRET_KEY,
    SECRET_KINDS,
    SLACK_APP_TOKEN,
    SLACK_BOT_TOKEN,
    SLACK_SIGNING_SECRET,
    SMTP_PASSWORD,
    WEBHOOK_URL,
    MissingSecret,
    SecretKind,
)
from bot.config.sections import (
    AppriseConfig,
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
from bot.config.servers import EmailServerConfig
from bot.config.subscribers import (
    NO_LANGUAGE,
    SubscriberConfig,
    subscriber_problems,
    subscriber_settings,
    too_many_rules,
)

__all__ = [
    "APPRISE_URLS",
    "DATABASE_URL",
    "IMAP_PASSWORD",
    "LLM_API_KEY",
    "MAILGUN_SIGNING_KEY",
    "MAX_CONFIG_BYTES",
    "NO_LANGUAGE",
    "POSTMARK_SECRET",
    "SECRET_KEY",
    "SECRET_KINDS",
    "SLACK_APP_TOKEN",
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SMTP_PASSWORD",
    "WEBHOOK_URL",
    "AppriseConfig",
    "BadRow",
    "Config",
    "DaemonConfig",
    "DatabaseConfig",
    "DeliveryConfig",
    "DigestConfig",
    "EmailConfig",
    "EmailServerConfig",
    "EmbeddingsConfig",
    "LlmConfig",
    "MissingSecret",
    "PeopleFile",
    "Person",
    "PollingConfig",
    "SecretKind",
    "SlackConfig",
    "SourceConfig",
    "SubscriberConfig",
    "WebConfig",
    "config_notes",
    "config_secrets",
    "example_config_text",
    "load_config",
    "parse_config",
    "read_people",
    "subscriber_problems",
    "subscriber_settings",
    "too_many_rules",
]
