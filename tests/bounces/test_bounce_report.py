"""Reading what comes back to the bounce address (bot.bounces): real DSNs as Postfix (made
on loopback), Exim, Exchange and Gmail write them, a real ARF complaint and a real
out-of-office reply (tests/fixtures/bounces/SOURCES.md); then hostile input, small ones
written here and Hypothesis's: never an exception, always an "unknown" report at worst."""

from __future__ import annotations

import time
from email.message import EmailMessage

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from support.paths import FIXTURES

from bot.bounces import read_bounce
from bot.bounces.report import MAX_BYTES
from bot.core.verp import Verp, VerpToken

BOUNCES = FIXTURES / "bounces"
# The key the Postfix fixtures' envelope senders were signed with (SOURCES.md).
FIXTURE_VERP = Verp("fixture-key-" + "x" * 30, "bounces@papers.lab.example")


def read(name: str) -> bytes:
    return (BOUNCES / name).read_bytes()


@pytest.mark.parametrize(
    ("name", "kind", "form", "status", "recipient", "message_id"),
    [
        (
            "postfix-unknown-user.eml",
            "hard",
            "rfc3464",
            "5.1.1",
            "ada-gone@lab.example",
            "paperbell.5f0c2a9e1b7d4c3a8e6f0d1c2b3a4958@papers.lab.example",
        ),
        (
            "postfix-mailbox-full.eml",
            "soft",
            "rfc3464",
            "4.2.2",
            "bob@full.example",
            "paperbell.0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a@papers.lab.example",
        ),
        ("postfix-connection-refused.eml", "soft", "rfc3464", "4.4.1", "bob@full.example", None),
        ("exchange2007-05.eml", "hard", "rfc3464", "5.1.1", "mikeneko@example.co.jp", None),
        (
            "exim-03.eml",
            "hard",
            "exim",
            "5.7.0",
            "kijitora@example.jp",
            "hogeuoiuadogalhg.dg9i09@example.jp",
        ),
        (
            "gmail-02.eml",
            "hard",
            "gmail",
            "5.1.1",
            "aougoueioaldljgoiuiorghladkgke@example.fr",
            "45B7FBD7-1218-4FCD-ACA1-4706F111E682@gmail.com",
        ),
        ("exchange-04.eml", "hard", "exchange", None, "kijitora@example.com", None),
        (
            "arf-02.eml",
            "complaint",
            "arf",
            None,
            "this-local-part-does-not-exist-on-yahoo@yahoo.com",
            "000000000000000000000000.smtp@example.com",
        ),
        ("rfc3834-01.eml", "auto-reply", "auto-reply", None, None, None),
    ],
)
def test_real_bounces_are_read(
    name: str,
    kind: str,
    form: str,
    status: str | None,
    recipient: str | None,
    message_id: str | None,
) -> None:
    report = read_bounce(read(name))
    assert (report.kind, report.form, report.status) == (kind, form, status)
    assert report.recipient == recipient
    if message_id is not None:
        assert report.message_id == message_id
    assert report.problem is None
    if report.diagnostic is not None:
        assert len(report.diagnostic) <= 500 and "\n" not in report.diagnostic


def test_the_reasons_are_the_servers() -> None:
    assert read_bounce(read("postfix-unknown-user.eml")).diagnostic == 'unknown user: "ada-gone"'
    assert read_bounce(read("postfix-mailbox-full.eml")).diagnostic == "452 4.2.2 Mailbox full"
    assert read_bounce(read("exchange-04.eml")).diagnostic == "Recipient Not Found"
    assert "554 5.7.0 Header error" in (read_bounce(read("exim-03.eml")).diagnostic or "")


@pytest.mark.parametrize(
    ("name", "record"),
    [
        ("postfix-unknown-user.eml", 42),
        ("postfix-connection-refused.eml", 43),
        ("postfix-mailbox-full.eml", 44),
    ],
)
def test_postfix_bounces_carry_the_verp_token(name: str, record: int) -> None:
    """Postfix returns the DSN to the VERP address (its To), and quotes it twice more
    (X-Postfix-Sender, the original's Return-Path): the token survives a mangled report."""
    report = read_bounce(read(name))
    tokens = [FIXTURE_VERP.read(a) for a in report.addresses]
    assert tokens[0] == VerpToken(record, "valid")
    assert sum(t == VerpToken(record, "valid") for t in tokens) >= 2
    # The report alone, its envelope headers gone: still found, from inside the report.
    raw = read(name).replace(b"\nTo: bounces+", b"\nX-Was-To: bounces+")
    inside = [FIXTURE_VERP.read(a) for a in read_bounce(raw).addresses]
    assert VerpToken(record, "valid") in inside


def test_a_delay_warning_is_no_failure() -> None:
    raw = read("postfix-mailbox-full.eml").replace(b"Action: failed", b"Action: delayed")
    assert read_bounce(raw).kind == "unknown"


def test_a_not_spam_feedback_report_is_no_complaint() -> None:
    raw = read("arf-02.eml").replace(b"Feedback-Type: abuse", b"Feedback-Type: not-spam")
    assert read_bounce(raw).kind == "unknown"


