"""The bounce webhooks over real HTTP (`POST /bounces/ses`, `/postmark`, `/mailgun`: the web
app on uvicorn on loopback, a real database): a provider's bounce pauses that subscriber's
email as a DSN piped into `paperbell bounce` does, by the same path; a forged call, an
event about no digest, a duplicate delivery and every malformed request change nothing for
anyone and get a 4xx, never a 500. SNS messages are signed with a certificate and key the
test makes (support.webhooks), handed to the app by its injected certificate fetch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.bounces import T0, sent
from support.config import WEB_SECRET
from support.servers import web_server
from support.webhooks import (
    MAILGUN_KEY,
    POSTMARK_SECRET,
    TOPIC,
    SnsSigner,
    basic_auth,
    json_values,
    mailgun_signed,
    payload,
)

from bot.config import Config, parse_config
from bot.core.errors import ConfigError
from bot.core.verp import Verp
from bot.pipeline.wiring import verp, wire
from bot.store import Store
from bot.web.app import create_app
from bot.web.bounces import MAX_BODY, PATHS, bounce_routes

pytestmark = pytest.mark.database

NOW = T0 + timedelta(minutes=5)
ENV = {"PB_WEB_KEY": WEB_SECRET, "PB_POSTMARK": POSTMARK_SECRET, "PB_MAILGUN": MAILGUN_KEY}
NEVER_5XX = {200, 400, 401, 403, 405, 413}


def webhook_config(database_url: str, **bounces: Any) -> Config:
    return parse_config(
        {
            "version": 1,
            "database": {"url": database_url},
            "web": {"public_url": "https://papers.lab.example", "secret_key_env": "PB_WEB_KEY"},
            "email": {
                "from": "paperbell <digest@papers.lab.example>",
                "bounce_address": "bounces@papers.lab.example",
            },
            "bounces": bounces
            or {
                "ses_topic_arns": [TOPIC],
                "postmark_secret_env": "PB_POSTMARK",
                "mailgun_signing_key_env": "PB_MAILGUN",
            },
        },
        environ=ENV,
    )


class Hooks:
    """The web app with the webhooks on loopback, its store, and what SNS's fetch got."""

    def __init__(self, store: Store, config: Config, base: str, signer: SnsSigner) -> None:
        self.store, self.config, self.signer = store, config, signer
        self.client = httpx.Client(base_url=base, timeout=30)
        self.fetched: list[str] = []
        verp_ = verp(config)
        assert verp_ is not None
        self.verp: Verp = verp_

    def post(self, provider: str, data: Any, **headers: str) -> httpx.Response:
        body = data if isinstance(data, bytes) else json.dumps(data).encode()
        return self.client.post(PATHS[provider], content=body, headers=headers)

    def ses(self, ses: dict[str, Any], *, message_id: str = "m-1") -> httpx.Response:
        note = self.signer.notification(ses, message_id=message_id)
        return self.post("ses", note, **{"Content-Type": "text/plain; charset=UTF-8"})

    def mailgun(self, data: dict[str, Any], *, token: str, at: datetime = NOW) -> httpx.Response:
        return self.post(
            "mailgun", mailgun_signed(data, timestamp=int(at.timestamp()), token=token)
        )

    def paused(self, name: str) -> str | None:
        found = self.store.subscribers.get(name)
        assert found is not None
        pause = self.store.targets.paused(found.id).get((found.id, "email"))
        return pause.reason if pause else None

    def actions(self) -> list[tuple[str, str]]:
        day = self.store.bounces
        return [(b.kind, b.action) for name in ("ada", "bob") for b in day.of(self._id(name))]

    def _id(self, name: str) -> int:
        found = self.store.subscribers.get(name)
        assert found is not None
        return found.id


@pytest.fixture(scope="module")
def signer() -> SnsSigner:
    return SnsSigner(NOW)


@pytest.fixture
def hooks(store: Store, database_url: str, signer: SnsSigner) -> Iterator[Hooks]:
    config = webhook_config(database_url)
    fetched: list[str] = []

    async def fetch(url: str) -> bytes:
        fetched.append(url)
        return signer.pem if url.endswith(".pem") else b"<ConfirmSubscriptionResponse/>"

    routes = bounce_routes(config.bounces, wire(config, store), clock=lambda: NOW, fetch=fetch)
    with web_server(create_app(routes=routes)) as base:
        made = Hooks(store, config, base, signer)
        made.fetched = fetched
        yield made
        made.client.close()


