"""POST /slack/commands against strangers: every malformed request is refused with a 4xx,
never a 500, signed or not; a replay is refused after a restart, since the signatures seen
are kept in the database (issue 17, faults 5 and 9).

Requests go to the real app (over uvicorn on loopback, or straight through ASGI for the
property tests, where no HTTP library tidies a hostile header first), signed exactly as
Slack signs them; commands reach the Slack stand-in.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.config import slack_config
from support.servers import web_server
from support.slack import SIGNING_SECRET, signed, wired_slack_app

from bot.demo.slack_standin import SlackStandIn
from bot.slack.app import RequestChecker, SlackApp, slack_routes
from bot.store import Store
from bot.web.app import create_app

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
ADA = "U07ADA123"
TRIGGERS = itertools.count()
OK = {200, 400, 401, 413}  # what any request may get: never a 5xx


@pytest.fixture
def slack() -> Iterator[SlackStandIn]:
    with SlackStandIn() as standin:
        standin.add_channel("C07ROBOTS", "robot-learning")
        standin.add_user(ADA, "ada", email="ada@lab.example", tz="Europe/London")
        yield standin


def command(text: str, **fields: str) -> bytes:
    """A slash command's form as Slack posts it (no response_url: the answer comes back
    in the response, however long it takes)."""
    form = {
        "team_id": "T0STANDIN",
        "channel_id": "C07ROBOTS",
        "channel_name": "robot-learning",
        "user_id": ADA,
        "user_name": "ada",
        "command": "/papers",
        "text": text,
        **fields,
    }
    return urlencode(form).encode()


class AsgiClient:
    """Posts straight to the ASGI app (no server, no client-side header checks), on one
    event loop kept for the whole test; the app's exceptions are raised, not turned into a
    500 page."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()

    def __enter__(self) -> AsgiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.close()

    def post(
        self, path: str, *, content: bytes, headers: dict[str, str] | Sequence[tuple[bytes, bytes]]
    ) -> httpx.Response:
        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                return await client.post(path, content=content, headers=headers)

        return self.loop.run_until_complete(send())


