"""Summaries and translations (`Digest.texts`) as the renderers show them: the view model,
the email's two layouts (HTML and plain text), Slack, the 102 KB Gmail limit on 50-paper
digests, and a model's hostile text carried as inert text everywhere.

The golden emails of these layouts are in tests/render/test_email_golden.py (`lin-summaries`,
`grace-zh`, `lin-both-ja`); their looks in Chromium in tests/web/test_browser.py.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import replace
from datetime import UTC, date, datetime
from email.message import EmailMessage
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.demo_texts import MODEL, chinese, fifty_paper_digest

from bot.core.models import (
    HUGGING_FACE,
    Digest,
    DigestGroup,
    DigestItem,
    Hit,
    Paper,
    PaperTexts,
    Subscriber,
)
from bot.demo.slack_limits import check_message, mrkdwn_problems
from bot.render.email import HTML_BUDGET, SHORTENED_NOTE, EmailSettings, render_digest
from bot.render.message import build_message
from bot.render.slack import SLACK_LIMITS, SlackMessage, build_posts, text_length
from bot.render.text import clip, plain_text, wrap
from bot.render.view import (
    SUMMARY_CHARS,
    TRANSLATED_TEXT_CHARS,
    cut_like,
    group_views,
    layout_of,
    model_text,
    summaries_note,
)
from bot.render.words import words_for

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
SETTINGS = EmailSettings(from_addr="digest@papers.lab.example")
ABSTRACT = (
    "We study diffusion policies for robot manipulation. Our method learns from a few "
    "demonstrations and generalises to new objects, scenes and embodiments without any "
    "fine-tuning. Experiments on three real robots show large gains in success rate over "
    "strong baselines, and an ablation study shows which parts matter. We also release a "
    "benchmark of forty household tasks with scripted resets, so that others can compare "
    "their policies under the same conditions; code and data are public for everyone."
)
SUMMARY = "A diffusion policy that learns from a few demonstrations and transfers to new robots."
ZH_TITLE = "用于机器人操作的扩散策略"
ZH_TEXT = chinese(len(ABSTRACT) // 3)
ZH_SUMMARY = "一种仅从少量示范中学习、并能迁移到新机器人的扩散策略。"


def paper(number: int, **changes: Any) -> Paper:
    base = Paper(
        id=f"2411.{number:05d}",
        version=1,
        title=f"Diffusion policy number {number} for robots",
        abstract=ABSTRACT,
        authors=("Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra"),
        categories=("cs.RO", "cs.LG"),
        announced=date(2024, 11, 28),
    )
    return replace(base, **changes)


def digest(
    texts: dict[str, PaperTexts] | None = None,
    *,
    count: int = 3,
    note: str | None = None,
    **subscriber: Any,
) -> Digest:
    papers = [paper(n) for n in range(1, count + 1)]
    items = tuple(
        DigestItem(
            paper=p,
            rules=('"diffusion policy"',),
            hits=(Hit(field="title", start=0, end=16, term="diffusion policy"),),
        )
        for p in papers
    )
    return Digest(
        subscriber=replace(
            Subscriber(name="ada", email="ada@lab.example", rules=('"diffusion policy"',)),
            **subscriber,
        ),
        digest_id="d-texts",
        created=NOW,
        groups=(DigestGroup(rule='"diffusion policy"', items=items),),
        announced=(date(2024, 11, 28),),
        texts=texts or {},
        texts_note=note,
    )


def html_text(message: EmailMessage) -> tuple[str, str | None]:
    """The decoded text part and HTML part (None: text only) of a built message."""
    plain = html = None
    for part in message.walk():
        if part.get_content_type() == "text/plain":
            plain = part.get_content()
        elif part.get_content_type() == "text/html":
            html = part.get_content()
    assert plain is not None
    return plain, html


class _Elements(HTMLParser):
    """Every element's tag, attributes and own text, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None], list[str]]] = []
        self.open: list[int] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs), []))
        if tag not in ("br", "meta", "hr", "img"):
            self.open.append(len(self.elements) - 1)

    def handle_endtag(self, tag: str) -> None:
        if self.open:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        if self.open:
            self.elements[self.open[-1]][2].append(data)


def elements(html: str) -> list[tuple[str, dict[str, str | None], str]]:
    parser = _Elements()
    parser.feed(html)
    return [(tag, attrs, "".join(text)) for tag, attrs, text in parser.elements]


# -- the view model ------------------------------------------------------------------------


