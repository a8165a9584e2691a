"""The Slack renderer on real papers: Block Kit limits, splitting, summary, escaping, notes."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from bot.core.models import Digest, DigestGroup, DigestItem, Paper, Subscriber
from bot.demo import bundled_papers
from bot.match.digest import RuleMatches, build_digest, match_rules, note_digest
from bot.render.mrkdwn import escape_mrkdwn, link, shorten
from bot.render.slack import (
    ABSTRACT_CHARS,
    SLACK_LIMITS,
    SlackLimits,
    SlackMessage,
    build_posts,
)
from bot.render.tex import letters
from bot.rules import parse_rule

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
RULES = ("robot", "quantum", "learning")  # 264 papers of the bundled listing
TITLE_RE = re.compile(r"^\*(\d+)\. <https://arxiv\.org/abs/([^|>]+)\|")
TOP_RE = re.compile(r"^\u2022 (\d+)\. <https://arxiv\.org/abs/([^|>]+)\|", re.MULTILINE)


@pytest.fixture(scope="module")
def papers() -> tuple[Paper, ...]:
    return tuple(bundled_papers())


def subscriber(max_papers: int = 50, rules: tuple[str, ...] = RULES) -> Subscriber:
    return Subscriber(name="ada", email=None, rules=rules, max_papers=max_papers)


@functools.cache
def rule_matches(papers: tuple[Paper, ...]) -> RuleMatches:
    """The rules matched against the listing once: each digest below only selects and caps."""
    return match_rules([parse_rule(r) for r in RULES], papers)


def real_digest(papers: tuple[Paper, ...], max_papers: int) -> Digest:
    """A digest as the pipeline builds it, on the real bundled listing."""
    s = subscriber(max_papers)
    rules = [parse_rule(r) for r in s.rules]
    matches = rule_matches(papers)
    digest = build_digest(s, rules, papers, delivered={}, now=NOW, matches=matches)
    assert digest is not None
    return digest


def hand_digest(*items: DigestItem, rule: str = "robot", **changes: Any) -> Digest:
    """A digest of the given items under one rule, built by hand (for odd papers)."""
    base = Digest(
        subscriber=subscriber(),
        digest_id="d-test",
        created=NOW,
        groups=(DigestGroup(rule=rule, items=items),),
        announced=(date(2024, 11, 28),),
    )
    return replace(base, **changes)


# -- checking what Slack accepts, counted here and not with the module's own helpers --------


def texts(value: Any) -> list[str]:
    """Every text object's text in a block (or list of blocks)."""
    if isinstance(value, dict):
        if value.get("type") in ("plain_text", "mrkdwn"):
            return [value["text"]]
        return [t for v in value.values() for t in texts(v)]
    if isinstance(value, list | tuple):
        return [t for v in value for t in texts(v)]
    return []


def check_limits(message: SlackMessage) -> None:
    """Every limit Slack sets on a message, and a margin under the 13k total."""
    payload = message.to_dict()
    assert json.loads(json.dumps(payload)) == payload  # JSON-ready
    assert message.text.strip(), "the fallback text is always set"
    assert len(message.text) <= 3000
    blocks = payload["blocks"]
    assert 1 <= len(blocks) <= 50
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None
        parsed.validate_json()
        assert parsed.to_dict() == block
        if block["type"] == "header":
            assert block["text"]["type"] == "plain_text"
            assert 0 < len(block["text"]["text"]) <= 150
        elif block["type"] == "section":
            assert 0 < len(block["text"]["text"]) <= 3000
        elif block["type"] == "context":
            assert 1 <= len(block["elements"]) <= 10
            assert all(0 < len(e["text"]) <= 3000 for e in block["elements"])
        else:
            assert block["type"] == "divider"
    total = sum(len(t) for t in texts(blocks))
    assert total <= SLACK_LIMITS.text_budget < 13_000


def thread_papers(posts: list[SlackMessage]) -> list[tuple[int, str]]:
    """(number, paper id) of every paper title in the thread messages, in order."""
    found = []
    for message in posts[1:]:
        for block in message.blocks:
            if block["type"] == "section" and (m := TITLE_RE.match(block["text"]["text"])):
                found.append((int(m.group(1)), m.group(2)))
    return found


