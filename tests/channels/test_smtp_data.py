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
