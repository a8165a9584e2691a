"""Config validation: every problem reported at once, each with its key path."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from bot.config import example_config_text, load_config, parse_config
from bot.core.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def minimal(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "version": 1,
        "sources": [{"kind": "arxiv", "categories": ["cs.LG"]}],
        "email": {"from": "paperbell <papers@example.org>", "host": "localhost"},
        "subscribers": [{"name": "ada", "email": "ada@example.org", "rules": ["robot"]}],
    }
    data.update(overrides)
    return data


def problems(data: dict[str, object], environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, environ=environ or {})
    return info.value.problems


def test_example_config_is_valid_and_is_the_init_text() -> None:
    text = (ROOT / "config.example.toml").read_text()
    assert example_config_text() == text
    config = parse_config(tomllib.loads(text), environ={})
    assert config.sources[0].name == "arxiv-ml"
    assert config.subscribers[0].rules[0] == '"diffusion policy"'


def test_minimal_config_defaults() -> None:
    config = parse_config(minimal(), environ={})
    assert config.database.url == "sqlite:///paperbell.sqlite"
    assert config.sources[0].name == "arxiv"
    assert config.email is not None and config.email.effective_port == 587
    sub = config.subscribers[0].to_subscriber()
    assert sub.include == frozenset({"new", "cross"}) and sub.max_papers == 50


def test_every_problem_is_reported_with_its_key_path() -> None:
    data = minimal(
        subscribers=[
            {"name": "ada", "email": "ada@example.org", "rules": ["robot"]},
            {"name": "bob", "email": "not-an-address", "rules": ["ok"], "max_papers": 0},
            {
                "name": "cy",
                "email": "cy@example.org",
                "rules": ["fine", '"unclosed phrase'],
                "include": ["new", "everything"],
                "categories": ["astroph!"],
            },
        ],
        sources=[{"kind": "arxiv", "categories": ["cs.LG"]}, {"kind": "nope"}],
        typo_section={"x": 1},
    )
    found = problems(data)
    joined = "\n".join(found)
    assert "subscribers[1].email: not a single email address: 'not-an-address'" in joined
    assert "subscribers[1].max_papers:" in joined
    assert 'subscribers[2].rules[1]: missing closing "' in joined
    assert "subscribers[2].include[1]:" in joined
    assert "subscribers[2].categories[0]: 'astroph!' is not an arXiv category" in joined
    assert "sources[1]: unknown source kind 'nope'" in joined
    assert "typo_section: unknown key 'typo_section'" in joined
    assert len(found) >= 7


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"version": 2}, "version: this paperbell reads config version 1, not 2"),
        ({"email": {"from": "x@example.org", "password": "hunter2"}}, "email.password: a secret"),
        ({"email": {"from": "x@example.org", "security": "ssl"}}, "email.security:"),
        ({"database": {"url": "mysql://x"}}, "database.url: use a sqlite:///path"),
        ({"sources": [{"kind": "arxiv"}]}, "sources[0]"),
        (
            {"subscribers": [{"name": "a", "email": "a@x.org", "rules": ["x"]}] * 2},
            "subscribers[1].name: 'a' is already used by subscribers[0]",
        ),
    ],
)
def test_single_problems(data: dict[str, object], expected: str) -> None:
    assert any(expected in p for p in problems(minimal(**data))), problems(minimal(**data))


def test_missing_version_is_reported() -> None:
    data = minimal()
    del data["version"]
    assert "version: required key is missing" in problems(data)


def test_password_comes_from_the_environment_and_placeholders_are_rejected() -> None:
    email = {"from": "p@example.org", "username": "p", "password_env": "PB_PASS"}
    assert any("PB_PASS is not set" in p for p in problems(minimal(email=email)))
    assert any("placeholder" in p for p in problems(minimal(email=email), {"PB_PASS": "changeme"}))
    config = parse_config(minimal(email=email), environ={"PB_PASS": "s3cret-Value"})
    assert config.email is not None and config.email.password == "s3cret-Value"
    assert "s3cret" not in config.model_dump_json()


def test_load_config_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("version = 1\n[email\n")
    with pytest.raises(ConfigError, match="not valid TOML") as info:
        load_config(bad)
    assert str(bad) in str(info.value)


def test_relative_sqlite_path_is_taken_from_the_config_folder(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "paperbell.toml"
    path.parent.mkdir()
    path.write_text('version = 1\n[database]\nurl = "sqlite:///data/pb.sqlite"\n')
    config = load_config(path, environ={})
    assert config.database_url() == f"sqlite:///{tmp_path}/conf/data/pb.sqlite"


def test_schema_problems_and_cross_checks_are_reported_together() -> None:
    data = minimal(
        email={"from": "p@example.org", "port": 0, "password_env": "PB_UNSET"},
        subscribers=[
            {"name": "ada", "email": "ada@example.org", "rules": ["x"]},
            {"name": "ada", "email": "ada2@example.org", "rules": ["y"]},
        ],
    )
    found = "\n".join(problems(data))
    assert "email.port:" in found
    assert "subscribers[1].name: 'ada' is already used by subscribers[0]" in found
    assert "PB_UNSET is not set" in found


@pytest.mark.parametrize(
    ("subscriber", "expected"),
    [
        ({"rules": ["robot", "robot ", "robots"]}, "subscribers[0]: rules[1] repeats rules[0]"),
        ({"rules": ["x"], "include": []}, "subscribers[0].include:"),
        ({"rules": ["x"], "email": "zoë@example.org"}, "not a plausible email address"),
        ({"rules": ["x"], "email": "ada@example.c"}, "not a plausible email address"),
    ],
)
def test_subscriber_problems(subscriber: dict[str, object], expected: str) -> None:
    entry = {"name": "ada", "email": "ada@example.org", **subscriber}
    assert any(expected in p for p in problems(minimal(subscribers=[entry])))


def test_header_fields_refuse_control_characters() -> None:
    email = {"from": "Lab\r\nBcc: x@example.org <p@example.org>", "list_id": "a\nb"}
    found = "\n".join(problems(minimal(email=email)))
    assert "email.from: control characters" in found
    assert "email.list_id: control characters" in found


def test_subscribers_need_an_email_section() -> None:
    data = minimal()
    del data["email"]
    assert "email: an [email] section is needed" in "\n".join(problems(data))


def test_categories_take_arxiv_spelling() -> None:
    sub = {"name": "ada", "email": "ada@example.org", "rules": ["x"], "categories": ["CS.ro"]}
    config = parse_config(minimal(subscribers=[sub]), environ={})
    assert config.subscribers[0].categories == ["cs.RO"]


SLACK = {"bot_token_env": "SLACK_BOT_TOKEN", "signing_secret_env": "SLACK_SIGNING_SECRET"}
SLACK_ENV = {"SLACK_BOT_TOKEN": "xoxb-1-2-abc", "SLACK_SIGNING_SECRET": "8f74223"}


def test_slack_secrets_come_from_the_environment() -> None:
    config = parse_config(
        minimal(
            slack={**SLACK, "api_url": "http://127.0.0.1:9/api"},
            subscribers=[{"name": "lab", "slack_channel": "#robot-learning", "rules": ["robot"]}],
        ),
        environ=SLACK_ENV,
    )
    assert config.slack is not None and config.slack.bot_token == "xoxb-1-2-abc"
    assert config.slack.signing_secret == "8f74223"
    assert config.slack.api_url == "http://127.0.0.1:9/api/"  # slack-sdk's base_url form
    assert "bot_token" not in config.model_dump()["slack"]  # never dumped
    [sub] = config.declared_subscribers()
    assert sub.targets() == (("slack", "#robot-learning"),)


@pytest.mark.parametrize(
    ("slack", "subscriber", "environ", "expected"),
    [
        ({**SLACK, "bot_token": "xoxb-1"}, None, SLACK_ENV, "slack.bot_token: a secret does"),
        (SLACK, None, {}, "slack.bot_token_env: the environment variable SLACK_BOT_TOKEN is"),
        (SLACK, None, {**SLACK_ENV, "SLACK_BOT_TOKEN": "changeme"}, "holds a placeholder"),
        (SLACK, None, {**SLACK_ENV, "SLACK_BOT_TOKEN": "xapp-1"}, "does not hold a bot token"),
        (None, {"slack_channel": "#lab"}, {}, "posting to Slack needs [slack] bot_token_env"),
        (SLACK, {"slack_channel": "#Robot Learning"}, SLACK_ENV, "is not a Slack channel"),
        (SLACK, {"slack_user": "ada"}, SLACK_ENV, "is not a Slack user id"),
        (
            SLACK,
            {"slack_user": "U0123ABCD", "slack_channel": "#lab"},
            SLACK_ENV,
            "are two subscribers",
        ),
        (None, {"webhook_url_env": "HOOK"}, {"HOOK": "hooks.slack.com/x"}, "not hold a webhook"),
        (None, {"webhook_url_env": "HOOK"}, {}, "the environment variable HOOK is not set"),
        (None, {"email": None}, {}, "say where the digests go"),
        ({**SLACK, "command": "papers"}, None, SLACK_ENV, "a slash command is '/'"),
    ],
)
def test_slack_problems(
    slack: dict[str, object] | None,
    subscriber: dict[str, object] | None,
    environ: dict[str, str],
    expected: str,
) -> None:
    sub: dict[str, object] = {"name": "lab", "rules": ["robot"], **(subscriber or {})}
    if "email" not in sub and not subscriber:
        sub["email"] = "lab@example.org"
    if sub.get("email") is None:
        sub.pop("email", None)
    data = minimal(subscribers=[sub])
    if slack is not None:
        data["slack"] = slack
    assert expected in "\n".join(problems(data, environ))


def test_a_webhook_subscriber_needs_no_bot_token() -> None:
    config = parse_config(
        minimal(subscribers=[{"name": "lab", "webhook_url_env": "HOOK", "rules": ["robot"]}]),
        environ={"HOOK": "https://hooks.slack.com/services/T0/B0/x"},
    )
    assert config.webhooks == {"HOOK": "https://hooks.slack.com/services/T0/B0/x"}
    [sub] = config.declared_subscribers()
    assert sub.targets() == (("slack", "webhook:HOOK"),)
