"""The building blocks of the config's schema: the base of every section, and the checked
field types (a rule, a time of day, a weekday, an address, a Slack channel...).

Shared by the section and subscriber models. Holds no section itself and reads nothing:
each type only checks (and tidies) one value.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints

from bot.core.checks import canonical_category, check_address, check_header_text, check_label
from bot.core.errors import RuleError
from bot.core.languages import standard_tag
from bot.core.schedule import WEEKDAYS, check_timezone, parse_time, parse_weekday
from bot.rules import format_rule, parse_rule

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@\-]{0,63}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SLACK_CHANNEL_RE = re.compile(r"^(#[a-z0-9][a-z0-9_\-]{0,79}|[CG][A-Z0-9]{6,20})$")
SLACK_USER_RE = re.compile(r"^[UW][A-Z0-9]{6,20}$")
MAX_PATH = 4096  # characters of a file's path
# Keys that would hold a secret in the file; each has a `<key>_env` naming its variable.
SECRET_KEYS = (
    "password",
    "bot_token",
    "signing_secret",
    "app_token",
    "webhook_url",
    "secret_key",
    "api_key",
    "postmark_secret",
    "mailgun_signing_key",
)


class Section(BaseModel):
    """The base of every table of the file: unknown keys are refused, strings stripped."""

    # inf and nan pass every bound (nan compares false) and overflow later: refused here.
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, allow_inf_nan=False)


@functools.lru_cache(maxsize=1 << 14)
def rule_key(text: str) -> str:
    """A rule's text as `format_rule` writes it (two rules alike have one key), or a
    RuleError. Remembered: a config or a file of 10,000 subscribers repeats its popular
    rules, and each is checked, then compared with its subscriber's others."""
    return format_rule(parse_rule(text))


def _check_rule(text: str) -> str:
    try:
        rule_key(text)
    except RuleError as exc:
        raise ValueError(
            f"{exc}\n      {exc.caret().replace(chr(10), chr(10) + '      ')}"
        ) from None
    return text


def _check_label(value: str) -> str:
    return check_label(value)


def _check_category(value: str) -> str:
    return canonical_category(value)


def check_email(value: str) -> str:
    """An email address, checked as the schema checks one (shared with [email] from)."""
    return check_address(value, what="")


def _check_header(value: str) -> str:
    return check_header_text(value, what="")


def _check_time(value: str) -> str:
    parse_time(value)
    return value.strip()


def _check_weekday(value: str) -> str:
    return WEEKDAYS[parse_weekday(value)]


def _check_env_name(value: str) -> str:
    if not ENV_NAME_RE.match(value):
        raise ValueError(f"{value!r} is not an environment variable name")
    return value


def _check_language(value: str) -> str:
    return standard_tag(value)


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


def _check_path(value: str) -> str:
    if not value.isprintable():  # a NUL cannot be opened; an escape would reach a terminal
        raise ValueError("control or invisible characters in the path")
    return value


RuleText = Annotated[str, AfterValidator(_check_rule)]
RuleLabel = Annotated[str, AfterValidator(_check_label)]  # tidied: one line, NFC
TimeOfDay = Annotated[str, AfterValidator(_check_time)]
Weekday = Annotated[str, AfterValidator(_check_weekday)]
TimeZoneName = Annotated[str, AfterValidator(check_timezone)]
Every = Literal["daily", "weekly"]
CategoryName = Annotated[str, AfterValidator(_check_category)]
EmailAddress = Annotated[str, AfterValidator(check_email)]
HeaderText = Annotated[str, AfterValidator(_check_header)]
EnvName = Annotated[str, AfterValidator(_check_env_name)]
SlackChannel = Annotated[str, AfterValidator(_check_slack_channel)]
SlackUser = Annotated[str, AfterValidator(_check_slack_user)]
LanguageTag = Annotated[str, AfterValidator(_check_language)]  # BCP 47, standardised
FilePath = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_PATH), AfterValidator(_check_path)
]
