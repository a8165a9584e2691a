"""VERP: with [email] bounce_address, each message goes out with an envelope sender that
names its outbox record, signed with the site's secret key (bot.core.verp); the From header
stays. Real parts: an aiosmtpd server on loopback that records the envelope, the database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.config import WEB_SECRET, sink_email
from support.servers import smtp_sink

from bot.channels.outbox import drain
from bot.core.errors import ConfigError
from bot.core.verp import Verp, VerpToken
from bot.pipeline import build_channels
from bot.pipeline.wiring import parse_config, verp
from bot.store import Store

T0 = datetime(2026, 12, 3, 7, 0, tzinfo=UTC)
KEY = "k" * 40


def config_data(database_url: str, port: int, **email: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "database": {"url": database_url},
        "email": {**sink_email(port), **email},
        "web": {
            "public_url": "https://papers.lab.example",
            "secret_key_env": "PAPERBELL_SECRET_KEY",
        },
    }


def queue(store: Store, name: str, address: str) -> int:
    sub, _ = store.subscribers.add(name, email=address, rules=["robot"], now=T0)
    assert sub.id is not None
    msg = EmailMessage()
    msg["From"] = "paperbell <papers@paperbell.example>"
    msg["To"] = address
    msg["Subject"] = f"digest for {name}"
    msg["Message-ID"] = f"<d-{name}@paperbell.example>"
    msg.set_content("papers")
    record = store.outbox.enqueue(
        sub.id,
        channel="email",
        period="2026-12-03",
        digest_id=f"d-{name}",
        recipient=address,
        payload=bytes(msg),
        sent=(),
        now=T0,
    )
    assert record is not None
    return record


def test_a_token_names_its_record_and_a_changed_one_is_forged() -> None:
    signer = Verp(KEY, "bounces@Lab.Example")
    address = signer.address(42)
    local, _, domain = address.partition("@")
    assert domain == "lab.example" and local.startswith("bounces+42-")
    assert len(local) <= 30  # short: a local part may hold 64
    assert signer.read(address) == VerpToken(42, "valid")
    # Mail servers fold case and wrap addresses in names and brackets: still read.
    assert signer.read(f"Bounces <{address.upper()}>") == VerpToken(42, "valid")
    assert signer.read(address.replace("+42-", "+43-")) == VerpToken(43, "forged")
    assert Verp("x" * 40, "bounces@lab.example").read(address) == VerpToken(42, "forged")
    assert signer.read("bounces@lab.example") is None


@pytest.mark.parametrize("address", ["bounces+x@lab.example", "nobody", "bö@lab.example"])
def test_a_bounce_address_is_plain(address: str) -> None:
    with pytest.raises(ValueError, match="plain ASCII"):
        Verp(KEY, address)


@given(st.text(max_size=300))
def test_any_text_reads_as_no_token_or_a_forged_one(text: str) -> None:
    found = Verp(KEY, "bounces@lab.example").read(text)
    assert found is None or found.status == "forged"  # a valid one: one chance in 2**80


def test_bounce_address_needs_the_secret_key() -> None:
    data = config_data("sqlite:///unused.sqlite", 25, bounce_address="bounces@lab.example")
    del data["web"]
    with pytest.raises(ConfigError, match=r"email\.bounce_address: needs \[web\] secret_key_env"):
        parse_config(data, environ={})
    data["email"]["bounce_address"] = "bounces+x@lab.example"
    with pytest.raises(ConfigError, match=r"no .\+."):
        parse_config(data, environ={})


@pytest.mark.database
@pytest.mark.parametrize("bounces", [True, False])
def test_each_message_is_sent_from_its_own_verp_address(database_url: str, bounces: bool) -> None:
    """The SMTP server sees MAIL FROM bounces+ID-SIG@domain, ID the message's outbox record;
    the From header is the configured sender. Without bounce_address, MAIL FROM is From."""
    extra = {"bounce_address": "bounces@papers.lab.example"} if bounces else {}
    with smtp_sink() as (sink, port), Store.open(database_url) as store:
        config = parse_config(
            config_data(database_url, port, **extra),
            environ={"PAPERBELL_SECRET_KEY": WEB_SECRET},
        )
        records = {
            queue(store, "ada", "ada@lab.example"): "ada@lab.example",
            queue(store, "bob", "bob@lab.example"): "bob@lab.example",
        }
        attempts = asyncio.run(drain(store, build_channels(config), clock=lambda: T0))
        assert [a.status for a in attempts] == ["sent", "sent"]
    signer = verp(config)
    assert (signer is not None) == bounces
    for (mail_from, to), message in zip(sink.envelopes, sink.messages, strict=True):
        assert message["From"] == "paperbell <papers@paperbell.example>"
        record = next(r for r, address in records.items() if to == [address])
        if signer is None:
            assert mail_from == "papers@paperbell.example"
        else:
            assert mail_from == signer.address(record)
            assert signer.read(mail_from) == VerpToken(record, "valid")
