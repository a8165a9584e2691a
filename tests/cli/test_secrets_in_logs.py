"""No secret in any log line (issue 17, fault 9): at -vv, slack_sdk logs every request with
its URL, and an incoming webhook's URL is its secret. The real `paperbell` command runs as
a process (as in tests/support/cli.py) against the Slack stand-in, with every secret set.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.cli import PAPERBELL, clean_env

from bot.config import config_secrets, parse_config
from bot.core.redact import MASK, SecretFilter
from bot.demo import bundled_papers
from bot.demo.slack_standin import SlackStandIn
from bot.store import Store

pytestmark = pytest.mark.database

SECRET_KEY = "web-secret-key-0123456789-abcdefghijklmnop"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-1234-5678-SeCrEtBoTtOkEn"
SMTP_PASSWORD = "smtp-pass-Zq8u1"


def test_a_digest_at_debug_level_logs_no_secret(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'paperbell.sqlite'}"
    with Store.open(database) as store:
        store.papers.upsert(bundled_papers(), now=datetime(2024, 11, 28, 15, tzinfo=UTC))
    with SlackStandIn(token=BOT_TOKEN) as slack:
        slack.add_user("U07ADA123", "ada")
        slack.add_channel("C0ROBOTS", "robots")
        webhook = slack.add_webhook("robots", "C0ROBOTS")  # not hooks.slack.com: no shape
        (tmp_path / "config.toml").write_text(
            f"""version = 1