def ses_bounce(
    hooks: Hooks, record: int, name: str = "ses-bounce-permanent.json"
) -> dict[str, Any]:
    data = payload(name)
    data["mail"]["source"] = hooks.verp.address(record)
    data["mail"].pop("headers", None)
    return data


# -- SES through SNS -----------------------------------------------------------------------


def test_sns_subscription_is_confirmed_only_when_signed_and_for_the_topic(hooks: Hooks) -> None:
    confirmation = payload("sns-subscription-confirmation.json")
    del confirmation["SigningCertURL"]
    other = {**confirmation, "TopicArn": "arn:aws:sns:eu-west-1:123456789012:someone-else"}
    assert hooks.post("ses", hooks.signer.sign(other)).status_code == 403
    unsigned = {**confirmation, "SigningCertURL": hooks.signer.sign(confirmation)["SigningCertURL"]}
    unsigned["Signature"] = hooks.signer.sign(other)["Signature"]
    assert hooks.post("ses", unsigned).status_code == 403
    assert not any("ConfirmSubscription" in url for url in hooks.fetched)
    done = hooks.post("ses", hooks.signer.sign(confirmation))
    assert (done.status_code, done.json()["result"]) == (200, "subscribed")
    assert hooks.fetched[-1] == confirmation["SubscribeURL"]


def test_an_ses_hard_bounce_pauses_that_subscriber_alone_and_once(hooks: Hooks) -> None:
    record, _ = sent(hooks.store, "ada")
    sent(hooks.store, "bob")
    data = ses_bounce(hooks, record)
    done = hooks.ses(data)
    assert (done.status_code, done.json()["actions"]) == (200, ["paused"])
    assert hooks.paused("ada") == "mailbox unknown (5.1.1)"
    assert hooks.paused("bob") is None
    again = hooks.ses(data, message_id="m-2")  # SNS delivers it again
    assert again.json()["actions"] == ["read before"]
    assert hooks.actions() == [("hard", "paused")]
    assert hooks.store.bounces.day(T0.date()).hard == 1


def test_an_ses_complaint_is_tied_by_the_message_id_it_quotes(hooks: Hooks) -> None:
    sent(hooks.store, "ada")
    data = payload("ses-complaint.json")
    data["mail"]["source"] = "digest@papers.lab.example"  # no VERP: the Message-ID names it
    assert hooks.ses(data).json()["actions"] == ["unsubscribed"]
    assert "spam" in (hooks.paused("ada") or "")


def test_an_ses_soft_bounce_naming_no_digest_is_tied_to_the_address(hooks: Hooks) -> None:
    sent(hooks.store, "ada")
    done = hooks.ses(payload("ses-bounce-transient.json"))
    assert done.json()["actions"] == ["counted"]
    assert hooks.paused("ada") is None


def test_a_bounce_for_an_address_paperbell_never_wrote_to_changes_nothing(hooks: Hooks) -> None:
    sent(hooks.store, "bob")
    data = payload("ses-bounce-transient.json")
    data["bounce"]["bouncedRecipients"][0]["emailAddress"] = "eve@lab.example"
    assert hooks.ses(data).json()["actions"] == ["unknown"]
    assert hooks.paused("bob") is None


def test_a_forged_ses_token_changes_nothing(hooks: Hooks) -> None:
    record, _ = sent(hooks.store, "ada")
    data = ses_bounce(hooks, record)
    forged = Verp("another site's key", "bounces@papers.lab.example").address(record)
    data["mail"]["source"] = forged
    assert hooks.ses(data).json()["actions"] == ["forged"]
    assert hooks.paused("ada") is None


def test_an_ses_delivery_is_ignored_and_not_recorded(hooks: Hooks) -> None:
    sent(hooks.store, "bob")
    done = hooks.ses(payload("ses-delivery.json"))
    assert (done.status_code, done.json()["result"]) == (200, "ignored: delivery")
    assert hooks.store.bounces.day(T0.date()).unmatched == 0


# -- Postmark ------------------------------------------------------------------------------


def test_a_postmark_hard_bounce_pauses_and_wrong_credentials_change_nothing(hooks: Hooks) -> None:
    sent(hooks.store, "ada")
    data = payload("postmark-bounce.json")
    assert hooks.post("postmark", data).status_code == 401
    assert hooks.post("postmark", data, **basic_auth("wrong")).status_code == 401
    assert hooks.paused("ada") is None
    assert hooks.store.bounces.day(NOW.date()).unmatched == 2  # recorded as forged
    done = hooks.post("postmark", data, **basic_auth())
    assert done.json()["actions"] == ["paused"]
    assert hooks.paused("ada") == "mailbox unknown (5.1.1)"
    assert hooks.post("postmark", data, **basic_auth()).json()["actions"] == ["read before"]