def test_layout_follows_the_subscriber() -> None:
    base = Subscriber(name="a", email=None, rules=("x",))
    assert layout_of(base) == "standard"
    assert layout_of(replace(base, summaries=True)) == "summaries"
    assert layout_of(replace(base, language="zh")) == "translated"
    assert layout_of(replace(base, summaries=True, language="ja")) == "translated"
    assert layout_of(replace(base, language="en")) == "standard"  # English: nothing to translate


def test_item_view_carries_summary_and_translations() -> None:
    texts = {
        "2411.00001": PaperTexts(
            summary=SUMMARY, summary_by=MODEL, language="zh", title=ZH_TITLE, text=ZH_SUMMARY
        ),
        "2411.00002": PaperTexts(summary="Hugging Face's summary.", summary_by=HUGGING_FACE),
    }
    (group,) = group_views(digest(texts, summaries=True, language="zh"))
    first, second, third = group.items
    assert first.summary == SUMMARY and first.summary_by == MODEL
    assert first.translated_title == ZH_TITLE and first.translated_text == ZH_SUMMARY
    assert (first.language, first.language_name, first.direction) == ("zh", "Chinese", "ltr")
    assert second.summary_by == HUGGING_FACE
    assert second.translated_title is None and second.translated_text is None
    assert third.summary is None and third.summary_by is None and not third.translated
    # Who wrote them is said once, for the digest: the model first.
    said = f"AI summaries by {MODEL} and Hugging Face."
    assert summaries_note(group.items) == said
    assert summaries_note([third]) is None


def test_what_the_subscriber_did_not_ask_for_is_not_shown() -> None:
    texts = {
        "2411.00001": PaperTexts(
            summary=SUMMARY, summary_by=MODEL, language="zh", title=ZH_TITLE, text=ZH_TEXT
        )
    }
    (only_zh,) = group_views(digest(texts, language="zh"))
    assert only_zh.items[0].summary is None and only_zh.items[0].translated_title == ZH_TITLE
    (only_summaries,) = group_views(digest(texts, summaries=True))
    assert only_summaries.items[0].summary == SUMMARY
    assert only_summaries.items[0].translated_title is None


def test_right_to_left_translations_say_so() -> None:
    texts = {"2411.00001": PaperTexts(language="ar", title="سياسة الانتشار", text="نص")}
    (group,) = group_views(digest(texts, language="ar"))
    assert group.items[0].direction == "rtl" and group.items[0].language_name == "Arabic"


@pytest.mark.parametrize("written", ["ja", "xx-!!<b>", "", "zh-CN-x-" + "a" * 80])
def test_translations_in_another_language_than_asked_are_not_shown(written: str) -> None:
    texts = {"2411.00001": PaperTexts(language=written, title="翻訳", text="本文")}
    (group,) = group_views(digest(texts, language="zh"))
    assert not group.items[0].translated
    assert "翻訳" not in render_digest(digest(texts, language="zh"), SETTINGS).html


def test_translations_tagged_in_another_form_of_the_asked_tag_are_shown() -> None:
    texts = {"2411.00001": PaperTexts(language="zh-cn", title=ZH_TITLE)}
    (group,) = group_views(digest(texts, language="zh-CN"))
    assert group.items[0].translated_title == ZH_TITLE and group.items[0].language == "zh-CN"


def test_model_text_is_cleaned_and_capped() -> None:
    raw = "Hello\x00 \u202eevil\u202c\x1b[31m  world\n\n$\\alpha$-stable"
    assert model_text(raw, 100) == "Hello evil[31m world α-stable"
    assert model_text("  \x00 ", 100) is None and model_text(None, 100) is None
    long = model_text("word " * 5000, SUMMARY_CHARS)
    assert long is not None and len(long) <= SUMMARY_CHARS and long.endswith("…")
    cjk = model_text("汉" * 10_000, TRANSLATED_TEXT_CHARS)
    assert cjk is not None and len(cjk) == TRANSLATED_TEXT_CHARS and cjk.endswith("…")


def test_a_short_abstracts_translation_is_cut_where_the_english_is() -> None:
    texts = {"2411.00001": PaperTexts(language="zh", text=ZH_TEXT)}
    (short,) = group_views(digest(texts, language="zh"))
    (full,) = group_views(digest(texts, language="zh", abstracts="full"))
    assert short.items[0].abstract.clipped and full.items[0].translated_text == ZH_TEXT
    shown = short.items[0].translated_text
    assert shown is not None and shown.endswith("…")
    head = sum(len(text) for text, _ in short.items[0].abstract.head)
    assert abs(len(shown) - len(ZH_TEXT) * head / len(ABSTRACT)) <= 30
    assert cut_like("全文", 10, 10) == "全文"


