"""The Apprise channel on real parts: Apprise's own plugins (ntfy, Mattermost, the JSON
webhook) sending to local stand-ins on loopback (tests/support/chat.py); URLs read offline
by the plugins; the messages checked against each plugin's own limits. No mock of Apprise,
nothing off loopback. (The rendering alone: tests/render/test_render_apprise.py.)"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import apprise
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.chat import chat_server
from support.servers import hostile_server

from bot.channels import RenderContext, SendOutcome, Target
from bot.channels.apprise import AppriseChannel, AppriseDelivery, AppriseKind, AppriseSettings
from bot.channels.apprise_urls import Unreadable, destination, destination_channel, split_urls
from bot.core.addresses import parse_reach
from bot.core.models import Digest, Paper, Subscriber
from bot.demo import bundled_papers
from bot.match.digest import build_digest
from bot.render.apprise import ChatShape, chat_messages
from bot.rules import parse_rule

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
RULES = ("robot", "quantum", "learning")
TOKEN = "s3cr3tToken0123456789"
# Plugins a digest may go to, each with a URL Apprise reads offline (no message is sent).
PLUGIN_URLS = [
    "ntfy://ntfy.example/papers",
    "mmost://chat.example/abcdefghijkl",
    "json://hooks.example/papers",
    "discord://123456789/abcdefghijklmnopqrstuvwxyz",
    "tgram://123456789:abcdefghijklmnopqrstuvwxyz/123456789/",
    "matrix://user:password@matrix.example/#papers",
    "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#papers",
    "rocket://user:password@rocket.example/#papers",
    "wecombot://abcdefghijklmnopq",
    "dingtalk://abcdefghijklmnopq/",
    "gotify://gotify.example/abcdefghijklmnop",
]


@pytest.fixture(scope="module")
def papers() -> tuple[Paper, ...]:
    return tuple(bundled_papers())


def digest_of(papers: tuple[Paper, ...], max_papers: int = 50, **changes: Any) -> Digest:
    sub = Subscriber(name="ada", email=None, rules=RULES, max_papers=max_papers, **changes)
    digest = build_digest(sub, [parse_rule(r) for r in RULES], papers, delivered={}, now=NOW)
    assert digest is not None
    return digest


def numbers_in(message_body: str) -> list[int]:
    return [int(n) for n in re.findall(r"^\**(\d+)\.\**", message_body, re.MULTILINE)]


# -- URLs, read offline -------------------------------------------------------------------


def test_a_url_is_read_by_its_plugin_keyed_and_shown_without_its_secret() -> None:
    public = destination("ntfy://ntfy.example/papers")
    assert public.label == "ntfy://ntfy.example/papers" and not public.secret
    assert public.channel == f"apprise:{public.key}" and len(public.channel) <= 64
    hook = destination(f"mmost://chat.example/{TOKEN}")
    assert hook.secret and TOKEN not in hook.label and TOKEN in hook.secrets
    assert hook.mask(f"posted to /hooks/{TOKEN}") == "posted to /hooks/***"
    # The key is a digest of the label: the same destination, written with its defaults
    # or not, is one key; the label as `list` shows it names it too.
    assert destination("ntfy://ntfy.example/papers?priority=default").key == public.key
    assert destination_channel(hook.label) == hook.channel
    assert destination_channel(f"mmost://chat.example/{TOKEN}") == hook.channel


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("", "(not a URL): not an Apprise URL"),
        ("hello there", "(not a URL): not a URL"),
        ("nosuchservice://x/y", "nosuchservice://…:"),
        (f"discord://{TOKEN}", "discord://…:"),
        ("json://host/\x00path", "json://…: not an Apprise URL (it holds control characters)"),
        ("ntfy://" + "a" * 5000, "ntfy://…: not an Apprise URL (empty or over 4096 characters)"),
    ],
)
def test_an_unreadable_url_is_named_by_its_scheme_only(url: str, said: str) -> None:
    with pytest.raises(Unreadable) as raised:
        destination(url)
    assert str(raised.value).startswith(said)
    assert TOKEN not in str(raised.value)


SCHEMES = st.sampled_from(["ntfy", "json", "mmost", "discord", "tgram", "matrix", "nosuch", ""])


@given(
    scheme=SCHEMES,
    rest=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300),
)
@example(scheme="json", rest="127.0.0.1:9/\x00")
@example(scheme="discord", rest="\u202e/" + "9" * 5000)
@settings(max_examples=200, deadline=None)
def test_any_text_is_read_or_refused_never_a_crash_and_never_echoed(scheme: str, rest: str) -> None:
    url = f"{scheme}://{rest}" if scheme else rest
    try:
        found = destination(url)
    except Unreadable as exc:
        said = str(exc)
        hidden = [w for w in re.split(r"[/:@?&=#,;+\s]+", rest) if len(w) >= 8]
        assert not any(word in said for word in hidden), said
        return
    assert found.channel.startswith("apprise:") and len(found.channel) <= 64
    assert len(found.label) <= 200
    for secret in found.secrets:
        assert secret not in found.label


def test_a_variable_holds_urls_whitespace_or_comma_separated() -> None:
    value = " ntfy://a.example/t1, json://b.example/x\n mmost://c.example/abcdefghijkl "
    assert split_urls(value) == [
        "ntfy://a.example/t1",
        "json://b.example/x",
        "mmost://c.example/abcdefghijkl",
    ]


# -- rendering ----------------------------------------------------------------------------


@pytest.mark.parametrize("url", PLUGIN_URLS)
def test_a_real_digest_fits_each_plugins_limits_and_keeps_every_paper_whole(
    papers: tuple[Paper, ...], url: str
) -> None:
    plugin = apprise.Apprise.instantiate(url)
    assert plugin is not None
    found = destination(url)
    digest = digest_of(papers, 50)
    messages = chat_messages(digest, found.shape, manage_url="https://papers.example/manage/x")
    for message in messages:
        assert len(message.body) <= plugin.body_maxlen
        assert len(message.title) <= max(plugin.title_maxlen, 0)
        if getattr(plugin, "overflow_amalgamate_title", False):
            assert len(message.title) + len(message.body) <= plugin.body_maxlen
        limit = getattr(plugin, "ntfy_json_upstream_size_limit", None)
        if limit:  # ntfy: the JSON it posts stays a message, not an attachment
            payload = {"topic": "papers", "title": message.title, "message": message.body}
            assert len(json.dumps(payload)) <= limit
    numbers = [n for m in messages for n in m.numbers]
    assert numbers == list(range(1, digest.count + 1))
    assert [n for m in messages for n in numbers_in(m.body)] == numbers  # whole, in order
    for message in messages:
        for number in message.numbers:  # each paper's page in the message with its number
            paper = digest.items[number - 1].paper
            assert f"https://arxiv.org/abs/{paper.id}" in message.body
    assert "Thank you to arXiv" in messages[-1].body
    assert "papers.example/manage/x" in messages[-1].body
    if len(messages) > 1:  # numbered in the order sent, in the title or the first line
        marks = [m.title or m.body.split("\n", 1)[0] for m in messages]
        total = len(messages)
        assert [mark.rpartition(" ")[2] for mark in marks] == [
            f"({i}/{total})" for i in range(1, total + 1)
        ]


def test_markdown_where_the_plugin_takes_it_else_plain_text() -> None:
    # Apprise 2 declares Markdown for the JSON webhook and Discord; 1.9 plain text only.
    since_2 = int(apprise.__version__.split(".")[0]) >= 2
    assert destination("json://hooks.example/x").shape.markdown == since_2
    assert destination("discord://123456789/abcdefghijklmnop").shape.markdown == since_2
    assert destination("tgram://123456789:abcdefghijklmnop/12345/").shape.markdown == since_2
    assert not destination("ntfy://ntfy.example/x").shape.markdown
    assert not destination("mmost://chat.example/abcdefghijkl").shape.markdown
    # `?format=text` in the URL is honoured by a plugin that takes several formats.
    assert not destination("json://hooks.example/x?format=text").shape.markdown


# -- sending, through the plugins to stand-ins ---------------------------------------------


def delivery_of(url: str, digest: Digest, *, shape: ChatShape | None = None) -> AppriseDelivery:
    found = destination(url)
    target = Target(
        found.channel, found.label, f"apprise {found.label}", shape=shape or found.shape
    )
    payload = AppriseKind.render(digest, target, RenderContext(now=NOW)).payload
    return AppriseChannel(AppriseSettings()).load(payload)


def channel_for(*urls: str, **options: Any) -> tuple[AppriseChannel, list[float]]:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    settings_ = AppriseSettings(urls=lambda: [(None, url) for url in urls], **options)
    return AppriseChannel(settings_, sleep=sleep), waits


def send(
    channel: AppriseChannel,
    batch: list[tuple[Any, AppriseDelivery]],
    *,
    progress: Callable[[Any, str], None] | None = None,
) -> tuple[list[SendOutcome], list[Any]]:
    sent: list[Any] = []
    outcomes = asyncio.run(channel.send_all(batch, sent.append, on_progress=progress))
    return outcomes, sent


@pytest.mark.parametrize("kind", ["ntfy", "mattermost", "json"])
def test_each_service_gets_the_digest_through_its_plugin(
    papers: tuple[Paper, ...], kind: str
) -> None:
    digest = digest_of(papers, 30)
    with chat_server(kind) as server:
        url = server.url(TOKEN if kind == "mattermost" else "papers")
        delivery = delivery_of(url, digest)
        channel, _ = channel_for(url)
        outcomes, sent = send(channel, [("item", delivery)])
        assert [o.ok for o in outcomes] == [True] and sent == ["item"]
        assert len(server.messages) == len(delivery.messages)
        text = "\n".join(server.texts)
        for item in digest.items:
            assert f"https://arxiv.org/abs/{item.paper.id}" in text
        if kind == "mattermost":
            assert server.messages[0].path == f"/hooks/{TOKEN}"
        if kind == "ntfy":  # posted as JSON to the topic, never as an attachment
            assert all(m.title for m in server.messages)


def test_a_500_is_worth_a_retry_and_a_404_is_not(papers: tuple[Paper, ...]) -> None:
    digest = digest_of(papers, 5)
    with chat_server("json") as server:
        url = server.url("hook")
        channel, _ = channel_for(url)
        server.fail = [500]
        (outcome,), _ = send(channel, [("a", delivery_of(url, digest))])
        assert not outcome.ok and not outcome.permanent and "HTTP 500" in (outcome.error or "")
        (outcome,), _ = send(channel, [("a", delivery_of(url, digest))])
        assert outcome.ok and len(server.messages) == 1
        server.fail = [429]
        (outcome,), _ = send(channel, [("b", delivery_of(url, digest))])
        assert not outcome.ok and not outcome.permanent and "HTTP 429" in (outcome.error or "")
        server.fail = [404]
        (outcome,), _ = send(channel, [("c", delivery_of(url, digest))])
        assert not outcome.ok and outcome.permanent and "HTTP 404" in (outcome.error or "")
    with chat_server("ntfy") as server:  # ntfy's own error codes (40401) start with the status
        url = server.url("papers")
        channel, _ = channel_for(url)
        server.fail = [403]
        (outcome,), _ = send(channel, [("d", delivery_of(url, digest))])
        assert outcome.permanent and "HTTP 403" in (outcome.error or "")


def test_a_service_that_does_not_answer_in_time_is_retried_later(
    papers: tuple[Paper, ...],
) -> None:
    with chat_server("json") as server:
        server.delay = 3.0
        url = server.url("slow")
        channel, _ = channel_for(url, deadline=0.5)
        (outcome,), sent = send(channel, [("a", delivery_of(url, digest_of(papers, 3)))])
        assert not outcome.ok and not outcome.permanent and sent == []
        assert "no answer within 0.5 s" in (outcome.error or "")


@pytest.mark.parametrize("given_on_page", [False, True])
def test_a_service_that_answers_byte_by_byte_is_cut_off_at_the_deadline(
    papers: tuple[Paper, ...], given_on_page: bool
) -> None:
    """A service that trickles its answer (or sends one without end) keeps each read within
    the plugin's timeout: the deadline must end the send itself, not only the wait for it,
    or each attempt holds a thread, and what it reads, for good."""

    async def attempt() -> tuple[SendOutcome, list[int]]:
        async with hostile_server(drip_seconds=0.05) as server:
            url = f"json://127.0.0.1:{server.port}/drip"
            channel, _ = channel_for(
                url,
                deadline=0.5,
                given_on_page=lambda: [url] if given_on_page else [],
                reach=parse_reach(["127.0.0.1"]),  # a hostile public server's stand-in
            )
            delivery = delivery_of(url, digest_of(papers, 3))
            (outcome,) = await channel.send_all([("a", delivery)], lambda _item: None)
            read = []
            for _ in range(3):
                await asyncio.sleep(0.5)
                read.append(server.sent["/drip"])
            return outcome, read

    outcome, read = asyncio.run(attempt())
    assert not outcome.ok and "no answer within 0.5 s" in (outcome.error or "")
    assert read[1] == read[2], f"still reading after the deadline: {read}"


def test_a_digest_in_parts_goes_on_where_it_stopped(papers: tuple[Paper, ...]) -> None:
    digest = digest_of(papers, 30)
    small = ChatShape(markdown=False, body=1500, title=100)
    with chat_server("json") as server:
        url = server.url("parts")
        delivery = delivery_of(url, digest, shape=small)
        parts = len(delivery.messages)
        assert parts >= 4
        channel, waits = channel_for(url, pace=2.0)
        progress: list[str] = []

        # Two messages go, then the service answers 503 to the third.
        calls = {"n": 0}
        original = channel._notify

        def flaky(*args: Any) -> tuple[bool, list[logging.LogRecord]]:
            calls["n"] += 1
            if calls["n"] == 3:
                server.fail.append(503)
            return original(*args)

        channel._notify = flaky  # type: ignore[method-assign]
        (outcome,), sent = send(
            channel, [("a", delivery)], progress=lambda _i, p: progress.append(p)
        )
        assert not outcome.ok and not outcome.permanent and sent == []
        assert [json.loads(p)["sent"] for p in progress] == [1, 2]
        first_two = [p for m in delivery.papers[:2] for p in m]
        assert outcome.sent_papers == tuple(first_two)
        assert len(server.messages) == 2
        assert waits == [pytest.approx(2.0, abs=0.5)] * 2  # paced: after each message sent

        # The retry loads the queued digest with its progress and sends the rest, once.
        again = AppriseChannel(AppriseSettings(urls=lambda: [(None, url)], pace=0))
        resumed = again.load(json.dumps(_payload(delivery)).encode(), progress[-1])
        (outcome,), sent = send(again, [("a", resumed)])
        assert outcome.ok and sent == ["a"]
        assert len(server.messages) == parts
        assert [n for t in server.texts for n in numbers_in(t)] == list(range(1, digest.count + 1))


def _payload(delivery: AppriseDelivery) -> dict[str, Any]:
    return {
        "destination": delivery.key,
        "label": delivery.label,
        "format": "markdown" if delivery.markdown else "text",
        "messages": [{"title": t, "body": b} for t, b in delivery.messages],
        "papers": [list(p) for p in delivery.papers],
    }


def test_destinations_go_side_by_side_and_a_slow_one_holds_up_none(
    papers: tuple[Paper, ...],
) -> None:
    digest = digest_of(papers, 5)
    with chat_server("json") as slow, chat_server("ntfy") as fast:
        slow.delay = 1.5
        slow_url, fast_url = slow.url("slow"), fast.url("papers")
        channel, _ = channel_for(slow_url, fast_url, pace=0)
        batch = [("slow", delivery_of(slow_url, digest)), ("fast", delivery_of(fast_url, digest))]
        outcomes, sent = send(channel, batch)
        assert [o.ok for o in outcomes] == [True, True]
        assert sent == ["fast", "slow"]  # the fast one was done first
        assert fast.messages[-1].at < slow.answered[0]


def test_a_destination_not_set_up_in_this_process_waits(papers: tuple[Paper, ...]) -> None:
    url = "json://127.0.0.1:9/gone"
    channel, _ = channel_for()  # knows no URL: its variable is not set here
    (outcome,), _ = send(channel, [("a", delivery_of(url, digest_of(papers, 3)))])
    assert not outcome.ok and not outcome.permanent
    assert "not set up in this process" in (outcome.error or "")


def test_no_secret_reaches_any_log_record_even_at_debug(
    papers: tuple[Paper, ...], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with chat_server("mattermost") as server:
        url = server.url(TOKEN)
        channel, _ = channel_for(url)
        server.fail = [500]
        send(channel, [("a", delivery_of(url, digest_of(papers, 3)))])
        send(channel, [("a", delivery_of(url, digest_of(papers, 3)))])
        assert server.messages
    text = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "apprise mmost://127.0.0.1" in text  # what Apprise said is kept, masked
    assert TOKEN not in text
    assert all(not r.name.startswith(("apprise", "urllib3")) for r in caplog.records)


def test_the_manage_link_goes_only_when_signed(papers: tuple[Paper, ...]) -> None:
    from bot.core.links import placeholder_url
    from bot.render.email import DigestLinks

    found = destination("ntfy://ntfy.example/papers")
    target = Target(found.channel, found.label, f"apprise {found.label}", shape=found.shape)
    digest = digest_of(papers, 3)

    def bodies(manage: str) -> str:
        links = DigestLinks(unsubscribe=None, manage=manage)
        context = RenderContext(now=NOW, links=lambda _s, _p, _d: links)
        data = json.loads(AppriseKind.render(digest, target, context).payload)
        assert found.label == data["label"] and "://" not in data["destination"]
        return "\n".join(m["body"] for m in data["messages"])

    assert "https://papers.example/manage/signed" in bodies("https://papers.example/manage/signed")
    unsigned = placeholder_url("https://papers.example", "manage")
    assert "papers.example/manage" not in bodies(unsigned)


def test_the_kinds_keep_their_order_whichever_module_is_imported_first() -> None:
    # bot.pipeline.wiring imports bot.channels.apprise before the others register: the
    # registry still lists (and a subscriber's targets still go) email, Slack, Apprise.
    from bot.channels import CHANNEL_KINDS, load_builtin_channels, subscriber_targets
    from bot.pipeline.wiring import channel_settings  # noqa: F401 (imports apprise first)

    load_builtin_channels()
    assert list(CHANNEL_KINDS)[:3] == ["email", "slack", "apprise"]
    sub = Subscriber("ada", "ada@lab.example", ("robot",), apprise=("json://127.0.0.1:9/hooks/x",))
    kinds = [target.kind for target in subscriber_targets(sub, {})]
    assert kinds[0] == "email" and kinds[-1] == "apprise", kinds
