"""Issue 41, part 2: only a report that proves it answers one of paperbell's messages acts. A
digest's id is no secret (a hash of the subscriber's name, the channel and the papers,
which a stranger can compute from the public listing): a DSN or an ARF complaint mailed to
the plain bounce address, quoting it or even the real Message-ID, is recorded and counted
(`status`) and pauses or unsubscribes no one. Message-IDs carry an HMAC under the site's
key, the same for a digest sent again; an operator whose relay drops the envelope's token
may let a signed Message-ID act, and a computed or forged one still acts on no one. Real
parts: `paperbell digest` to the project's SMTP sink, `paperbell bounce` as the mail
server runs it; the Message-ID token by property (Hypothesis)."""

from __future__ import annotations

import re
from dataclasses import replace
from email import message_from_bytes
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from support.bounces import pipe_bounce, postfix_dsn
from support.cli import invoke
from support.config import WEB_SECRET, local_feed_config, sink_email, toml_table
from support.demo_mail import NOW, SETTINGS, demo_digests
from support.servers import smtp_sink

from bot.core.verp import MessageIds
from bot.render.email import EmailSettings
from bot.render.message import build_message

ENV = {"PB_SECRET_KEY": WEB_SECRET}
KEY = "k" * 64
DIGEST_IDS = st.from_regex(r"paperbell\.[0-9a-f]{32}", fullmatch=True)
SIGNATURES = st.from_regex(r"[a-z2-7]{16}", fullmatch=True)


@given(digest_id=DIGEST_IDS, signature=SIGNATURES, other=st.text(min_size=1, max_size=80))
@example(digest_id="paperbell." + "0" * 32, signature="a" * 16, other="x")
def test_a_message_id_made_without_the_key_acts_on_no_one(
    digest_id: str, signature: str, other: str
) -> None:
    ids = MessageIds(KEY)
    real = f"<{ids.local(digest_id)}@papers.example.org>"
    found = ids.read(real)
    assert found is not None and (found.digest_id, found.status) == (digest_id, "valid")
    assert ids.read(f"<{digest_id}@papers.example.org>") is None  # computed: no token
    guessed = ids.read(f"<{digest_id}.{signature}@papers.example.org>")
    assert guessed is not None
    assert guessed.status == ("valid" if signature == ids.signature(digest_id) else "forged")
    elsewhere = MessageIds(KEY + other).local(digest_id)  # another site's key
    assert ids.read(f"<{elsewhere}@x>").status == "forged"  # type: ignore[union-attr]


@given(st.text(max_size=300))
@example("<paperbell.abc.aaaaaaaaaaaaaaaa@>")
@example("paperbell." + "f" * 32 + "." + "a" * 16)
def test_any_message_id_is_read_without_a_crash_and_valid_only_with_the_key(text: str) -> None:
    found = MessageIds(KEY).read(text)
    if found is not None and found.status == "valid":
        assert MessageIds(KEY).local(found.digest_id) in text.lower()


def write_config(folder: Path, database_url: str, port: int, **email: object) -> Path:
    config = folder / "config.toml"
    settings = {**sink_email(port), "bounce_address": "bounces@papers.example.org", **email}
    config.write_text(
        local_feed_config(database_url)
        + toml_table("email", settings)
        + """[web]
public_url = "https://papers.example.org"
secret_key_env = "PB_SECRET_KEY"
"""
    )
    return config


def sent_digest(tmp_path: Path, database_url: str, **email: object) -> tuple[Path, bytes, str]:
    """`victim`, a database subscriber (an address's local part, as a sign-up names it),
    sent one digest through the SMTP sink: the config, the message and its envelope
    sender."""
    with smtp_sink() as (sink, port):
        config = write_config(tmp_path, database_url, port, **email)
        subscribed = invoke(
            "subscribe", "victim", "--email", "victim@example.org", '"language model"',
            config=config, env=ENV,
        )  # fmt: skip
        assert subscribed.exit_code == 0, subscribed.output
        assert invoke("poll", config=config, env=ENV).exit_code == 0
        sent = invoke("digest", "--since", "2024-11-28", config=config, env=ENV)
        assert sent.exit_code == 0, sent.output
    ((mail_from, _to),) = sink.envelopes
    return config, sink.raw[0], mail_from


def complaint(quoted: bytes, recipient: str) -> bytes:
    """An ARF abuse report (RFC 5965) about `quoted`, as a mailbox provider sends one."""
    boundary = "arf-boundary"
    return (
        (
            f"From: feedback@mail.example\nTo: bounces@papers.example.org\n"
            f"Subject: complaint\nMIME-Version: 1.0\n"
            f'Content-Type: multipart/report; report-type=feedback-report; boundary="{boundary}"'
            f"\n\n--{boundary}\nContent-Type: text/plain\n\nAn abuse report.\n"
            f"\n--{boundary}\nContent-Type: message/feedback-report\n\n"
            f"Feedback-Type: abuse\nUser-Agent: Mail-Feedback/1.0\nVersion: 1\n"
            f"Original-Rcpt-To: {recipient}\n"
            f"\n--{boundary}\nContent-Type: message/rfc822\n\n"
        ).encode()
        + quoted.replace(b"\r\n", b"\n")
        + f"\n--{boundary}--\n".encode()
    )


