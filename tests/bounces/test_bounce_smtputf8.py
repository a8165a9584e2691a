"""The SMTPUTF8 path with VERP: a message to an address that is not ASCII goes through
aiosmtplib's send_message with SMTPUTF8 (`_send` in bot.channels.email), to an aiosmtpd
server on loopback that offers it; with [email] bounce_address set its envelope sender is
still the VERP address naming its outbox record, and the DSN for it is matched.

paperbell refuses such addresses today (bot.core.checks.check_address: ASCII only, in the
config, `subscribe` and the renderer), so the message and the subscriber are put in the
store as a later version accepting them would: this pins the transport and the bounce
path, not the sign-up."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.bounces import postfix_dsn
from support.config import WEB_SECRET, sink_email
from support.servers import SinkHandler

from bot.channels.email import EmailChannel, SmtpSettings
from bot.channels.outbox import drain
from bot.config import Config, parse_config
from bot.core.models import Subscriber
from bot.demo import free_port
from bot.pipeline.bounces import handle_bounce
from bot.pipeline.wiring import build_channels, verp
from bot.store import Store, utcnow

JURGEN = "jürgen@exämple.org"
MESSAGE = (
    "From: paperbell <papers@paperbell.example>\r\n"
    f"To: {JURGEN}\r\n"
    "Subject: Your papers\r\n"
    "Message-ID: <paperbell.d-jurgen@paperbell.example>\r\n"
    "MIME-Version: 1.0\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "Content-Transfer-Encoding: 8bit\r\n"
    "\r\n"
    "Grüße: three papers today.\r\n"
).encode()


@contextmanager
def utf8_sink(*, offered: bool = True) -> Iterator[tuple[SinkHandler, int]]:
    """An SMTP server on loopback that offers SMTPUTF8 (RFC 6531), or not."""
    handler, port = SinkHandler(), free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port, enable_SMTPUTF8=offered)
    controller.start()
    try:
        yield handler, port
    finally:
        controller.stop()


def queue_for_jurgen(store: Store) -> tuple[int, int]:
    """Jürgen as a subscriber and a message to him queued: his id and the record's."""
    now = utcnow()
    store.subscribers.sync_config([Subscriber("jurgen", JURGEN, ("x",))], now=now)
    jurgen = store.subscribers.get("jurgen")
    assert jurgen is not None and jurgen.id is not None
    record = store.outbox.enqueue(
        jurgen.id,
        channel="email",
        period="daily:2026-11-23",
        digest_id="paperbell.d-jurgen",
        recipient=JURGEN,
        payload=MESSAGE,
        sent=(),
        now=now,
    )
    assert record is not None
    return jurgen.id, record


def with_verp(port: int) -> Config:
    """[email] to the sink on `port`, with bounce_address (and the key that signs)."""
    return parse_config(
        {
            "version": 1,
            "email": sink_email(port) | {"bounce_address": "bounces@papers.example.org"},
            "web": {"public_url": "https://papers.example.org", "secret_key_env": "PB_KEY"},
        },
        environ={"PB_KEY": WEB_SECRET},
    )


@pytest.mark.database
def test_a_non_ascii_address_goes_from_the_verp_address_and_its_dsn_is_matched(
    store: Store,
) -> None:
    jurgen, record = queue_for_jurgen(store)
    with utf8_sink() as (sink, port):
        config = with_verp(port)
        channels = build_channels(config, store=store)
        attempts = asyncio.run(drain(store, channels, clock=utcnow, owner="w"))
    assert [a.status for a in attempts] == ["sent"]
    [(mail_from, recipients)] = sink.envelopes
    signer = verp(config)
    assert signer is not None and mail_from == signer.address(record)
    assert re.fullmatch(r"bounces\+\d+-[a-z2-7]{16}@papers\.example\.org", mail_from)
    assert recipients == [JURGEN]
    assert "SMTPUTF8" in sink.mail_options[0]
    assert JURGEN.encode() in sink.raw[0]  # the To header as it was, in UTF-8

    dsn = postfix_dsn(sink.raw[0], envelope_from=mail_from, recipient=JURGEN)
    outcome = handle_bounce(dsn, store=store, verp=signer, bounce_limit=3, now=utcnow())
    assert (outcome.action, outcome.subscriber) == ("paused", "jurgen")
    assert outcome.line == "jurgen: email paused: mailbox unknown (5.1.1)"
    assert store.targets.paused(jurgen)


@pytest.mark.database
def test_a_server_without_smtputf8_refuses_it_for_good_and_says_why(store: Store) -> None:
    queue_for_jurgen(store)
    with utf8_sink(offered=False) as (sink, port):
        channels = build_channels(with_verp(port), store=store)
        attempts = asyncio.run(drain(store, channels, clock=utcnow, owner="w"))
    assert [a.status for a in attempts] == ["failed"]  # never sendable there: no retries
    assert attempts[0].error is not None and "SMTPUTF8" in attempts[0].error
    assert sink.envelopes == []


@given(
    local=st.text(min_size=1, max_size=40),
    body=st.binary(max_size=200),
    raw_header=st.binary(max_size=80),
)
@example(local="j\udcffrgen", body=b"", raw_header=b"")  # not UTF-8: a surrogate
@example(local="a", body=b"\x00", raw_header=b"To: \xff\xfe@x.org")
@settings(max_examples=40)
def test_any_header_bytes_give_one_outcome_and_never_raise(
    local: str, body: bytes, raw_header: bytes
) -> None:
    """Whatever the To header holds (odd Unicode, bytes that are not UTF-8, NUL), the send
    gives one outcome: sent, or failed with a reason; nothing escapes."""
    to = local.encode("utf-8", "surrogateescape") + b"@ex\xc3\xa4mple.org"
    payload = b"From: papers@paperbell.example\r\nTo: " + to + b"\r\n" + raw_header
    payload += b"\r\nSubject: x\r\n\r\n" + body
    with utf8_sink() as (_, port):
        channel = EmailChannel(SmtpSettings("127.0.0.1", port, security="none", timeout=10))
        sent: list[Any] = []
        outcomes = asyncio.run(channel.send_all([("item", payload)], sent.append))
    assert len(outcomes) == 1
    assert outcomes[0].ok or outcomes[0].error