[database]
url = "{database}"
[web]
public_url = "https://papers.lab.example"
secret_key_env = "PAPERBELL_SECRET_KEY"
[email]
from = "paperbell <digest@lab.example>"
host = "127.0.0.1"
port = 9
username = "paperbell"
password_env = "SMTP_PASSWORD"
[slack]
api_url = "{slack.base_url}"
bot_token_env = "SLACK_BOT_TOKEN"
signing_secret_env = "SLACK_SIGNING_SECRET"
post_interval_seconds = 0
[[subscribers]]
name = "robots"
webhook_url_env = "ROBOTS_WEBHOOK"
rules = ["robot"]
[[subscribers]]
name = "ada"
slack_user = "U07ADA123"
rules = ["robot"]
"""
        )
        env = {
            **clean_env(),
            "ROBOTS_WEBHOOK": webhook,
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "PAPERBELL_SECRET_KEY": SECRET_KEY,
            "SMTP_PASSWORD": SMTP_PASSWORD,
        }
        done = subprocess.run(
            [*PAPERBELL, "-vv", "digest", "-c", "config.toml", "--since", "2024-11-28"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        posted = slack.messages("C0ROBOTS")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert posted  # the webhook was used, so slack_sdk logged its request
    assert "DEBUG slack_sdk" in output  # -vv: the debug lines are there, masked
    assert "/webhook/robots" not in output
    for secret in (webhook, BOT_TOKEN, SIGNING_SECRET, SECRET_KEY, SMTP_PASSWORD):
        assert secret not in output, secret
    assert MASK in output


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("posting to https://hooks.slack.com/services/T0/B0/abcDEF123 now", "abcDEF123"),
        ("headers: {'Authorization': 'Bearer xoxb-12-34-abcdef'}", "xoxb-12-34-abcdef"),
        ("app token xapp-1-A0-123-abcdef", "xapp-1-A0-123-abcdef"),
        ("cannot open postgresql://paperbell:hunter2pw@db/paperbell", "hunter2pw"),
        ("user token xoxp-99-abc", "xoxp-99-abc"),
    ],
)
def test_well_known_shapes_are_masked(line: str, secret: str) -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%s", (line,), None)
    assert SecretFilter().filter(record)
    assert secret not in record.getMessage() and MASK in record.getMessage()


def test_the_configs_secrets_are_masked_in_messages_arguments_and_tracebacks() -> None:
    config = parse_config(
        {
            "version": 1,
            "database": {"url": "postgresql://paperbell:pg-Secret-77@db.lab/paperbell"},
            "email": {"from": "digest@lab.example", "username": "u", "password_env": "PW"},
            "subscribers": [{"name": "r", "webhook_url_env": "HOOK", "rules": ["robot"]}],
        },
        environ={"PW": SMTP_PASSWORD, "HOOK": "https://chat.lab.example/hook/s3cr3t-hook"},
    )
    secrets = config_secrets(config)
    assert set(secrets) == {
        "pg-Secret-77",
        SMTP_PASSWORD,
        "https://chat.lab.example/hook/s3cr3t-hook",
    }
    masking = SecretFilter(secrets)
    try:
        raise RuntimeError(f"login failed with {SMTP_PASSWORD}")
    except RuntimeError:
        record = logging.LogRecord(
            "x",
            logging.ERROR,
            __file__,
            1,
            "posting to %s failed",
            ("https://chat.lab.example/hook/s3cr3t-hook",),
            sys.exc_info(),
        )
    masking.filter(record)
    formatted = logging.Formatter().format(record)
    assert "s3cr3t" not in formatted and SMTP_PASSWORD not in formatted
    assert "posting to *** failed" in formatted


def test_a_failed_poll_stores_and_shows_no_password_from_the_source_url(tmp_path: Path) -> None:
    """`status` printed `could not fetch http://user:PASSWORD@…` from the stored error (found
    in review); the logs were already masked."""
    from support.cli import run
    from support.servers import feed_server

    with feed_server() as server:  # no route: every answer is a 404 naming the url
        url = server.url("/feed.xml").replace("http://", "http://reader:hunter2secret@")
        config = tmp_path / "config.toml"
        config.write_text(
            'version = 1\n[database]\nurl = "sqlite:///{db}"\n'
            '[[sources]]\nkind = "feed"\nname = "journal"\nurl = "{url}"\n'.format(
                db=tmp_path / "paperbell.sqlite", url=url
            )
        )
        polled = run("-vv", "poll", "-c", str(config), cwd=tmp_path)
    status = run("status", "-c", str(config), cwd=tmp_path)
    assert polled.returncode == 1 and "HTTP 404" in polled.stdout + polled.stderr
    assert "HTTP 404" in status.stdout, status.stdout
    for output in (polled.stdout, polled.stderr, status.stdout, status.stderr):
        assert "hunter2secret" not in output


def test_an_apprise_digest_at_debug_level_logs_no_token(tmp_path: Path) -> None:
    """At -vv Apprise logs each request (its URL, its payload) and urllib3 each path: none
    of it reaches the log as written; paperbell's own lines show the masked form."""
    from support.chat import chat_server

    token = "mm-S3cretHookToken-4242"
    database = f"sqlite:///{tmp_path / 'paperbell.sqlite'}"
    with Store.open(database) as store:
        store.papers.upsert(bundled_papers(), now=datetime(2024, 11, 28, 15, tzinfo=UTC))
    with chat_server("mattermost") as mattermost:
        mattermost.fail = [500]
        (tmp_path / "config.toml").write_text(
            f"""version = 1
[database]
url = "{database}"
[apprise]
pace_seconds = 0
[[subscribers]]
name = "lab"
apprise_env = "LAB_CHATS"
rules = ["robot"]
"""
        )
        env = {**clean_env(), "LAB_CHATS": mattermost.url(token)}
        runs = [
            subprocess.run(
                [*PAPERBELL, "-vv", "digest", "-c", "config.toml", "--since", "2024-11-28"],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
            )
            for _ in range(2)  # a failure (500), then the digest goes
        ]
        assert mattermost.messages and mattermost.requests[0][0] == f"/hooks/{token}"
    output = "".join(done.stdout + done.stderr for done in runs)
    assert "DEBUG bot.channels.apprise: apprise mmost://127.0.0.1" in output, output[-2000:]
    assert "HTTP 500" in output
    assert token not in output
