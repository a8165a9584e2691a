"""What a real SMTP server reads of a message paperbell sends: its periods and line endings
as written, a bare CR or LF made CRLF; the SIZE announced is that of the bytes sent."""

from __future__ import annotations

import asyncio

from support.servers import smtp_sink

from bot.channels.base import SendOutcome
from bot.channels.email import EmailChannel, SmtpSettings


def _send(port: int, payloads: list[bytes]) -> list[SendOutcome]:
    async def run() -> list[SendOutcome]:
        channel = EmailChannel(SmtpSettings("127.0.0.1", port, security="none", timeout=5))

        async def on_sent(item: object) -> None:
            return None

        return await channel.send_all(list(enumerate(payloads)), on_sent)

    return asyncio.run(run())


def test_periods_and_bare_line_endings_arrive_as_written() -> None:
    head = b"From: papers@paperbell.example\r\nTo: ada@lab.example\r\nSubject: dots\r\n\r\n"
    plain = head + b"no period starts a line.\r\nnone.\r\n"
    dotted = head + b".a line starting with a period\r\n..two\r\n.\r\nend\r\n"
    bare = head + b"a bare LF\nand a bare CR\rand no CRLF at the end."
    # aiosmtpd announces SIZE: aiosmtplib counts the bytes as it sends them.
    with smtp_sink() as (sink, port):
        outcomes = _send(port, [plain, dotted, bare])
    assert all(outcome.ok for outcome in outcomes), outcomes
    # What the server reads after undoing the dot-stuffing: each message with its line
    # endings as CRLF, periods as they were written.
    made_crlf = head + b"a bare LF\r\nand a bare CR\r\nand no CRLF at the end.\r\n"
    assert sink.raw == [plain, dotted, made_crlf]
    assert sink.raw[0] == plain and sink.raw[1] == dotted
    assert sink.raw[2].endswith(b"a bare LF\r\nand a bare CR\r\nand no CRLF at the end.\r\n")
    # SIZE: the bytes as sent (RFC 1870), the line endings made CRLF, before dot-stuffing.
    assert sink.mail_options == [[f"SIZE={len(raw)}"] for raw in sink.raw]


def test_a_fault_with_one_message_fails_it_alone_and_the_batch_goes_on() -> None:
    """An unexpected error while one message is sent (here, its envelope sender cannot be
    made) fails that message alone, as a retry: the batch goes on with the next ones, as
    Slack's and Apprise's do, instead of the error leaving every record of the batch
    claimed and unsent until its lease ends."""
    head = b"From: papers@paperbell.example\r\nTo: ada@lab.example\r\nSubject: %d\r\n\r\nhi\r\n"

    def envelope_from(item: object) -> str:
        if item == 1:
            raise RuntimeError("a fault of this message alone")
        return f"bounces+{item}@paperbell.example"

    async def run() -> list[SendOutcome]:
        settings = SmtpSettings("127.0.0.1", port, security="none", timeout=5)
        channel = EmailChannel(settings, envelope_from=envelope_from)

        async def on_sent(item: object) -> None:
            return None

        return await channel.send_all([(n, head % n) for n in range(3)], on_sent)

    with smtp_sink() as (sink, port):
        outcomes = asyncio.run(run())
    assert [(o.item, o.ok, o.permanent) for o in outcomes] == [
        (0, True, False),
        (1, False, False),
        (2, True, False),
    ]
    assert "RuntimeError: a fault of this message alone" in (outcomes[1].error or "")
    assert len(sink.raw) == 2