def test_a_postmark_spam_complaint_stops_email(hooks: Hooks) -> None:
    sent(hooks.store, "ada")
    done = hooks.post("postmark", payload("postmark-spam-complaint.json"), **basic_auth())
    assert done.json()["actions"] == ["unsubscribed"]


# -- Mailgun -------------------------------------------------------------------------------


def test_a_mailgun_failure_pauses_and_replays_and_stale_calls_are_refused(hooks: Hooks) -> None:
    record, _ = sent(hooks.store, "ada")
    sent(hooks.store, "bob")
    data = payload("mailgun-failed-permanent.json")
    data["event-data"]["envelope"]["sender"] = hooks.verp.address(record)
    stale = hooks.mailgun(data, token="t-old", at=NOW - timedelta(minutes=10))
    assert (stale.status_code, stale.json()["result"]) == (
        401,
        "a stale timestamp (or a clock that is off)",
    )
    unsigned = hooks.post("mailgun", data)
    assert unsigned.status_code == 401
    assert hooks.paused("ada") is None
    assert hooks.mailgun(data, token="t-1").json()["actions"] == ["paused"]
    replay = hooks.mailgun(data, token="t-1")
    assert (replay.status_code, replay.json()["result"]) == (401, "a token seen before (a replay)")
    assert hooks.mailgun(data, token="t-2").json()["actions"] == ["read before"]
    assert hooks.paused("bob") is None


def test_a_mailgun_complaint_stops_email(hooks: Hooks) -> None:
    sent(hooks.store, "ada")
    done = hooks.mailgun(payload("mailgun-complained.json"), token="t-3")
    assert done.json()["actions"] == ["unsubscribed"]


# -- the entry point's rules ---------------------------------------------------------------


@pytest.mark.parametrize("provider", ["ses", "postmark", "mailgun"])
def test_malformed_calls_get_a_clear_4xx(hooks: Hooks, provider: str) -> None:
    sent(hooks.store, "ada")
    auth = basic_auth() if provider == "postmark" else {}
    cases: dict[str, tuple[bytes, int]] = {
        "not JSON": (b"{not json", 400),
        "not UTF-8": (b'{"a": "\xff"}', 400),
        "a list": (b"[1, 2]", 400),
        "a string": (b'"Bounce"', 400),
        "deep": (b"[" * 50_000 + b"]" * 50_000, 400),
        "long number": (b'{"ID": 1' + b"0" * 5000 + b"}", 400),
        "too large": (b'{"a": "' + b"x" * (MAX_BODY + 10) + b'"}', 413),
        "empty": (b"", 400),
    }
    for name, (body, status) in cases.items():
        done = hooks.client.post(PATHS[provider], content=body, headers=auth)
        assert done.status_code == status, (name, done.status_code, done.text)
        assert done.json()["result"], name
    assert hooks.client.get(PATHS[provider]).status_code == 405
    assert hooks.paused("ada") is None


def test_routes_are_mounted_only_when_configured(store: Store, database_url: str) -> None:
    config = webhook_config(database_url, postmark_secret_env="PB_POSTMARK")
    assert [
        r.path for r in bounce_routes(config.bounces, wire(config, store), clock=lambda: NOW)
    ] == [PATHS["postmark"]]
    imap_only = webhook_config(
        database_url, imap_url="imaps://b@imap.lab.example/INBOX", password_env="PB_WEB_KEY"
    )
    assert bounce_routes(imap_only.bounces, wire(imap_only, store), clock=lambda: NOW) == []


@pytest.mark.parametrize(
    ("bounces", "environ", "said"),
    [
        ({}, {}, "sets no way in"),
        ({"ses_topic_arns": ["arn:aws:sqs:eu-west-1:123456789012:q"]}, {}, "not an SNS topic ARN"),
        ({"postmark_secret_env": "PB_P"}, {"PB_P": "changeme"}, "holds a placeholder"),
        ({"postmark_secret_env": "PB_P"}, {"PB_P": "short"}, "too short"),
        ({"mailgun_signing_key": "in the file"}, {}, "does not belong in the file"),
    ],
)
def test_bounces_config_problems(
    bounces: dict[str, Any], environ: dict[str, str], said: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"version": 1, "bounces": bounces}, environ=environ)
    assert said in str(raised.value)


