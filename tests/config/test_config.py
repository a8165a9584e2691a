"""Config validation: every problem reported at once, each with its key path."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from support.paths import ROOT

from bot.config import config_secrets, example_config_text
from bot.core.errors import ConfigError, MissingSecrets
from bot.pipeline.wiring import load_config, parse_config, targets


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
    # Not set: no problem of the file; recorded, for the command that sends to ask for it.
    unset = parse_config(minimal(email=email), environ={})
    assert unset.email is not None and unset.email.password is None
    assert [(m.kind, m.key, m.variable) for m in unset.missing_secrets.values()] == [
        ("smtp_password", "[email] password_env", "PB_PASS")
    ]
    assert any("placeholder" in p for p in problems(minimal(email=email), {"PB_PASS": "changeme"}))
    config = parse_config(minimal(email=email), environ={"PB_PASS": "s3cret-Value"})
    assert config.email is not None and config.email.password == "s3cret-Value"
    assert "s3cret" not in config.model_dump_json()


# -- [[email.servers]] -------------------------------------------------------------------------

SENDER = {"from": "p@example.org"}


def test_email_servers_each_with_its_relay_limits_weight_and_password() -> None:
    servers = [
        {"host": "smtp.a.example", "weight": 3, "max_per_second": 14, "username": "u"}
        | {"password_env": "PB_A"},
        {"host": "SMTP.b.example", "port": 2525, "security": "none", "max_per_day": 200},
    ]
    config = parse_config(
        minimal(email=SENDER | {"servers": servers}), environ={"PB_A": "s3cret-Value"}
    )
    assert config.email is not None
    a, b = config.email.servers
    assert (a.relay, a.weight, a.max_per_second, a.password) == (
        "smtp.a.example:587",
        3,
        14,
        "s3cret-Value",
    )
    assert (b.relay, b.weight, b.max_per_day, b.password) == ("smtp.b.example:2525", 1, 200, None)
    assert "s3cret-Value" in config_secrets(config)
    assert "s3cret" not in config.model_dump_json()
    unset = parse_config(minimal(email=SENDER | {"servers": servers}), environ={})
    assert [(m.key, m.variable) for m in unset.missing_secrets.values()] == [
        ("email.servers[0].password_env", "PB_A")
    ]
    # The simple case is unchanged: no list, [email] names the relay.
    assert parse_config(minimal()).email.servers == []  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("email", "expected"),
    [
        (
            {"host": "smtp.x.example", "max_per_hour": 5, "servers": [{"host": "a.example"}]},
            "email: host, max_per_hour in [email] beside [[email.servers]]: with a servers list "
            "each server has its own (move host, max_per_hour into each server, or drop the list)",
        ),
        (
            {"servers": [{"host": "a.example"}, {"host": "A.example", "port": 587}]},
            "email: servers[1] is servers[0] again (a.example:587): list each relay once",
        ),
        ({"servers": [{"port": 25}]}, "email.servers[0].host: required key is missing"),
        ({"servers": [{"host": "a b"}]}, "email.servers[0].host: a host name or address"),
        ({"servers": [{"host": "a", "weight": 0}]}, "email.servers[0].weight:"),
        ({"servers": [{"host": "a", "max_per_second": 0}]}, "email.servers[0].max_per_second:"),
        ({"servers": [{"host": "a", "wieght": 2}]}, "email.servers[0].wieght: unknown key"),
        ({"servers": [{"host": "a", "password": "x"}]}, "email.servers[0].password: a secret"),
        (
            {"servers": [{"host": "a", "username": "u"}]},
            "email.servers[0].password_env: a username is set",
        ),
        ({"servers": [{"host": "a"}] * 51}, "email.servers:"),
        ({"servers": {"host": "a"}}, "email.servers:"),
    ],
)
def test_email_server_problems_name_the_key(email: dict[str, object], expected: str) -> None:
    found = problems(minimal(email=SENDER | email))
    assert any(p.startswith(expected) for p in found), found


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
        email={"from": "p@example.org", "port": 0, "password_env": "PB_PASS"},
        subscribers=[
            {"name": "ada", "email": "ada@example.org", "rules": ["x"]},
            {"name": "ada", "email": "ada2@example.org", "rules": ["y"]},
        ],
    )
    found = "\n".join(problems(data, {"PB_PASS": "changeme"}))
    assert "email.port:" in found
    assert "subscribers[1].name: 'ada' is already used by subscribers[0]" in found
    assert "email.password_env: PB_PASS holds a placeholder" in found


@pytest.mark.parametrize(
    ("subscriber", "expected"),
    [
        ({"rules": ["robot", "robot ", "robots"]}, "subscribers[0]: rules[1] repeats rules[0]"),
        ({"rules": ["x"], "include": []}, "subscribers[0].include:"),
        ({"rules": ["x"], "email": "zoë@example.org"}, "not a plausible email address"),
        ({"rules": ["x"], "email": "ada@example.c"}, "not a plausible email address"),
        ({"rules": ["x"], "long_emails": "split"}, "subscribers[0].long_emails:"),
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
    assert [(t.channel, t.recipient) for t in targets(config, sub)] == [
        ("slack", "#robot-learning")
    ]


@pytest.mark.parametrize(
    ("slack", "subscriber", "environ", "expected"),
    [
        ({**SLACK, "bot_token": "xoxb-1"}, None, SLACK_ENV, "slack.bot_token: a secret does"),
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


def test_a_bad_slack_section_and_the_subscriber_it_leaves_unable_to_post_both_at_once() -> None:
    # The [slack] section fails the schema (a bad variable name) and has no bot token: the
    # subscriber who posts to a channel is named in the same run, not after the first fix.
    data = minimal(subscribers=[{"name": "lab", "rules": ["robot"], "slack_channel": "#lab"}])
    data["slack"] = {"signing_secret_env": "SSS", "app_token_env": "1BAD"}
    found = problems(data, {"SSS": "s" * 32})
    assert any(p.startswith("slack.app_token_env: ") for p in found), found
    assert any(
        p.startswith("subscribers[0].slack_channel: posting to Slack needs") for p in found
    ), found


@pytest.mark.parametrize(
    ("section", "subscriber", "expected"),
    [
        (
            {"slack": {"bot_token_env": "SLACK_BOT_TOKEN"}},
            {},
            [("slack_bot_token", "[slack] bot_token_env", "SLACK_BOT_TOKEN")],
        ),
        (
            {"slack": {**SLACK, "app_token_env": "SLACK_APP_TOKEN"}},
            {},
            [
                ("slack_bot_token", "[slack] bot_token_env", "SLACK_BOT_TOKEN"),
                ("slack_signing_secret", "[slack] signing_secret_env", "SLACK_SIGNING_SECRET"),
                ("slack_app_token", "[slack] app_token_env", "SLACK_APP_TOKEN"),
            ],
        ),
        (
            {},
            {"webhook_url_env": "HOOK", "email": None},
            [("webhook_url", "[[subscribers]] lab: webhook_url_env", "HOOK")],
        ),
        (
            {"web": {"public_url": "https://papers.example", "secret_key_env": "PB_KEY"}},
            {},
            [("secret_key", "[web] secret_key_env", "PB_KEY")],
        ),
        ({"database": {"url_env": "PB_DB"}}, {}, [("database_url", "[database] url_env", "PB_DB")]),
    ],
)
def test_secrets_not_set_are_recorded_not_problems(
    section: dict[str, object], subscriber: dict[str, object], expected: list[tuple[str, ...]]
) -> None:
    sub: dict[str, object] = {"name": "lab", "email": "lab@example.org", "rules": ["robot"]}
    sub.update(subscriber)
    if sub["email"] is None:
        del sub["email"]
    config = parse_config(minimal(subscribers=[sub], **section), environ={})
    found = [(m.kind, m.key, m.variable) for m in config.missing_secrets.values()]
    assert found == expected
    assert config.missing(*(kind for kind, _, _ in expected)) == list(
        config.missing_secrets.values()
    )
    # Each says what to set, and (given the command) why it is needed.
    for missing in config.missing_secrets.values():
        line = missing.line("paperbell digest")
        assert line.startswith(f"{missing.key} names {missing.variable}, which is not set: ")
        assert "`paperbell digest` " in line and line.endswith(" and needs it")


def test_a_database_url_not_set_is_never_the_default_database() -> None:
    config = parse_config(minimal(database={"url_env": "PB_DB"}), environ={})
    with pytest.raises(MissingSecrets, match=r"\[database\] url_env names PB_DB, which is not"):
        config.database_url()


def test_a_webhook_subscriber_needs_no_bot_token() -> None:
    config = parse_config(
        minimal(subscribers=[{"name": "lab", "webhook_url_env": "HOOK", "rules": ["robot"]}]),
        environ={"HOOK": "https://hooks.slack.com/services/T0/B0/x"},
    )
    assert config.webhooks == {"HOOK": "https://hooks.slack.com/services/T0/B0/x"}
    [sub] = config.declared_subscribers()
    assert [(t.channel, t.recipient) for t in targets(config, sub)] == [("slack", "webhook:HOOK")]


def test_the_database_url_may_come_from_the_environment(tmp_path: Path) -> None:
    data = minimal(database={"url_env": "PB_DB"})
    url = "postgresql://pb:S3cret%40x@db.lab.example/pb"
    config = parse_config(data, environ={"PB_DB": f" {url}\n"})
    assert config.database_url() == url and not config.missing_secrets
    assert {"S3cret%40x", "S3cret@x"} <= set(config_secrets(config))  # masked in logs
    # A relative SQLite path is taken from the config file's folder, as in the file.
    path = tmp_path / "conf" / "paperbell.toml"
    path.parent.mkdir()
    path.write_text('version = 1\n[database]\nurl_env = "PB_DB"\n')
    config = load_config(path, environ={"PB_DB": "sqlite:///data/pb.sqlite"})
    assert config.database_url() == f"sqlite:///{tmp_path}/conf/data/pb.sqlite"


@pytest.mark.parametrize(
    ("database", "environ", "expected"),
    [
        (
            {"url": "sqlite:///a.sqlite", "url_env": "PB_DB"},
            {"PB_DB": "sqlite:///b.sqlite"},
            "database: url and url_env both name the database: keep one",
        ),
        ({"url_env": "PB DB"}, {}, "database.url_env: 'PB DB' is not an environment variable"),
        (
            {"url_env": "PB_DB"},
            {"PB_DB": "mysql://pb:Hunter2@db/pb"},
            "database.url_env: PB_DB does not hold a database URL: use a sqlite:///path",
        ),
        (
            {"url_env": "PB_DB"},
            {"PB_DB": "postgresql://pb:Hunter2@db/pb\x00"},
            "PB_DB does not hold a database URL: control or invisible characters",
        ),
        (
            {"url_env": "PB_DB"},
            {"PB_DB": "sqlite:///" + "Hunter2" * 1000},
            "PB_DB does not hold a database URL: longer than 4096 characters",
        ),
        ({"url_env": "PB_DB"}, {"PB_DB": "changeme"}, "PB_DB holds a placeholder"),
        ({"url": "sqlite:///a\x00b.sqlite"}, {}, "database.url: control or invisible"),
    ],
)
def test_database_url_problems(
    database: dict[str, str], environ: dict[str, str], expected: str
) -> None:
    found = "\n".join(problems(minimal(database=database), environ))
    assert expected in found
    assert "Hunter2" not in found  # a problem never repeats the URL: it may hold a password


@pytest.mark.parametrize(
    "url",
    ["sqlite://", "sqlite:///:memory:", "sqlite:///", "sqlite:///:memory:?timeout=5"],
)
def test_an_in_memory_database_is_refused(tmp_path: Path, url: str) -> None:
    # Each process (every command, the daemon's planner and senders) would get an empty
    # database of its own: what one command stores, the next would not find.
    expected = "an in-memory SQLite database lasts one process only"
    path = tmp_path / "config.toml"
    path.write_text(f'version = 1\n[database]\nurl = "{url}"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert [p for p in info.value.problems if p.startswith("database.url: ")] == [
        f"database.url: {expected}: each command, and the daemon's planner and senders, "
        'would get an empty one of its own; use a file, e.g. "sqlite:///paperbell.sqlite"'
    ]
    path.write_text('version = 1\n[database]\nurl_env = "PB_DB"\n')
    with pytest.raises(ConfigError, match=f"PB_DB does not hold a database URL: {expected}"):
        load_config(path, environ={"PB_DB": url})
    # A file whose name says memory is a file.
    path.write_text('version = 1\n[database]\nurl = "sqlite:///memory.sqlite"\n')
    assert load_config(path, environ={}).database_url().endswith("/memory.sqlite")


# -- how a subscriber reads: summaries, a language ------------------------------------------------


def test_a_subscriber_may_have_summaries_and_a_language() -> None:
    sub = {"name": "ada", "email": "ada@example.org", "rules": ["x"]}
    plain = parse_config(minimal(subscribers=[sub]), environ={}).declared_subscribers()[0]
    assert (plain.summaries, plain.language) == (False, None)
    reading = {**sub, "summaries": True, "language": "zh-cn"}
    declared = parse_config(minimal(subscribers=[reading]), environ={}).declared_subscribers()
    assert (declared[0].summaries, declared[0].language) == (True, "zh-CN")  # standardised
    for english in ("en", "en-GB", "EN-us"):  # English is no translation, and no error
        config = parse_config(minimal(subscribers=[{**sub, "language": english}]), environ={})
        assert config.declared_subscribers()[0].language is None


def test_a_subscriber_takes_long_digests_in_parts_unless_they_say_one() -> None:
    sub = {"name": "ada", "email": "ada@example.org", "rules": ["x"], "abstracts": "full"}
    plain = parse_config(minimal(subscribers=[sub]), environ={}).declared_subscribers()[0]
    assert plain.long_emails == "parts"
    one = {**sub, "long_emails": "one"}
    declared = parse_config(minimal(subscribers=[one]), environ={}).declared_subscribers()[0]
    assert declared.long_emails == "one"


@pytest.mark.parametrize(
    ("subscriber", "expected"),
    [
        (
            {"language": "xx"},
            "subscribers[0].language: language 'xx': no language paperbell knows by that tag",
        ),
        (
            {"language": "robot\x00"},
            "subscribers[0].language: language 'robot\\x00': not a BCP 47 language tag",
        ),
        ({"language": ""}, "subscribers[0].language: language '': not a BCP 47 language tag"),
        ({"language": 7}, "subscribers[0].language:"),
        ({"summaries": "sometimes"}, "subscribers[0].summaries:"),
    ],
)
def test_a_bad_language_or_summaries_is_a_problem_at_its_key(
    subscriber: dict[str, object], expected: str
) -> None:
    entry = {"name": "ada", "email": "ada@example.org", "rules": ["x"], **subscriber}
    found = problems(minimal(subscribers=[entry]))
    assert any(p.startswith(expected) for p in found), found


def test_a_language_or_summaries_without_llm_is_a_note_not_a_problem() -> None:
    from bot.config import config_notes

    subscribers = [
        {"name": "ada", "email": "ada@example.org", "rules": ["x"], "language": "zh"},
        {"name": "bob", "email": "bob@example.org", "rules": ["x"], "summaries": True},
        {"name": "cy", "email": "cy@example.org", "rules": ["x"], "language": "en"},
    ]
    config = parse_config(minimal(subscribers=subscribers), environ={})
    assert config_notes(config) == [
        'subscribers[0] ada: language = "zh" needs an [llm] section; until there is one, '
        "digests are in English",
        "subscribers[1] bob: summaries without [llm]: Hugging Face's AI summaries where a "
        "paper has one, else the abstract",
    ]
    llm = {"base_url": "http://localhost:11434/v1", "model": "qwen2.5:7b-instruct"}
    assert config_notes(parse_config(minimal(subscribers=subscribers, llm=llm), environ={})) == []


def test_settings_given_elsewhere_are_checked_and_stored_as_the_file_would_have_them() -> None:
    from bot.config import subscriber_problems, subscriber_settings

    assert subscriber_settings("ada", {"summaries": "on", "language": "ZH-hant"}) == (
        {"summaries": True, "language": "zh-Hant"},
        [],
    )
    for cleared in ("none", "OFF", " en ", "en-GB"):
        assert subscriber_settings("ada", {"language": cleared}) == ({"language": None}, [])
    assert subscriber_settings("ada", {"summaries": "off"}) == ({"summaries": False}, [])
    values, found = subscriber_settings("ada", {"language": "xx", "time": "25:00"})
    assert values == {}
    assert "language: language 'xx': no language paperbell knows by that tag" in found
    assert any(p.startswith("time:") for p in found)
    found = subscriber_problems(name="ada", email=None, rules=["x"], settings={"language": "xx"})
    assert found == ["language: language 'xx': no language paperbell knows by that tag"]
    cleared = subscriber_problems(name="ada", email=None, rules=["x"], settings={"language": "off"})
    assert cleared == []


# -- [llm] ----------------------------------------------------------------------------------

LLM = {"base_url": "http://localhost:11434/v1/", "model": "qwen2.5:7b-instruct"}


def test_llm_is_optional_and_takes_any_openai_compatible_endpoint() -> None:
    assert parse_config({"version": 1}, environ={}).llm is None
    llm = parse_config({"version": 1, "llm": LLM}, environ={}).llm
    assert llm is not None and llm.base_url == "http://localhost:11434/v1"
    assert (llm.timeout, llm.max_retries, llm.concurrency, llm.deadline_seconds) == (60, 2, 4, 90)
    assert llm.max_requests_per_day is None and llm.api_key is None
    # a server on the local network, without a key: plain http is fine
    lan = {"base_url": "http://gpu-box.lab:8000/v1", "model": "m"}
    assert parse_config({"version": 1, "llm": lan}, environ={}).llm is not None


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"base_url": "localhost:11434"}, "llm.base_url: the endpoint's base URL"),
        ({"model": ""}, "llm.model: "),
        ({"concurrency": 0}, "llm.concurrency: "),
        ({"max_requests_per_day": -1}, "llm.max_requests_per_day: "),
        ({"temperature": 3}, "llm.temperature: "),
        ({"timeout": float("inf")}, "llm.timeout: "),
        ({"api_key": "sk-in-the-file"}, "llm.api_key: a secret does not belong in the file"),
        (
            {"base_url": "http://api.example/v1", "api_key_env": "KEY"},
            "use https:// when an api_key_env is set",
        ),
        ({"deadline_seconds": 4000}, "llm.deadline_seconds: "),
    ],
)
def test_a_bad_llm_section_says_what_is_wrong(settings: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"version": 1, "llm": {**LLM, **settings}}, environ={})
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_the_tick_outlasts_a_digest_runs_summaries() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(
            {
                "version": 1,
                "llm": {**LLM, "deadline_seconds": 1800},
                "daemon": {"tick_deadline_seconds": 1200},
            },
            environ={},
        )
    assert caught.value.problems == [
        "daemon.tick_deadline_seconds: 1200 must be longer than llm.deadline_seconds (1800): "
        "a tick writes the summaries of the digests it sends"
    ]


def test_the_llm_key_comes_from_the_environment_and_is_masked() -> None:
    data = {"version": 1, "llm": {**LLM, "api_key_env": "PAPERBELL_LLM_KEY"}}
    config = parse_config(data, environ={"PAPERBELL_LLM_KEY": "sk-live-0123456789"})
    assert config.llm is not None and config.llm.api_key == "sk-live-0123456789"
    assert "sk-live-0123456789" in config_secrets(config)
    unset = parse_config(data, environ={})
    (missing,) = unset.missing_secrets.values()
    assert missing.line("paperbell digest") == (
        "[llm] api_key_env names PAPERBELL_LLM_KEY, which is not set: `paperbell digest` "
        "asks the [llm] model for summaries and translations and needs it"
    )
    with pytest.raises(ConfigError, match="holds a placeholder"):
        parse_config(data, environ={"PAPERBELL_LLM_KEY": "changeme"})


def test_embeddings_section() -> None:
    """[embeddings]: an endpoint (base_url) or fastembed; its key by variable only, over
    https:// unless on loopback."""
    local = {"base_url": "http://localhost:11434/v1/", "model": "nomic-embed-text"}
    config = parse_config(minimal(embeddings=local), environ={})
    assert config.embeddings is not None
    assert (config.embeddings.base_url, config.embeddings.kind) == (
        "http://localhost:11434/v1",
        "openai:nomic-embed-text",
    )
    fast = parse_config(minimal(embeddings={"provider": "fastembed", "model": "m"}), environ={})
    assert fast.embeddings is not None and fast.embeddings.kind == "fastembed:m"
    keyed = {"base_url": "https://api.example.org/v1", "model": "e", "api_key_env": "EMB_KEY"}
    config = parse_config(minimal(embeddings=keyed), environ={"EMB_KEY": "sk-123 "})
    assert config.embeddings is not None and config.embeddings.api_key == "sk-123"
    for bad, said in (
        ({"model": "m"}, "base_url is required"),
        ({**local, "base_url": "localhost:11434"}, "the endpoint's base URL"),
        ({**keyed, "base_url": "http://api.example.org/v1"}, "use https://"),
        ({**local, "api_key": "sk-1"}, "a secret does not belong in the file"),
        ({**local, "batch_size": 0}, "batch_size"),
        ({**local, "provider": "torch"}, "provider"),
        ({**local, "cache_dir": "models"}, "cache_dir is fastembed's model folder: only with"),
    ):
        assert any(said in p for p in problems(minimal(embeddings=bad))), (bad, said)


@pytest.mark.parametrize("url", ["https://example.org/papers", "https://example.org/papers/"])
def test_a_public_url_with_a_path_is_refused_at_load(url: str) -> None:
    # The pages' forms, redirects and renew buttons post to /manage/..., /rate/...: behind a
    # proxy at /papers each of them would leave the prefix and miss the pages.
    found = "\n".join(problems(minimal(web={"public_url": url, "secret_key_env": "PB_KEY"})))
    assert "web.public_url: " in found and "no path" in found, found


def test_a_public_url_at_the_root_is_taken_without_its_trailing_slash() -> None:
    web = {"public_url": "https://papers.example.org/", "secret_key_env": "PB_KEY"}
    config = parse_config(minimal(web=web), environ={})
    assert config.web.public_url == "https://papers.example.org"