def paper_blocks(message: SlackMessage, paper_id: str) -> list[dict[str, Any]]:
    """The blocks of one paper: from its title to the next divider, title or message end."""
    blocks = list(message.blocks)
    start = next(n for n, b in enumerate(blocks) if (m := _title_match(b)) and m[2] == paper_id)
    end = start + 1
    while end < len(blocks) and blocks[end]["type"] != "divider" and not _title_match(blocks[end]):
        end += 1
    return blocks[start:end]


def _title_match(block: dict[str, Any]) -> re.Match[str] | None:
    return TITLE_RE.match(block["text"]["text"]) if block["type"] == "section" else None


# -- splitting on real digests ------------------------------------------------------------


@pytest.mark.parametrize(("size", "threads"), [(1, 1), (12, 1), (60, 4), (200, 13)])
def test_real_digest_splits_within_every_limit(
    papers: tuple[Paper, ...], size: int, threads: int
) -> None:
    digest = real_digest(papers, size)
    assert digest.count == size
    posts = build_posts(digest)
    for message in posts:
        check_limits(message)
    # Every paper once, in digest order, numbered 1..n across the thread.
    expected = [(n, item.paper.id) for n, item in enumerate(digest.items, start=1)]
    assert thread_papers(posts) == expected
    assert len(posts) == 1 + threads
    # Greedy: a thread message is only closed when the next paper would not fit.
    for message in posts[1:-1]:
        total = sum(len(t) for t in texts(list(message.blocks)))
        assert len(message.blocks) + 6 > 50 or total + 3000 > SLACK_LIMITS.text_budget
    # Each thread message says which papers it holds.
    for message in posts[1:]:
        numbers = [int(m.group(1)) for b in message.blocks if (m := _title_match(b))]
        first, last = numbers[0], numbers[-1]
        span = f"Paper {first}" if first == last else f"Papers {first}\u2013{last}"
        assert message.text == f"{span} of {size}"


@pytest.mark.parametrize(
    "limits",
    [SlackLimits(blocks=12), SlackLimits(text_budget=2500), SlackLimits(blocks=6)],
    ids=["few-blocks", "little-text", "one-paper-a-message"],
)
def test_tighter_limits_split_finer(papers: tuple[Paper, ...], limits: SlackLimits) -> None:
    digest = real_digest(papers, 60)
    posts = build_posts(digest, limits=limits)
    expected = [(n, item.paper.id) for n, item in enumerate(digest.items, start=1)]
    assert thread_papers(posts) == expected
    for message in posts[1:]:
        assert len(message.blocks) <= limits.blocks
        assert sum(len(t) for t in texts(list(message.blocks))) <= limits.text_budget


def test_groups_have_headings_and_every_message_opens_with_one(
    papers: tuple[Paper, ...],
) -> None:
    digest = real_digest(papers, 200)
    posts = build_posts(digest)
    headings = [
        b["text"]["text"]
        for message in posts[1:]
        for b in message.blocks
        if b["type"] == "section" and re.fullmatch(r"\*\w+\* · \d+ papers.*", b["text"]["text"])
    ]
    firsts = [f"*{g.rule}* \u00b7 {len(g.items)} papers" for g in digest.groups]
    assert [h for h in headings if not h.endswith("(continued)")] == firsts
    for message in posts[1:]:
        assert message.blocks[0]["text"]["text"] in headings
        assert message.blocks[-1]["type"] != "divider"
    for message in posts[2:]:
        opening = message.blocks[0]["text"]["text"]
        if opening not in firsts:
            assert opening.endswith(" papers (continued)")


def test_output_is_deterministic(papers: tuple[Paper, ...]) -> None:
    digest = real_digest(papers, 60)
    first = [m.to_dict() for m in build_posts(digest)]
    again = [m.to_dict() for m in build_posts(real_digest(papers, 60))]
    assert json.dumps(first) == json.dumps(again)