def test_clip_prefers_spaces_then_punctuation() -> None:
    assert clip("one two three four", 12) == "one two…"
    assert clip("第一句话很长很长。第二句", 11) == "第一句话很长很长…"
    assert clip("汉字汉字汉字", 4) == "汉字汉…"
    assert plain_text("a\u2066b\u2069\tc") == "ab c"


@pytest.mark.parametrize(
    "text",
    [
        ZH_TEXT,
        "日本語の文章：「括弧」と、句読点。" * 9,
        "混合 text with English words and 中文字符 and a URL https://example.org/a/long/path ok",
    ],
)
def test_wrap_breaks_cjk_within_the_width(text: str) -> None:
    wrapped = wrap(text, 40, "    ")
    lines = wrapped.splitlines()
    assert len(lines) > 1
    for line in lines:
        columns = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)
        assert columns <= 40 or "://" in line, line
        assert line[4:5] not in "，。、：」）"  # no line starts with a closing mark
    assert "".join(wrapped.split()) == "".join(text.split())


def test_wrap_of_plain_english_is_unchanged() -> None:
    text = "The quick brown fox jumps over the lazy dog " * 5
    import textwrap

    assert wrap(text, 30) == textwrap.fill(text.strip(), 30, break_on_hyphens=False)


# -- email: the summaries layout -----------------------------------------------------------


def summaries_digest() -> Digest:
    texts = {
        "2411.00001": PaperTexts(summary=SUMMARY, summary_by=MODEL),
        "2411.00002": PaperTexts(summary="Hugging Face's own summary.", summary_by=HUGGING_FACE),
    }
    note = "A summary could not be written for 1 paper today: its abstract is shown."
    return digest(texts, summaries=True, note=note, count=7)


def test_summaries_layout_shows_summaries_in_place_of_abstracts() -> None:
    text, html = html_text(build_message(summaries_digest(), SETTINGS, now=NOW))
    assert html is not None
    # Who wrote the summaries: once, at the top, not on every paper.
    said = f"AI summaries by {MODEL} and Hugging Face."
    assert SUMMARY in html and html.count(said) == 1
    assert html.index(said) < html.index('id="paper-1"')
    assert "AI summary" not in html and "Summary by" not in html
    assert html.count("We study diffusion policies") == 5  # the papers without a summary
    # The abstract a click away, for every paper: its title's one link there.
    assert html.count('<a href="https://arxiv.org/abs/') == 7 and ">Abstract</a>" not in html
    assert "A summary could not be written for 1 paper today" in html
    assert 'href="#paper-' not in html  # no table of contents: nothing competes
    assert "Matched:" not in html and "Read the full abstract" not in html
    flat = " ".join(text.split())  # as read, line breaks aside
    assert SUMMARY in flat and flat.count(said) == 1 and "AI summary" not in flat
    assert f"{SUMMARY} Ada Lovelace, Alan Turing et al." in flat
    assert "A summary could not be written for 1 paper today" in flat
    # The note sits near the top: before the first paper.
    assert html.index("could not be written") < html.index('id="paper-1"')
    assert text.index("could not be written") < text.index("1.  ")


def test_new_layouts_inline_the_css_of_every_classed_element() -> None:
    for d in (summaries_digest(), digest({}, language="zh")):
        html = render_digest(d, SETTINGS).html
        body = html.split("<body", 1)[1]
        unstyled = [
            (tag, attrs.get("class"))
            for tag, attrs, _ in elements("<body" + body)
            if attrs.get("class") and not attrs.get("style")
        ]
        assert unstyled == []


def test_without_summaries_or_language_the_digest_is_as_before() -> None:
    texts = {
        "2411.00001": PaperTexts(
            summary=SUMMARY, summary_by=MODEL, language="zh", title=ZH_TITLE, text=ZH_TEXT
        )
    }
    plain = render_digest(digest({}), SETTINGS)
    assert render_digest(digest(texts), SETTINGS) == plain
    assert SUMMARY not in plain.html and ZH_TITLE not in plain.html


# -- email: the translated layout ----------------------------------------------------------


