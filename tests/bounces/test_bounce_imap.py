"""The bounce mailbox over IMAP (`paperbell bounce --imap`, [bounces] imap_url), against a
real dovecot started by the test (support.imap): what it deals with is moved aside, what it
cannot use (unreadable, forged, about no message sent) stays in the mailbox untouched, not
even marked read, and is recorded once however often it is read."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.bounces import ENV, fixture, postfix_dsn, write_config
from support.cli import invoke
from support.imap import dovecot, mailbox_config, send_digests
from support.servers import smtp_sink

from bot.bounces.imap import MAX_MESSAGES, parse_imap_url
from bot.store import Store

pytestmark = pytest.mark.database


def test_the_mailbox_is_read_once_and_only_what_was_used_moves(
    tmp_path: Path, database_url: str
) -> None:
    with smtp_sink() as (sink, port), dovecot() as server:
        config, env = mailbox_config(tmp_path, database_url, port, server)
        sent = send_digests(config, env, sink)
        ada_from, ada_raw = sent["ada@example.org"]
        bob_from, _ = sent["bob@example.org"]
        server.append(postfix_dsn(ada_raw, envelope_from=ada_from, recipient="ada@example.org"))
        server.append(
            fixture("rfc3834-01.eml").replace(
                b"X-Original-To: joe@example.com", f"X-Original-To: {bob_from}".encode()
            )
        )
        forged = ada_from.rpartition("-")[0] + "-aaaaaaaaaaaaaaaa@papers.example.org"
        server.append(postfix_dsn(ada_raw, envelope_from=forged, recipient="ada@example.org"))
        server.append(b"Subject: \x00\xff\r\n\r\n\x00garbage\r\n")

        first = invoke("bounce", "--imap", config=config, env=env)
        assert first.exit_code == 0, first.output
        assert "bounce: paused: ada: email paused: mailbox unknown (5.1.1)" in first.output
        assert "bounce: ignored: bob: an auto-reply, ignored" in first.output
        assert first.output.endswith(
            "4 messages read: 2 moved to paperbell-processed, 2 left in the mailbox\n"
        )
        left = server.messages("INBOX")
        assert len(left) == 2 and all(b"\\Seen" not in flags for flags, _ in left)
        assert len(server.messages("paperbell-processed")) == 2
        assert "email paused since" in invoke("list", config=config, env=env).output

        again = invoke("bounce", "--imap", config=config, env=env)
        assert again.output.endswith(
            "0 messages read: 0 moved to paperbell-processed, 0 left in the mailbox\n"
        )
        with Store.open(database_url) as store:
            day = store.bounces.day(store.bounces.of(1)[0].received_at.date())
        assert (day.hard, day.auto_replies, day.unmatched, day.tokenless) == (1, 1, 1, 1)  # once

        wrong = invoke("bounce", "--imap", config=config, env={**env, "PB_IMAP_PASSWORD": "no"})
        assert wrong.exit_code == 1
        assert "cannot read the bounce mailbox bounces@127.0.0.1" in wrong.output


def test_the_password_s_variable_is_asked_for(tmp_path: Path) -> None:
    config = write_config(tmp_path, f"sqlite:///{tmp_path / 'db.sqlite'}", 9)
    with config.open("a") as file:
        file.write('[bounces]\nimap_url = "imaps://bounces@imap.example.org/INBOX"\n')
    done = invoke("bounce", "--imap", config=config, env=ENV)
    assert done.exit_code == 2 and "bounces.password_env: name the variable" in done.output
    with config.open("a") as file:
        file.write('password_env = "PB_IMAP_PASSWORD"\n')
    done = invoke("bounce", "--imap", config=config, env=ENV)
    assert done.exit_code == 2
    assert "[bounces] password_env names PB_IMAP_PASSWORD, which is not set" in done.output


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "imaps://bounces%40lab.example@imap.lab.example/INBOX",
            ("tls", 993, "bounces@lab.example"),
        ),
        ("imap://bounces@imap.lab.example", ("starttls", 143, "bounces")),
        ("imap://bounces@127.0.0.1:1143/Bounces", ("none", 1143, "bounces")),
    ],
)
def test_imap_urls(url: str, expected: tuple[str, int, str]) -> None:
    found = parse_imap_url(url)
    assert (found.security, found.port, found.username) == expected


@pytest.mark.parametrize(
    "url",
    [
        "https://x@imap.example.org",
        "imaps://imap.example.org",
        "imaps://u:pw@imap.example.org",
        'imaps://u@imap.example.org/a"b',
        "imaps://u@imap.example.org:99999",
    ],
)
def test_bad_imap_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        parse_imap_url(url)


def test_mail_left_in_the_mailbox_never_hides_a_bounce_that_came_after(
    tmp_path: Path, database_url: str
) -> None:
    # Anyone can mail the bounce address: a flood it leaves in place (tokenless) must not
    # fill every later read, or no genuine bounce is ever read again.
    with smtp_sink() as (sink, port), dovecot() as server:
        config, env = mailbox_config(tmp_path, database_url, port, server)
        sent = send_digests(config, env, sink)
        ada_from, ada_raw = sent["ada@example.org"]
        imap = server.client()
        try:
            for number in range(MAX_MESSAGES):
                junk = f"Subject: junk {number}\r\n\r\nhello\r\n".encode()
                assert imap.append("INBOX", None, None, junk)[0] == "OK"
        finally:
            imap.logout()
        first = invoke("bounce", "--imap", config=config, env=env)
        assert first.output.endswith(
            f"{MAX_MESSAGES} messages read: 0 moved to "
            f"paperbell-processed, {MAX_MESSAGES} left in the mailbox\n"
        )
        server.append(postfix_dsn(ada_raw, envelope_from=ada_from, recipient="ada@example.org"))

        again = invoke("bounce", "--imap", config=config, env=env)
        assert "bounce: paused: ada: email paused: mailbox unknown (5.1.1)" in again.output
        assert again.output.endswith(
            "1 message read: 1 moved to paperbell-processed, 0 left in the mailbox\n"
        )
        assert len(server.messages("INBOX")) == MAX_MESSAGES