def header_bytes(value: str) -> bytes:
    """A header's bytes: latin-1, as servers decode them ("¹" is one byte, 0xB9), else UTF-8."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode()


def slack_app(slack: SlackStandIn, store: Store, database_url: str) -> SlackApp:
    config = slack_config(slack, database_url, [], signing_secret=SIGNING_SECRET)
    built = wired_slack_app(config, store, clock=lambda: NOW)
    assert built is not None and built.http is not None
    return built


def test_malformed_requests_get_a_4xx_never_a_500(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    """The two 500s of the issue (a superscript-digit timestamp: `"¹²³".isdigit()` is True
    but int() refuses it; a body that is not UTF-8), and their neighbours, over uvicorn."""
    app = create_app(routes=slack_routes(slack_app(slack, store, database_url)))
    latin1 = "caf\xe9".encode("latin-1")
    stamp = str(int(time.time()))
    bogus = {"X-Slack-Signature": "v0=" + "0" * 64}
    cases: list[tuple[str, bytes, dict[str, Any]]] = [
        ("superscript timestamp", b"text=help", {**bogus, "X-Slack-Request-Timestamp": "¹²³"}),
        ("arabic-indic digits", b"text=help", {**bogus, "X-Slack-Request-Timestamp": "١٢٣"}),
        ("huge timestamp", b"text=help", {**bogus, "X-Slack-Request-Timestamp": "9" * 400}),
        (
            "non-UTF-8 body",
            b"text=\xff\xfe" + latin1,
            {**bogus, "X-Slack-Request-Timestamp": stamp},
        ),
        ("NUL body", b"text=\x00\x00", {**bogus, "X-Slack-Request-Timestamp": stamp}),
        (
            "non-ASCII signature",
            b"text=help",
            {"X-Slack-Signature": "v0=\xe9", "X-Slack-Request-Timestamp": stamp},
        ),
        ("empty", b"", {}),
    ]
    answers = {}
    with web_server(app) as base, httpx.Client(base_url=base) as client:
        for name, body, headers in cases:
            raw = [(k.encode(), header_bytes(v)) for k, v in headers.items()]
            answers[name] = client.post("/slack/commands", content=body, headers=raw)
        # Signed over the raw bytes, a body that is not UTF-8 is refused: slack-sdk's
        # verifier reads it as text, as Slack sends it (urlencoded ASCII).
        body = b"command=/papers&user_id=" + ADA.encode() + b"&text=help\xff"
        answers["signed non-UTF-8"] = client.post(
            "/slack/commands", content=body, headers=signed(body)
        )
    for name, response in answers.items():
        assert response.status_code in OK, (name, response.status_code, response.text)
    assert answers["superscript timestamp"].status_code == 401
    assert answers["superscript timestamp"].text == "bad timestamp"
    assert answers["non-UTF-8 body"].text == "bad signature"
    assert answers["signed non-UTF-8"].status_code == 401
    assert answers["signed non-UTF-8"].text == "bad signature"


def test_a_content_length_in_superscript_digits_is_not_a_500(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    """uvicorn refuses such a header itself; an ASGI server that passes it on must not
    make the app fail."""
    app = create_app(routes=slack_routes(slack_app(slack, store, database_url)))
    with AsgiClient(app) as client:
        response = client.post(
            "/slack/commands",
            content=b"text=help",
            headers=[(b"content-length", "¹²".encode("latin-1"))],
        )
    assert response.status_code in OK


HEADER_TEXT = st.text(
    st.characters(codec="latin-1", exclude_characters="\r\n"), max_size=40
)  # what an HTTP header can carry
TIMESTAMPS = st.one_of(
    HEADER_TEXT,
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.sampled_from(["¹²³", "١٧٣٢٧٩٥٢٠٠", "1e9", " 1732795200", "0x10", "", "-0"]),
)
BODIES = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"\x00" * 50, b"\xff\xfe\xfd", b"text=" + b"a" * 20_000, b"%%%&&&=="]),
)


def test_hostile_headers_and_bodies_never_get_a_5xx(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    app = create_app(routes=slack_routes(slack_app(slack, store, database_url)))

    with AsgiClient(app) as client:

        @settings(
            max_examples=150,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(
            body=BODIES,
            stamp=TIMESTAMPS,
            signature=st.one_of(HEADER_TEXT, st.just("v0=" + "a" * 64)),
            length=st.one_of(st.none(), HEADER_TEXT, st.integers(0, 10**12).map(str)),
            content_type=st.one_of(st.none(), HEADER_TEXT),
        )
        @example(body=b"text=help", stamp="¹²³", signature="v0=x", length=None, content_type=None)
        @example(
            body=b"\xff\xfe",
            stamp=str(int(time.time())),
            signature="v0=x",
            length=None,
            content_type=None,
        )
        def check(
            body: bytes, stamp: str, signature: str, length: str | None, content_type: str | None
        ) -> None:
            headers = {"x-slack-request-timestamp": stamp, "x-slack-signature": signature}
            if length is not None:
                headers["content-length"] = length
            if content_type is not None:
                headers["content-type"] = content_type
            raw = [(k.encode(), header_bytes(v)) for k, v in headers.items()]
            response = client.post("/slack/commands", content=body, headers=raw)
            assert response.status_code in OK - {200}, response.text

        check()


# Form values a stranger in the workspace could type (text), or a client could forge once
# the signature is right (every other field).
FIELD_TEXT = st.one_of(
    st.text(max_size=120),
    st.sampled_from(
        [
            "subscribe \x00robot",
            "subscribe " + "(" * 400,
            "try " + "a" * 3000,
            "subscribe ti:\u202eevil",
            "email not-an-address",
            "email ada@lab.example\r\nBcc: x@y",
            "digest",
            "remove 99999999999999999999",
            "manage",
            "pause",
        ]
    ),
)


def test_signed_requests_with_hostile_contents_get_a_clear_reply(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    """Correctly signed, so they reach bot.slack.commands: the answer is a reply, never a 500."""
    app = create_app(routes=slack_routes(slack_app(slack, store, database_url)))

    with AsgiClient(app) as client:

        @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(
            text=FIELD_TEXT,
            user=st.one_of(st.just(ADA), st.text(max_size=30)),
            channel=st.one_of(st.just("C07ROBOTS"), st.text(max_size=30)),
            extra=st.dictionaries(st.text(max_size=10), st.text(max_size=30), max_size=3),
        )
        @example(text="subscribe \x00robot", user=ADA, channel="C07ROBOTS", extra={})
        @example(text="help", user="\x00", channel="\x00", extra={"command": ""})
        def check(text: str, user: str, channel: str, extra: dict[str, str]) -> None:
            fields = {k: v for k, v in extra.items() if k not in ("response_url", "ssl_check")}
            unique = {"trigger_id": f"t{next(TRIGGERS)}"}  # Slack's requests are never alike
            body = command(text, **{**fields, "user_id": user, "channel_id": channel, **unique})
            response = client.post("/slack/commands", content=body, headers=signed(body))
            assert response.status_code == 200, response.text
            reply = response.json()
            assert reply["response_type"] in ("ephemeral", "in_channel")
            assert reply["text"].strip()

        check()


def test_a_replay_is_refused_after_a_restart(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    """Accepted once; the app rebuilt on the same database (a restart): refused as a replay."""
    body = command("help")
    headers = signed(body)
    app = create_app(routes=slack_routes(slack_app(slack, store, database_url)))
    with AsgiClient(app) as client:
        first = client.post("/slack/commands", content=body, headers=headers)
    store.close()

    with Store.open(database_url) as restarted:
        app = create_app(routes=slack_routes(slack_app(slack, restarted, database_url)))
        with AsgiClient(app) as client:
            again = client.post("/slack/commands", content=body, headers=headers)
            fresh = command("help", trigger_id="another")
            other = client.post("/slack/commands", content=fresh, headers=signed(fresh))
    assert first.status_code == 200
    assert (again.status_code, again.text) == (401, "replayed request")
    assert other.status_code == 200


def test_the_replay_cache_is_shared_and_pruned(store: Store, database_url: str) -> None:
    """Two processes on one database agree (the primary key decides); entries older than
    the five-minute window are dropped."""
    window = timedelta(minutes=5)
    with Store.open(database_url) as other:
        assert store.slack_requests.first("v0=aa", now=NOW, window=window)
        assert not other.slack_requests.first("v0=aa", now=NOW, window=window)
        assert other.slack_requests.first("v0=bb", now=NOW, window=window)
        later = NOW + timedelta(minutes=6)
        # Pruned: gone from the table (a timestamp that old is refused as stale anyway).
        assert store.slack_requests.first("v0=cc", now=later, window=window)
        assert store.slack_requests.first("v0=aa", now=later, window=window)


@pytest.mark.parametrize("with_store", [False, True], ids=["in memory", "database"])
def test_a_timestamp_ahead_of_our_clock_is_remembered_until_it_goes_stale(
    with_store: bool, database_url: str
) -> None:
    """Kept 5 minutes after it came, a request stamped 250 s ahead was accepted again at
    301 s while its timestamp was still within the window (found in review)."""
    start = 1_732_795_200.0
    clock = [start]
    store = Store.open(database_url) if with_store else None
    try:
        checker = RequestChecker(SIGNING_SECRET, now=lambda: clock[0], store=store)
        ahead = signed(b"text=help", at=start + 250)
        assert checker.check(b"text=help", ahead) is None
        for later in (1, 301, 549):
            clock[0] = start + later
            assert checker.check(b"text=help", ahead) == "replayed request", later
        clock[0] = start + 551
        assert checker.check(b"text=help", ahead) == (
            "stale request (timestamp more than 5 minutes away)"
        )
    finally:
        if store is not None:
            store.close()


def test_the_checker_refuses_without_raising() -> None:
    checker = RequestChecker(SIGNING_SECRET, now=lambda: 1_732_795_200.0)
    good = signed(b"text=help", at=1_732_795_200)
    assert checker.check(b"text=help", good) is None
    assert checker.check(b"text=help", good) == "replayed request"  # in memory, no store
    assert checker.check(b"x", {**good, "X-Slack-Request-Timestamp": "¹²³"}) == "bad timestamp"
    assert checker.check(b"\xff", {**good, "X-Slack-Signature": "v0=\xe9"}) == "bad signature"


def test_requests_that_come_together_are_each_new_once(store: Store) -> None:
    """Forty threads at once, two to a signature (a request and its replay, side by side):
    written in batches, each signature is new exactly once, and a restart remembers all."""
    signatures = [f"v0={n:064x}" for n in range(20)] * 2
    window = timedelta(minutes=5)
    with ThreadPoolExecutor(max_workers=40) as pool:
        firsts = list(
            pool.map(lambda s: store.slack_requests.first(s, now=NOW, window=window), signatures)
        )
    assert sorted(s for s, first in zip(signatures, firsts, strict=True) if first) == sorted(
        set(signatures)
    )
    restarted = type(store.slack_requests)(store.database)
    assert not any(restarted.first(s, now=NOW, window=window) for s in set(signatures))