def test_an_ordinary_message_is_not_a_bounce() -> None:
    msg = EmailMessage()
    msg["From"] = "ada@lab.example"
    msg["To"] = "bounces@papers.lab.example"
    msg["Subject"] = "thanks for the digest"
    msg.set_content("Great papers today. Ada")
    report = read_bounce(bytes(msg))
    assert (report.kind, report.form) == ("unknown", "not a bounce")


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Auto-Submitted", "auto-replied (vacation)"),
        ("X-Autoreply", "yes"),
        ("Precedence", "auto_reply"),
        ("Subject", "Automatic reply: Your papers for 3 Dec"),
        ("Subject", "Abwesenheitsnotiz: Your papers"),
    ],
)
def test_auto_replies_are_recognised(header: str, value: str) -> None:
    msg = EmailMessage()
    msg["From"] = "ada@lab.example"
    msg["Subject"] = "Re: Your papers"
    if header == "Subject":
        del msg["Subject"]
    msg[header] = value
    msg.set_content("I am away until Monday.")
    assert read_bounce(bytes(msg)).kind == "auto-reply"


# -- hostile input -------------------------------------------------------------------------

HOSTILE = [
    b"",
    b"\x00" * 1000,
    b"Content-Type: multipart/report; report-type=delivery-status; boundary=x\n\n--x\n",
    b"Content-Type: multipart/report; report-type=delivery-status; boundary=x\n\n"
    b"--x\nContent-Type: message/delivery-status\n\n\n\n--x--\n",
    b"Content-Type: multipart/report; report-type=feedback-report; boundary=x\n\n--x--\n",
    b"Content-Type: text/plain; charset=no-such-charset\nSubject: Undeliverable\n\n\xff\xfe",
    b"From: MAILER-DAEMON\nSubject: =?bogus?q?x?=\n\n" + "é5.1.1".encode("utf-16"),
    b"Subject: Undelivered\nContent-Transfer-Encoding: base64\n\n!!!not base64!!!",
]


def test_a_status_in_other_digits_is_no_status() -> None:
    # RFC 3463 writes a status in ASCII digits; kept as it came, "5.\u0661.\u0661" was
    # stored with the bounce and matched none of the statuses a reason is told by.
    raw = (
        "From: MAILER-DAEMON@mx.example\nSubject: Undelivered Mail Returned to Sender\n"
        "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n"
        "ada@lab.example: 550 5.\u0661.\u0661 unknown user\n"
    ).encode()
    report = read_bounce(raw)
    assert report.status is None
    assert report.kind == "hard"  # by the SMTP code, 550


def nested(depth: int) -> bytes:
    """A report nested `depth` multiparts deep (each its own boundary)."""
    head = b"Content-Type: multipart/report; report-type=delivery-status; boundary=b0\n\n"
    body = b""
    for level in range(1, depth):
        body += f"--b{level - 1}\nContent-Type: multipart/mixed; boundary=b{level}\n\n".encode()
    return head + body + b"--b0--\n"


@pytest.mark.parametrize(
    "raw", [*HOSTILE, nested(2000), b"Subject: x\n\n" + b"a" * (3 * MAX_BYTES)]
)
def test_hostile_messages_are_unknown_never_an_error(raw: bytes) -> None:
    report = read_bounce(raw)
    assert report.kind in ("unknown", "hard", "soft")
    assert report.diagnostic is None or len(report.diagnostic) <= 500


def test_a_plain_bounce_made_to_backtrack_is_read_at_once() -> None:
    # A phrase a delay warning holds, repeated on one long line: a pattern that scanned
    # the rest of the line from each one took seconds of CPU per message anyone can send.
    raw = b"From: MAILER-DAEMON\nSubject: Undelivered Mail\n\n" + b"warning: message " * 11_000
    started = time.monotonic()
    assert read_bounce(raw).kind == "unknown"
    assert time.monotonic() - started < 1.0


_HEADERS = st.sampled_from(
    [
        "Content-Type: multipart/report; report-type=delivery-status; boundary=b",
        "Content-Type: multipart/report; report-type=feedback-report; boundary=b",
        "Content-Type: message/delivery-status",
        "Content-Type: message/rfc822",
        "Content-Type: text/plain; charset=utf-16",
        "Content-Type: text/plain; charset=x-unknown",
        "Content-Transfer-Encoding: base64",
        "Content-Transfer-Encoding: quoted-printable",
        "Status: 5.1.1",
        "Action: failed",
        "Final-Recipient: rfc822; \x00@\u202e",
        "Auto-Submitted: auto-replied",
        "Subject: =?utf-8?b?w6k=?= Undeliverable",
        "Delivered-To: bounces+1-aaaaaaaaaaaaaaaa@lab.example",
        "X-Failed-Recipients: \U0001f4a9@example.org",
        "--b",
        "--b--",
        "",
    ]
)


@given(st.lists(st.one_of(_HEADERS, st.text(max_size=80)), max_size=60))
@example(["Content-Type: multipart/report; report-type=delivery-status; boundary=b", "", "--b"])
@example(["Content-Type: message/rfc822", "", "Content-Type: message/rfc822", ""])
def test_any_message_is_read_without_an_error(lines: list[str]) -> None:
    raw = "\n".join(lines).encode("utf-8", errors="surrogatepass")
    report = read_bounce(raw)
    assert report.kind in ("hard", "soft", "complaint", "auto-reply", "unknown")
    assert all(isinstance(a, str) for a in report.addresses) and len(report.addresses) <= 40


@given(st.binary(max_size=4000))
def test_any_bytes_are_read_without_an_error(raw: bytes) -> None:
    assert read_bounce(raw).kind in ("hard", "soft", "complaint", "auto-reply", "unknown")
