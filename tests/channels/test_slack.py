"""Slack delivery end to end: real digests of a real listing, posted with slack-sdk to the
local stand-in of the Slack Web API, which checks Slack's limits on every message."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from support.config import slack_config

from bot.channels.slack import SlackChannel
from bot.config import Config, parse_config
from bot.core.models import Paper
from bot.demo.slack_standin import FIRST_TS, SlackStandIn
from bot.pipeline import (
    DeliveryReport,
    DeliveryRequest,
    build_channels,
    deliver,
    slack_settings,
    wire,
)
from bot.store import Store

pytestmark = pytest.mark.database

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
DAY = date(2024, 11, 28)
TOKEN = "xoxb-standin"


@pytest.fixture
def slack() -> Iterator[SlackStandIn]:
    with SlackStandIn(token=TOKEN) as standin:
        standin.add_channel("C0ROBOTS", "robot-learning")
        standin.add_channel("C0QUANTUM", "quantum", member=False)
        standin.add_user("U07ADA123", "ada", email="ada@lab.example", real_name="Ada L.")
        yield standin
        assert standin.violations == [], "a message broke Slack's limits"


def make_config(
    slack: SlackStandIn,
    database_url: str,
    subscribers: list[dict[str, Any]],
    *,
    interval: float = 0.0,
) -> Config:
    return slack_config(slack, database_url, subscribers, interval=interval)


ROBOTS = {"name": "robots", "slack_channel": "#robot-learning", "rules": ["robot"]}
ADA = {"name": "ada", "slack_user": "U07ADA123", "rules": ['"large language models"']}


def run(config: Config, store: Store, **kwargs: Any) -> list[DeliveryReport]:
    channels = kwargs.pop("channels", None) or build_channels(config)
    request = DeliveryRequest(since=DAY, **kwargs)
    return asyncio.run(deliver(wire(config, store, channels), request, now=NOW))


def thread_papers(slack: SlackStandIn, channel: str) -> list[str]:
    """The arXiv ids linked from the thread messages of the channel's one summary."""
    tops = [m for m in slack.messages(channel) if not m.get("thread_ts")]
    assert len(tops) == 1
    ids = []
    for message in slack.thread(tops[0]["ts"]):
        text = json.dumps(message["blocks"])
        linked = [part.split("|")[0] for part in text.split("<https://arxiv.org/abs/")[1:]]
        ids += dict.fromkeys(linked)  # a paper's title and its "abs" link
    return ids