def test_an_unset_webhook_secret_is_missing_not_a_problem(store: Store, database_url: str) -> None:
    config = parse_config(
        {
            "version": 1,
            "database": {"url": database_url},
            "bounces": {"mailgun_signing_key_env": "PB_M"},
        },
        environ={},
    )
    assert [m.variable for m in config.missing_secrets.values()] == ["PB_M"]
    [route] = bounce_routes(config.bounces, wire(config, store), clock=lambda: NOW)
    with web_server(create_app(routes=[route])) as base:
        done = httpx.post(base + PATHS["mailgun"], content=b"{}")
    assert done.status_code == 503 and "mailgun_signing_key_env" in done.json()["result"]


# -- Hypothesis over HTTP ------------------------------------------------------------------

JSON = json_values(text=30, leaves=25)
BODIES = st.one_of(
    st.binary(max_size=600),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(
        st.sampled_from(
            ["Type", "TopicArn", "RecordType", "Email", "event-data", "signature", "Message"]
        ),
        JSON,
        max_size=5,
    ).map(lambda v: json.dumps(v).encode()),
)
HEADERS = st.dictionaries(
    st.sampled_from(["Authorization", "Content-Type", "X-Amz-Sns-Message-Type"]),
    # No space at either end: the HTTP client refuses to send such a header.
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60).map(
        str.strip
    ),
    max_size=3,
)


def test_any_call_from_a_stranger_gets_a_4xx_and_pauses_no_one(hooks: Hooks) -> None:
    sent(hooks.store, "ada")
    sent(hooks.store, "bob")

    @settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
    @given(st.sampled_from(sorted(PATHS)), BODIES, HEADERS)
    @example("ses", json.dumps(payload("sns-subscription-confirmation.json")).encode(), {})
    @example(
        "postmark",
        json.dumps(payload("postmark-bounce.json")).encode(),
        {"Authorization": "Basic Og=="},
    )
    @example("mailgun", json.dumps(payload("mailgun-failed-permanent.json")).encode(), {})
    @example("mailgun", b"", {"Authorization": ""})
    @example(
        "ses",
        b'{"Type": "Notification", "TopicArn": "' + TOPIC.encode() + b'", "Message": "\\u0000"}',
        {},
    )
    def call(provider: str, body: bytes, headers: dict[str, str]) -> None:
        done = hooks.client.post(PATHS[provider], content=body, headers=headers)
        assert done.status_code in NEVER_5XX - {200}, (done.status_code, done.text)

    call()
    assert hooks.paused("ada") is None and hooks.paused("bob") is None


def test_any_authenticated_event_gets_an_answer_never_a_500(hooks: Hooks) -> None:
    """Signed or authenticated as the provider would, any JSON object is read: at worst
    "unreadable", never a 500."""
    sent(hooks.store, "ada")
    tokens = iter(range(10**6))

    @settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
    @given(st.sampled_from(sorted(PATHS)), st.dictionaries(st.text(max_size=15), JSON, max_size=6))
    @example(
        "postmark", {"RecordType": "Bounce", "Email": "\x00ada@lab.example\ud800", "ID": "\x00"}
    )
    @example("mailgun", {"event-data": {"event": "failed", "id": "x" * 500, "recipient": []}})
    @example("ses", {"notificationType": "Bounce", "bounce": {"bouncedRecipients": [{}] * 80}})
    def call(provider: str, value: dict[str, Any]) -> None:
        if provider == "ses":
            done = hooks.ses(value, message_id=f"m-{next(tokens)}")
        elif provider == "mailgun":
            done = hooks.mailgun(value, token=f"fuzz-{next(tokens)}")
        else:
            done = hooks.post("postmark", value, **basic_auth())
        assert done.status_code in NEVER_5XX, (done.status_code, done.text)

    call()


def test_serve_asks_for_the_webhooks_secrets_by_name(tmp_path: Any, database_url: str) -> None:
    from click.testing import CliRunner

    from bot.cli import main

    path = tmp_path / "config.toml"
    path.write_text(
        f'version = 1\n[database]\nurl = "{database_url}"\n[bounces]\n'
        'postmark_secret_env = "PB_HOOK_POSTMARK"\nmailgun_signing_key_env = "PB_HOOK_MAILGUN"\n'
    )
    done = CliRunner().invoke(main, ["serve", "-c", str(path)], env={"PB_HOOK_MAILGUN": "k"})
    assert done.exit_code == 2
    assert done.output == (
        "error: [bounces] postmark_secret_env names PB_HOOK_POSTMARK, which is not set: "
        "`paperbell serve` checks Postmark's bounce webhook (POST /bounces/postmark) and "
        "needs it\n"
    )