# -- the summary --------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 12, 200])
def test_summary_content(papers: tuple[Paper, ...], size: int) -> None:
    digest = real_digest(papers, size)
    summary = build_posts(digest)[0]
    header, counts, top, context = summary.blocks
    noun = "paper" if size == 1 else "papers"
    assert header["type"] == "header"
    assert header["text"]["text"] == f"{size} new {noun} for you \u2014 Thu 28 Nov 2024"
    rules = ", ".join(digest.rules)  # plain words: no code spans
    groups = len(digest.groups)
    matched = f"{size} {noun} matched {groups} rule{'s' if groups > 1 else ''}: {rules}."
    assert counts["text"]["text"] == matched
    # The best papers by score, at most five, each linked to its abstract page, in the
    # thread's order with its numbers: they run upwards, as the thread does.
    numbered = list(enumerate(digest.items, start=1))
    best = sorted(sorted(numbered, key=lambda pair: (-pair[1].score, pair[0]))[:5])
    shown = [(int(n), i) for n, i in TOP_RE.findall(top["text"]["text"])]
    assert shown == [(n, item.paper.id) for n, item in best]
    assert [n for n, _ in shown] == sorted(n for n, _ in shown)
    for _, item in best:
        assert link(item.paper.abs_url, item.paper.title) in top["text"]["text"]
    notes = [e["text"] for e in context["elements"]]
    assert notes[0] == "The papers are in the thread \u2193"
    left = len(digest.omitted)
    assert left == 264 - size
    best_of = f"The best {size} of the 264 papers" if size > 1 else "The best of the 264 papers"
    verb = "are" if size > 1 else "is"
    assert notes[1] == f"{best_of} that matched your rules {verb} here."
    rule_list = ", ".join(digest.rules)  # the fallback: each rule as itself, no quotes added
    assert summary.text == escape_mrkdwn(shorten(f"{header['text']['text']}: {rule_list}", 300))


def test_a_labelled_rule_is_shown_by_its_label_and_others_in_words(
    papers: tuple[Paper, ...],
) -> None:
    digest = real_digest(papers, 12)
    first, *others = digest.rules
    labels = {first: "Robots *and* <friends>"}
    digest = replace(digest, subscriber=replace(digest.subscriber, labels=labels))
    summary, *thread = build_posts(digest)
    shown = "Robots \u2217and\u2217 &lt;friends&gt;"
    counts = summary.blocks[1]["text"]["text"]
    assert counts.startswith(f"12 papers matched {len(digest.groups)} rules: {shown}, ")
    assert first not in counts and all(f", {rule}" in counts for rule in others)
    assert "`" not in counts
    assert summary.text.startswith(
        escape_mrkdwn(f"12 new papers for you \u2014 Thu 28 Nov 2024: {labels[first]}, ")
    )
    opening = thread[0].blocks[0]["text"]["text"]
    assert opening.startswith(f"*{shown}* \u00b7 ")
    # A paper's rule is its group's heading: no "Matched" line on every paper.
    said = json.dumps([m.to_dict() for m in thread])
    assert "Matched" not in said and "`" not in said


def test_summary_without_omitted_papers_points_at_the_thread(
    papers: tuple[Paper, ...],
) -> None:
    digest = replace(real_digest(papers, 12), omitted=())
    context = build_posts(digest)[0].blocks[-1]
    assert [e["text"] for e in context["elements"]] == ["The papers are in the thread \u2193"]


@pytest.mark.parametrize(
    ("days", "when"),
    [
        ((date(2024, 11, 28),), " \u2014 Thu 28 Nov 2024"),
        ((date(2024, 11, 28), date(2024, 11, 25)), " \u2014 Mon 25 \u2013 Thu 28 Nov 2024"),
        ((date(2024, 11, 29), date(2024, 12, 2)), " \u2014 Fri 29 Nov \u2013 Mon 2 Dec 2024"),
        ((date(2024, 12, 30), date(2025, 1, 2)), " \u2014 Mon 30 Dec 2024 \u2013 Thu 2 Jan 2025"),
        ((), ""),
    ],
)
def test_header_dates(papers: tuple[Paper, ...], days: tuple[date, ...], when: str) -> None:
    digest = replace(real_digest(papers, 12), announced=days)
    assert build_posts(digest)[0].blocks[0]["text"]["text"] == f"12 new papers for you{when}"


