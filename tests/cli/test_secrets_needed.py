"""Secrets where they are needed, and nowhere else (issue 19): a config that names the SMTP
password, the Slack tokens, a webhook and the secret key runs every command that uses none
of them in an environment without them; the commands that use one (`digest` that sends,
`run`, `serve`) stop with one line per variable to set. `[database] url_env` keeps the
database URL (and its password) out of the file.

Each test runs one command as a separate process, as a user runs it, and the others through
the same command line in the test's process (`run_here`): a process start each would make
minutes of them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.cli import invoke, run, run_here
from support.config import local_feed_config
from support.paths import FULL_FEED
from support.servers import first_items

from bot.config import Config, parse_config
from bot.core.errors import ConfigError, MissingSecrets, StoreError
from bot.core.links import UNSIGNED
from bot.store import Store, schema_state

SECRETS = {
    "PB_SMTP_PASSWORD": "smtp-Password-0123",
    "PB_SECRET_KEY": "a-secret-key-that-is-long-enough-0123456789",
    "PB_SLACK_BOT_TOKEN": "xoxb-1-2-abc",
    "PB_SLACK_SIGNING_SECRET": "8f74223abcdef",
    "PB_SLACK_APP_TOKEN": "xapp-1-A1-abc",
    "PB_LAB_HOOK": "http://127.0.0.1:9/hook",  # loopback, nothing listens: nothing leaves
}
# Every secret of this config, behind a variable. Mail and Slack go to loopback ports where
# nothing listens, so a command that does send reaches nobody.
SECRET_SECTIONS = """[web]
public_url = "https://papers.lab.example"
secret_key_env = "PB_SECRET_KEY"
[email]
from = "papers@lab.example"
host = "127.0.0.1"
port = 9
security = "none"
username = "paperbell"
password_env = "PB_SMTP_PASSWORD"
[slack]
bot_token_env = "PB_SLACK_BOT_TOKEN"
signing_secret_env = "PB_SLACK_SIGNING_SECRET"
app_token_env = "PB_SLACK_APP_TOKEN"
api_url = "http://127.0.0.1:9/api/"
[[subscribers]]
name = "ada"
email = "ada@lab.example"
rules = ['"language model"']
[[subscribers]]
name = "lab"
webhook_url_env = "PB_LAB_HOOK"
rules = ['"language model"']
"""
# The line each command prints for each variable, in this order when all are unset.
LINES = {
    "PB_SMTP_PASSWORD": "[email] password_env names PB_SMTP_PASSWORD, which is not set: "
    "`paperbell {command}` sends email and needs it",
    "PB_SECRET_KEY": "[web] secret_key_env names PB_SECRET_KEY, which is not set: "
    "`paperbell {command}` signs the manage and unsubscribe links and needs it",
    "PB_SLACK_BOT_TOKEN": "[slack] bot_token_env names PB_SLACK_BOT_TOKEN, which is not set: "
    "`paperbell {command}` posts to Slack and needs it",
    "PB_SLACK_SIGNING_SECRET": "[slack] signing_secret_env names PB_SLACK_SIGNING_SECRET, which "
    "is not set: `paperbell {command}` checks Slack's slash-command requests "
    "(POST /slack/commands) and needs it",
    "PB_SLACK_APP_TOKEN": "[slack] app_token_env names PB_SLACK_APP_TOKEN, which is not set: "
    "`paperbell {command}` connects to Slack in Socket Mode and needs it",
    "PB_LAB_HOOK": "[[subscribers]] lab: webhook_url_env names PB_LAB_HOOK, which is not set: "
    "`paperbell {command}` posts to that Slack webhook and needs it",
}


# Papers of the day's listing the config reads: enough for every rule to find some.
PAPERS = 100


def write_config(folder: Path, database_url: str) -> Path:
    listing = folder / "listing.xml"
    listing.write_bytes(first_items(FULL_FEED.read_bytes(), PAPERS))
    path = folder / "config.toml"
    path.write_text(local_feed_config(database_url, listing) + SECRET_SECTIONS)
    return path


def with_config(args: tuple[str, ...], config: str) -> list[str]:
    """ARGS with `-c CONFIG` after the command's name (`db upgrade`: after both)."""
    cut = 2 if args[0] == "db" else 1
    return [*args[:cut], "-c", config, *args[cut:]]


def no_secret_asked(result: Any) -> bool:
    """Whether a command ran past its config without asking for a secret (nor crashing)."""
    return "which is not set" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.database
