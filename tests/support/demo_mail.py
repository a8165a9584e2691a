"""The demo digests as they are mailed: each demo subscriber (`bot.demo.DEMO_SUBSCRIBERS`),
a full-abstracts and a text-only variant, and the summaries and translations variants (with
the hand-written texts of tests/support/demo_texts.py), gets the digest the pipeline would
build from the bundled papers, built by `bot.render.message.build_message` with a fixed clock
and fixed signed links. tests/render/test_email_golden.py compares them with tests/golden/,
tests/render/test_spam.py scores them with SpamAssassin."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

from bot.core.models import Digest, Paper, PaperTexts, Subscriber
from bot.demo import DEMO_DAY, DEMO_HF_DAY, DEMO_SUBSCRIBERS, bundled_hf_papers, bundled_papers
from bot.demo.data import IN_CONFIG
from bot.match.digest import build_digest, match_rules
from bot.render.email import DigestLinks, EmailSettings, VoteLinks
from bot.render.message import build_message
from bot.rules import parse_rule
from support.demo_texts import (
    GRACE_CHINESE,
    GRACE_CHINESE_NOTE,
    LIN_BOTH_JAPANESE,
    LIN_SUMMARIES,
    LIN_SUMMARIES_NOTE,
)

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
WINDOW_DAYS = 7  # the demo's [digest] window_days
SETTINGS = EmailSettings(from_addr="digest@papers.lab.example", from_name="paperbell")


@dataclass(frozen=True)
class DemoCase:
    """One demo message: a demo subscriber, maybe with other email preferences, and the
    summaries and translations its digest carries (`Digest.texts`, `Digest.texts_note`)."""

    name: str
    subscriber: Subscriber
    texts: Mapping[str, PaperTexts] = field(default_factory=dict)
    texts_note: str | None = None


def demo_subscriber(entry: Mapping[str, Any]) -> Subscriber:
    """A demo subscriber from its config entry (the email-related keys), from the config
    file or the database as the demo stores it (`bot.demo.IN_CONFIG`)."""
    rules = [rule if isinstance(rule, str) else rule["rule"] for rule in entry["rules"]]
    labels = {rule["rule"]: rule["label"] for rule in entry["rules"] if isinstance(rule, dict)}
    return Subscriber(
        origin="config" if entry["name"] in IN_CONFIG else "database",
        name=entry["name"],
        email=entry["email"],
        rules=tuple(rules),
        labels=labels,
        categories=tuple(entry.get("categories", ())),
        max_papers=entry.get("max_papers", 50),
        email_format=entry.get("email_format", "html"),
        abstracts=entry.get("abstracts", "short"),
    )


def demo_cases() -> list[DemoCase]:
    """Each demo subscriber as configured, then a full-abstracts and a text-only variant."""
    subscribers = {entry["name"]: demo_subscriber(entry) for entry in DEMO_SUBSCRIBERS}
    cases = [DemoCase(name, subscriber) for name, subscriber in subscribers.items()]
    cases.append(DemoCase("ada-full", replace(subscribers["ada"], abstracts="full")))
    cases.append(DemoCase("grace-text", replace(subscribers["grace"], email_format="text")))
    # Summaries ("From the arXiv"), Chinese translations (the keyword digest), and both.
    cases.append(
        DemoCase(
            "lin-summaries",
            replace(subscribers["lin"], summaries=True),
            LIN_SUMMARIES,
            LIN_SUMMARIES_NOTE,
        )
    )
    cases.append(
        DemoCase(
            "grace-zh",
            replace(subscribers["grace"], language="zh"),
            GRACE_CHINESE,
            GRACE_CHINESE_NOTE,
        )
    )
    cases.append(
        DemoCase(
            "lin-both-ja",
            replace(subscribers["lin"], summaries=True, language="ja"),
            LIN_BOTH_JAPANESE,
            LIN_SUMMARIES_NOTE,
        )
    )
    return cases


@functools.cache
def demo_papers() -> tuple[Paper, ...]:
    listing = tuple(bundled_papers())
    assert {paper.announced for paper in listing} == {DEMO_DAY}
    hf = tuple(bundled_hf_papers())
    assert {paper.announced for paper in hf} == {DEMO_HF_DAY}
    return hf + listing  # as the store gives them: the newest announcement first


@functools.cache
def demo_digests() -> dict[str, Digest]:
    """Every demo subscriber's digest, built as `bot.pipeline.deliver` builds them."""
    subscribers = [demo_subscriber(entry) for entry in DEMO_SUBSCRIBERS]
    parsed = {sub.name: [parse_rule(text) for text in sub.rules] for sub in subscribers}
    papers = demo_papers()
    matches = match_rules((rule for rules in parsed.values() for rule in rules), papers)
    since = DEMO_DAY - timedelta(days=WINDOW_DAYS - 1)
    digests: dict[str, Digest] = {}
    for sub in subscribers:
        digest = build_digest(
            sub, parsed[sub.name], papers, delivered={}, now=NOW, since=since, matches=matches
        )
        assert digest is not None, f"the demo subscriber {sub.name} gets no digest"
        digests[sub.name] = digest
    return digests


def demo_links(name: str) -> DigestLinks:
    """Fixed links, as signed ones stand in the email: manage, unsubscribe, each paper's
    👍 / 👎 (as long as real ones: about 50 characters of token), the digest in the archive
    and the Atom feed."""
    votes = {
        item.paper.id: VoteLinks(
            like=f"https://papers.lab.example/feedback/TOKEN-{name}-{number}-like-{'L' * 24}",
            dislike=f"https://papers.lab.example/feedback/TOKEN-{name}-{number}-dislike-{'D' * 21}",
        )
        for number, item in enumerate(demo_digests()[name].items, 1)
    }
    return DigestLinks(
        unsubscribe=f"https://papers.lab.example/unsubscribe/TOKEN-{name}",
        manage=f"https://papers.lab.example/manage/TOKEN-{name}",
        feedback=votes,
        archive=f"https://papers.lab.example/archive/TOKEN-{name}/{demo_digests()[name].digest_id}",
        feed=f"https://papers.lab.example/feed/TOKEN-{name}.atom",
        rating=f"https://papers.lab.example/rate/TOKEN-{name}-{'R' * 40}",
    )


def demo_message(case: DemoCase) -> EmailMessage:
    """The case's digest as the message it is sent as."""
    base = demo_digests()[case.subscriber.name]
    digest = replace(base, subscriber=case.subscriber, texts=case.texts, texts_note=case.texts_note)
    return build_message(digest, SETTINGS, now=NOW, links=demo_links(case.subscriber.name))


CASES = demo_cases()