def test_many_long_rules_stay_within_the_summary(papers: tuple[Paper, ...]) -> None:
    digest = real_digest(papers, 60)
    item = digest.items[0]
    rules = tuple(f"rule {n} " + "<&>" * 400 for n in range(40))
    groups = tuple(DigestGroup(rule=rule, items=(item,)) for rule in rules)
    posts = build_posts(replace(digest, groups=groups))
    for message in posts:
        check_limits(message)
    counts = posts[0].blocks[1]["text"]["text"]
    assert counts.startswith("40 papers matched 40 rules: rule 0 &lt;&amp;&gt;")
    assert re.search(r" \(\+\d+ more\)\.$", counts)


# -- a paper as odd as a paper gets -------------------------------------------------------

EVIL_WORDS = "Bridges <b>&</b> *not bold* _nor italic_ a|b ~x~ `c` $x<y$ <!channel> "
EVIL_TITLE = (EVIL_WORDS * 80)[:5000]


def odd_paper(base: Paper, kind: str) -> Paper:
    changes: dict[str, Any] = {}
    if kind in ("title", "all"):
        changes["title"] = EVIL_TITLE
    if kind in ("abstract", "all"):
        changes["abstract"] = ("A & B < C > D " + "word " * 10)[:100] * 100
    if kind in ("authors", "all"):
        changes["authors"] = tuple(f"Author {n} <{n}@x> & co" for n in range(2000))
    if kind in ("categories", "all"):
        changes["categories"] = tuple(f"cs.X{n}" for n in range(500))
        changes["announce_type"] = "replace-cross"
        changes["version"] = 7
    if kind == "empty":
        changes.update(title="", abstract="", authors=(), categories=())
    return replace(base, **changes)


@pytest.mark.parametrize("kind", ["title", "abstract", "authors", "categories", "all", "empty"])
@pytest.mark.parametrize("count", [1, 40])
def test_pathological_papers_still_fit(papers: tuple[Paper, ...], kind: str, count: int) -> None:
    items = tuple(
        DigestItem(paper=odd_paper(p, kind), rules=("robot", "x" * 5000), hits=())
        for p in papers[:count]
    )
    digest = hand_digest(*items, rule="<&>" * 2000)
    posts = build_posts(digest)
    for message in posts:
        check_limits(message)
    assert [pid for _, pid in thread_papers(posts)] == [i.paper.id for i in items]
    blocks = paper_blocks(posts[1], items[0].paper.id)
    title = blocks[0]["text"]["text"]
    if kind in ("title", "all"):
        label = title.partition("|")[2]
        assert "&lt;b&gt;&amp;&lt;/b&gt;" in label and "&lt;!channel&gt;" in label
        assert not re.search(r"[*_~`|<]", label.removesuffix(">*"))
        assert label.endswith("\u2026>*")
    if kind in ("abstract", "all"):
        abstract = blocks[1]["text"]
        assert abstract["type"] == "plain_text"
        assert abstract["text"].startswith("A & B < C > D ")  # plain text: not escaped
        assert len(abstract["text"]) <= ABSTRACT_CHARS
        assert abstract["text"].endswith("\u2026")
    if kind in ("authors", "all"):
        authors = blocks[-1]["elements"][0]
        assert authors == {
            "type": "plain_text",
            "text": "Author 0 <0@x> & co, Author 1 <1@x> & co, Author 2 <2@x> & co "
            "et al. (2000 authors)",
            "emoji": False,
        }
    if kind in ("categories", "all"):
        described = blocks[-1]["elements"][-2]["text"]
        assert described.startswith("cs.X0; cs.X1; ")  # codes arXiv does not list
        assert described.endswith(" \u00b7 cross-list from cs.X0 \u00b7 updated: v7")
    if kind == "empty":
        assert title == f"*1. <{items[0].paper.abs_url}|{items[0].paper.versioned_id}>*"


