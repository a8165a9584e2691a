"""A subscriber as the config declares one (`[[subscribers]]`), and the checks of a
subscriber given anywhere else (the command line, Slack, the web) by the same schema.

Owns where the digests go, the rules (each must parse; none twice) and their labels (a
short name each, none twice), the subscriber's own schedule and reading (summaries, a
language), how many rules a subscriber may have, and the papers they like and dislike
(`like`, `dislike`: paper ids, checked and kept as keys; `like_file`: a library export,
read by bot.config.likes; `similar_max`, `similar_min`).
Must not read the environment nor the store: a subscriber is checked here, kept elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from bot.config.fields import (
    NAME_RE,
    CategoryName,
    EmailAddress,
    EnvName,
    Every,
    FilePath,
    LanguageTag,
    RuleLabel,
    RuleText,
    Section,
    SlackChannel,
    SlackUser,
    TimeOfDay,
    TimeZoneName,
    Weekday,
    rule_key,
)
from bot.config.problems import validation_problems
from bot.config.sections import MAX_RULES, DigestConfig
from bot.core.languages import is_english
from bot.core.models import Subscriber
from bot.similar.refs import paper_key

MAX_LIKES = 1000  # papers in one `like` or `dislike` list (a library file holds more)
# A paper as a person names one (`2411.18179v2`, an abs link, `doi:…`), kept as its key; a
# value that names none is a problem at its own key (`subscribers[0].like[2]`).
PaperRef = Annotated[str, AfterValidator(paper_key)]
MAX_APPRISE_URLS = 20  # in one subscriber's `apprise` list
# An Apprise URL as the schema reads it; what it names is checked by the Apprise channel
# kind (bot.channels.apprise: offline, every problem at its key).
AppriseURL = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4096)]


class LabelledRule(Section):
    """A rule written as a table, with its label: `{ rule = "marl OR ...", label = "multi-agent
    RL" }`; the digests show the label in place of the rule."""

    rule: RuleText
    label: RuleLabel | None = None


# The tags of a rule's two forms; `bot.config.problems` leaves them out of a problem's key,
# so a problem reads `rules[1]: ...` or `rules[1].label: ...`, in the file's words.
RULE_STRING, RULE_TABLE = "rule-string", "rule-table"


def _rule_form(value: Any) -> str | None:
    """Which form a rule is written in: a string, or a table (anything else: neither)."""
    if isinstance(value, str):
        return RULE_STRING
    return RULE_TABLE if isinstance(value, dict | LabelledRule) else None


RuleEntry = Annotated[
    Annotated[RuleText, Tag(RULE_STRING)] | Annotated[LabelledRule, Tag(RULE_TABLE)],
    Discriminator(
        _rule_form,
        custom_error_type="rule_form",
        custom_error_message='write a rule as a string, or as { rule = "...", label = "..." }',
    ),
]


def rule_entries(rules: Sequence[str], labels: Mapping[str, str] | None = None) -> list[Any]:
    """Rules as the schema reads them: a string each, a table for one with a label."""
    labels = labels or {}
    return [{"rule": r, "label": labels[r]} if labels.get(r) else r for r in rules]


class SubscriberConfig(Section):
    name: str
    email: EmailAddress | None = None
    slack_channel: SlackChannel | None = None
    slack_user: SlackUser | None = None
    webhook_url_env: EnvName | None = None
    # Apprise URLs (none may carry a secret), and a variable holding more (with secrets).
    apprise: list[AppriseURL] = Field(default_factory=list, max_length=MAX_APPRISE_URLS)
    apprise_env: EnvName | None = None
    rules: list[RuleEntry] = Field(min_length=1, max_length=MAX_RULES)
    categories: list[CategoryName] = Field(default_factory=list)
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
    # A digest too long for one email with full abstracts: numbered parts, or one email.
    long_emails: Literal["parts", "one"] = "parts"
    # A summary in place of each abstract; a language whose translations stand beside the
    # English (a BCP 47 tag; English itself needs none, and is read as none).
    summaries: bool = False
    language: LanguageTag | None = None
    # Papers like these (bot.similar): the papers liked and disliked (arXiv ids, arXiv
    # links, DOIs; kept as their keys), a library export of liked papers (relative to the
    # config file), at most how many papers no rule matched are added, from what score.
    like: list[PaperRef] = Field(default_factory=list, max_length=MAX_LIKES)
    dislike: list[PaperRef] = Field(default_factory=list, max_length=MAX_LIKES)
    like_file: FilePath | None = None
    similar_max: int = Field(5, ge=0, le=100)
    similar_min: float | None = Field(None, ge=0, le=1)

    @model_validator(mode="after")
    def _papers(self) -> SubscriberConfig:
        """`like` and `dislike` name each paper once (2411.18179v2 and its abs link are
        2411.18179), and none in both."""
        self.like, self.dislike = list(dict.fromkeys(self.like)), list(dict.fromkeys(self.dislike))
        both = [key for key in self.like if key in self.dislike]
        if both:
            raise ValueError(
                f"{self.name} both likes and dislikes {', '.join(both[:5])}: keep each paper "
                "in one of like and dislike"
            )
        return self

    @model_validator(mode="after")
    def _somewhere(self) -> SubscriberConfig:
        places = (self.email, self.slack_channel, self.slack_user, self.webhook_url_env)
        if not any(places) and not (self.apprise or self.apprise_env):
            raise ValueError(
                "say where the digests go: email, slack_channel, slack_user, webhook_url_env, "
                "apprise or apprise_env"
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
        labels: dict[str, int] = {}
        for index, text in enumerate(self.rule_texts):
            key = rule_key(text)
            if key in seen:
                raise ValueError(f"rules[{index}] repeats rules[{seen[key]}] ({text!r})")
            seen[key] = index
        for index, entry in enumerate(self.rules):
            label = entry.label if isinstance(entry, LabelledRule) else None
            if label is None:
                continue
            if label.casefold() in labels:
                first = labels[label.casefold()]
                raise ValueError(
                    f"rules[{index}].label repeats rules[{first}].label ({label!r}): "
                    "give each rule its own label"
                )
            labels[label.casefold()] = index
        return self

    @property
    def rule_texts(self) -> tuple[str, ...]:
        """The rules' texts, in order (a table's `rule`)."""
        return tuple(e.rule if isinstance(e, LabelledRule) else e for e in self.rules)

    @property
    def labels(self) -> dict[str, str]:
        """The labelled rules' labels, by the rule's text."""
        return {e.rule: e.label for e in self.rules if isinstance(e, LabelledRule) and e.label}

    @field_validator("language")
    @classmethod
    def _no_english(cls, value: str | None) -> str | None:
        return None if is_english(value) else value

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
            rules=self.rule_texts,
            labels=self.labels,
            categories=tuple(self.categories),
            max_papers=self.max_papers,
            include=frozenset(self.include),
            origin="config",
            schedule=base.resolve(self.schedule, self.day, self.time, self.timezone),
            notify_empty=base.notify_empty if notify is None else notify,
            slack_channel=self.slack_channel,
            slack_user=self.slack_user,
            slack_webhook=self.webhook_url_env,
            apprise=tuple(self.apprise),
            apprise_env=self.apprise_env,
            email_format=self.email_format,
            abstracts=self.abstracts,
            long_emails=self.long_emails,
            summaries=self.summaries,
            language=self.language,
            similar_max=self.similar_max,
            similar_min=self.similar_min,
        )


# Words that clear a subscriber's language (English only) where one is typed or picked:
# `subscribe --language none`, `/papers language off`, the manage page's "English only".
NO_LANGUAGE = frozenset({"none", "off"})


def subscriber_problems(
    *,
    name: str,
    email: str | None,
    rules: Sequence[str],
    categories: Sequence[str] = (),
    settings: Mapping[str, Any] | None = None,
    max_rules: int | None = None,
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    """The problems with a subscriber given on the command line, Slack or the web, checked
    by the same schema as the config file's `[[subscribers]]` (`labels`: the rules' labels,
    by rule); with `max_rules`, more rules than that is one ([digest] max_rules: count the
    ones it has already)."""
    data: dict[str, Any] = {
        "name": name,
        "rules": rule_entries(rules, labels),
        "categories": list(categories),
    }
    data.update(_typed(settings or {}))
    data["email"] = email if email is not None else "unknown@example.org"
    try:
        SubscriberConfig.model_validate(data)
    except ValidationError as exc:
        return validation_problems(exc, model=SubscriberConfig, data=data)
    if max_rules is not None and (problem := too_many_rules(len(rules), max_rules)):
        return [f"rules: {problem}"]
    return []


def subscriber_settings(name: str, settings: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A subscriber's settings given on the command line, in Slack or on the web, checked by
    the same schema: the values to store (a language's standard tag, None for English or
    a word of NO_LANGUAGE; summaries as a bool) and no problem, or no values and the
    problems (then nothing may change)."""
    wanted = _typed(settings)
    data = {"name": name, "rules": ["placeholder"], "email": "unknown@example.org", **wanted}
    try:
        checked = SubscriberConfig.model_validate(data)
    except ValidationError as exc:
        return {}, validation_problems(exc, model=SubscriberConfig, data=data)
    return {key: getattr(checked, key) for key in wanted}, []


def _typed(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings with a word that clears the language (NO_LANGUAGE) read as None."""
    wanted = dict(settings)
    language = wanted.get("language")
    if isinstance(language, str) and language.strip().lower() in NO_LANGUAGE:
        wanted["language"] = None
    return wanted


def too_many_rules(count: int, max_rules: int) -> str | None:
    """The problem with a subscriber having `count` rules, or None."""
    if count <= max_rules:
        return None
    return (
        f"{count} rules, more than the {max_rules} a subscriber may have ([digest] max_rules): "
        "remove some, or join them with OR"
    )