def translated_digest(language: str = "zh", **subscriber: Any) -> Digest:
    texts = {
        "2411.00001": PaperTexts(language=language, title=ZH_TITLE, text=ZH_TEXT),
        "2411.00002": PaperTexts(language=language, title=ZH_TITLE),  # its text failed
    }
    return digest(texts, language=language, count=3, **subscriber)


def test_translated_layout_puts_each_translation_under_its_english() -> None:
    text, html = html_text(build_message(translated_digest(), SETTINGS, now=NOW))
    assert html is not None
    found = elements(html)
    # (the translation's own text follows its label, "中文摘要", in the reader's language)
    marked = [(tag, attrs, own.strip()) for tag, attrs, own in found if attrs.get("lang") == "zh"]
    assert [own for _, _, own in marked][:2] == [ZH_TITLE, ZH_TEXT[: len(marked[1][2]) - 1] + "…"]
    assert '<b lang="zh-Hans">中文摘要</b>' in html and "<div><b>摘要</b> We study" in html
    assert len(marked) == 3  # two titles, one text: the third paper is English only
    # The translated title is the element right after the title's heading.
    heading = next(n for n, (tag, _, _) in enumerate(found) if tag == "h3")
    after = [e for e in found[heading + 1 :] if e[0] != "a" and e[0] != "mark"]
    assert after[0][1].get("lang") == "zh" and after[0][2] == ZH_TITLE
    # The translation of the abstract comes after the English.
    assert html.index("We study diffusion policies") < html.index(ZH_TEXT[:20])
    assert "Noto Sans CJK SC" in html and "PingFang SC" in html
    assert "中文译文由机器翻译生成。" in html  # in the reader's language, as all its words
    lines = text.splitlines()
    title_line = next(n for n, line in enumerate(lines) if "number 1 for robots" in line)
    assert lines[title_line + 1].strip() == ZH_TITLE
    assert text.index("We study diffusion policies") < text.index(ZH_TEXT[:10])


@pytest.mark.parametrize(
    ("language", "font"),
    [("ja", "Noto Sans CJK JP"), ("zh-Hant", "Noto Sans CJK TC"), ("ko", "Noto Sans CJK KR")],
)
def test_the_font_stack_follows_the_language(language: str, font: str) -> None:
    html = render_digest(translated_digest(language), SETTINGS).html
    assert font in html and "Noto Sans CJK SC" not in html
    assert f'lang="{language}"' in html


def test_both_shows_the_summary_and_its_translation() -> None:
    texts = {
        "2411.00001": PaperTexts(
            summary=SUMMARY, summary_by=MODEL, language="zh", title=ZH_TITLE, text=ZH_SUMMARY
        )
    }
    text, html = html_text(
        build_message(digest(texts, summaries=True, language="zh"), SETTINGS, now=NOW)
    )
    assert html is not None
    first = html.split('id="paper-2"')[0]
    assert html.index(f"总结由 AI 生成：{MODEL}。") < html.index('id="paper-1"')  # zh words
    assert first.index(ZH_TITLE) < first.index(SUMMARY)
    assert MODEL not in first.split('id="paper-1"')[1]
    assert first.index(SUMMARY) < first.index(ZH_SUMMARY)
    assert "We study diffusion policies" not in first  # the summary is in the abstract's place
    assert re.search(r'<h3 style="[^"]*">1\. <a href="https://arxiv\.org/abs/', first)
    assert text.index(SUMMARY.split()[0]) < text.index(ZH_SUMMARY[:8])


def test_text_part_lines_fit_72_columns_with_cjk() -> None:
    text, _ = html_text(build_message(translated_digest(), SETTINGS, now=NOW))
    for line in text.splitlines():
        columns = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)
        assert columns <= 72 or "://" in line, line


# -- Gmail's 102 KB: fifty papers -----------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"summaries": True},
        {"language": "zh"},
        {"summaries": True, "language": "zh"},
        {"language": "zh", "abstracts": "full"},
    ],
    ids=["summaries", "translated", "both", "translated-full"],
)
def test_fifty_papers_stay_under_gmails_clipping(changes: dict[str, Any]) -> None:
    d = fifty_paper_digest(**changes)
    _, html = html_text(build_message(d, SETTINGS, now=NOW))
    assert html is not None
    size = len(html.encode())
    print(f"{'+'.join(f'{k}={v}' for k, v in changes.items())}: {size / 1024:.1f} KB")
    assert size < HTML_BUDGET, f"{size} bytes of HTML: Gmail clips past 102 KB"
    assert html.count('id="paper-') == 50
    shortened = words_for(d.subscriber.language).gettext(SHORTENED_NOTE)  # the reader's words
    if changes.get("abstracts") == "full":  # too long in full: shortened, and said so
        assert shortened in html
    else:
        assert shortened not in html
    cjk = sum(1 for char in html if "\u4e00" <= char <= "\u9fff")
    assert (cjk > 2500) is ("language" in changes)  # a third of the English, cut like it