def journal_paper(base: Paper, number: int, size: int) -> Paper:
    """A paper of a journal's feed: its link its page, with the tracking parameters such
    links carry (each `&` is five characters once escaped), `size` characters long."""
    link = f"https://journal.example/doi/full/10.1000/{number}?"
    link = (link + "utm_source=rss&utm_medium=feed&" * (size // 30))[:size]
    return replace(base, id=f"url:https://journal.example/{number}", link=link)


@pytest.mark.parametrize("size", [450, 1200, 2000])
def test_papers_with_long_links_still_fit(papers: tuple[Paper, ...], size: int) -> None:
    """Links as long as a journal's feed gives (up to the 2048 characters of a URL) never
    push a block over its limit: the digest is posted, each title shown, linked or not."""
    items = tuple(
        DigestItem(paper=journal_paper(p, n, size), rules=("robot",), hits=())
        for n, p in enumerate(papers[:6], 1)
    )
    code = "https://github.com/lab/code?" + "a=1&" * (size // 4)
    items = (replace(items[0], paper=replace(items[0].paper, github=code[:size])), *items[1:])
    posts = build_posts(hand_digest(*items))
    for message in posts:
        check_limits(message)
    titles = [
        b["text"]["text"]
        for message in posts[1:]
        for b in message.blocks
        if b["type"] == "section" and re.match(r"^\*\d+\. ", b["text"]["text"])
    ]
    assert len(titles) == len(items)
    top = posts[0].blocks[2]["text"]["text"].splitlines()
    assert len(top) == 5 and all(line.startswith("\u2022 ") for line in top)


# -- escaping on real titles --------------------------------------------------------------


def test_real_titles_with_markup_characters_are_escaped(papers: tuple[Paper, ...]) -> None:
    odd = [p for p in papers if re.search(r"[<>&*_~`|]", p.title)]
    assert len(odd) >= 30, "the bundled listing has TeX and ampersands in titles"
    digest = hand_digest(*(DigestItem(paper=p, rules=("robot",), hits=()) for p in odd))
    posts = build_posts(digest)
    for message in posts:
        check_limits(message)
    titles = [
        b["text"]["text"]
        for message in posts[1:]
        for b in message.blocks
        if _title_match(b) is not None
    ]
    assert len(titles) == len(odd)
    for paper, title in zip(odd, titles, strict=True):
        label = title.partition("|")[2].removesuffix(">*")
        assert not re.search(r"[<>*_~`|]", label), label
        looks_alike = str.maketrans("\u2217\u02cd\u223c\u02cb\u2223", "*_~`|")
        shown = label.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        expected = " ".join(letters(paper.title).split())  # TeX as letters, as in email
        assert shown.translate(looks_alike) == expected.translate(looks_alike)


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("plain", "plain"),
        ("a & b", "a &amp; b"),
        ("$x<y$ and $y>z$", "$x&lt;y$ and $y&gt;z$"),
        (
            "<!channel> <@U123> <https://evil.example|click>",
            "&lt;!channel&gt; &lt;@U123&gt; &lt;https://evil.example|click&gt;",
        ),
        ("&amp; stays visible", "&amp;amp; stays visible"),
        ("*bold* _it_ ~s~", "*bold* _it_ ~s~"),
    ],
)
def test_escape_mrkdwn(text: str, escaped: str) -> None:
    assert escape_mrkdwn(text) == escaped


@pytest.mark.parametrize(
    ("url", "label", "expected"),
    [
        ("https://arxiv.org/abs/2411.17700", "PDF", "<https://arxiv.org/abs/2411.17700|PDF>"),
        ("https://x.example/a", "a|b>c<d&e", "<https://x.example/a|a\u2223b&gt;c&lt;d&amp;e>"),
        (
            "https://x.example/a",
            "*b* _i_ ~s~ `c`",
            "<https://x.example/a|\u2217b\u2217 \u02cdi\u02cd \u223cs\u223c \u02cbc\u02cb>",
        ),
        ("https://x.example/a|c}d", "x", "<https://x.example/a%7Cc%7Dd|x>"),
        # Not a plain http(s) URL (bot.core.links.web_url): the label alone, no link.
        ("https://x.example/a b>d", "x", "x"),
        ("javascript:alert(1)", "Title", "Title"),
        ("data:text/html,<script>alert(1)</script>", "a|b", "a\u2223b"),
        ("https://x.example/?a=1&b=2", "q", "<https://x.example/?a=1&amp;b=2|q>"),
        ("https://x.example/", "two\nlines", "<https://x.example/|two lines>"),
        ("https://x.example/", "  ", "<https://x.example/>"),
    ],
)
def test_link(url: str, label: str, expected: str) -> None:
    assert link(url, label) == expected


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short enough", 20, "short enough"),
        ("cut at a word boundary please", 20, "cut at a word\u2026"),
        ("x" * 50, 10, "x" * 9 + "\u2026"),
        ("trailing, punctuation; goes away", 23, "trailing, punctuation\u2026"),
        ("spaces\n\n  tidied   here", 100, "spaces tidied here"),
        ("anything", 1, "\u2026"),
        ("anything", 0, ""),
    ],
)
def test_shorten(text: str, limit: int, expected: str) -> None:
    assert shorten(text, limit) == expected
    assert len(shorten(text, limit)) <= limit


