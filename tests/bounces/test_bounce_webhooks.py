"""Reading the providers' webhook events (bot.bounces.webhooks) and checking that a call is
theirs (bot.bounces.sns, bot.bounces.signatures): the payloads in the shape each provider
documents (tests/fixtures/bounces/webhooks/SOURCES.md), SNS signatures made with a key and
certificate made here; then hostile values, Hypothesis's: never an exception, nothing a
database would refuse."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from support.webhooks import (
    CERT_URL,
    MAILGUN_KEY,
    POSTMARK_SECRET,
    SnsSigner,
    basic_auth,
    json_values,
    mailgun_signed,
    payload,
)

from bot.bounces.signatures import (
    SeenTokens,
    basic_auth_ok,
    mailgun_problem,
    mailgun_signature,
)
from bot.bounces.sns import (
    SigningCertificates,
    SnsMessage,
    certificate_url_ok,
    read_message,
    sns_url_ok,
)
from bot.bounces.webhooks import WebhookEvent, load_json, read_mailgun, read_postmark, read_ses

NOW = 1796281331.0
SIGNED_AT = datetime.fromtimestamp(NOW, UTC)  # the SNS checks' clock, NOW as a datetime


@pytest.mark.parametrize(
    ("name", "reader", "kind", "status", "message_id", "addresses"),
    [
        (
            "ses-bounce-permanent.json",
            read_ses,
            "hard",
            "5.1.1",
            "paperbell.ada0001@papers.lab.example",
            ("bounces+42-aaaaaaaaaaaaaaaa@papers.lab.example",),
        ),
        (
            "ses-bounce-transient.json",
            read_ses,
            "soft",
            "4.2.2",
            None,
            ("digest@papers.lab.example",),
        ),
        (
            "ses-complaint.json",
            read_ses,
            "complaint",
            None,
            "paperbell.ada0001@papers.lab.example",
            ("bounces+42-aaaaaaaaaaaaaaaa@papers.lab.example",),
        ),
        ("postmark-bounce.json", read_postmark, "hard", "5.1.1", None, ()),
        ("postmark-spam-complaint.json", read_postmark, "complaint", None, None, ()),
        (
            "mailgun-failed-permanent.json",
            read_mailgun,
            "hard",
            "5.1.1",
            "paperbell.ada0001@papers.lab.example",
            ("bounces+42-aaaaaaaaaaaaaaaa@papers.lab.example",),
        ),
        (
            "mailgun-failed-temporary.json",
            read_mailgun,
            "soft",
            "4.2.2",
            "paperbell.ada0001@papers.lab.example",
            ("digest@papers.lab.example",),
        ),
        (
            "mailgun-complained.json",
            read_mailgun,
            "complaint",
            None,
            "paperbell.ada0001@papers.lab.example",
            (),
        ),
    ],
)
def test_the_providers_events_are_read(
    name: str,
    reader: Any,
    kind: str,
    status: str | None,
    message_id: str | None,
    addresses: tuple[str, ...],
) -> None:
    event: WebhookEvent = reader(payload(name))
    assert event.problem is None and event.key
    [(source, report)] = event.sources()
    assert source == event.key
    assert (report.kind, report.status, report.recipient) == (kind, status, "ada@lab.example")
    assert report.message_id == message_id
    assert report.addresses == addresses
    assert report.form == name.partition("-")[0]


@pytest.mark.parametrize(
    ("name", "reader", "event"),
    [
        ("ses-delivery.json", read_ses, "delivery"),
        ("postmark-delivery.json", read_postmark, "delivery"),
        ("mailgun-delivered.json", read_mailgun, "delivered"),
    ],
)
def test_deliveries_are_no_bounce(name: str, reader: Any, event: str) -> None:
    found = reader(payload(name))
    assert (found.event, found.reports, found.problem) == (event, (), None)


def test_every_recipient_of_an_ses_bounce_is_a_report_with_its_own_key() -> None:
    data = payload("ses-bounce-permanent.json")
    [ada] = data["bounce"]["bouncedRecipients"]
    data["bounce"]["bouncedRecipients"].append({**ada, "emailAddress": "bob@lab.example"})
    sources = read_ses(data).sources()
    assert [(s, r.recipient) for s, r in sources] == [
        (f"ses:{data['bounce']['feedbackId']}#0", "ada@lab.example"),
        (f"ses:{data['bounce']['feedbackId']}#1", "bob@lab.example"),
    ]


def test_a_not_spam_feedback_is_no_complaint() -> None:
    data = payload("ses-complaint.json")
    data["complaint"]["complaintFeedbackType"] = "not-spam"
    assert read_ses(data).reports[0].kind == "unknown"


def test_postmarks_bounce_content_gives_the_digest_it_answers() -> None:
    """With "include bounce content", Postmark sends the raw DSN: it quotes the digest."""
    dsn = (
        "From: MAILER-DAEMON@postmark.example\r\nTo: pm_bounces@pm-bounces.papers.lab.example\r\n"
        "Subject: Undelivered Mail Returned to Sender\r\nMIME-Version: 1.0\r\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="b"\r\n\r\n'
        "--b\r\nContent-Type: text/plain\r\n\r\nGone.\r\n"
        "--b\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; pm\r\n\r\n"
        "Final-Recipient: rfc822; ada@lab.example\r\nAction: failed\r\nStatus: 5.1.1\r\n\r\n"
        "--b\r\nContent-Type: message/rfc822\r\n\r\n"
        "Message-ID: <paperbell.ada0001@papers.lab.example>\r\nSubject: papers\r\n\r\n"
        "x\r\n--b--\r\n"
    )
    data = {**payload("postmark-bounce.json"), "Content": dsn, "Details": "gone"}
    [report] = read_postmark(data).reports
    assert report.message_id == "paperbell.ada0001@papers.lab.example"
    assert report.status == "5.1.1"


@pytest.mark.parametrize(
    ("bounce_type", "kind"),
    [
        ("HardBounce", "hard"),
        ("SoftBounce", "soft"),
        ("Transient", "soft"),
        ("AutoResponder", "auto-reply"),
        ("DMARCPolicy", "unknown"),  # the sender's fault, not the address's
        ("Unsubscribe", "unknown"),
        ("SomethingNew", "unknown"),
    ],
)
def test_postmark_bounce_types(bounce_type: str, kind: str) -> None:
    [report] = read_postmark({**payload("postmark-bounce.json"), "Type": bounce_type}).reports
    assert report.kind == kind


# -- hostile values ----------------------------------------------------------------------

JSON = json_values()
FIELDS = st.sampled_from(
    [
        "notificationType",
        "bounce",
        "mail",
        "bouncedRecipients",
        "emailAddress",
        "RecordType",
        "Type",
        "Email",
        "Details",
        "Content",
        "event-data",
        "event",
        "recipient",
        "severity",
        "message",
        "headers",
        "message-id",
        "delivery-status",
    ]
)


def _clean(event: WebhookEvent) -> None:
    """What an event holds is fit for any database: no NUL, no lone surrogate."""
    for source, report in event.sources():
        for text in (source, report.diagnostic, report.recipient, report.message_id, report.status):
            if text is not None:
                assert "\x00" not in text
                text.encode("utf-8")


@given(JSON)
@example({"notificationType": "Bounce", "bounce": {"bouncedRecipients": [{"emailAddress": 1}]}})
@example({"RecordType": "Bounce", "Email": "a\x00@b.example", "Details": "\ud800", "ID": 10**5000})
@example({"event-data": {"event": "failed", "recipient": "\U0001f4a9@x.example", "id": "\x00"}})
@example({"event-data": {"event": "complained", "message": {"headers": {"message-id": []}}}})
def test_any_json_value_is_read_without_an_error(value: Any) -> None:
    for reader in (read_ses, read_postmark, read_mailgun):
        _clean(reader(value))


@given(
    st.dictionaries(FIELDS, st.one_of(JSON, st.dictionaries(FIELDS, JSON, max_size=6)), max_size=8)
)
def test_events_near_the_real_shape_are_read_without_an_error(value: dict[str, Any]) -> None:
    for reader in (read_ses, read_postmark, read_mailgun):
        _clean(reader(value))
        _clean(reader({**payload("ses-bounce-permanent.json"), **value}))
        _clean(reader({"event-data": value}))


@given(st.binary(max_size=2000))
@example(b"[" * 100_000)
@example(b'{"a": 1' + b"0" * 5000 + b"}")
@example(b"\xff\xfe")
def test_any_body_is_json_or_a_reason(body: bytes) -> None:
    value, problem = load_json(body)
    assert (value is None) or problem is None


# -- SNS ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def signer() -> SnsSigner:
    return SnsSigner(SIGNED_AT)


def verifier(signer: SnsSigner, fetched: list[str] | None = None) -> SigningCertificates:
    async def fetch(url: str) -> bytes:
        if fetched is not None:
            fetched.append(url)
        return signer.pem

    return SigningCertificates(fetch)


def check(certificates: SigningCertificates, data: dict[str, Any]) -> str | None:
    message = read_message(data)
    assert isinstance(message, SnsMessage)
    return asyncio.run(certificates.verify(message, now=SIGNED_AT))


@pytest.mark.parametrize("version", ["1", "2"])
def test_sns_signatures_of_both_versions_are_checked(signer: SnsSigner, version: str) -> None:
    fetched: list[str] = []
    certificates = verifier(signer, fetched)
    confirmation = payload("sns-subscription-confirmation.json")
    del confirmation["SigningCertURL"]  # the certificate the test made, at CERT_URL
    data = signer.sign(confirmation, version=version)
    assert check(certificates, data) is None
    note = signer.notification(payload("ses-bounce-permanent.json"), Subject="Amazon SES")
    assert check(certificates, signer.sign(note, version=version)) is None
    assert fetched == [CERT_URL]  # fetched once, then kept


@pytest.mark.parametrize(
    "change",
    [
        {"Message": "{}"},
        {"TopicArn": "arn:aws:sns:eu-west-1:123456789012:other"},
        {"SignatureVersion": "3"},
        {"Signature": "not base64!"},
        {"Signature": base64.b64encode(b"x" * 256).decode()},
        {"Subject": "added after signing"},
    ],
)
def test_a_changed_sns_message_fails_its_check(signer: SnsSigner, change: dict[str, str]) -> None:
    data = signer.notification(payload("ses-bounce-permanent.json"))
    assert check(verifier(signer), {**data, **change}) is not None


def test_a_certificate_out_of_its_dates_fails(signer: SnsSigner) -> None:
    data = signer.notification(payload("ses-bounce-permanent.json"))
    message = read_message(data)
    assert isinstance(message, SnsMessage)
    later = SIGNED_AT + timedelta(days=60)
    said = asyncio.run(verifier(signer).verify(message, now=later))
    assert said == "the signing certificate is not valid now"


def test_a_certificate_of_another_key_fails(signer: SnsSigner) -> None:
    other = SnsSigner(SIGNED_AT)
    data = other.notification(payload("ses-bounce-permanent.json"))
    assert check(verifier(signer), data) == "the signature is wrong"


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-abc.pem", True),
        ("https://sns.us-gov-west-1.amazonaws.com/SimpleNotificationService-abc.pem", True),
        ("https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-abc.pem", True),
        ("http://sns.eu-west-1.amazonaws.com/SimpleNotificationService-abc.pem", False),
        ("https://sns.eu-west-1.amazonaws.com.evil.example/x.pem", False),
        ("https://evil.example/sns.eu-west-1.amazonaws.com/x.pem", False),
        ("https://sns.eu-west-1.amazonaws.com:8443/x.pem", False),
        ("https://user@sns.eu-west-1.amazonaws.com/x.pem", False),
        ("https://sns.eu-west-1.amazonaws.com/x.txt", False),
        ("https://sns.eu-west-1.amazonaws.com/x.pem?u=https://evil.example/", False),
        ("https://sqs.eu-west-1.amazonaws.com/x.pem", False),
        ("https://[::1/x.pem", False),
    ],
)
def test_certificates_come_only_from_sns(url: str, ok: bool) -> None:
    assert certificate_url_ok(url) is ok


def test_a_certificate_url_elsewhere_is_never_fetched(signer: SnsSigner) -> None:
    fetched: list[str] = []
    data = signer.notification(
        payload("ses-bounce-permanent.json"), SigningCertURL="https://evil.example/cert.pem"
    )
    assert "SigningCertURL" in (check(verifier(signer, fetched), data) or "")
    assert fetched == []


def test_subscribe_links_go_only_to_sns() -> None:
    assert sns_url_ok(payload("sns-subscription-confirmation.json")["SubscribeURL"])
    assert not sns_url_ok("https://evil.example/?Action=ConfirmSubscription")
    assert not sns_url_ok("http://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription")


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "Type",
                "Message",
                "MessageId",
                "Signature",
                "SigningCertURL",
                "Timestamp",
                "TopicArn",
                "SignatureVersion",
                "Token",
                "SubscribeURL",
            ]
        ),
        JSON,
        max_size=10,
    )
)
@example(
    {
        "Type": "Notification",
        "Message": "\ud800",
        "MessageId": "1",
        "Timestamp": "t",
        "TopicArn": "a",
        "SignatureVersion": "2",
        "Signature": "AAAA",
        "SigningCertURL": CERT_URL,
    }
)
def test_any_sns_envelope_is_checked_without_an_error(value: dict[str, Any]) -> None:
    async def fetch(url: str) -> bytes:
        return b"not a certificate"

    message = read_message(value)
    if isinstance(message, SnsMessage):
        checked = SigningCertificates(fetch).verify(message, now=SIGNED_AT)
        assert asyncio.run(checked) is not None


# -- Mailgun and Postmark ----------------------------------------------------------------


def test_mailgun_signatures() -> None:
    data = mailgun_signed(payload("mailgun-failed-permanent.json"), timestamp=int(NOW), token="t1")
    assert mailgun_problem(mailgun_signature(data), MAILGUN_KEY, now=NOW) is None
    assert mailgun_problem(mailgun_signature(data), MAILGUN_KEY, now=NOW + 301) == (
        "a stale timestamp (or a clock that is off)"
    )
    assert mailgun_problem(mailgun_signature(data), "another key", now=NOW) == "a wrong signature"
    assert (
        mailgun_problem(
            mailgun_signature(payload("mailgun-failed-permanent.json")), MAILGUN_KEY, now=NOW
        )
        == "a wrong signature"
    )
    assert mailgun_problem(None, MAILGUN_KEY, now=NOW) == "no signature"
    odd = {**data, "signature": {**data["signature"], "timestamp": "¹²³"}}
    assert mailgun_problem(mailgun_signature(odd), MAILGUN_KEY, now=NOW) == (
        "a timestamp that is no number"
    )


def test_a_mailgun_token_is_taken_once() -> None:
    seen = SeenTokens()
    assert seen.first_time("t1", now=NOW) and not seen.first_time("t1", now=NOW + 10)
    assert seen.first_time("t2", now=NOW + 10)


@given(st.dictionaries(st.text(max_size=10), JSON, max_size=4), st.floats(allow_nan=False))
@example({"signature": {"timestamp": "9" * 12, "token": "t", "signature": "\ud800"}}, NOW)
def test_any_mailgun_signature_is_checked_without_an_error(
    value: dict[str, Any], now: float
) -> None:
    assert (
        mailgun_problem(mailgun_signature({"signature": value}), MAILGUN_KEY, now=now) is not None
    )


def test_postmark_basic_auth() -> None:
    assert basic_auth_ok(basic_auth()["Authorization"], POSTMARK_SECRET)
    assert basic_auth_ok(basic_auth(user="")["Authorization"], POSTMARK_SECRET)
    assert not basic_auth_ok(basic_auth("wrong")["Authorization"], POSTMARK_SECRET)
    for header in (
        None,
        "",
        "Bearer x",
        "Basic",
        "Basic !!!",
        "Basic " + base64.b64encode(POSTMARK_SECRET.encode()).decode(),
    ):
        assert not basic_auth_ok(header, POSTMARK_SECRET)


@given(st.text(max_size=200))
def test_any_authorization_header_is_checked_without_an_error(header: str) -> None:
    assert basic_auth_ok(header, POSTMARK_SECRET) in (True, False)


def test_the_fixtures_are_json() -> None:
    from support.webhooks import WEBHOOKS

    for path in WEBHOOKS.glob("*.json"):
        assert isinstance(json.loads(path.read_text(encoding="utf-8")), dict), path.name


# -- the certificate fetch: the fetcher's size cap, no redirect followed ------------------


def test_the_sns_fetch_is_capped_and_follows_no_redirect(signer: SnsSigner) -> None:
    from support.servers import hostile_server

    from bot.core.errors import PaperbellError
    from bot.web.bounces import sns_fetch

    async def run() -> tuple[bytes, list[str], dict[str, int]]:
        async with hostile_server(pieces=[signer.pem]) as server:
            got = await sns_fetch(server.url("/given"))
            with pytest.raises(PaperbellError, match="larger than"):
                await sns_fetch(server.url("/endless"))
            # A 302 whose own body never ends: neither followed nor read past the cap.
            with pytest.raises(PaperbellError, match="larger than"):
                await sns_fetch(server.url("/redirect-endless"))
            return got, list(server.requests), dict(server.sent)

    got, requests, sent = asyncio.run(run())
    assert got == signer.pem
    assert "/feed" not in requests  # the redirect was not followed
    assert sent["/endless"] < 64 * 1024 * 1024  # stopped (socket buffers hold a few MB)
