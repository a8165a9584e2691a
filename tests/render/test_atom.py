"""The Atom feed as rendered (`bot.render.atom`), on the real papers of 28 Nov 2024 and on
hostile text: valid against RFC 4287's RELAX NG schema, read back by feedparser as written,
TeX as letters, markup as text, stable ids, the same bytes for the same papers."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.atom import atom_problems, parsed_feed

from bot.core.models import Paper
from bot.render.atom import MAX_AUTHORS, FeedEntry, FeedInfo, entry_id, render_feed

SITE = "https://papers.lab.example"
T0 = datetime(2024, 11, 28, 9, 0, tzinfo=UTC)
INFO = FeedInfo(
    id="urn:uuid:7f6e3a52-0d5c-5b8e-9a39-1b1d2c3e4f50",
    title="paperbell: papers for ada",
    self_url=f"{SITE}/feed/7.abc.atom",
    author="paperbell",
    updated=T0,
)


def entries(papers: tuple[Paper, ...]) -> list[FeedEntry]:
    """Newest first: paper n was sent n hours before the last one."""
    last = T0 + timedelta(days=1)
    return [FeedEntry(p, T0, last - timedelta(hours=n)) for n, p in enumerate(papers)]


def test_real_papers_make_a_valid_feed_read_back_as_written(
    full_feed_papers: tuple[Paper, ...],
) -> None:
    papers = full_feed_papers[:200]
    body = render_feed(INFO, entries(papers), site=SITE)
    assert body.startswith(b"<?xml version='1.0' encoding='UTF-8'?>")
    feed = parsed_feed(body)
    assert feed.feed.title == INFO.title and feed.feed.id == INFO.id
    assert [link.href for link in feed.feed.links if link.rel == "self"] == [INFO.self_url]
    assert len(feed.entries) == 200
    for paper, entry in zip(papers, feed.entries, strict=True):
        assert entry.id == entry_id(SITE, paper)
        assert entry.link == f"https://arxiv.org/abs/{paper.id}"
        assert len(entry.links) == 1  # one alternate link (see bot.render.atom)
        assert "$" not in entry.title or "$" in paper.title.replace("\\$", "")
        assert entry.summary_detail.type == "text/plain"
    assert feed.entries[0].updated_parsed > feed.entries[1].updated_parsed  # newest first
    assert feed.feed.updated == "2024-11-29T09:00:00+00:00"


def test_tex_shows_as_letters_and_markup_as_text(full_feed_papers: tuple[Paper, ...]) -> None:
    paper = replace(
        full_feed_papers[0],
        title=r"Schr\"odinger cats & <b>bold</b> $\alpha$-stable laws",
        abstract='We show <script>alert("x")</script> that M<7 & N>2 \x0b\x1b holds.',
        authors=("R\\'emy Dupont", " Ada Lovelace (Lab & Co)"),
    )
    body = render_feed(INFO, entries((paper,)), site=SITE)
    assert b"<script" not in body and b"<b>" not in body
    [entry] = parsed_feed(body).entries
    assert entry.title == "Schrödinger cats & <b>bold</b> α-stable laws"
    assert entry.summary == 'We show <script>alert("x")</script> that M<7 & N>2 holds.'
    assert [a.name for a in entry.authors] == ["Rémy Dupont", "Ada Lovelace (Lab & Co)"]
    assert [t.term for t in entry.tags] == list(paper.categories)


def test_ids_are_stable_and_the_same_papers_give_the_same_bytes(
    full_feed_papers: tuple[Paper, ...],
) -> None:
    papers = full_feed_papers[:5]
    first = render_feed(INFO, entries(papers), site=SITE)
    assert render_feed(INFO, entries(papers), site=SITE) == first
    v2 = replace(papers[0], version=papers[0].version + 1)
    assert entry_id(SITE, v2) == entry_id(SITE, papers[0])  # a new version updates the entry
    assert entry_id(SITE, papers[0]) != entry_id("https://other.example", papers[0])


def test_an_empty_feed_is_valid_and_dated_by_its_info() -> None:
    feed = parsed_feed(render_feed(INFO, [], site=SITE))
    assert feed.entries == [] and feed.feed.updated == "2024-11-28T09:00:00+00:00"


def test_a_collaboration_is_counted_and_a_paper_without_a_page_gets_content(
    full_feed_papers: tuple[Paper, ...],
) -> None:
    crowd = replace(full_feed_papers[0], authors=tuple(f"Author {n}" for n in range(2914)))
    odd = replace(
        full_feed_papers[1], id="url:javascript:alert(1)", link="javascript:alert(1)", authors=()
    )
    body = render_feed(INFO, entries((crowd, odd)), site=SITE)
    first, second = parsed_feed(body).entries
    assert len(first.authors) == MAX_AUTHORS
    assert first.authors[-1].name == "et al. (2914 authors)"
    assert b"javascript:" not in body.replace(b"url:javascript:alert(1)", b"")
    assert not second.get("links")
    assert second.content[0].value  # RFC 4287: no alternate link, so content


def test_the_validator_refuses_what_is_not_atom() -> None:
    body = render_feed(INFO, [], site=SITE)
    assert atom_problems(body.replace(b"<id>", b"<ident>").replace(b"</id>", b"</ident>"))
    no_author = body.replace(b"<author>\n    <name>paperbell</name>\n  </author>\n", b"")
    assert no_author != body and atom_problems(no_author) == []  # no entries: no author needed


@settings(max_examples=60)
@given(st.text(), st.text(), st.lists(st.text(), max_size=4))
def test_any_text_makes_a_valid_feed(title: str, abstract: str, authors: list[str]) -> None:
    paper = Paper(
        id="2411.00001",
        version=1,
        title=title,
        abstract=abstract,
        authors=tuple(authors),
        categories=("cs.LG",),
    )
    body = render_feed(INFO, entries((paper,)), site=SITE)
    assert atom_problems(body) == []


RUNAWAY = "word " * 40_000  # 200,000 characters: a broken or hostile feed's field
RUNAWAY_FIELDS: dict[str, dict[str, object]] = {
    "title": {"title": RUNAWAY},
    "abstract": {"abstract": RUNAWAY},
    "an author": {"authors": (RUNAWAY, "Ada Lovelace")},
    "a category": {"categories": ("cs.LG", RUNAWAY)},
    "categories": {"categories": tuple(f"cs.X{n}" for n in range(20_000))},
}


@pytest.mark.parametrize("fields", RUNAWAY_FIELDS.values(), ids=RUNAWAY_FIELDS.keys())
def test_a_paper_with_a_runaway_field_is_cut_in_the_feed(
    full_feed_papers: tuple[Paper, ...], fields: dict[str, object]
) -> None:
    """The feed shows such a paper cut, as a digest does: whole, it would stay in the
    subscriber's feed for its last 200 papers, megabytes at each poll."""
    runaway = replace(full_feed_papers[0], **fields)  # type: ignore[arg-type]
    body = render_feed(INFO, entries((runaway, full_feed_papers[1])), site=SITE)
    assert len(body) < 30_000, len(body)
    assert atom_problems(body) == []
    first, second = parsed_feed(body).entries
    assert first.title and first.summary and second.title == full_feed_papers[1].title
