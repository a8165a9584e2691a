"""bot.channels.smtpwire: aiosmtplib's two rewrites before DATA, skipped only where they
would change nothing: the same bytes as aiosmtplib's own steps for any message, and the
same message at a real SMTP server."""

from __future__ import annotations

import asyncio
import copy

import aiosmtplib.protocol
import aiosmtplib.smtp
from hypothesis import example, given
from hypothesis import strategies as st
from support.servers import smtp_sink

import bot.channels.email  # noqa: F401  (installs the wrappers, as the sender does)
from bot.channels.base import SendOutcome
from bot.channels.email import EmailChannel, SmtpSettings
from bot.channels.smtpwire import _Stuffing, has_leading_period, install, line_endings_are_crlf

NORMALIZE = aiosmtplib.protocol.normalize_message_line_endings
ORIGINAL_NORMALIZE = NORMALIZE.__wrapped__  # type: ignore[attr-defined]
STUFFING = aiosmtplib.protocol.PERIOD_REGEX

# Messages made of what the two steps look at (CR, LF, period) among other bytes, and any
# bytes at all.
_PIECES = st.sampled_from([b"\r", b"\n", b"\r\n", b".", b"..", b"a", b"=2E", b"\x00", b" "])
MESSAGES = st.one_of(st.lists(_PIECES, max_size=40).map(b"".join), st.binary(max_size=200))


def test_installed_in_aiosmtplib_once() -> None:
    assert isinstance(STUFFING, _Stuffing)
    assert STUFFING.pattern == rb"(?m)^\." and STUFFING.flags == STUFFING.regex.flags
    assert copy.copy(STUFFING).sub(b"..", b".a") == b"..a"
    assert aiosmtplib.smtp.normalize_message_line_endings is NORMALIZE
    assert NORMALIZE is not ORIGINAL_NORMALIZE
    assert install() is True  # again: nothing changes
    assert aiosmtplib.protocol.PERIOD_REGEX is STUFFING
    assert aiosmtplib.protocol.normalize_message_line_endings is NORMALIZE


@given(MESSAGES)
@example(b"")
@example(b"\r\n")
@example(b".\r\n")
@example(b"a\r\n.b\r\n")
@example(b"a\r.b\r\n")  # a period after a lone CR does not start a line for `(?m)^`
@example(b"a\r\r\n")
@example(b"a\n\r")
@example(b"a\r\n\n")
def test_the_same_bytes_as_aiosmtplib(message: bytes) -> None:
    assert NORMALIZE(message) == ORIGINAL_NORMALIZE(message)
    assert STUFFING.sub(b"..", message) == STUFFING.regex.sub(b"..", message)
    normalized = ORIGINAL_NORMALIZE(message)
    assert line_endings_are_crlf(message) == (normalized == message)
    assert has_leading_period(message) == (STUFFING.regex.sub(b"..", message) != message)


def test_a_digest_shaped_message_is_left_as_it_is() -> None:
    body = b"".join(b"line %d =E2=80=94 text.\r\n" % n for n in range(2000))
    message = b"From: a@b.example\r\nTo: c@d.example\r\n\r\n" + body
    assert NORMALIZE(message) is message
    assert STUFFING.sub(b"..", message) is message


def _send(port: int, payloads: list[bytes]) -> list[SendOutcome]:
    async def run() -> list[SendOutcome]:
        channel = EmailChannel(SmtpSettings("127.0.0.1", port, security="none", timeout=5))

        async def on_sent(item: object) -> None:
            return None

        return await channel.send_all(list(enumerate(payloads)), on_sent)

    return asyncio.run(run())


def test_periods_and_bare_line_endings_arrive_as_aiosmtplib_sends_them() -> None:
    head = b"From: papers@paperbell.example\r\nTo: ada@lab.example\r\nSubject: dots\r\n\r\n"
    plain = head + b"no period starts a line.\r\nnone.\r\n"
    dotted = head + b".a line starting with a period\r\n..two\r\n.\r\nend\r\n"
    bare = head + b"a bare LF\nand a bare CR\rand no CRLF at the end."
    # aiosmtpd announces SIZE: aiosmtplib counts the bytes with the wrapped step too.
    with smtp_sink() as (sink, port):
        outcomes = _send(port, [plain, dotted, bare])
    assert all(outcome.ok for outcome in outcomes), outcomes
    # What the server reads after undoing the dot-stuffing: each message with its line
    # endings as CRLF, periods as they were written.
    assert sink.raw == [ORIGINAL_NORMALIZE(m) for m in (plain, dotted, bare)]
    assert sink.raw[0] == plain and sink.raw[1] == dotted
    assert sink.raw[2].endswith(b"a bare LF\r\nand a bare CR\r\nand no CRLF at the end.\r\n")
    # SIZE: the bytes as sent (RFC 1870), the line endings made CRLF, before dot-stuffing.
    assert sink.mail_options == [[f"SIZE={len(raw)}"] for raw in sink.raw]