def test_channel_and_dm_digests_thread_within_limits_and_never_twice(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    store.papers.upsert(full_feed_papers, now=NOW)
    config = make_config(slack, database_url, [ROBOTS, ADA])
    reports = run(config, store)
    assert {(r.subscriber, r.channel, r.status) for r in reports} == {
        ("robots", "slack", "sent"),
        ("ada", "slack", "sent"),
    }
    counts = {r.subscriber: r.count for r in reports}

    # The channel: one summary, the papers in its thread, unfurling off, a fallback text.
    robots = slack.messages("C0ROBOTS")
    summary = robots[0]
    assert summary.get("thread_ts") is None
    assert f"{counts['robots']} new papers" in json.dumps(summary["blocks"])
    assert all(m["text"] for m in robots)
    assert all(m["unfurl_links"] is False and m["unfurl_media"] is False for m in robots)
    ids = thread_papers(slack, "C0ROBOTS")
    assert len(ids) == counts["robots"] == len(set(ids))

    # The direct message goes to the user's DM channel, threaded the same way.
    dm = slack.messages("DU07ADA123")
    assert dm and dm[0]["user"] == "U07ADA123"
    assert len(thread_papers(slack, "DU07ADA123")) == counts["ada"]

    # A re-run posts nothing: every paper is recorded as delivered on Slack.
    posted = len(slack.messages())
    again = run(config, store)
    assert {r.status for r in again} == {"nothing"}
    assert len(slack.messages()) == posted


def test_a_long_digest_splits_its_thread_into_several_messages(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    store.papers.upsert(full_feed_papers, now=NOW)
    many = {"name": "many", "slack_channel": "C0ROBOTS", "rules": ["learning OR model"]}
    many["max_papers"] = 300
    [report] = run(make_config(slack, database_url, [many]), store)
    assert report.status == "sent" and report.count == 300
    ids = thread_papers(slack, "C0ROBOTS")
    assert len(ids) == 300 == len(set(ids))
    thread = slack.thread(slack.messages("C0ROBOTS")[0]["ts"])
    assert len(thread) > 5  # 300 papers do not fit in one message
    assert all(len(m["blocks"]) <= 50 for m in thread)


def test_a_429_is_waited_out_and_posts_are_paced_per_channel(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    store.papers.upsert(full_feed_papers, now=NOW)
    config = make_config(slack, database_url, [ROBOTS], interval=0.3)
    slack.fail_next("chat.postMessage", retry_after=1)
    [report] = run(config, store)
    assert report.status == "sent"
    posts = [r for r in slack.requests if r.method == "chat.postMessage"]
    assert posts[0].status == 429 and posts[1].status == 200
    assert posts[1].at - posts[0].at >= 1.0  # Retry-After honoured
    accepted = [r.at for r in posts if r.status == 200]
    gaps = [b - a for a, b in itertools.pairwise(accepted)]
    assert len(gaps) >= 2 and min(gaps) >= 0.29


def test_a_digest_cut_off_mid_thread_goes_on_where_it_stopped(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Slack fails (HTTP 500) on the third message: the retry neither posts the summary
    again nor the thread messages already in; it finishes the same thread."""
    store.papers.upsert(full_feed_papers, now=NOW)
    many = {"name": "many", "slack_channel": "C0ROBOTS", "rules": ["learning"], "max_papers": 200}
    config = make_config(slack, database_url, [many])
    sleeps = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    channel = SlackChannel(slack_settings(config), sleep=sleep)
    posted = []

    original = channel.client.chat_postMessage

    async def post(**kwargs: Any) -> Any:
        posted.append(kwargs.get("thread_ts"))
        if len(posted) == 3:
            slack.fail_next("chat.postMessage", status=500)
        return await original(**kwargs)

    channel.client.chat_postMessage = post  # type: ignore[method-assign]
    [first] = run(config, store, channels={"slack": channel})
    assert first.status == "retry" and "HTTP 500" in (first.error or "")
    assert len(slack.messages("C0ROBOTS")) == 2  # the summary and one thread message

    second = run(config, store, channels={"slack": channel})
    assert [r.status for r in second] == ["nothing", "sent"]  # no new papers; the retry
    messages = slack.messages("C0ROBOTS")
    assert sum(1 for m in messages if not m.get("thread_ts")) == 1
    ids = thread_papers(slack, "C0ROBOTS")
    assert len(ids) == first.count == len(set(ids)) > 100


@pytest.mark.parametrize(
    ("error", "status", "words"),
    [
        ("channel_not_found", "failed", "check slack_channel"),
        ("not_in_channel", "failed", "/invite @paperbell"),
        ("invalid_auth", "retry", "bot_token_env"),
    ],
)
def test_slack_errors_say_what_to_do_and_others_still_get_theirs(
    slack: SlackStandIn,
    store: Store,
    database_url: str,
    full_feed_papers: tuple[Paper, ...],
    error: str,
    status: str,
    words: str,
) -> None:
    store.papers.upsert(full_feed_papers, now=NOW)
    config = make_config(slack, database_url, [ROBOTS, ADA])
    slack.fail_next("chat.postMessage", error=error)
    reports = {r.subscriber: r for r in run(config, store)}
    failed, ok = reports["robots"], reports["ada"]
    assert failed.status == status and error in (failed.error or "")
    assert words in (failed.error or "")
    assert ok.status == "sent"
    # The papers are not lost: a failure gives them back, a retry keeps them queued.
    later = {r.subscriber: r for r in run(config, store)}
    assert later["robots"].status == "sent"
    assert later["ada"].status == "nothing"


def test_the_bot_not_in_a_channel_is_reported(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    store.papers.upsert(full_feed_papers, now=NOW)
    quantum = {"name": "quantum", "slack_channel": "C0QUANTUM", "rules": ["qubit"]}
    [report] = run(make_config(slack, database_url, [quantum]), store)
    assert report.status == "failed"
    assert "not_in_channel" in (report.error or "") and "/invite" in (report.error or "")


def test_an_incoming_webhook_posts_the_digest_without_a_bot_token(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    store.papers.upsert(full_feed_papers, now=NOW)
    url = slack.add_webhook("robots", "C0ROBOTS")
    config = parse_config(
        {
            "version": 1,
            "database": {"url": database_url},
            "subscribers": [
                {"name": "robots", "webhook_url_env": "ROBOTS_WEBHOOK", "rules": ["robot"]}
            ],
        },
        environ={"ROBOTS_WEBHOOK": url},
    )
    [report] = run(config, store)
    assert report.status == "sent" and report.address == "webhook:ROBOTS_WEBHOOK"
    posts = slack.messages("C0ROBOTS")
    assert posts and all(m["via"] == "webhook:robots" for m in posts)
    assert "The papers follow" in json.dumps(posts[0]["blocks"])  # no thread on a webhook
    assert [r.subscriber for r in run(config, store)] == ["robots"]
    assert len(slack.messages("C0ROBOTS")) == len(posts)


def test_digest_out_writes_the_slack_messages_as_json(
    slack: SlackStandIn,
    store: Store,
    database_url: str,
    full_feed_papers: tuple[Paper, ...],
    tmp_path: Path,
) -> None:
    store.papers.upsert(full_feed_papers, now=NOW)
    config = make_config(slack, database_url, [ROBOTS])
    [report] = run(config, store, channels=build_channels(config, out_dir=tmp_path), mode="files")
    assert report.status == "written" and report.where and report.where.endswith(".json")
    data = json.loads(Path(report.where).read_text())
    assert data["target"] == "#robot-learning" and len(data["messages"]) >= 2
    assert slack.messages() == []


def test_an_empty_day_note_is_one_message(
    slack: SlackStandIn, store: Store, database_url: str
) -> None:
    """A subscriber with notify_empty hears why there is nothing (the daemon's notes)."""
    config = make_config(slack, database_url, [{**ROBOTS, "notify_empty": True}])
    note = "No arXiv announcement for Thursday 26 November 2026 (Thanksgiving, an arXiv holiday)."
    [report] = run(config, store, note=lambda sub: note, period=lambda sub: "daily:2026-11-26")
    assert report.status == "sent" and report.count == 0
    [message] = slack.messages("C0ROBOTS")
    assert "Thanksgiving" in message["text"] and message["thread_ts"] is None
    assert [
        r.status
        for r in run(config, store, note=lambda sub: note, period=lambda sub: "daily:2026-11-26")
    ] == ["queued-elsewhere"]


def test_a_thread_refused_half_way_keeps_what_was_posted_and_gives_back_the_rest(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Slack refuses the third message for good: the papers of the messages it took are
    delivered; the others come in the next digest. No paper twice, none lost."""
    store.papers.upsert(full_feed_papers, now=NOW)
    many = {"name": "many", "slack_channel": "C0ROBOTS", "rules": ["learning"], "max_papers": 200}
    config = make_config(slack, database_url, [many])
    channel = SlackChannel(slack_settings(config))
    original, calls = channel.client.chat_postMessage, []

    async def post(**kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            slack.fail_next("chat.postMessage", error="msg_too_long")
        return await original(**kwargs)

    channel.client.chat_postMessage = post  # type: ignore[method-assign]
    [first] = run(config, store, channels={"slack": channel})
    assert first.status == "failed" and "msg_too_long" in (first.error or "")
    kept = thread_papers(slack, "C0ROBOTS")  # one thread message got in
    assert 0 < len(kept) < first.count

    [second] = run(config, store)
    assert second.status == "sent" and second.count == first.count - len(kept)
    summaries = [m for m in slack.messages("C0ROBOTS") if not m.get("thread_ts")]
    rest = []
    for message in slack.thread(summaries[1]["ts"]):
        text = json.dumps(message["blocks"])
        linked = [part.split("|")[0] for part in text.split("<https://arxiv.org/abs/")[1:]]
        rest += dict.fromkeys(linked)
    assert not set(kept) & set(rest)
    assert len(kept) + len(rest) == first.count


def late_channel(slack: SlackStandIn, config: Config, late: int, **how: Any) -> SlackChannel:
    """The channel, with a one-second timeout, whose post number `late` (0: the summary)
    Slack takes but answers as `how` says (`answer_late`); its clock is the stand-in's."""
    settings = replace(slack_settings(config), timeout=1.0)
    channel = SlackChannel(settings, clock=lambda: FIRST_TS)
    original, calls = channel.client.chat_postMessage, []

    async def post(**kwargs: Any) -> Any:
        if len(calls) == late:
            slack.answer_late("chat.postMessage", **how)
        calls.append(1)
        return await original(**kwargs)

    channel.client.chat_postMessage = post  # type: ignore[method-assign]
    return channel


@pytest.mark.parametrize(
    ("subscriber", "channel_id", "late"),
    [(ROBOTS, "C0ROBOTS", 0), (ROBOTS, "C0ROBOTS", 1), (ADA, "DU07ADA123", 0)],
    ids=["channel-summary", "thread-message", "dm-summary"],
)
def test_a_post_slack_took_but_answered_too_late_is_not_posted_again(
    slack: SlackStandIn,
    store: Store,
    database_url: str,
    full_feed_papers: tuple[Paper, ...],
    subscriber: dict[str, Any],
    channel_id: str,
    late: int,
) -> None:
    """Slack posts a message but its answer comes after the client's timeout: the retry
    finds that message (by its metadata) and goes on after it, posting it no second time."""
    store.papers.upsert(full_feed_papers, now=NOW)
    config = make_config(slack, database_url, [subscriber])
    channel = late_channel(slack, config, late, delay=1.5)
    [first] = run(config, store, channels={"slack": channel})
    assert first.status == "retry" and "cannot reach Slack" in (first.error or "")

    second = run(config, store, channels={"slack": channel})
    assert "sent" in [r.status for r in second]
    summaries = [m for m in slack.messages(channel_id) if not m.get("thread_ts")]
    assert len(summaries) == 1
    ids = thread_papers(slack, channel_id)
    assert len(ids) == first.count == len(set(ids))
    looked = {"conversations.history", "conversations.replies"}
    assert looked & {r.method for r in slack.requests}


def test_a_timeout_under_a_second_is_kept_not_dropped(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """[slack] timeout takes a fraction of a second; slack-sdk takes whole seconds, where 0
    means none. A timeout of 0.2 s must still end a post Slack answers 3 s late."""
    store.papers.upsert(full_feed_papers, now=NOW)
    config = make_config(slack, database_url, [ROBOTS])
    channel = SlackChannel(replace(slack_settings(config), timeout=0.2), clock=lambda: FIRST_TS)
    slack.answer_late("chat.postMessage", delay=3.0)
    started = time.monotonic()
    [report] = run(config, store, channels={"slack": channel})
    waited = time.monotonic() - started
    assert report.status == "retry" and "cannot reach Slack" in (report.error or "")
    assert waited < 2.5


def test_without_the_history_scopes_a_post_with_no_answer_is_posted_again_and_said_once(
    slack: SlackStandIn,
    store: Store,
    database_url: str,
    full_feed_papers: tuple[Paper, ...],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A token without channels:history cannot look: the digest goes on as before (its
    summary posted twice), and the log says which scopes to add, once."""
    store.papers.upsert(full_feed_papers, now=NOW)
    config = make_config(slack, database_url, [ROBOTS])
    channel = late_channel(slack, config, 0, delay=1.5)
    [first] = run(config, store, channels={"slack": channel})
    assert first.status == "retry"
    slack.fail_next("conversations.history", error="missing_scope")
    with caplog.at_level(logging.WARNING, logger="bot.channels.slack"):
        second = run(config, store, channels={"slack": channel})
    assert "sent" in [r.status for r in second]
    said = [r.getMessage() for r in caplog.records if "channels:history" in r.getMessage()]
    assert len(said) == 1 and "reinstall" in said[0]
    summaries = [m for m in slack.messages("C0ROBOTS") if not m.get("thread_ts")]
    assert len(summaries) == 2


def test_a_post_whose_connection_dropped_is_not_sent_again_at_once(
    slack: SlackStandIn, store: Store, database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Slack takes the summary, then the connection drops with no answer. slack-sdk must
    not re-send it at once (it cannot tell whether Slack took it): the retry looks first."""
    store.papers.upsert(full_feed_papers, now=NOW)
    config = make_config(slack, database_url, [ROBOTS])
    channel = late_channel(slack, config, 0, hang_up=True)
    [first] = run(config, store, channels={"slack": channel})
    summaries = [m for m in slack.messages("C0ROBOTS") if not m.get("thread_ts")]
    assert len(summaries) == 1
    assert first.status == "retry" and "cannot reach Slack" in (first.error or "")

    second = run(config, store, channels={"slack": channel})
    assert "sent" in [r.status for r in second]
    summaries = [m for m in slack.messages("C0ROBOTS") if not m.get("thread_ts")]
    assert len(summaries) == 1
    ids = thread_papers(slack, "C0ROBOTS")
    assert len(ids) == first.count == len(set(ids))
