"""Messages that fit the fault: an empty variable is empty, a host that does not resolve is
named, a refused connection is said so; the help names every source kind."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from support.cli import invoke, outcome

from bot.config import Config, parse_config
from bot.config.sections import DaemonConfig, DigestConfig, WebConfig
from bot.core.errors import ConfigError, SourceError
from bot.sources import SOURCE_KINDS, load_builtin_sources
from bot.sources.base import FetchState
from bot.sources.http import PoliteFetcher, make_client


def problems(data: dict[str, object], environ: dict[str, str]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config({"version": 1, **data}, environ=environ)
    return caught.value.problems


@pytest.mark.parametrize("value", ["", "  ", "\t"])
def test_an_empty_variable_is_called_empty(value: str) -> None:
    found = problems(
        {
            "email": {"from": "p@example.org", "password_env": "PB_PASS"},
            "database": {"url_env": "PB_DB"},
        },
        {"PB_PASS": value, "PB_DB": value},
    )
    assert "email.password_env: PB_PASS is empty, not a password" in found
    assert "database.url_env: PB_DB is empty, not a database URL" in found
    assert not any("placeholder" in line for line in found)
    found = problems({"email": {"from": "p@example.org", "password_env": "P"}}, {"P": "changeme"})
    assert found == ["email.password_env: P holds a placeholder, not a password"]


def _fetch_error(url: str) -> tuple[SourceError, list[float]]:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def main() -> SourceError:
        async with make_client() as client:
            fetcher = PoliteFetcher(client, min_interval=0, sleep=sleep)
            with pytest.raises(SourceError) as caught:
                await fetcher.get(url, FetchState(), source="news")
        return caught.value

    return asyncio.run(main()), sleeps


def test_a_host_that_does_not_resolve_is_named_not_called_busy() -> None:
    error, sleeps = _fetch_error("https://no-such-host.invalid/feed.xml")  # RFC 6761: never
    assert "cannot resolve no-such-host.invalid (" in error.message
    assert error.hint is not None and "network and DNS" in error.hint
    assert "rate-limiting" not in str(error)
    if "Temporary failure" not in error.message:  # a machine without any resolver retries
        assert sleeps == []  # a name that does not exist: no point asking again now
        assert error.message.startswith(
            "could not fetch https://no-such-host.invalid/feed.xml: cannot resolve "
        )


def test_a_refused_connection_is_said_so() -> None:
    error, sleeps = _fetch_error("http://127.0.0.1:9/feed")  # the discard port: nobody there
    assert error.message == (
        "could not fetch http://127.0.0.1:9/feed: gave up after 4 attempts; last: "
        "cannot connect to 127.0.0.1 port 9 (refused)"
    )
    assert error.hint is not None and error.hint.startswith("nothing answers at that address")
    assert sleeps == [2.0, 4.0, 8.0]


def test_the_help_names_every_source_kind() -> None:
    load_builtin_sources()
    text = " ".join(invoke("--help").output.split())
    assert len(SOURCE_KINDS) >= 4
    for kind in SOURCE_KINDS:
        assert f"`{kind}`" in text, kind
    assert "Hugging Face Daily Papers" in text and "RSS or Atom" in text


def test_an_unknown_key_suggests_the_nearest_known_one(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        "version = 1\n[deamon]\ntick_seconds = 10\n[digest]\nwindw_days = 3\n"
        '[[sources]]\nkind = "huggingface"\nday = 2\n[[sources]]\nkind = "arxiv"\n'
        'categories = ["cs.RO"]\nxyzzy = 1\n[email]\nfrom = "a@b.org"\nHost = "smtp"\n'
        '[[subscribers]]\nname = "ada"\nemail = "ada@b.org"\nrules = ["x"]\ntimezon = "UTC"\n'
    )
    code, out = outcome("check-config", config=config)
    assert code == 2
    for line in (
        "deamon: unknown key 'deamon' (did you mean 'daemon'?)",
        "digest.windw_days: unknown key 'windw_days' (did you mean 'window_days'?)",
        "sources[0].day: unknown key 'day' (did you mean 'days'?)",  # its kind's options
        "sources[1].xyzzy: unknown key 'xyzzy'\n",  # nothing near: no guess
        "email.Host: unknown key 'Host' (did you mean 'host'?)",
        "subscribers[0].timezon: unknown key 'timezon' (did you mean 'timezone'?)",
    ):
        assert f"  {line}" in out, line
    code, out = outcome("subscribe", "bob", "robot", "--email", "b@example.org", config=config)
    assert code == 2  # the file first


KNOWN = {
    "": [k for k in Config.model_fields if k not in ("webhooks", "missing_secrets", "path")],
    "daemon": list(DaemonConfig.model_fields),
    "digest": list(DigestConfig.model_fields),
    "web": [k for k in WebConfig.model_fields if k != "secret_key"],
}


@given(
    table=st.sampled_from(sorted(KNOWN)),
    key=st.one_of(
        st.text(st.characters(codec="utf-8"), min_size=1, max_size=30),
        st.sampled_from([k for keys in KNOWN.values() for k in keys]).map(lambda k: k[:-1]),
    ),
)
@example(table="", key="deamon")
@example(table="web", key="secret_key")  # a secret: it says so, and guesses nothing
def test_an_unknown_key_is_named_and_any_guess_is_a_known_key(table: str, key: str) -> None:
    assume(key not in KNOWN[table] and key != "version")
    data: dict[str, Any] = {"version": 1}
    if table:
        data[table] = {key: 1}
    else:
        data[key] = 1
    found = problems(data, {})
    where = f"{table}.{key}" if table else key
    (line,) = (line for line in found if line.startswith(f"{where}: "))
    guess = re.search(r"\(did you mean '(.*)'\?\)$", line, re.S)
    assert guess is None or guess.group(1) in KNOWN[table]
    if "a secret does not belong" in line:
        assert guess is None


def test_check_config_reports_every_problem_of_slack_and_web_at_once(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        "version = 1\n[digest]\nwindow_days = 0\n"
        '[slack]\nbot_token_env = "PB_BOT"\nsigning_secret_env = "PB_SIGN"\n'
        'app_token_env = "PB_APP"\napi_url = "ftp://slack"\ncommand = "papers"\n'
        '[web]\nport = -1\nsecret_key_env = "PB_KEY"\nsignup = true\n'
        'signup_domains = ["not a domain"]\n'
    )
    environ = {"PB_BOT": "abc", "PB_SIGN": "", "PB_APP": "xoxb-1", "PB_KEY": "short"}
    code, out = outcome("check-config", config=config, env=environ)
    assert code == 2
    found = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    assert found[0] == "digest.window_days: Input should be greater than or equal to 1"
    for line in (
        "slack.api_url: use an https:// URL",
        "slack.command: a slash command is '/' and up to 31 lower-case letters or digits",
        "slack.bot_token_env: PB_BOT does not hold a bot token (xoxb-...)",
        "slack.signing_secret_env: PB_SIGN is empty, not the app's signing secret",
        "slack.app_token_env: PB_APP does not hold an app-level token (xapp-...)",
        "web.port: Input should be greater than or equal to 0",
        "web.signup_domains: 'not a domain' is not a domain name",
        "web.secret_key_env: needs public_url, the address the links point to",
        "web.secret_key_env: PB_KEY is too short for a secret key",
    ):
        assert any(problem.startswith(line) for problem in found), line
    assert len(found) == 10
    assert "2 problems" not in out and "10 problems" in out
    # Without a key, sign-up is refused for what it needs (alone, and with the rest).
    config.write_text("version = 1\n[web]\nsignup = true\n")
    code, out = outcome("check-config", config=config)
    assert code == 2 and (
        "web.signup: needs public_url and secret_key_env (it mails a link to confirm)" in out
    )