def test_commands_that_use_no_secret_run_without_them(tmp_path: Path, database_url: str) -> None:
    config = str(write_config(tmp_path, database_url))

    def ok(*args: str, here: bool = True) -> str:
        command = with_config(args, config)
        result = run_here(*command) if here else run(*command, cwd=tmp_path)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        assert no_secret_asked(result), (args, result.stderr)
        return result.stdout

    out = ok("check-config", here=False)
    assert out.startswith(f"{config}: OK (1 source, 2 subscribers, 2 rules; database ")
    assert "\nschema: " in out
    not_set = [line for line in out.splitlines() if line.startswith("not set: ")]
    assert not_set == [
        "not set: PB_SMTP_PASSWORD ([email] password_env): `digest` (to send; not --dry-run "
        "or --out), `run` and `serve` need it",
        "not set: PB_SECRET_KEY ([web] secret_key_env): `digest` (to send; not --dry-run or "
        "--out), `run` and `serve` need it",
        "not set: PB_SLACK_BOT_TOKEN ([slack] bot_token_env): `digest` (to send; not "
        "--dry-run or --out), `run` and `serve` need it",
        "not set: PB_SLACK_SIGNING_SECRET ([slack] signing_secret_env): `run` and `serve` need it",
        "not set: PB_SLACK_APP_TOKEN ([slack] app_token_env): `run` and `serve` need it",
        "not set: PB_LAB_HOOK ([[subscribers]] lab: webhook_url_env): `digest` (to send; not "
        "--dry-run or --out) and `run` need it",
    ]
    assert "newest" in ok("db", "upgrade") + ok("db", "current")
    assert f"{PAPERS} new" in ok("poll")
    assert "subscribed bob" in ok("subscribe", "bob", "--email", "bob@lab.example", "robot")
    # Posting to Slack needs [slack] bot_token_env in the file; subscribing sends nothing.
    assert "subscribed robots" in ok("subscribe", "robots", "--slack-channel", "#robots", "robot")
    listed = ok("list")
    assert "ada <ada@lab.example> [config, active]" in listed and "robots slack #robots" in listed
    assert "robots" in ok("status")
    assert "2411." in ok("try", '"language model"', "--since", "2024-11-28", "--no-color")
    dry = ok("digest", "--dry-run", "--since", "2024-11-28")
    assert "ada <ada@lab.example>: would get" in dry and "robots slack #robots: would get" in dry
    assert "unsubscribed bob" in ok("unsubscribe", "bob")
    assert "resumed bob" in ok("resume", "bob")
    # backfill reads no secret either: it goes on to check its dates.
    backwards = ("backfill", "--since", "2024-11-28", "--until", "2024-11-01")
    late = run_here(*with_config(backwards, config))
    assert late.returncode == 2 and "is before --since" in late.stderr and no_secret_asked(late)

    # digest --out: the files, with placeholder links where the signed ones would be.
    out_dir = tmp_path / "out"
    written = ok("digest", "--out", str(out_dir), "--since", "2024-11-28")
    assert "bob <bob@lab.example>:" in written and "-> " in written
    note = (
        "note: [web] secret_key_env names PB_SECRET_KEY, which is not set: the emails' manage "
        f"and unsubscribe links are placeholders (https://papers.lab.example/manage/{UNSIGNED})"
    )
    assert note in written.splitlines()
    bob = next(out_dir.glob("bob-*.eml")).read_text()
    assert f"https://papers.lab.example/unsubscribe/{UNSIGNED}" in bob
    assert f"https://papers.lab.example/manage/{UNSIGNED}" in bob
    # Nothing was sent or recorded by any of them.
    assert not re.search(r"[1-9][0-9]* papers sent", ok("list"))


@pytest.mark.database
def test_the_commands_that_use_a_secret_ask_for_each_by_name(
    tmp_path: Path, database_url: str
) -> None:
    config = str(write_config(tmp_path, database_url))
    assert run_here("poll", "-c", config).returncode == 0

    def refused(*args: str, env: dict[str, str] | None = None, here: bool = True) -> list[str]:
        command = with_config(args, config)
        result = run_here(*command, env=env) if here else run(*command, cwd=tmp_path, env=env)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert result.stdout == "" and "Traceback" not in result.stderr
        return result.stderr.splitlines()

    def lines(command: str, *variables: str) -> list[str]:
        return ["error: " + LINES[v].format(command=command) for v in variables]

    everything = list(LINES)
    sending = ["PB_SMTP_PASSWORD", "PB_SECRET_KEY", "PB_SLACK_BOT_TOKEN", "PB_LAB_HOOK"]
    assert refused("digest", "--since", "2024-11-28", here=False) == lines("digest", *sending)
    assert refused("run") == lines("run", *everything)
    no_web = [v for v in everything if v != "PB_SLACK_SIGNING_SECRET"]
    assert refused("run", "--no-web") == lines("run", *no_web)
    assert refused("serve") == lines("serve", *everything[:-1])
    # Only what is missing is named.
    but_token = {k: v for k, v in SECRETS.items() if k != "PB_SLACK_BOT_TOKEN"}
    assert refused("digest", env=but_token) == lines("digest", "PB_SLACK_BOT_TOKEN")
    assert refused("serve", env=but_token) == lines("serve", "PB_SLACK_BOT_TOKEN")
    # All set: `digest` goes on and sends (to loopback ports where nothing listens).
    sent = run_here("digest", "-c", config, "--since", "2024-11-28", env=SECRETS)
    assert sent.returncode == 1 and no_secret_asked(sent)
    assert "ada <ada@lab.example>: FAILED" in sent.stderr