def test_full_abstracts_that_fit_are_kept() -> None:
    html = render_digest(translated_digest(abstracts="full"), SETTINGS).html
    assert SHORTENED_NOTE not in html and ZH_TEXT in html and ABSTRACT[-40:] in html


# -- Slack -------------------------------------------------------------------------------


def check_slack(posts: list[SlackMessage]) -> list[str]:
    violations: list[str] = []
    for number, post in enumerate(posts):
        check_message(f"post {number}", post.to_dict(), violations)
        assert text_length(list(post.blocks)) <= SLACK_LIMITS.text_budget
    return violations


def mrkdwn_texts(posts: list[SlackMessage]) -> list[str]:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") == "mrkdwn":
                found.append(value["text"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk([post.blocks for post in posts])
    return found


def plain_texts(posts: list[SlackMessage]) -> list[str]:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") == "plain_text":
                found.append(value["text"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk([post.blocks for post in posts])
    return found


@pytest.mark.parametrize(
    "changes",
    [{"summaries": True, "language": "zh"}, {"language": "zh"}, {"summaries": True}],
    ids=["both", "translated", "summaries"],
)
def test_slack_posts_of_fifty_papers_with_texts_fit(changes: dict[str, Any]) -> None:
    d = replace(fifty_paper_digest(**changes), channel="slack")
    posts = build_posts(d)
    assert check_slack(posts) == []
    numbers = [n for post in posts[1:] for n in post.numbers]
    assert numbers == list(range(1, 51))
    plain = " ".join(plain_texts(posts))
    if changes.get("summaries"):
        said = words_for(d.subscriber.language).gettext("AI summaries by %(writers)s.")
        assert plain.count(said % {"writers": MODEL}) == 1  # in the first message
        assert MODEL not in " ".join(plain_texts(posts[1:]))
    if changes.get("language"):
        assert sum(1 for char in plain if "\u4e00" <= char <= "\u9fff") > 4000
    summary = " ".join(plain_texts(posts[:1]))
    assert "Summaries could not be written for 3 papers today" in summary
    assert ("中文译文由机器翻译生成。" in summary) is ("language" in changes)  # Chinese words


def test_slack_paper_shows_translated_title_under_title_and_summary_then_translation() -> None:
    texts = {
        "2411.00001": PaperTexts(
            summary=SUMMARY, summary_by=MODEL, language="zh", title=ZH_TITLE, text=ZH_SUMMARY
        ),
        "2411.00002": PaperTexts(language="zh", title=ZH_TITLE, text=ZH_TEXT),
    }
    posts = build_posts(replace(digest(texts, summaries=True, language="zh"), channel="slack"))
    blocks = list(posts[1].blocks)
    first = next(n for n, b in enumerate(blocks) if "Diffusion policy number 1" in str(b))
    translated = blocks[first + 1]
    assert translated["type"] == "context"
    assert translated["elements"] == [{"type": "plain_text", "text": ZH_TITLE, "emoji": False}]
    body = next(b for b in blocks[first:] if b["type"] == "section" and SUMMARY in str(b))
    assert body["text"] == {
        "type": "plain_text",
        "text": f"{SUMMARY}\n\n{ZH_SUMMARY}",
        "emoji": False,
    }
    second = next(n for n, b in enumerate(blocks) if "Diffusion policy number 2" in str(b))
    abstract = next(b for b in blocks[second:] if b["type"] == "section" and "We study" in str(b))
    english, chinese_text = abstract["text"]["text"].split("\n\n")
    assert english.endswith("…") and chinese_text.endswith("…")
    assert len(chinese_text) < len(ZH_TEXT) * 0.9  # cut like the English
    assert check_slack(posts) == []


# -- a model's hostile text ----------------------------------------------------------------

HOSTILE = [
    "<script>alert(1)</script>",
    '<a href="https://evil.example/x">click</a>',
    "*bold* _it_ ~strike~ `code` > quote",
    "<https://evil.example|click> <!channel> <@U123> &amp; & &lt;",
    "nul\x00byte and \x1b[31mescape",
    "\u202eevil reversed\u202c and \u2067isolate\u2069",
    "x" * 10_000,
    "中" * 10_000,
    "https://evil.example/bare-url and www.evil.example",
    "{{ 7*7 }} {% raw %} ]]> <!-- comment -->",
]
# Where the digest's own links go: arXiv, and the unsubscribe address's domain.
ALLOWED_HOSTS = {"arxiv.org", "papers.lab.example"}


def hostile_digest(text: str, *, language: str | None = "zh") -> Digest:
    texts = {
        "2411.00001": PaperTexts(
            summary=text, summary_by=text, language=language, title=text, text=text
        ),
        "2411.00002": PaperTexts(language=language, title=text, text=text),
    }
    return digest(texts, summaries=True, language=language, note=text, count=2)


def assert_inert_email(d: Digest) -> None:
    message = build_message(d, SETTINGS, now=NOW)
    text, html = html_text(message)
    assert html is not None
    found = elements(html)
    assert not [tag for tag, _, _ in found if tag in ("script", "iframe", "object", "img")]
    hrefs = [attrs.get("href") or "" for tag, attrs, _ in found if tag == "a"]
    hosts = {urlsplit(href).hostname or urlsplit(href).path.partition("@")[2] for href in hrefs}
    assert hosts <= ALLOWED_HOSTS, hosts
    assert "evil" not in "".join(attrs.get("href") or "" for _, attrs, _ in found)
    assert not [attrs for _, attrs, _ in found if any(k.startswith("on") for k in attrs)]
    for part in (text, html):
        assert "\x00" not in part and "\x1b" not in part
        assert not set(part) & set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    assert "<script" not in html.lower()
    assert len(html.encode()) < 60_000  # capped, even a runaway answer


def assert_inert_slack(d: Digest) -> None:
    posts = build_posts(replace(d, channel="slack"))
    assert check_slack(posts) == []
    for text in mrkdwn_texts(posts) + [post.text for post in posts]:
        assert "evil" not in text, text
        assert mrkdwn_problems(text) == []
    links = re.findall(r"<(https?://[^|>]+)", " ".join(mrkdwn_texts(posts)))
    assert {urlsplit(url).hostname for url in links} <= ALLOWED_HOSTS


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_model_text_is_inert_in_email(text: str) -> None:
    d = hostile_digest(text)
    assert_inert_email(d)
    assert_inert_email(replace(d, subscriber=replace(d.subscriber, language=None)))
    html = render_digest(d, SETTINGS).html
    if text.startswith("<script>"):
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    if text.startswith("<a href"):
        assert '&lt;a href="https://evil.example/x"&gt;click&lt;/a&gt;' in html


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_model_text_is_inert_in_slack(text: str) -> None:
    d = hostile_digest(text)
    assert_inert_slack(d)
    posts = build_posts(replace(d, channel="slack"))
    shown = " ".join(plain_texts(posts))
    if "*bold*" in text:  # plain text: shown as written, never formatted
        assert "*bold* _it_ ~strike~ `code` > quote" in shown
    if text.startswith("<https://evil"):
        assert "<https://evil.example|click>" in shown


@pytest.mark.parametrize("field", ["summary", "title", "text"])
def test_a_link_a_models_tex_makes_is_not_shown(field: str) -> None:
    """A model's text keeps its TeX (shown as letters, as titles are): `evil{}.com` and
    `$www$.evil.xyz` pass the answer's link check, and are links once shown as letters."""
    hidden = "Read evil{}.com, $www$.evil.xyz or mail me{}@evil.org today."
    texts = {"2411.00001": replace(PaperTexts(summary_by=MODEL, language="zh"), **{field: hidden})}
    d = digest(texts, summaries=True, language="zh", abstracts="full", count=1)
    text, html = html_text(build_message(d, SETTINGS, now=NOW))
    slack = " ".join(plain_texts(build_posts(replace(d, channel="slack"))))
    for shown in (text, html, slack):
        assert "Read" in shown
        assert not re.search(r"evil|www\.(?!w3\.org)", shown)  # the HTML's own xmlns


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1, max_size=400))
@example("<https://evil.example|x>")
@example("\u202e<b>")
def test_any_model_text_is_inert(text: str) -> None:
    d = hostile_digest(text)
    assert_inert_email(d)
    assert_inert_slack(d)