# -- notes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("note", "shown"),
    [
        (
            "No arXiv announcement for Thursday 28 November 2024 (Thanksgiving).",
            "No arXiv announcement for Thursday 28 November 2024 (Thanksgiving).",
        ),
        ("Nothing matched <your> rules & more", "Nothing matched <your> rules & more"),
        ("x " * 3000, None),
        (None, "No new papers matched your rules."),
    ],
)
def test_note_digest_is_one_message(note: str | None, shown: str | None) -> None:
    digest = note_digest(subscriber(), note or "", period="2024-11-28", now=NOW)
    digest = replace(digest, note=note)
    posts = build_posts(digest)
    assert len(posts) == 1
    message = posts[0]
    check_limits(message)
    (block,) = message.blocks
    assert block["type"] == "section" and block["text"]["type"] == "plain_text"
    if shown is not None:
        assert block["text"]["text"] == shown
        assert message.text == escape_mrkdwn(shown)
    else:
        assert block["text"]["text"].endswith("\u2026")
        assert len(message.text) <= 300


def test_a_note_beside_papers_goes_in_the_summary(papers: tuple[Paper, ...]) -> None:
    digest = replace(real_digest(papers, 12), note="Also: arXiv was late & <slow>.")
    context = build_posts(digest)[0].blocks[-1]
    assert context["elements"][-1]["text"] == "Also: arXiv was late &amp; &lt;slow&gt;."


# -- links: one per destination -----------------------------------------------------------


def test_a_paper_links_each_destination_once(papers: tuple[Paper, ...]) -> None:
    """The title goes to the abstract page, its only link there; beside it Hugging Face's
    upvotes (▲ 7) linked to its page there; on the quiet line the PDF and the code, each
    once; no "Abstract", HTML or DOI link (the abstract page has them)."""
    paper = replace(
        next(p for p in papers if p.dois),
        github="https://github.com/lab/code",
        github_stars=12,
        upvotes=7,
        hf_rank=2,
    )
    digest = hand_digest(DigestItem(paper=paper, rules=("robot",), hits=()))
    posts = build_posts(digest)
    blocks = paper_blocks(posts[1], paper.id)
    shown = json.dumps(blocks)
    urls = re.findall(r"<(https://[^|>]+)\|", shown)
    assert urls.count(paper.abs_url) == 1 and len(urls) == len(set(urls))
    links = blocks[-1]["elements"][-1]["text"]
    assert f"<{paper.pdf_url}|PDF>" in links
    assert "<https://github.com/lab/code|Code>" in links
    assert f"<{paper.hf_url}|\u25b2 7>" in blocks[0]["text"]["text"]  # link() tidies
    assert "|DOI>" not in shown and "Hugging Face" not in shown
    assert "|Abstract>" not in shown and "arxiv.org/html/" not in shown


@pytest.mark.parametrize("size", [1, 12])
def test_the_summary_speaks_to_its_reader(papers: tuple[Paper, ...], size: int) -> None:
    """No configuration key or operator in what a channel reads."""
    posts = build_posts(real_digest(papers, size))
    words = " ".join(texts([post.to_dict()["blocks"] for post in posts]))
    words = re.sub(r"<https?://[^>]+>", " ", words)
    assert "max_papers" not in words and "operator" not in words and " = " not in words