def test_a_dry_run_shows_what_a_webhook_would_get_without_its_variable(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        local_feed_config(f"sqlite:///{tmp_path / 'pb.sqlite'}")
        + '[[subscribers]]\nname = "lab"\nwebhook_url_env = "PB_LAB_HOOK"\nrules = ["robot"]\n'
    )
    assert invoke("poll", config=config).exit_code == 0
    dry = invoke("digest", "--dry-run", "--since", "2024-11-28", config=config)
    assert dry.exit_code == 0 and "lab slack webhook:PB_LAB_HOOK: would get" in dry.output
    sent = invoke("digest", "--since", "2024-11-28", config=config)
    assert sent.exit_code == 2 and "PB_LAB_HOOK, which is not set" in sent.output


def test_a_secret_that_is_set_but_wrong_is_a_mistake_every_command_reports(
    tmp_path: Path,
) -> None:
    config = str(write_config(tmp_path, f"sqlite:///{tmp_path / 'pb.sqlite'}"))
    wrong = {**SECRETS, "PB_SLACK_BOT_TOKEN": "xapp-1-not-a-bot-token", "PB_SECRET_KEY": "short"}
    for command in ("list", "check-config"):
        result = run(command, "-c", config, cwd=tmp_path, env=wrong)
        assert result.returncode == 2, result.stderr
        assert "slack.bot_token_env: PB_SLACK_BOT_TOKEN does not hold a bot token" in result.stderr
        assert "web.secret_key_env: PB_SECRET_KEY is too short for a secret key" in result.stderr
        assert "xapp-1-not" not in result.stderr  # never the value


def test_a_send_never_carries_placeholder_links(store: Store, database_url: str) -> None:
    from bot.channels.email import FileChannel
    from bot.pipeline import DeliveryRequest, deliver, wire

    config = parse_config(
        {
            "version": 1,
            "database": {"url": database_url},
            "web": {"public_url": "https://papers.lab.example", "secret_key_env": "PB_KEY"},
            "email": {"from": "papers@lab.example"},
        },
        environ={},
    )
    channel = FileChannel(Path(tempfile.mkdtemp()))
    now = datetime(2024, 11, 28, 12, tzinfo=UTC)
    with pytest.raises(MissingSecrets, match="PB_KEY, which is not set: emails are sent with"):
        asyncio.run(deliver(wire(config, store, {"email": channel}), DeliveryRequest(), now=now))


# ---- [database] url_env -------------------------------------------------------------------

URL_ENV_CONFIG = """version = 1
[database]
url_env = "PB_DB"
"""


def with_password(url: str) -> str:
    """A PostgreSQL URL with a password in it (trust authentication ignores it), to see
    that it is never shown; a SQLite URL as it is."""
    if not url.startswith("postgresql://") or "@" not in url:
        return url
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user.split(':')[0]}:Pw-S3cret-42@{host}"