@pytest.mark.database
def test_a_forged_report_quoting_the_victims_message_id_changes_nothing(
    tmp_path: Path, database_url: str
) -> None:
    config, raw, _mail_from = sent_digest(tmp_path, database_url)
    message_id = str(message_from_bytes(raw)["Message-ID"])
    real = re.fullmatch(r"<(paperbell\.[0-9a-f]{32})\.[a-z2-7]{16}(@[^>]+)>", message_id)
    assert real is not None, message_id  # signed
    # What a stranger computes from the public listing: the id main used to send.
    computed = raw.replace(message_id.encode(), f"<{real.group(1)}{real.group(2)}>".encode())
    before = invoke("list", config=config, env=ENV).output
    reports = [
        postfix_dsn(
            quoted, envelope_from="bounces@papers.example.org", recipient="victim@example.org"
        )
        for quoted in (computed, raw)
    ] + [complaint(quoted, "victim@example.org") for quoted in (computed, raw)]
    done = pipe_bounce(reports[0], config, env=ENV)  # as the mail server runs it
    assert done.returncode == 0 and done.stdout.startswith("bounce: tokenless: "), done.stdout
    for report in reports[1:]:
        result = invoke("bounce", config=config, env=ENV, stdin=report)
        assert result.output.startswith("bounce: tokenless: "), result.output
    assert invoke("list", config=config, env=ENV).output == before
    assert "paused" not in before and "unconfirmed" not in before
    status = invoke("status", config=config, env=ENV).output
    assert "4 without the envelope's token" in status, status


@pytest.mark.database
def test_an_operator_may_let_a_signed_message_id_act_and_a_computed_one_still_does_not(
    tmp_path: Path, database_url: str
) -> None:
    """[email] bounces_by_message_id: a relay that rewrites the envelope sender drops the
    token; a report quoting the real, signed Message-ID acts; one quoting the computed id
    or a forged signature does not."""
    config, raw, _ = sent_digest(tmp_path, database_url, bounces_by_message_id=True)
    message_id = str(message_from_bytes(raw)["Message-ID"])
    local = message_id.strip("<>").partition("@")[0]
    digest_id, _, signature = local.rpartition(".")
    forged_signature = ("a" if signature[0] != "a" else "b") + signature[1:]
    tries = {
        f"<{digest_id}@papers.example.org>": "tokenless",
        f"<{digest_id}.{forged_signature}@papers.example.org>": "forged",
    }
    for quoted_id, action in tries.items():
        quoted = raw.replace(message_id.encode(), quoted_id.encode())
        dsn = postfix_dsn(quoted, envelope_from="relay@example.net", recipient="victim@example.org")
        result = invoke("bounce", config=config, env=ENV, stdin=dsn)
        assert result.output.startswith(f"bounce: {action}: "), result.output
    assert "paused" not in invoke("list", config=config, env=ENV).output
    dsn = postfix_dsn(raw, envelope_from="relay@example.net", recipient="victim@example.org")
    done = pipe_bounce(dsn, config, env=ENV)
    assert done.stdout.startswith("bounce: paused: victim: email paused: mailbox unknown"), (
        done.stdout
    )


def test_a_digest_built_again_carries_the_same_signed_message_id() -> None:
    """The Message-ID is made from the digest's id and the key alone: the same digest,
    built again (after a crash, by another process) signs the same; another key, not."""
    digest = next(iter(demo_digests().values()))
    signed = replace(SETTINGS, message_id_key=KEY)

    def message_id(settings: EmailSettings) -> str:
        return str(build_message(digest, settings, now=NOW)["Message-ID"])

    first, again = message_id(signed), message_id(replace(signed))
    assert first == again == f"<{MessageIds(KEY).local(digest.digest_id)}@papers.lab.example>"
    assert message_id(replace(SETTINGS, message_id_key=KEY + "x")) != first
    assert message_id(SETTINGS) == f"<{digest.digest_id}@papers.lab.example>"  # no key
    assert KEY not in repr(signed)


def test_bounces_by_message_id_needs_the_sites_key(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        local_feed_config(f"sqlite:///{tmp_path / 'db.sqlite'}")
        + toml_table("email", {**sink_email(9), "bounces_by_message_id": True})
    )
    result = invoke("check-config", config=config, env={})
    assert result.exit_code != 0
    assert "email.bounces_by_message_id: needs [web] secret_key_env" in result.output
