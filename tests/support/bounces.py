"""Bounces as Postfix writes them, for a message paperbell sent: the real DSNs Postfix made
on loopback (tests/fixtures/bounces/postfix-*.eml) with their envelope sender, failed
address and quoted message replaced by the ones of the message at hand; and running
`paperbell bounce` on one, as a mail server does."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path

from bot.store import Store
from support.cli import PAPERBELL, clean_env
from support.config import WEB_SECRET, local_feed_config, sink_email, toml_table
from support.paths import FIXTURES

BOUNCES = FIXTURES / "bounces"
T0 = datetime(2026, 12, 3, 7, 0, tzinfo=UTC)
# What each Postfix fixture was made for (tests/fixtures/bounces/SOURCES.md).
_MADE_FOR = {
    "postfix-unknown-user.eml": ("bounces+42-ensxarwck7bi2gm2@papers.lab.example", "ada-gone"),
    "postfix-mailbox-full.eml": ("bounces+44-uf4v4t3med6u34lb@papers.lab.example", "bob"),
}
_DOMAINS = {"postfix-unknown-user.eml": "lab.example", "postfix-mailbox-full.eml": "full.example"}


def postfix_dsn(
    sent: bytes,
    *,
    envelope_from: str,
    recipient: str,
    template: str = "postfix-unknown-user.eml",
) -> bytes:
    """The DSN Postfix returns to `envelope_from` when `recipient` cannot take `sent` (the
    message as it went over the wire): `template`'s, with its addresses replaced and `sent`
    quoted whole, as Postfix quotes it; lines end in LF, as Postfix's local delivery hands
    a message to a command."""
    # As SMTP carried it (CRLF); a mail server hands a pipe its lines ending in LF.
    text = (BOUNCES / template).read_bytes().replace(b"\r\n", b"\n")
    verp, user = _MADE_FOR[template]
    old_recipient = f"{user}@{_DOMAINS[template]}".encode()
    head, marker, _ = text.partition(b"Content-Type: message/rfc822\nContent-Transfer-Encoding")
    boundary = re.search(rb'boundary="([^"]+)"', text)
    assert marker and boundary is not None
    head = head.replace(verp.encode(), envelope_from.encode())
    head = head.replace(old_recipient, recipient.encode())
    head = head.replace(f'"{user}"'.encode(), f'"{recipient.partition("@")[0]}"'.encode())
    quoted = sent.replace(b"\r\n", b"\n")
    return (
        head
        + marker
        + b": 8bit\n\nReturn-Path: <"
        + envelope_from.encode()
        + b">\n"
        + quoted.rstrip(b"\n")
        + b"\n\n--"
        + boundary.group(1)
        + b"--\n"
    )


def fixture(name: str) -> bytes:
    return (BOUNCES / name).read_bytes()


def bounce_file(folder: Path, raw: bytes, name: str = "bounce.eml") -> Path:
    path = folder / name
    path.write_bytes(raw)
    return path


def pipe_bounce(
    raw: bytes, config: Path, *, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`paperbell bounce -c CONFIG` as the mail server runs it: a process of its own, the
    message on its standard input."""
    done = subprocess.run(
        [*PAPERBELL, "bounce", "-c", str(config)],
        input=raw,
        capture_output=True,
        timeout=120,
        env={**clean_env(), **(env or {})},
        cwd=config.parent,
    )
    return subprocess.CompletedProcess(
        done.args,
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def digest(address: str, n: int) -> bytes:
    """A digest as it went out to `address` (its Message-ID names digest `n`)."""
    headers = {
        "From": "paperbell <digest@papers.lab.example>",
        "To": address,
        "Subject": f"Your papers, day {n}",
        "Message-ID": f"<paperbell.{address.partition('@')[0]}{n:04d}@papers.lab.example>",
    }
    msg = EmailMessage()
    for name, value in headers.items():
        msg[name] = value
    msg.set_content("papers")
    return bytes(msg)


def sent(
    store: Store, name: str, n: int = 1, *, channel: str = "email", now: datetime = T0
) -> tuple[int, bytes]:
    """A digest queued and sent to `name` (subscribed at name@lab.example if new): its
    outbox record and the bytes sent."""
    found = store.subscribers.get(name)
    if found is None:
        store.subscribers.add(name, email=f"{name}@lab.example", rules=["robot"], now=now)
        found = store.subscribers.get(name)
    assert found is not None and found.email is not None
    payload = digest(found.email, n)
    record = store.outbox.enqueue(
        found.id,
        channel=channel,
        period=f"p{n}",
        digest_id=f"paperbell.{name}{n:04d}",
        recipient=found.email,
        payload=payload,
        sent=(),
        now=now,
    )
    assert record is not None
    for item in store.outbox.claim("w", now=now, lease=timedelta(minutes=5), due_only=False):
        store.outbox.mark_sent(item.id, owner="w", now=now)
    return record, payload


ENV = {"PB_SECRET_KEY": WEB_SECRET}


def write_config(folder: Path, database_url: str, port: int) -> Path:
    config = folder / "config.toml"
    email = {**sink_email(port), "bounce_address": "bounces@papers.example.org"}
    config.write_text(
        local_feed_config(database_url)
        + toml_table("email", email)
        + """[web]
public_url = "https://papers.example.org"
secret_key_env = "PB_SECRET_KEY"
[[subscribers]]
name = "ada"
email = "ada@example.org"
rules = ['"language model"']
max_papers = 3
[[subscribers]]
name = "bob"
email = "bob@example.org"
rules = ['"language model"']
max_papers = 3
"""
    )
    return config