@pytest.mark.database
def test_the_database_url_comes_from_the_variable_url_env_names(
    tmp_path: Path, database_url: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(URL_ENV_CONFIG)
    url = with_password(database_url)
    env = {"PB_DB": url}
    password = "Pw-S3cret-42" if url != database_url else None

    def ok(*args: str, here: bool = True) -> str:
        result = run_here(*args, env=env) if here else run(*args, cwd=tmp_path, env=env)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        if password is not None:
            assert password not in result.stdout + result.stderr
        return result.stdout

    checked = ok("check-config", "-c", str(config), here=False)
    assert "(from $PB_DB)" in checked and "not set" not in checked
    assert "subscribed bob" in ok("subscribe", "-c", str(config), "bob", "--email", "b@x.org", "x")
    assert "bob <b@x.org> [database, active]" in ok("-vv", "list", "-c", str(config))
    assert "newest" in ok("db", "current", "-c", str(config))
    if password is not None:
        assert ":***@" in checked

    # Not set: every command that opens the database says so; check-config only reports it.
    missing = "[database] url_env names PB_DB, which is not set"
    for args in (("list",), ("db", "upgrade"), ("digest", "--dry-run")):
        result = run_here(*args, "-c", str(config))
        command = " ".join(args[:2] if args[0] == "db" else args[:1])
        assert result.returncode == 2 and result.stderr == (
            f"error: {missing}: `paperbell {command}` opens the database and needs it\n"
        )
    result = run_here("check-config", "-c", str(config))
    assert result.returncode == 0, result.stderr
    assert "database from $PB_DB, which is not set" in result.stdout
    assert f"schema: cannot tell: {missing}" in result.stdout
    assert (
        "not set: PB_DB ([database] url_env): every command that opens the database needs it"
        in result.stdout
    )


def test_url_and_url_env_are_one_or_the_other(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(URL_ENV_CONFIG + 'url = "sqlite:///pb.sqlite"\n')
    result = run("list", "-c", str(config), cwd=tmp_path, env={"PB_DB": "sqlite:///b.sqlite"})
    assert result.returncode == 2
    assert "database: url and url_env both name the database: keep one" in result.stderr


# What a variable may hold: anything. SQLite paths stay inside a temporary folder (no "/"),
# PostgreSQL hosts stay on loopback port 1, where nothing listens. A value is (whether it is
# a path in that folder, the text).
_NAME = st.text(st.characters(blacklist_characters="/\\", blacklist_categories=("Cs",)))
_PART = st.text(st.characters(blacklist_characters="/\\@:?#%&=", blacklist_categories=("Cs",)))
_HUGE = st.integers(3000, 6000).map(lambda n: "é" * n)
DatabaseValue = tuple[bool, str]


@st.composite
def database_values(draw: st.DrawFn) -> DatabaseValue:
    kind = draw(st.sampled_from(["any", "sqlite", "huge", "postgresql"]))
    if kind == "any":
        return False, draw(st.text())
    if kind in ("sqlite", "huge"):
        return True, draw(_NAME if kind == "sqlite" else _HUGE)
    user, password, name = draw(_PART), draw(_PART), draw(_PART)
    return False, f"postgresql://{user}:{password}@127.0.0.1:1/{name}"


def database_value(value: DatabaseValue, folder: str) -> str:
    in_folder, text = value
    return f"sqlite:///{folder}/{text}" if in_folder else text


HOSTILE_VALUES: list[DatabaseValue] = [
    (True, "a\x00b"),
    (True, "x" * 5000),
    (True, "\u202eevil\u2066"),
    (True, "zoë-数据.sqlite"),
    (True, ".."),
    (False, "postgresql://ü:\x00@127.0.0.1:1/db"),
    (False, "postgresql://ü:p@127.0.0.1:1/db"),
    (False, " \n"),
]


def hostile_examples(test: Any) -> Any:
    for value in HOSTILE_VALUES:
        test = example(value)(test)
    return test


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(database_values())
@hostile_examples
def test_any_value_of_url_env_gives_a_config_or_store_error(value: DatabaseValue) -> None:
    with tempfile.TemporaryDirectory() as folder:
        environ = {"PB_DB": database_value(value, folder)}
        try:
            config = parse_config({"version": 1, "database": {"url_env": "PB_DB"}}, environ=environ)
        except ConfigError as exc:
            assert exc.problems
            assert all(p.startswith("database.url_env: PB_DB ") for p in exc.problems)
            return
        assert isinstance(config, Config)
        if config.database_url().startswith("sqlite"):
            with contextlib.suppress(StoreError):
                schema_state(config.database_url())  # reads; never creates a file
            assert os.listdir(folder) == []


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(database_values())
@hostile_examples
def test_any_value_of_url_env_is_a_message_on_the_command_line(value: DatabaseValue) -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = database_value(value, folder)
        try:  # what an environment can hold at all: no NUL, no lone surrogate
            os.fsencode(url)
        except UnicodeEncodeError:
            return
        if "\x00" in url:
            return
        config = Path(folder) / "config.toml"
        config.write_text(URL_ENV_CONFIG)
        for command in ("check-config", "list"):
            result = invoke(command, config=config, env={"PB_DB": url})
            assert result.exit_code in (0, 1, 2), result.output
            assert result.exception is None or isinstance(result.exception, SystemExit), repr(
                result.exception
            )
            assert "Traceback" not in result.output
            if result.exit_code:
                assert "error: " in result.output
