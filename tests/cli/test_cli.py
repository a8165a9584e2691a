"""The command line as a user runs it: the installed `paperbell` command, and each subcommand."""

from __future__ import annotations

import email
import email.policy
import functools
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.cli import invoke, outcome, run
from support.config import WEB_SECRET, local_feed_config
from support.digests import make_paper

from bot.config import example_config_text
from bot.store import Store, utcnow


def test_demo_twice_sends_nothing_the_second_time(tmp_path: Path) -> None:
    first = run("demo", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "poll arxiv-all: 1,504 papers in the 2024-11-28 listing, 1,504 new" in first.stdout
    sent = re.findall(r"digest (\S+) <[^>]+>: (\d+) papers sent", first.stdout)
    assert len(sent) == 4 and all(int(n) > 0 for _, n in sent)
    assert "poll hf-daily: 17 papers in the 2026-08-21 listing, 17 new" in first.stdout
    assert re.search(r"digest lin <lin@lab.example>: 5 papers sent", first.stdout)
    mail = tmp_path / "paperbell-demo" / "mail"
    emls, htmls = sorted(mail.glob("*.eml")), sorted(mail.glob("*.html"))
    assert len(emls) == 4 and len(htmls) == 4
    assert "Thank you to arXiv" in htmls[0].read_text()
    posted = json.loads((tmp_path / "paperbell-demo" / "slack" / "posted.json").read_text())
    assert re.search(r"robotics-lab slack #robot-learning: \d+ papers posted", first.stdout)
    assert len(posted["messages"]) >= 2 and posted["violations"] == []

    second = run("demo", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "0 new, 1,504 already stored" in second.stdout
    assert second.stdout.count("nothing new (already delivered)") == 5  # 4 emails, 1 channel
    assert len(list(mail.glob("*.eml"))) == 4


def test_help_lists_every_command() -> None:
    out = invoke("--help").output
    listed = re.findall(r"^  ([a-z-]+) ", out.split("Commands:", 1)[1], re.M)
    assert listed == [
        "backfill",
        "bounce",
        "check-config",
        "db",
        "demo",
        "digest",
        "dislike",
        "init",
        "like",
        "likes",
        "list",
        "poll",
        "resume",
        "run",
        "serve",
        "status",
        "subscribe",
        "summarize",
        "try",
        "unlike",
        "unsubscribe",
    ]


def test_init_writes_the_example_and_refuses_to_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "config.toml"
    assert invoke("init", str(target)).exit_code == 0
    assert target.read_text() == example_config_text()
    again = invoke("init", str(target))
    assert again.exit_code == 2 and "exists" in again.output
    check = invoke("check-config", config=target)
    assert check.exit_code == 0 and "OK (2 sources, 1 subscriber, 3 rules" in check.output
    printed = invoke("init", "-")
    assert printed.exit_code == 0 and printed.output == example_config_text()


@pytest.mark.database
def test_subscribe_list_unsubscribe(tmp_path: Path, database_url: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        example_config_text().replace(
            'url = "sqlite:///paperbell.sqlite"', f'url = "{database_url}"'
        )
    )
    cli = functools.partial(outcome, config=config)

    code, out = cli("subscribe", "bob", "--email", "bob@example.org", '"graph neural"', "robot")
    assert code == 0 and "subscribed bob <bob@example.org>: daily at 08:00 (UTC)" in out
    assert "2 rules:" in out
    code, out = cli("subscribe", "bob", "cat:cs.RO")
    assert code == 0 and "3. cat:cs.RO" in out
    code, out = cli(
        "subscribe",
        "bob",
        "--schedule",
        "weekly",
        "--day",
        "fri",
        "--time",
        "7:30",
        "--timezone",
        "Asia/Tokyo",
        "--notify-empty",
    )
    assert code == 0, out
    assert "weekly on Friday at 07:30 (Asia/Tokyo), with a note on empty days" in out
    # The slot already handled is left alone: a new schedule skips no papers.
    from bot.store import Store

    with Store.open(database_url) as store:
        row = store.subscribers.get("bob")
        assert row is not None and row.last_slot is None
    code, out = cli("subscribe", "bob", "--time", "25:00", "--timezone", "Mars/Olympus")
    assert code == 2 and "time: '25:00' is not a time of day" in out and "Mars/Olympus" in out
    code, out = cli("subscribe", "zed", "--email", "zed@example.org")
    assert code == 2 and "give at least one RULE" in out

    code, out = cli("subscribe", "eve", "--email", "x\nBcc: a@b.c", "--", 'open "quote', "-only")
    assert code == 2
    assert "email:" in out and "rules[0]: missing closing" in out and "rules[1]:" in out
    code, out = cli("subscribe", "carl", "robot")
    assert code == 2 and "say where its digests go: --email" in out
    code, out = cli("subscribe", "lab", "--slack-channel", "#robots", "robot")
    assert code == 2 and "posting to Slack needs [slack] bot_token_env" in out
    code, out = cli("subscribe", "lab", "--slack-channel", "Robots!", "robot")
    assert code == 2 and "is not a Slack channel" in out
    code, out = cli("subscribe", "ada", "--email", "a@example.org", "robot")
    assert code == 2 and "declared in the config file" in out

    code, out = cli("list")
    assert code == 0
    assert "ada <ada@example.org> [config, active]" in out
    assert "bob <bob@example.org> [database, active]" in out and "2. robot" in out
    assert "weekly on Friday at 07:30 (Asia/Tokyo), notes on empty days" in out
    assert "daily at 07:30 (Europe/Berlin)" in out  # ada, from the example config

    assert cli("unsubscribe", "bob", "--rule", "2")[0] == 0
    assert "2. cat:cs.RO" in cli("list")[1]
    code, out = cli("unsubscribe", "ada")
    assert code == 0 and "unsubscribed ada" in out
    assert "ada <ada@example.org> [config, unsubscribed]" in cli("list")[1]
    code, out = cli("resume", "ada")
    assert code == 0 and "resumed ada" in out
    assert "ada <ada@example.org> [config, active]" in cli("list")[1]
    assert cli("resume", "nobody")[0] == 1
    code, out = cli("unsubscribe", "nobody")
    assert code == 1 and "no subscriber named 'nobody'" in out
    code, out = cli("unsubscribe", "bob", "--delete")
    assert code == 0 and "bob" not in cli("list")[1]


@pytest.mark.database
def test_digest_out_writes_eml_and_records_nothing(tmp_path: Path, database_url: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        local_feed_config(database_url)
        + """[email]
from = "papers@example.org"
host = "127.0.0.1"
port = 9
[[subscribers]]
name = "ada"
email = "ada@example.org"
rules = ['"language model"']
max_papers = 3
"""
    )
    assert invoke("poll", config=config).exit_code == 0
    out_dir = tmp_path / "out"
    for _ in range(2):  # nothing is recorded, so the same digest is written again
        result = invoke("digest", "--since", "2024-11-28", "--out", str(out_dir), config=config)
        assert result.exit_code == 0, result.output
        assert re.search(r"ada <ada@example.org>: 3 papers \(\+\d+ left out\) -> ", result.output)
    assert len(list(out_dir.glob("*.eml"))) == 1
    # Beside each .eml, its HTML part, to open in a browser.
    (eml,) = out_dir.glob("*.eml")
    html = eml.with_suffix(".html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "Thank you to arXiv" in html
    dry = invoke("digest", "--since", "2024-11-28", "--dry-run", config=config)
    assert "would get 3 papers" in dry.output
    only = invoke("digest", "--dry-run", "--subscriber", "nobody", config=config)
    assert only.exit_code == 1 and "no active subscriber named 'nobody'" in only.output
    # Default window: the 2024 feed is outside the last 7 days, so nothing is due.
    window = invoke("digest", "--dry-run", config=config)
    assert "no new matching papers" in window.output


@pytest.mark.database
def test_digest_out_links_work_for_a_subscriber_of_the_config_file(
    tmp_path: Path, database_url: str
) -> None:
    """A preview of a config file's subscriber carries manage and unsubscribe links that
    open their page: the subscriber is stored (synced) first, as a send does."""
    from bot.config import load_config
    from bot.manage import Manager, Refused, SiteChoices
    from bot.pipeline import wire
    from bot.store import Store, utcnow

    config = tmp_path / "config.toml"
    config.write_text(
        local_feed_config(database_url)
        + """[email]
from = "papers@example.org"
host = "127.0.0.1"
port = 9
[web]
public_url = "https://papers.example.org"
secret_key_env = "PB_SECRET_KEY"
[[subscribers]]
name = "ada"
email = "ada@example.org"
rules = ['"language model"']
"""
    )
    env = {"PB_SECRET_KEY": WEB_SECRET}
    assert invoke("poll", config=config).exit_code == 0
    out_dir = tmp_path / "out"
    result = invoke(
        "digest", "--since", "2024-11-28", "--out", str(out_dir), config=config, env=env
    )
    assert result.exit_code == 0, result.output
    (eml,) = out_dir.glob("ada-*.eml")
    (html,) = out_dir.glob("ada-*.html")
    page = html.read_text(encoding="utf-8")
    loaded = load_config(config, environ=env)
    store = Store.open(database_url)
    try:
        manager = Manager(SiteChoices.of(loaded), wire(loaded, store), clock=utcnow)
        for purpose in ("manage", "unsubscribe"):
            found = re.search(rf'href="https://papers\.example\.org/{purpose}/([^"#]+)"', page)
            assert found is not None, purpose
            opened = manager.open(purpose, found.group(1))  # as its page opens it
            assert not isinstance(opened, Refused) and opened.name == "ada", (purpose, opened)
        headers = email.message_from_bytes(eml.read_bytes(), policy=email.policy.default)
        assert str(headers["List-Unsubscribe"]).startswith("<https://papers.example.org/unsub")
    finally:
        store.close()


def test_filesystem_errors_are_messages_not_tracebacks(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = invoke("init", str(blocker / "config.toml"))
    assert result.exit_code == 1
    assert "error: cannot write" in result.output and "Traceback" not in result.output


def test_check_config_hides_the_database_password(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        example_config_text().replace(
            'url = "sqlite:///paperbell.sqlite"', 'url = "postgresql://pb:S3cretPass@db/pb"'
        )
    )
    result = invoke("check-config", config=config)
    assert result.exit_code == 0 and "S3cretPass" not in result.output
    assert "postgresql://pb:***@db/pb" in result.output


@pytest.mark.database
def test_subscribe_sets_summaries_and_a_language_and_list_shows_them(
    tmp_path: Path, database_url: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f"""version = 1
[database]
url = "{database_url}"
[email]
from = "papers@example.org"
[[subscribers]]
name = "ada"
email = "ada@example.org"
rules = ["robot"]
summaries = true
language = "zh-Hant"
"""
    )
    cli = functools.partial(outcome, config=config)
    code, out = cli("check-config")
    assert code == 0, out
    assert (
        'note: subscribers[0] ada: language = "zh-Hant" needs an [llm] section; until there '
        "is one, digests are in English"
    ) in out
    assert "note: subscribers[0] ada: summaries without [llm]: Hugging Face's AI" in out

    code, out = cli("subscribe", "bob", "--email", "bob@example.org", "--summaries", "robot")
    assert code == 0 and "subscribed bob <bob@example.org>: daily at 08:00 (UTC), summaries" in out
    code, out = cli("subscribe", "bob", "--language", "zh")
    assert code == 0
    assert (
        "updated bob <bob@example.org>: daily at 08:00 (UTC), summaries, in Chinese beside "
        "the English"
    ) in out
    code, out = cli("subscribe", "bob", "--language", "klingon!")
    assert code == 2 and "language: language 'klingon!': not a BCP 47 language tag" in out
    code, out = cli("list")
    assert code == 0
    assert (
        "max 50; daily at 08:00 (UTC); summaries; in Chinese (Traditional) beside the English"
    ) in out  # ada, from the file
    assert "max 50; daily at 08:00 (UTC); summaries; in Chinese beside the English" in out

    from bot.config import load_config
    from bot.store import Store, utcnow

    with Store.open(database_url) as store:
        declared = load_config(config, environ={}).declared_subscribers()
        store.subscribers.sync_config(declared, now=utcnow())
        found = {s.name: s for s in store.subscribers.all(declared)}
    # The file's subscriber keeps what the file says; the database's, what was stored.
    assert (found["ada"].summaries, found["ada"].language) == (True, "zh-Hant")
    assert found["ada"].id is not None
    assert (found["bob"].summaries, found["bob"].language) == (True, "zh")

    for clear in ("none", "en"):
        code, out = cli("subscribe", "bob", "--language", "zh", "--no-summaries")
        assert code == 0 and out.splitlines()[0].endswith("(UTC), in Chinese beside the English")
        code, out = cli("subscribe", "bob", "--language", clear)
        assert code == 0 and out.splitlines()[0].endswith("daily at 08:00 (UTC)"), out
    with Store.open(database_url) as store:
        bob = next(s for s in store.subscribers.all() if s.name == "bob")
    assert (bob.summaries, bob.language) == (False, None)


def example_cli(tmp_path: Path, database_url: str) -> Callable[..., tuple[int, str]]:
    """The commands on the example config, its database at `database_url`."""
    config = tmp_path / "config.toml"
    config.write_text(
        example_config_text().replace(
            'url = "sqlite:///paperbell.sqlite"', f'url = "{database_url}"'
        )
    )
    return functools.partial(outcome, config=config)


@pytest.mark.database
def test_subscribe_that_only_changes_settings_leaves_an_unsubscribed_one_stopped(
    tmp_path: Path, database_url: str
) -> None:
    """Someone who unsubscribed (on their page, or by the operator) gets nothing after the
    operator changes a setting of theirs: only `resume`, or new rules, send again."""
    cli = example_cli(tmp_path, database_url)
    assert cli("subscribe", "bob", "--email", "bob@example.org", "robot")[0] == 0
    assert cli("unsubscribe", "bob")[0] == 0

    code, out = cli("subscribe", "bob", "--max-papers", "5", "--timezone", "Asia/Tokyo")
    assert code == 0, out
    listed = cli("list")[1]
    assert "bob <bob@example.org> [database, unsubscribed]" in listed
    assert "max 5; daily at 08:00 (Asia/Tokyo)" in listed
    assert "bob stays unsubscribed: `paperbell resume bob`" in out

    code, out = cli("subscribe", "bob", "cat:cs.RO")  # new rules: subscribed again
    assert code == 0 and "stays unsubscribed" not in out
    assert "bob <bob@example.org> [database, active]" in cli("list")[1]


@pytest.mark.database
def test_unsubscribe_withdraws_the_digests_still_queued(tmp_path: Path, database_url: str) -> None:
    """A digest queued before an unsubscribe (waiting for a retry or the relay's limits) is
    not sent after it: it is withdrawn, and its papers go back to the subscriber."""
    cli = example_cli(tmp_path, database_url)
    assert cli("subscribe", "bob", "--email", "bob@example.org", "robot")[0] == 0
    queued_at = datetime.now(UTC)
    with Store.open(database_url) as store:
        bob = store.subscribers.get("bob")
        assert bob is not None
        queued = store.outbox.enqueue(
            bob.id,
            channel="email",
            period="daily:2026-12-07",
            digest_id="d1",
            recipient="bob@example.org",
            payload=b"Subject: papers\r\n\r\nrobots\r\n",
            sent=[make_paper(1)],
            now=queued_at,
        )
        assert queued is not None

    code, out = cli("unsubscribe", "bob")
    assert code == 0 and "unsubscribed bob: no more digests" in out
    with Store.open(database_url) as store:
        claimed = store.outbox.claim(
            "sender", now=queued_at + timedelta(hours=1), lease=timedelta(minutes=5)
        )
        assert [item.subscriber for item in claimed] == []
        assert store.outbox.delivered_versions(bob.id, "email") == {}  # theirs again
    assert cli("resume", "bob")[0] == 0
    with Store.open(database_url) as store:
        later = queued_at + timedelta(hours=2)
        assert store.outbox.claim("sender", now=later, lease=timedelta(minutes=5)) == []


@pytest.mark.database
def test_resume_says_an_address_a_complaint_stopped_waits_for_its_owner(
    tmp_path: Path, database_url: str
) -> None:
    """A spam complaint stopped bob's email: his address waits for a new confirmation.
    `resume bob` said "digests will be sent again", and none came."""
    cli = example_cli(tmp_path, database_url)
    assert cli("subscribe", "bob", "--email", "bob@example.org", "robot")[0] == 0
    with Store.open(database_url) as store:
        bob = store.subscribers.get("bob")
        assert bob is not None and bob.id is not None
        store.subscribers.stop_email("bob")  # what a complaint does
        store.targets.pause(bob.id, "email", "marked a digest as spam", now=utcnow())
    code, out = cli("resume", "bob")
    assert code == 0 and "resumed bob" in out
    assert "bob's address <bob@example.org> is not confirmed" in out
    assert "`paperbell subscribe bob --email bob@example.org`" in out


@pytest.mark.database
def test_a_name_the_config_file_dropped_can_be_deleted_and_used_again(
    tmp_path: Path, database_url: str
) -> None:
    """A subscriber renamed or removed in the config file leaves its stored row and history:
    the commands say so truly, `unsubscribe --delete` removes it, and the name is free."""
    example = example_config_text().replace(
        'url = "sqlite:///paperbell.sqlite"', f'url = "{database_url}"'
    )
    config = tmp_path / "config.toml"
    config.write_text(example)
    assert outcome("unsubscribe", "ada", config=config)[0] == 0  # ada is stored now
    config.write_text(example.replace('name = "ada"', 'name = "ada-lovelace"'))
    cli = functools.partial(outcome, config=config)

    code, out = cli("resume", "ada")
    assert code == 1 and "'ada' is in the config file no more" in out
    code, out = cli("subscribe", "ada", "--email", "ada@example.org", "robot")
    assert code == 2 and "`paperbell unsubscribe ada --delete`" in out
    assert "declared in the config file" not in out
    code, out = cli("unsubscribe", "ada", "--delete")
    assert code == 0 and "deleted ada and its delivery history" in out
    code, out = cli("subscribe", "ada", "--email", "ada@example.org", "robot")
    assert code == 0 and "subscribed ada <ada@example.org>" in out
    assert cli("unsubscribe", "ada-lovelace")[0] == 0
    code, out = cli("unsubscribe", "ada-lovelace", "--delete")  # the file's: changed there
    assert code == 1 and "declared in the config file" in out


@pytest.mark.database
def test_subscribe_email_withdraws_the_address_waiting_for_confirmation(
    tmp_path: Path, database_url: str
) -> None:
    """Bob asked for a new address in Slack (`/papers email`), and it waits for its link;
    the operator then gives him another with `subscribe --email`. The waiting address
    stayed: its link, opened later, put it in place of the operator's."""
    cli = example_cli(tmp_path, database_url)
    assert cli("subscribe", "bob", "--email", "bob@example.org", "robot")[0] == 0
    with Store.open(database_url) as store:
        store.subscribers.set_email("bob", "bob@typo.example", confirmed=False)
    code, out = cli("subscribe", "bob", "--email", "bob@lab.example")
    assert code == 0, out
    assert "<bob@typo.example> no longer waits for confirmation" in out, out
    assert "bob@typo.example" not in cli("list")[1]
    with Store.open(database_url) as store:
        bob = store.subscribers.get("bob")
        assert bob is not None
        # What the waiting address's confirmation link does when it is opened.
        assert not store.subscribers.confirm_email(bob.id, "bob@typo.example")
        bob = store.subscribers.get("bob")
        assert bob is not None and (bob.email, bob.email_confirmed) == ("bob@lab.example", True)
