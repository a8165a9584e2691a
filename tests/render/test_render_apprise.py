"""The digest as chat messages (bot.render.apprise): split between papers within a
service's limit, never cutting a paper, numbered in order; feed and model text escaped so
that it shows as written and makes no link, image or formatting. Checked with CommonMark's
reference parser (markdown-it-py), on hostile titles (Hypothesis)."""

from __future__ import annotations

import functools
import html
import re
from dataclasses import replace
from datetime import UTC, date, datetime

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from bot.core.models import Digest, DigestGroup, DigestItem, Paper, Subscriber
from bot.demo import bundled_papers
from bot.render.apprise import MIN_BODY, ChatShape, chat_messages, escape_markdown, plain

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
COMMONMARK = MarkdownIt("commonmark")


@functools.cache
def base_paper() -> Paper:
    """The bundled listing's first paper, parsed once (the property tests make hundreds of
    digests)."""
    return bundled_papers()[0]


def hand_digest(*titles: str, abstract: str = "An abstract.") -> Digest:
    """A digest of papers with these titles under one rule."""
    base = base_paper()
    items = tuple(
        DigestItem(
            paper=replace(base, id=f"2411.{10000 + n}", title=title, abstract=abstract),
            rules=("robot",),
            hits=(),
        )
        for n, title in enumerate(titles)
    )
    return Digest(
        subscriber=Subscriber(name="ada", email=None, rules=("robot",)),
        digest_id="d-test",
        created=NOW,
        groups=(DigestGroup(rule="robot", items=items),),
        announced=(date(2024, 11, 28),),
    )


def numbers_in(body: str) -> list[int]:
    """The papers' numbers a message shows, in order (`1.` or `**1.**` opening a line)."""
    return [int(n) for n in re.findall(r"^\**(\d+)\.\**", body, re.MULTILINE)]


def test_a_paper_longer_than_a_message_is_shortened_never_split() -> None:
    digest = hand_digest("Short title", "Long " * 3000, "Another", abstract="Word " * 3000)
    shape = ChatShape(markdown=True, body=600, title=100)
    messages = chat_messages(digest, shape)
    assert [n for m in messages for n in m.numbers] == [1, 2, 3]
    assert all(len(m.body) <= 600 for m in messages)
    long_one = next(m for m in messages if 2 in m.numbers)
    assert "\u2026" in long_one.body and numbers_in(long_one.body) == [2]


def test_the_smallest_shape_still_holds_each_paper_and_a_smaller_is_refused() -> None:
    digest = hand_digest(*(f"Paper {n} " * 30 for n in range(5)))
    messages = chat_messages(digest, ChatShape(markdown=False, body=MIN_BODY))
    assert [n for m in messages for n in m.numbers] == [1, 2, 3, 4, 5]
    assert all(len(m.body) <= MIN_BODY for m in messages)
    with pytest.raises(ValueError, match="too short for a digest"):
        chat_messages(digest, ChatShape(markdown=False, body=MIN_BODY - 1))


def test_a_digest_with_nothing_is_one_message_with_its_note() -> None:
    digest = replace(hand_digest(), groups=(), note="No arXiv announcement today [see](x).")
    (message,) = chat_messages(digest, ChatShape(markdown=True, body=2000, title=200))
    assert message.numbers == () and "No arXiv announcement today" in message.body
    assert "<a" not in COMMONMARK.render(message.body)


HOSTILE = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=200
)
MARKUP = st.sampled_from(
    [
        "[x](https://evil.example)",
        "![i](https://evil.example/i.png)",
        "<script>",
        "**",
        "_",
        "`",
        "\\",
        "# ",
        "> ",
        "1. ",
        "&amp;",
        "&#60;",
        "<https://evil.example>",
        "|",
        "~~",
        "\x00",
        "\u202e",
        "\U0001f600",
        "<!channel>",
        "$x<y$",
        "\n",
        "  \n",
    ]
)


@given(st.lists(st.one_of(HOSTILE, MARKUP), max_size=12).map("".join))
@example("[click](https://evil.example) **bold** `code` <b>x</b> ![i](y) \\ \\\\")
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_escaped_text_shows_as_written_and_makes_no_markup(text: str) -> None:
    rendered = COMMONMARK.renderInline(escape_markdown(text))
    assert "<" not in rendered  # no element of any kind: every < of the text is &lt;
    shown = html.unescape(rendered).replace("\ufffd", "\x00")
    assert shown.split() == text.split()  # as written (CommonMark folds line breaks)
    assert not set("[]<>") & set(plain(text))


@given(
    titles=st.lists(st.one_of(HOSTILE, MARKUP).map(lambda t: t or "x"), min_size=1, max_size=8),
    body=st.integers(MIN_BODY, 3000),
    title=st.sampled_from([0, 100, 250]),
    markdown=st.booleans(),
    counted_as_json=st.booleans(),
)
@example(titles=["x"], body=MIN_BODY, title=0, markdown=False, counted_as_json=False)
@example(  # separators count as JSON counts them ("\n" is two characters there)
    titles=["x", "x", "\U0010f9ad^", "<script>", "å\U0005cd84*\U000ccb04Ý!\x15¦", "x", "x", "x"],
    body=1266,
    title=250,
    markdown=False,
    counted_as_json=True,
)
@example(
    titles=["[a](https://evil.example)"] * 3,
    body=MIN_BODY,
    title=0,
    markdown=True,
    counted_as_json=True,
)
@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_hostile_titles_split_within_the_limit_and_inject_nothing(
    titles: list[str], body: int, title: int, markdown: bool, counted_as_json: bool
) -> None:
    digest = hand_digest(*titles)
    shape = ChatShape(markdown=markdown, body=body, title=title, json=counted_as_json)
    messages = chat_messages(digest, shape, manage_url="https://papers.example/manage/t")
    assert [n for m in messages for n in m.numbers] == list(range(1, len(titles) + 1))
    for message in messages:
        assert shape.size(message.body) <= body
        assert len(message.title) <= title
        assert [n for n in numbers_in(message.body)] == list(message.numbers)
        if markdown:
            tokens = COMMONMARK.parseInline(message.body)
            hrefs = [
                dict(child.attrs).get("href")
                for token in tokens
                for child in token.children or []
                if child.type == "link_open"
            ]
            allowed = re.compile(r"https://(arxiv\.org|papers\.example|huggingface\.co)/")
            assert all(isinstance(h, str) and allowed.match(h) for h in hrefs), hrefs
            assert "<img" not in COMMONMARK.render(message.body)
