"""A digest with full abstracts too long for one email: every paper whole, in numbered parts
each within `HTML_BUDGET` (the heaviest real papers, with Chinese translations), threaded
under the first; one email when the subscriber chose it; anyone else as before, one email
shortened to fit. And `bot.render.parts.split`: the papers in order, each once, in as many
parts as asked (at most one a paper)."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import example, given
from hypothesis import strategies as st
from support.demo_texts import heaviest_digest

from bot.render.email import (
    HTML_BUDGET,
    SHORTENED_NOTES,
    SUBJECT_LIMIT,
    EmailSettings,
    html_size,
    render_digest,
    render_parts,
)
from bot.render.message import build_message
from bot.render.parts import split

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
SETTINGS = EmailSettings(from_addr="digest@lab.example", message_id_key="k" * 32)


def numbers(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<div id="paper-(\d+)"', html)]


def test_fifty_of_the_heaviest_papers_in_full_come_whole_in_parts() -> None:
    digest = heaviest_digest(50, abstracts="full", language="zh")  # 612 more left out
    parts = render_parts(digest, SETTINGS)
    total = len(parts)
    assert total >= 2
    assert all(html_size(part.html) <= HTML_BUDGET for part in parts)
    assert not any(note in part.html for part in parts for note in SHORTENED_NOTES.values())
    # Every paper once, in order, numbered on across the parts; every translation whole.
    assert [n for part in parts for n in numbers(part.html)] == list(range(1, 51))
    for item in digest.items:
        text = digest.texts[item.paper.id].text
        assert text is not None and sum(text in part.html for part in parts) >= 1
    # The papers left out of the digest are the first part's, said once, in the last.
    shown = [part.digest for part in parts]
    assert all(d is not None for d in shown)
    assert [len(d.omitted) for d in shown if d] == [612] + [0] * (total - 1)
    assert sum(d.count for d in shown if d) == 50
    # (in the reader's language: these digests are a reader of zh's)
    best = "这里是符合你规则的 662 篇论文中最好的 50 篇。"
    assert best in parts[-1].html
    assert not any(best in part.html for part in parts[:-1])
    # One subject stem; each part says which papers it holds.
    stem = parts[0].subject.removesuffix(f" (1/{total})")
    expected = [f"{stem} ({n}/{total})" for n in range(1, total + 1)]
    assert [part.subject for part in parts] == expected
    assert f"第 1 部分，共 {total} 部分：第 1–" in parts[0].text


def test_the_parts_are_threaded_under_the_first() -> None:
    digest = heaviest_digest(40, abstracts="full", language="zh")
    parts = render_parts(digest, SETTINGS)
    messages = [
        build_message(part.digest or digest, SETTINGS, now=NOW, rendered=part) for part in parts
    ]
    ids = [str(message["Message-ID"]) for message in messages]
    assert len(set(ids)) == len(parts) >= 2
    assert messages[0]["In-Reply-To"] is None and messages[0]["References"] is None
    for message in messages[1:]:
        assert str(message["In-Reply-To"]) == str(message["References"]) == ids[0]
    # The first keeps the digest's id: its outbox record's, which its links name.
    assert [part.digest.digest_id for part in parts if part.digest] == [digest.digest_id] + [
        f"{digest.digest_id}p{n}" for n in range(2, len(parts) + 1)
    ]


def test_a_parts_number_ends_its_subject_within_the_limit() -> None:
    digest = heaviest_digest(40, abstracts="full", language="zh")
    # Rules shown in words as long as a subject: the first is cut to leave room for "(1/2)".
    phrase = " ".join(["reinforcement learning for robot manipulation"] * 3)
    long_rules = tuple(
        replace(group, rule=f'"{phrase} {n}"') for n, group in enumerate(digest.groups)
    )
    parts = render_parts(replace(digest, groups=long_rules), SETTINGS)
    assert len(parts) >= 2
    for number, part in enumerate(parts, 1):
        assert len(part.subject) <= SUBJECT_LIMIT
        # (in the reader's language: "(+1 more) — Thu 28 Nov" in English)
        assert part.subject.endswith(f"…（另有 1 条） \u2014 11月28日周四 ({number}/{len(parts)})")


def test_a_part_says_which_it_is_under_the_day_then_who_wrote_the_summaries() -> None:
    digest = heaviest_digest(67, abstracts="full", language="zh", summaries=True)
    parts = render_parts(digest, SETTINGS)
    assert len(parts) >= 2
    for number, part in enumerate(parts, 1):
        html = part.html[part.html.index('class="brand"') :]  # past the preheader
        for body in (part.text, html):  # in the reader's language, Chinese
            day = body.index("2024年11月28日星期四")
            which = body.index(f"第 {number} 部分，共 {len(parts)} 部分")
            written = body.index("总结由 AI 生成：qwen2.5:7b-instruct。")
            assert day < which < written
            assert body.count("总结由 AI 生成") == 1


def test_one_email_when_the_subscriber_chose_it() -> None:
    digest = heaviest_digest(40, abstracts="full", language="zh")
    one = replace(digest, subscriber=replace(digest.subscriber, long_emails="one"))
    (email,) = render_parts(one, SETTINGS)
    assert html_size(email.html) > HTML_BUDGET and numbers(email.html) == list(range(1, 41))
    assert email.part is None and "(1/" not in email.subject


def test_short_abstracts_are_one_email_shortened_as_before() -> None:
    digest = heaviest_digest(100, summaries=True)
    (email,) = render_parts(digest, SETTINGS)
    assert email == render_digest(digest, SETTINGS)
    assert html_size(email.html) <= HTML_BUDGET


def test_a_digest_that_fits_is_one_email() -> None:
    digest = heaviest_digest(10, abstracts="full", language="zh")
    (email,) = render_parts(digest, SETTINGS)
    assert email.part is None and numbers(email.html) == list(range(1, 11))


@given(st.lists(st.integers(1, 100_000), min_size=1, max_size=80), st.integers(1, 100))
@example([1, 1, 100_000], 3)
@example([100_000, 1, 1], 2)
def test_split_keeps_every_paper_once_in_order(weights: list[int], count: int) -> None:
    digest = heaviest_digest(len(weights))
    parts = split(digest, weights, count)
    assert len(parts) == min(count, len(weights))
    ids = [item.paper.id for part in parts for item in part.digest.items]
    assert ids == [item.paper.id for item in digest.items]
    assert all(part.digest.count >= 1 for part in parts)
    assert [part.first for part in parts] == [
        1 + sum(p.digest.count for p in parts[:n]) for n in range(len(parts))
    ]
