"""The email renderer: MIME structure, headers, escaping, highlighting and wording."""

from __future__ import annotations

import email
import email.policy
import html as html_module
import pickle
import re
import time
from dataclasses import replace
from datetime import date, timedelta, timezone
from email.message import EmailMessage
from html.parser import HTMLParser

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from support.digests import NOW, hits_for, make_paper, sample_digest

from bot.core.models import Digest, DigestGroup, DigestItem
from bot.match.digest import note_digest
from bot.render import template_env, templates_dir
from bot.render.email import (
    ACKNOWLEDGEMENT,
    DigestLinks,
    EmailSettings,
    RenderedEmail,
    VoteLinks,
    check_address,
    render_digest,
    subject_line,
)
from bot.render.message import build_message, build_message_bytes
from bot.render.text import (
    SHORT_SLACK,
    excerpt,
    highlight,
    highlight_segments,
    numbered,
    shorten_authors,
    star_marks,
    tidy,
    wrap,
)
from bot.render.view import SHORT_CHARS, group_views

SETTINGS = EmailSettings(
    from_addr="digest@bell.example.org", unsubscribe_mailto="off@bell.example.org"
)


def one_paper_digest() -> Digest:
    digest = sample_digest()
    first = digest.groups[0]
    return replace(digest, groups=(replace(first, items=first.items[:1]),), omitted=())


def parse(msg: EmailMessage) -> EmailMessage:
    parsed = email.message_from_bytes(msg.as_bytes(), policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


def parts(msg: EmailMessage) -> tuple[str, str]:
    """The decoded text and HTML bodies of a parsed message."""
    parsed = parse(msg)
    plain, html = list(parsed.iter_parts())
    return plain.get_content().replace("\r\n", "\n"), html.get_content().replace("\r\n", "\n")


@pytest.fixture(scope="module")
def message() -> EmailMessage:
    return build_message(sample_digest(), SETTINGS, now=NOW)


@pytest.fixture(scope="module")
def html(message: EmailMessage) -> str:
    return parts(message)[1]


@pytest.fixture(scope="module")
def text(message: EmailMessage) -> str:
    return parts(message)[0]


# -- templates and environment -----------------------------------------------------------


def test_templates_found_and_env_is_shared() -> None:
    assert (templates_dir() / "email" / "digest.html.j2").is_file()
    assert template_env() is template_env()
    assert template_env().get_template("email/digest.html.j2").environment.autoescape


# -- MIME structure and headers -------------------------------------------------------


def test_mime_structure_text_first_html_last(message: EmailMessage) -> None:
    parsed = parse(message)
    assert parsed.get_content_type() == "multipart/alternative"
    kinds = [part.get_content_type() for part in parsed.iter_parts()]
    assert kinds == ["text/plain", "text/html"]
    for part in parsed.iter_parts():
        assert part.get_content_charset() == "utf-8"


def test_crlf_line_endings(message: EmailMessage) -> None:
    raw = message.as_bytes()
    assert b"\r\n" in raw
    assert re.search(rb"[^\r]\n", raw) is None


def test_headers(message: EmailMessage) -> None:
    parsed = parse(message)
    assert parsed["From"] == "paperbell <digest@bell.example.org>"
    assert parsed["To"] == "alice@uni.example.edu"
    assert parsed["Date"] == "Thu, 28 Nov 2024 06:30:00 +0000"
    assert parsed["Message-ID"] == "<d-2024-11-28-alice-3f9a@bell.example.org>"
    assert parsed["List-Id"] == "paperbell digest <paperbell-digest.bell.example.org>"
    assert parsed["List-Unsubscribe"] == "<mailto:off@bell.example.org?subject=unsubscribe%20alice>"
    assert "List-Unsubscribe-Post" not in parsed
    assert parsed["Auto-Submitted"] == "auto-generated"
    assert parsed["X-Auto-Response-Suppress"] == "All"
    assert parsed["MIME-Version"] == "1.0"


def test_message_id_stable_for_same_digest() -> None:
    first = build_message(sample_digest(), SETTINGS, now=NOW)
    later = build_message(sample_digest(), SETTINGS, now=NOW + timedelta(hours=5))
    assert first["Message-ID"] == later["Message-ID"]
    other = build_message(sample_digest(digest_id="another-id"), SETTINGS, now=NOW)
    assert other["Message-ID"] != first["Message-ID"]


def test_same_digest_gives_the_same_bytes() -> None:
    first = build_message(sample_digest(), SETTINGS, now=NOW).as_bytes()
    assert first == build_message(sample_digest(), SETTINGS, now=NOW).as_bytes()
    assert b'boundary="=_paperbell_' in first  # "=_" is never in a QP body
    # From the headers: another digest (its own Message-ID) has its own boundary.
    other = build_message(sample_digest(digest_id="another-id"), SETTINGS, now=NOW).as_bytes()
    assert first.split(b"boundary=", 1)[1][:40] != other.split(b"boundary=", 1)[1][:40]


def test_date_keeps_the_offset() -> None:
    eastern = NOW.astimezone(timezone(timedelta(hours=-5)))
    msg = build_message(sample_digest(), SETTINGS, now=eastern)
    assert msg["Date"] == "Thu, 28 Nov 2024 01:30:00 -0500"


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone"):
        build_message(sample_digest(), SETTINGS, now=NOW.replace(tzinfo=None))


def test_unsubscribe_defaults_to_from_addr_and_quotes_the_name() -> None:
    subscriber = replace(sample_digest().subscriber, name="Zoë B")
    msg = build_message(
        sample_digest(subscriber=subscriber), EmailSettings(from_addr="a@b.example"), now=NOW
    )
    assert msg["List-Unsubscribe"] == "<mailto:a@b.example?subject=unsubscribe%20Zo%C3%AB%20B>"


def test_one_click_unsubscribe_url() -> None:
    url = "https://bell.example.org/unsubscribe/tok3n"
    msg = parse(
        build_message(sample_digest(), SETTINGS, now=NOW, links=DigestLinks(unsubscribe=url))
    )
    assert msg["List-Unsubscribe"] == (
        f"<{url}>, <mailto:off@bell.example.org?subject=unsubscribe%20alice>"
    )
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    text, html = parts(msg)
    assert url in text
    assert f'href="{url}"' in html


def test_a_long_one_click_url_is_folded_between_entries_never_encoded() -> None:
    """A real signed URL is longer than a header line: it stays one URL in angle brackets
    (the header folded after its comma), never RFC 2047 encoded words, which no mail app
    reads as a link (Gmail's and Yahoo's one-click unsubscribe would be lost)."""
    token = "WzEsIjdlNmM0YzYyNjg5MiJd.Z0ivoA.2AloM0W4QN2pNPGCMaso4PZTNMO2FKsLuUr8dUawviQ"
    url = f"https://papers.bench.example/unsubscribe/{token}"
    raw = build_message_bytes(
        sample_digest(), SETTINGS, now=NOW, links=DigestLinks(unsubscribe=url)
    )
    head = raw.split(b"\r\n\r\n", 1)[0]
    assert (
        b"=?" not in head.split(b"List-Unsubscribe:", 1)[1].split(b"\r\nList-Unsubscribe-Post")[0]
    )
    assert f"List-Unsubscribe: <{url}>,\r\n <mailto:".encode() in head
    msg = parse(
        build_message(sample_digest(), SETTINGS, now=NOW, links=DigestLinks(unsubscribe=url))
    )
    assert msg["List-Unsubscribe"] == (
        f"<{url}>, <mailto:off@bell.example.org?subject=unsubscribe%20alice>"
    )


@pytest.mark.parametrize(
    "url", ["http://bell.example.org/u", "https://x.example/u\r\nBcc: a@b.c", "javascript:x"]
)
def test_bad_one_click_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        build_message(sample_digest(), SETTINGS, now=NOW, links=DigestLinks(unsubscribe=url))


def test_non_ascii_from_name_is_rfc2047_encoded() -> None:
    settings = EmailSettings(from_addr="lab@bell.example.org", from_name="Zoë's Lab")
    msg = build_message(sample_digest(), settings, now=NOW)
    raw = msg.as_bytes()
    from_line = next(line for line in raw.split(b"\r\n") if line.startswith(b"From:"))
    assert re.search(rb"=\?utf-8\?[qQbB]\?", from_line)
    assert from_line.endswith(b"<lab@bell.example.org>")
    raw.decode("ascii")  # every header and body byte is 7-bit
    parsed = parse(msg)
    assert parsed["From"].addresses[0].display_name == "Zoë's Lab"
    assert parsed["From"].addresses[0].addr_spec == "lab@bell.example.org"


def test_from_name_with_specials_is_quoted() -> None:
    settings = EmailSettings(from_addr="lab@bell.example.org", from_name="Lab, Inc. (bot)")
    parsed = parse(build_message(sample_digest(), settings, now=NOW))
    assert parsed["From"].addresses[0].display_name == "Lab, Inc. (bot)"
    assert len(parsed["From"].addresses) == 1


@pytest.mark.parametrize(
    "address",
    [
        "alice@uni.example.edu\r\nBcc: victim@evil.example",
        "alice@uni.example.edu\nBcc: victim@evil.example",
        "alice@uni.example.edu, bob@uni.example.edu",
        "Alice <alice@uni.example.edu>",
        "alice",
        "alice@@uni.example.edu",
        "alice@localhost",
        "al ice@uni.example.edu",
        "",
        None,
    ],
)
def test_bad_to_address_raises(address: str | None) -> None:
    subscriber = replace(sample_digest().subscriber, email=address)
    with pytest.raises(ValueError):
        build_message(sample_digest(subscriber=subscriber), SETTINGS, now=NOW)


@pytest.mark.parametrize(
    "settings",
    [
        EmailSettings(from_addr="digest@bell.example.org\r\nBcc: x@y.example"),
        EmailSettings(from_addr="digest@bell.example.org", from_name="bell\r\nBcc: x@y.example"),
        EmailSettings(from_addr="digest@bell.example.org", list_id="list\nX-Evil: 1"),
        EmailSettings(from_addr="digest@bell.example.org", unsubscribe_mailto="a@b.c?cc=x@y.z"),
    ],
)
def test_bad_settings_raise(settings: EmailSettings) -> None:
    with pytest.raises(ValueError):
        build_message(sample_digest(), settings, now=NOW)


def test_digest_id_must_fit_a_message_id() -> None:
    with pytest.raises(ValueError, match="Message-ID"):
        build_message(sample_digest(digest_id="a b>\r\nX: y"), SETTINGS, now=NOW)


def test_check_address_accepts_plain_addresses() -> None:
    assert check_address("first.last+tag@sub.example.co.uk") == "first.last+tag@sub.example.co.uk"


# -- subject --------------------------------------------------------------------------


def test_subject_many_papers(message: EmailMessage) -> None:
    assert message["Subject"] == "4 new papers: diffusion policy, multi-agent \u2014 Thu 28 Nov"


def test_subject_one_paper() -> None:
    assert subject_line(one_paper_digest()) == "1 new paper: diffusion policy \u2014 Thu 28 Nov"


def test_subject_shows_each_rules_label_in_its_place() -> None:
    """The issue's example: labels where the rules have them, the rule in words elsewhere
    (no quotes, no operators); the days of a weekly digest as a span."""
    marl = 'marl OR "multi-agent reinforcement learning"'
    digest = sample_digest()
    digest = replace(
        digest,
        subscriber=replace(digest.subscriber, labels={'"diffusion policy"': "diffusion policy"}),
        groups=(digest.groups[0], replace(digest.groups[1], rule=marl)),
    )
    labelled = replace(
        digest.subscriber, labels={**digest.subscriber.labels, marl: "multi-agent RL"}
    )
    words = "marl or multi-agent reinforcement learning"
    assert subject_line(digest) == f"4 new papers: diffusion policy, {words} \u2014 Thu 28 Nov"
    assert (
        subject_line(replace(digest, subscriber=labelled))
        == "4 new papers: diffusion policy, multi-agent RL \u2014 Thu 28 Nov"
    )
    week = (date(2026, 11, 23), date(2026, 11, 27), date(2026, 11, 24))
    assert subject_line(replace(digest, subscriber=labelled, announced=week)).endswith(
        "multi-agent RL \u2014 Mon 23 \u2013 Fri 27 Nov"
    )
    turn = (date(2026, 11, 30), date(2026, 12, 1))
    assert subject_line(replace(digest, announced=turn)).endswith(
        "\u2014 Mon 30 Nov \u2013 Tue 1 Dec"
    )
    assert subject_line(replace(digest, announced=())).endswith(f", {words}")
    years = (date(2026, 1, 2), date(2025, 12, 29))
    assert subject_line(replace(digest, announced=years)).endswith(
        "\u2014 Mon 29 Dec 2025 \u2013 Fri 2 Jan 2026"
    )


def test_subject_many_rules_is_capped() -> None:
    rules = tuple(f"rule number {i} about something rather long" for i in range(8))
    digest = sample_digest()
    item = digest.groups[0].items[0]
    groups = tuple(DigestGroup(rule=rule, items=(item,)) for rule in rules)
    subject = subject_line(replace(digest, groups=groups))
    assert len(subject) <= 120
    assert subject == (
        "8 new papers: rule number 0 about something rather long (+7 more) \u2014 Thu 28 Nov"
    )
    shorter = tuple(DigestGroup(rule=f"rule {i}", items=(item,)) for i in range(40))
    subject = subject_line(replace(digest, groups=shorter))
    assert len(subject) <= 120 and subject.startswith("40 new papers: rule 0, rule 1, ")
    assert re.search(r", rule \d+ \(\+\d+ more\) \u2014 Thu 28 Nov$", subject), subject


def test_subject_single_huge_rule_is_cut_at_a_word() -> None:
    digest = one_paper_digest()
    group = replace(digest.groups[0], rule="x" * 300)
    subject = subject_line(replace(digest, groups=(group,)))
    assert len(subject) == 120
    assert subject.startswith("1 new paper: xxx") and subject.endswith("x… \u2014 Thu 28 Nov")
    words = " ".join(f"word{n}" for n in range(60))
    group = replace(digest.groups[0], rule=words)
    two = replace(digest, groups=(group, replace(group, rule="robot")))
    subject = subject_line(two)
    assert len(subject) <= 120 and subject.endswith("… (+1 more) \u2014 Thu 28 Nov")
    cut = subject.removeprefix("2 new papers: ").split("…")[0]
    assert words.startswith(cut + " "), subject  # whole words only


def test_subject_plurals() -> None:
    digest = one_paper_digest()
    assert subject_line(digest).startswith("1 new paper: ")
    group = digest.groups[0]
    three = replace(
        digest,
        groups=(group, replace(group, rule="robot"), replace(group, rule="a longer third rule")),
    )
    assert subject_line(three, limit=60) == (
        "3 new papers: diffusion policy, robot (+1 more) \u2014 Thu 28 Nov"
    )


def test_subject_strips_line_breaks() -> None:
    digest = one_paper_digest()
    group = replace(digest.groups[0], rule="evil\r\nBcc: x@y.example")
    msg = build_message(replace(digest, groups=(group,)), SETTINGS, now=NOW)
    assert msg["Subject"] == "1 new paper: evil Bcc: x@y.example \u2014 Thu 28 Nov"
    assert b"\r\nBcc:" not in msg.as_bytes()


def test_empty_digest_says_so() -> None:
    digest = replace(sample_digest(), groups=(), omitted=())
    rendered = render_digest(digest)
    assert rendered.subject == "No new papers for your rules"
    assert "No new papers matched your rules" in rendered.text
    assert "No new papers matched your rules" in rendered.html
    assert ACKNOWLEDGEMENT in rendered.text


# -- content: escaping ----------------------------------------------------------------


def test_html_escapes_paper_text(html: str) -> None:
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "x&lt;y" in html  # $x<y$, as Unicode text
    assert "a&lt;b" in html
    assert "<b>bold</b>" not in html
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert 'Schrödinger "bridges" &amp; ' in html  # TeX as letters; a quote is plain text


def test_text_part_is_literal(text: str) -> None:
    assert 'Schrödinger "bridges" & <b>bold</b> x<y' in text
    assert "<script>alert(1)</script>" in text
    assert "&lt;" not in text and "&amp;" not in text


def test_html_has_no_external_resources(html: str) -> None:
    assert "<img" not in html
    assert "<link" not in html
    assert "<script" not in html
    assert "src=" not in html
    assert "url(" not in html


# -- content: highlighting ------------------------------------------------------------


def test_mark_surrounds_exactly_the_matched_words(html: str) -> None:
    marks = re.findall(r"<mark[^>]*>(.*?)</mark>", html)
    assert marks.count("diffusion policy") == 4  # nasty title + abstract x2, update title
    assert marks.count("multi-agent") == 3  # nasty abstract, cross title, many title
    assert set(marks) == {"diffusion policy", "multi-agent"}
    assert "<mark" not in html.split("Schr", 1)[0]


def test_text_part_stars_matched_words(text: str) -> None:
    assert "*diffusion policy*" in text.replace("\n    ", " ")
    assert "*multi-agent*" in text
    assert "*bold*" not in text


# -- content: paper details -----------------------------------------------------------


def test_links_present(html: str, text: str) -> None:
    for url in (
        "https://arxiv.org/abs/2411.00001",
        "https://arxiv.org/pdf/2411.00001v1",
        "https://arxiv.org/pdf/2411.00003v3",
    ):
        assert f'href="{url}"' in html
    # The text part: one URL a paper, its page (the others are a click away there).
    assert "https://arxiv.org/abs/2411.00001" in text and "/pdf/" not in text


def test_the_text_part_has_one_url_a_paper_and_one_rating_link() -> None:
    """Each paper's page, once; its 👍 / 👎 (and PDF, code, DOI) only in the HTML part; one
    link to the email's rating page, where there are papers to rate."""
    digest = sample_digest()
    votes = {
        item.paper.id: VoteLinks(
            like=f"https://bell.example.org/feedback/{item.paper.id}-up",
            dislike=f"https://bell.example.org/feedback/{item.paper.id}-down",
        )
        for item in digest.items
    }
    rating = "https://bell.example.org/rate/7hPaS.tok.en"
    links = DigestLinks(feedback=votes, rating=rating)
    rendered = render_digest(digest, SETTINGS, links=links)
    urls = re.findall(r"https?://\S+", rendered.text)
    pages = [url for url in urls if "/rate/" not in url]
    assert sorted(pages) == sorted(str(item.paper.abs_url) for item in digest.items)
    assert rendered.text.count(rating) == 1 and "/feedback/" not in rendered.text
    assert rendered.html.count("/feedback/") == 2 * digest.count and rating not in rendered.html
    note = render_digest(
        note_digest(digest.subscriber, "No papers today.", period="p", now=NOW),
        SETTINGS,
        links=links,
    )
    assert "/rate/" not in note.text


def test_one_link_per_destination(html: str, text: str) -> None:
    """The title goes to the abstract page, its only link there; beside it, the PDF and each
    other destination once. The HTML version is a click away on the abstract page."""
    for number in range(1, 5):
        assert html.count(f'href="https://arxiv.org/abs/2411.{number:05d}"') == 1
        assert html.count(f'href="https://arxiv.org/pdf/2411.{number:05d}') == 1
    assert "arxiv.org/html/" not in html and "arxiv.org/html/" not in text
    title = re.search(r"<h3[^>]*>1\. <a href=\"([^\"]+)\">", html)
    assert title is not None and title.group(1) == "https://arxiv.org/abs/2411.00001"
    assert "Read the full abstract" not in html and ">Abstract</a>" not in html


def test_links_are_distinct_even_when_the_feed_repeats_them() -> None:
    """A journal's paper whose page is its DOI, and whose code and DOI links repeat: each
    destination is linked once."""
    doi = "10.1000/j.1"
    paper = make_paper(
        1, id=f"doi:{doi}", dois=(doi, doi), link=None, github="https://doi.org/10.1000/j.1"
    )
    digest = one_paper_digest()
    item = replace(digest.groups[0].items[0], paper=paper, hits=())
    digest = replace(digest, groups=(replace(digest.groups[0], items=(item,)),))
    rendered = render_digest(digest, SETTINGS)
    assert rendered.html.count('href="https://doi.org/10.1000/j.1"') == 1
    assert rendered.text.count("https://doi.org/10.1000/j.1") == 1


def test_doi_link_is_quoted(html: str, text: str) -> None:
    """A paper off arXiv links its DOI, quoted; one on arXiv leaves it to its abstract
    page (a quiet line: the PDF, not every destination)."""
    assert "doi.org" not in html and "doi.org" not in text
    assert "Journal ref: J. Robots 12 (2024) 1-10" in text
    assert "J. Robots 12 (2024) 1-10" in html
    paper = make_paper(1, id="url:https://journal.example/1", dois=("10.1000/xyz<123>",))
    digest = one_paper_digest()
    item = replace(digest.groups[0].items[0], paper=paper, hits=())
    digest = replace(digest, groups=(replace(digest.groups[0], items=(item,)),))
    rendered = render_digest(digest, SETTINGS)
    assert '<a href="https://doi.org/10.1000/xyz%3C123%3E">DOI</a>' in rendered.html
    assert "doi.org" not in rendered.text  # the text part: one URL a paper, its page


def test_authors_shortened_with_count(html: str, text: str) -> None:
    assert "Author 01, Author 02, Author 03 et al. (40 authors)" in html
    assert "Author 01, Author 02, Author 03 et al. (40 authors)" in text
    assert "Author 04" not in html
    assert "Ada Lovelace, Alan Turing" in text


def test_categories_in_words_primary_first(html: str, text: str) -> None:
    """As arXiv lists a paper's subjects: "Robotics (cs.RO); Machine Learning (cs.LG)"."""
    assert "Robotics (cs.RO); Machine Learning (cs.LG)" in html
    assert "Robotics (cs.RO); Machine Learning (cs.LG)" in tidy(text)
    assert "(primary)" not in html and "(primary)" not in text
    # A category arXiv's taxonomy does not know is shown as its code.
    odd = replace(sample_digest().groups[0].items[0].paper, categories=("cs.ZZ",))
    digest = one_paper_digest()
    digest = replace(
        digest,
        groups=(replace(digest.groups[0], items=(replace(digest.items[0], paper=odd),)),),
    )
    rendered = render_digest(digest, SETTINGS)
    assert "cs.ZZ" in rendered.html and "(cs.ZZ)" not in rendered.html


def test_cross_and_update_markers(html: str, text: str) -> None:
    assert "cross-list from cs.AI" in html
    assert "cross-list from cs.AI" in tidy(text)
    assert "updated: v3" in html
    assert "updated: v3" in tidy(text)
    assert tidy(text).count("cross-list from") == 1
    assert tidy(text).count("updated: v") == 1


def test_groups_and_matched_rules(html: str, text: str) -> None:
    """A paper is filed under the first rule it matched; the others it matched are named
    beside it (once, and only those)."""
    assert "== diffusion policy · 2 papers ==" in text
    assert "== multi-agent · 2 papers ==" in text
    assert "Matched:" not in text and "Matched:" not in html
    assert tidy(text).count("also matched") == 1 and html.count("also matched") == 1
    assert "also matched multi-agent" in tidy(text)
    assert "also matched multi-agent" in html  # a rule in words: no code, no quotes
    assert '"multi-agent"' not in html and "<code>" not in html
    assert "· 2 papers" in html
    assert text.index("diffusion policy · 2 papers") < text.index("multi-agent · 2 papers")


def test_a_labelled_rule_is_shown_by_its_label_and_others_in_words() -> None:
    digest = sample_digest()
    labels = {"multi-agent": "Multi-agent & co"}
    digest = replace(digest, subscriber=replace(digest.subscriber, labels=labels))
    rendered = render_digest(digest, SETTINGS)
    assert "== Multi-agent & co · 2 papers ==" in rendered.text
    assert "also matched Multi-agent & co" in tidy(rendered.text)
    assert "matching diffusion policy, Multi-agent & co." in tidy(rendered.text)
    assert ">Multi-agent &amp; co <span" in rendered.html
    assert "matching diffusion policy, Multi-agent &amp; co.</p>" in rendered.html
    assert "<code>" not in rendered.html
    assert rendered.subject == "4 new papers: diffusion policy, Multi-agent & co \u2014 Thu 28 Nov"


def test_omitted_papers_are_counted(html: str, text: str) -> None:
    said = "The best 4 of the 6 papers that matched your rules are here."
    assert said in tidy(text) and said in html
    one = render_digest(replace(sample_digest(), omitted=(make_paper(9),)))
    assert "The best 4 of the 5 papers that matched your rules are here." in tidy(one.text)
    assert "matched your rules are here" not in render_digest(one_paper_digest()).text
    alone = render_digest(replace(one_paper_digest(), omitted=(make_paper(9),)))
    assert "The best of the 2 papers that matched your rules is here." in tidy(alone.text)


def test_show_more_links_to_the_manage_page_where_the_reader_can_change_it() -> None:
    """A subscriber who manages their own subscription is shown where to ask for more; one
    in the config file cannot change it on that page, and is told only what they get."""
    links = DigestLinks(manage="https://bell.example.org/manage/tok")
    own = replace(sample_digest().subscriber, origin="database")
    rendered = render_digest(sample_digest(subscriber=own), SETTINGS, links=links)
    link = '<a href="https://bell.example.org/manage/tok#settings">Show more papers per email</a>'
    assert link in rendered.html
    assert "Show more papers per email:\n    https://bell.example.org/manage/tok#settings" in (
        rendered.text
    )
    config = render_digest(sample_digest(), SETTINGS, links=links)
    assert "Show more papers" not in config.html and "Show more papers" not in config.text
    assert "The best 4 of the 6 papers" in config.html


def reader_words(rendered: RenderedEmail, view: str) -> str:
    """What a reader reads of a rendered part: its words, without markup or URLs."""
    shown = rendered.text if view == "text" else rendered.html.split("<body", 1)[1]
    shown = re.sub(r"<[^>]+>", " ", shown)
    return tidy(re.sub(r"(https?|mailto):\S+", " ", html_module.unescape(shown)))


@pytest.mark.parametrize("view", ["html", "text"])
def test_the_email_speaks_to_its_reader_not_its_operator(view: str) -> None:
    """No configuration key, command line or operator in what a subscriber reads."""
    links = DigestLinks(
        unsubscribe="https://bell.example.org/unsubscribe/tok",
        manage="https://bell.example.org/manage/tok",
    )
    own = replace(sample_digest().subscriber, origin="database")
    for digest, settings, shown in (
        (sample_digest(), SETTINGS, links),
        (sample_digest(subscriber=own), SETTINGS, links),
        (sample_digest(), None, None),
        (replace(one_paper_digest(), omitted=(make_paper(9),)), SETTINGS, None),
    ):
        words = reader_words(render_digest(digest, settings, links=shown), view)
        for operator_word in ("max_papers", "operator", "paperbell unsubscribe", "config", " = "):
            assert operator_word not in words, (operator_word, words)
        assert not re.search(r"\b[a-z]+_[a-z]+\b", words), words


def test_footer_in_both_parts(html: str, text: str) -> None:
    assert text.count(ACKNOWLEDGEMENT) == 1
    assert html.count(ACKNOWLEDGEMENT) == 1
    why = "You get this email because alice@uni.example.edu is subscribed to new papers matching"
    assert why in tidy(text) and why in html
    assert "paperbell" not in text.split("\n-- \n")[-1] and "operator" not in html
    said = 'To unsubscribe, write to off@bell.example.org with the subject "unsubscribe alice".'
    assert said in tidy(text)
    assert 'href="mailto:off@bell.example.org?subject=unsubscribe%20alice"' in html


def test_intro_names_the_announcement_day(text: str) -> None:
    assert text.startswith("paperbell: 4 new papers matched your rules from the arXiv")
    assert "announcement of Thursday 28 November 2024." in tidy(text)


def test_text_lines_fit(text: str) -> None:
    long_lines = [line for line in text.splitlines() if len(line) > 72 and "://" not in line]
    assert long_lines == []


def test_render_without_settings_tells_to_reply() -> None:
    rendered = render_digest(sample_digest())
    assert 'reply to this email with the subject "unsubscribe alice"' in tidy(rendered.text)
    assert ACKNOWLEDGEMENT in rendered.html


def test_subscriber_name_is_escaped_in_html() -> None:
    subscriber = replace(sample_digest().subscriber, name="<i>eve</i>")
    rendered = render_digest(sample_digest(subscriber=subscriber), SETTINGS)
    assert "<i>eve</i>" not in rendered.html
    assert "“unsubscribe &lt;i&gt;eve&lt;/i&gt;”" in rendered.html
    assert 'the subject "unsubscribe <i>eve</i>"' in tidy(rendered.text)


# -- text helpers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "spans", "expected"),
    [
        ("abcdef", [], [("abcdef", False)]),
        ("abcdef", [(0, 2)], [("ab", True), ("cdef", False)]),
        ("abcdef", [(1, 3), (2, 4)], [("a", False), ("bcd", True), ("ef", False)]),
        ("abcdef", [(1, 2), (2, 3)], [("a", False), ("bc", True), ("def", False)]),
        ("abcdef", [(4, 6), (0, 1)], [("a", True), ("bcd", False), ("ef", True)]),
        ("abc", [(-5, 1), (2, 99), (1, 1)], [("a", True), ("b", False), ("c", True)]),
        ("", [(0, 3)], []),
    ],
)
def test_highlight_segments(
    text: str, spans: list[tuple[int, int]], expected: list[tuple[str, bool]]
) -> None:
    assert highlight_segments(text, spans) == expected


def test_highlight_tidies_whitespace_outside_marks() -> None:
    text = "  a\n  big  word \n here "
    spans = [(4, 13)]  # "  big  wo": leading spaces inside the span
    assert highlight(text, spans) == [("a ", False), ("big wo", True), ("rd here", False)]
    assert star_marks(highlight(text, spans)) == "a *big wo*rd here"


def test_shorten_authors() -> None:
    assert shorten_authors(["A", " B ", "C"]) == "A, B, C"
    assert shorten_authors([f"N{i}" for i in range(10)]) == ", ".join(f"N{i}" for i in range(10))
    assert shorten_authors([f"N{i}" for i in range(11)]) == "N0, N1, N2 et al. (11 authors)"
    assert shorten_authors([f"N{i}" for i in range(5)], limit=2) == "N0, N1 et al. (5 authors)"
    assert shorten_authors([]) == ""


def test_wrap_and_tidy() -> None:
    assert tidy(" a\n\tb  c ") == "a b c"
    wrapped = wrap("word " * 40, 20, "  ")
    assert all(len(line) <= 20 for line in wrapped.splitlines())
    assert all(line.startswith("  ") for line in wrapped.splitlines())
    assert wrap("x https://example.org/" + "a" * 100, 20).splitlines()[1].startswith("https://")
    assert wrap("one\n\ntwo", 72) == "one\n\ntwo"


# -- HTML: inlined CSS, layout, dark mode ---------------------------------------------


class _Tags(HTMLParser):
    """Every start tag of an HTML document with its attributes, comments left out."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def styles_of(html: str, css_class: str) -> list[str]:
    """The style attributes of the elements carrying a class."""
    return [
        attrs.get("style") or ""
        for _, attrs in tags(html)
        if css_class in (attrs.get("class") or "").split()
    ]


def test_css_is_inlined_on_every_styled_element(html: str) -> None:
    body = html.split("<body", 1)[1]
    classed = [(tag, attrs) for tag, attrs in tags("<body" + body) if attrs.get("class")]
    assert classed
    unstyled = [(tag, attrs["class"]) for tag, attrs in classed if not attrs.get("style")]
    assert unstyled == []
    assert all("max-width:640px" in style for style in styles_of(html, "card"))
    # The papers carry no class: their few rules are inlined by where they stand.
    papers = [attrs for tag, attrs in tags(html) if (attrs.get("id") or "").startswith("paper-")]
    assert len(papers) == 4 and not any("class" in attrs for attrs in papers)
    for group_last, attrs in zip((False, True, False, True), papers, strict=True):
        assert ("border-bottom:1px solid" in (attrs.get("style") or "")) is not group_last
    titles = [attrs for tag, attrs in tags(html) if tag == "h3"]
    assert len(titles) == 4 and all("font-size:17px" in (a.get("style") or "") for a in titles)
    assert all("overflow-wrap:anywhere" in style for style in styles_of(html, "cell"))


def test_papers_repeat_few_styles(html: str) -> None:
    """What a paper repeats is small: a paper's markup and styles take under 1 KB beside its
    own text (titles, authors, abstracts, URLs), so that max_papers of them stay light."""
    papers = html.split('id="paper-1"', 1)[1].split('class="cell bottom"', 1)[0]
    markup = sum(len(tag) for tag in re.findall(r"<[^>]*>", papers))
    urls = sum(len(url) for url in re.findall(r'href="([^"]*)"', papers))
    assert (markup - urls) / 4 < 600, (markup - urls) / 4
    # Link colours, highlights and dark mode are styled once, in the kept <style> block.
    assert "<mark>" in papers and "<a href=" in papers


def test_style_block_kept_for_phones_and_dark_mode(html: str) -> None:
    without_comments = re.sub(r"<!--.*?-->", "", html, flags=re.DOTALL)
    blocks = re.findall(r"<style>(.*?)</style>", without_comments, flags=re.DOTALL)
    kept = re.findall(
        r'<style data-css-inline="ignore">(.*?)</style>', without_comments, flags=re.DOTALL
    )
    assert len(blocks) == 1 and len(kept) == 1
    assert "@media (max-width: 480px)" in kept[0]
    assert "@media (prefers-color-scheme: dark)" in kept[0]
    assert "mark {" in kept[0] and "a {" in kept[0]
    assert '<meta name="color-scheme" content="light dark">' in html
    assert '<meta name="supported-color-schemes" content="light dark">' in html


def test_layout_is_presentation_tables(html: str) -> None:
    tables = [attrs for tag, attrs in tags(html) if tag == "table"]
    assert tables and all(attrs.get("role") == "presentation" for attrs in tables)
    assert "<!--[if mso]><table" in html  # Outlook: a fixed 640 px column


def test_preheader_is_hidden_and_summarises(html: str) -> None:
    preheader = re.search(r'<div class="preheader" style="([^"]*)">(.*?)</div>', html)
    assert preheader is not None
    assert "display:none" in preheader.group(1)
    assert preheader.group(2).startswith("4 new papers: 2 for diffusion policy, 2 for multi")
    assert "First: Schr" in preheader.group(2)


def test_top_names_the_day_and_the_rules(html: str) -> None:
    assert "4 new papers matched your rules" in html
    assert "From the arXiv announcement of Thursday 28 November 2024." in html
    assert (
        '">diffusion policy <span class="count" style="font-weight:normal;color:#59636e">' in html
    )


# -- table of contents ----------------------------------------------------------------


def long_digest(count: int = 6) -> Digest:
    digest = sample_digest()
    papers = [make_paper(10 + n, title=f"Diffusion policy study {n}") for n in range(count)]
    items = tuple(DigestItem(paper=p, rules=('"diffusion policy"',), hits=()) for p in papers)
    return replace(digest, groups=(DigestGroup(rule='"diffusion policy"', items=items),))


def test_toc_when_more_than_five_papers() -> None:
    rendered = render_digest(long_digest(6), SETTINGS)
    for number in range(1, 7):
        assert f'href="#paper-{number}"' in rendered.html
        assert f'id="paper-{number}"' in rendered.html
    assert rendered.html.index('href="#paper-6"') < rendered.html.index('id="paper-1"')
    assert "\ndiffusion policy · 6 papers:\n   1. Diffusion policy study 0\n" in rendered.text
    assert "   6. Diffusion policy study 5\n" in rendered.text


@pytest.mark.parametrize("count", [1, 5])
def test_no_toc_for_five_papers_or_fewer(count: int) -> None:
    rendered = render_digest(long_digest(count), SETTINGS)
    assert 'href="#paper-' not in rendered.html
    assert f'id="paper-{count}"' in rendered.html
    assert "   1. Diffusion policy study 0" not in rendered.text


# -- abstracts: short or full ---------------------------------------------------------

LONG_ABSTRACT = (
    "We study how robots learn from demonstrations in cluttered kitchens. "
    + "Our method builds a scene graph and plans over it with a learned cost model. " * 6
    + "Finally we compare against a diffusion policy baseline and a behaviour cloning one, "
    "and release the code."
)


def long_abstract_digest(abstracts: str = "short", *, title: str = "Kitchen robots") -> Digest:
    paper = make_paper(7, title=title, abstract=LONG_ABSTRACT)
    hits = (
        *hits_for(LONG_ABSTRACT, "diffusion policy", "abstract"),
        *hits_for(title, "diffusion policy", "title"),
    )
    item = DigestItem(paper=paper, rules=('"diffusion policy"',), hits=hits)
    digest = sample_digest()
    subscriber = replace(digest.subscriber, abstracts=abstracts)
    return replace(
        digest,
        subscriber=subscriber,
        groups=(DigestGroup(rule='"diffusion policy"', items=(item,)),),
        omitted=(),
    )


def abstract_html(html: str) -> str:
    found = re.search(r'<p class="by"[^>]*>.*?</p>\s*<div>(.*?)</div>', html, flags=re.DOTALL)
    assert found is not None
    return found.group(1)


def test_short_abstract_is_cut_between_words_with_a_snippet() -> None:
    assert LONG_ABSTRACT.index("diffusion policy") > 400
    rendered = render_digest(long_abstract_digest("short"), SETTINGS)
    head = abstract_html(rendered.html)
    shown = re.sub(r"<[^>]+>", "", head.split("…")[0])
    assert 90 <= len(shown) <= SHORT_CHARS  # a few lines: about four on a phone
    assert LONG_ABSTRACT.startswith(shown)
    assert LONG_ABSTRACT[len(shown)] == " "  # cut between words
    assert "diffusion policy" not in head
    assert head.endswith("…")  # the whole abstract is the title's link away
    snippet = re.search(r'<p class="snip"[^>]*>(.*?)</p>', rendered.html, flags=re.DOTALL)
    assert snippet is not None
    assert re.search(r"compare against a <mark>diffusion policy</mark> baseline", snippet.group(1))
    assert snippet.group(1).endswith("and release the code.")  # the end: no "…" after
    text = tidy(rendered.text)
    assert "compare against a *diffusion policy* baseline and a behaviour cloning one, and " in text
    assert "Further on: …" in text


def test_no_snippet_when_the_title_already_shows_the_match() -> None:
    digest = long_abstract_digest("short", title="A diffusion policy for kitchens")
    rendered = render_digest(digest, SETTINGS)
    assert abstract_html(rendered.html).endswith("…")
    assert 'class="snip"' not in rendered.html
    assert "Further on:" not in rendered.text


def test_full_abstract_when_asked() -> None:
    rendered = render_digest(long_abstract_digest("full"), SETTINGS)
    head = abstract_html(rendered.html)
    assert re.sub(r"<[^>]+>", "", head) == LONG_ABSTRACT.strip()
    assert "<mark" in head
    assert 'class="snip"' not in rendered.html
    assert "*diffusion policy* baseline" in tidy(rendered.text)
    assert "Further on" not in rendered.text


def test_short_abstract_left_whole_when_barely_longer() -> None:
    rendered = render_digest(sample_digest(), SETTINGS)
    assert "</mark> learning scales.</div>" in rendered.html


@pytest.mark.parametrize(
    ("text", "spans"),
    [
        ("word " * 100, [(318, 330)]),  # a highlight straddling the limit stays whole
        ("word " * 100, [(0, 4), (100, 104)]),
        ("x" * 500, []),  # no place to cut: left whole
        ("alpha $a + b + c$ " * 30, []),  # never inside a formula left as TeX
    ],
)
def test_excerpt_cuts_only_between_words(text: str, spans: list[tuple[int, int]]) -> None:
    segments = highlight(text, spans)
    short = excerpt(segments)
    head = "".join(part for part, _ in short.head)
    whole = "".join(part for part, _ in segments)
    assert whole.startswith(head)
    if short.clipped:
        assert whole[len(head)] == " " or whole[len(head) - 1 : len(head) + 1] == ", "
        assert head.count("$") % 2 == 0
        assert len(head) < len(whole) - SHORT_SLACK
    for part, marked in short.head:
        if marked:
            assert any(whole[s:e].strip() == part for s, e in spans)


def test_excerpt_snippet_keeps_marks_whole() -> None:
    text = "filler words here " * 30 + "then a rare term appears " + "more text " * 20
    start = text.index("rare term")
    short = excerpt(highlight(text, [(start, start + 9)]))
    assert short.clipped
    assert ("rare term", True) in short.snippet
    joined = "".join(part for part, _ in short.snippet)
    assert 60 <= len(joined) <= 160
    assert joined in text


def test_excerpt_of_a_huge_abstract_with_many_hits_takes_linear_time() -> None:
    """Each space was tested against every highlight: 50 s on 200,000 characters."""
    text = "word " * 40_000
    segments = highlight(text, [(i, i + 4) for i in range(0, len(text), 10)])
    # CPU time of this process: a busy machine (or tests run in parallel) does not count.
    started = time.process_time()
    short = excerpt(segments)
    assert short.clipped
    assert time.process_time() - started < 5


# -- links: Hugging Face, manage ------------------------------------------------------


@pytest.mark.parametrize(("upvotes", "shown"), [(12, "12"), (1, "1"), (1234, "1,234")])
def test_upvotes_beside_the_title_link_to_hugging_face(upvotes: int, shown: str) -> None:
    """As Hugging Face shows them: `▲ 163` beside the title, linked to its page there;
    in plain text beside the title, with no link of their own."""
    digest = one_paper_digest()
    item = digest.groups[0].items[0]
    item = replace(item, paper=replace(item.paper, upvotes=upvotes, hf_rank=1))
    digest = replace(digest, groups=(replace(digest.groups[0], items=(item,)),))
    rendered = render_digest(digest, SETTINGS)
    link = f'<a href="https://huggingface.co/papers/2411.00001">\u25b2&nbsp;{shown}</a>'
    title = re.search(r"<h3[^>]*>(.*?)</h3>", rendered.html)
    assert title is not None and link in title.group(1)
    assert rendered.html.count("huggingface.co") == 1
    assert "upvote" not in rendered.html and "of the day" not in rendered.html
    assert f"learning \u25b2 {shown} https://arxiv.org/abs/2411.00001" in tidy(rendered.text)
    assert "huggingface.co" not in rendered.text


def test_no_hugging_face_link_when_not_there(html: str, text: str) -> None:
    assert "huggingface.co" not in html
    assert "Hugging Face" not in text


def test_manage_and_unsubscribe_links_in_the_footer() -> None:
    links = DigestLinks(
        unsubscribe="https://bell.example.org/unsubscribe/tok",
        manage="https://bell.example.org/m/t",
    )
    rendered = render_digest(sample_digest(), SETTINGS, links=links)
    footer = rendered.html.split('class="footer"', 1)[1]
    assert 'href="https://bell.example.org/m/t"' in footer
    assert ">Manage your subscription</a>" in footer
    assert 'href="https://bell.example.org/unsubscribe/tok"' in footer
    assert 'href="mailto:off@bell.example.org?subject=unsubscribe%20alice"' in footer
    assert footer.index("Manage your subscription") < footer.index(ACKNOWLEDGEMENT)
    tail = rendered.text.split("\n-- \n", 1)[1]
    assert "To manage your subscription (rules, schedule, format), open\n" in tail
    assert "    https://bell.example.org/m/t\n" in tail
    assert "    https://bell.example.org/unsubscribe/tok\n" in tail
    assert tail.rstrip().endswith(ACKNOWLEDGEMENT)


def test_manage_link_may_be_loopback_http() -> None:
    url = "http://127.0.0.1:8025/manage/tok"
    rendered = render_digest(sample_digest(), SETTINGS, links=DigestLinks(manage=url))
    assert f'href="{url}"' in rendered.html
    assert "Manage your subscription" in rendered.html
    assert ">Unsubscribe</a>" not in rendered.html


@pytest.mark.parametrize(
    "url", ["http://bell.example.org/m", "javascript:alert(1)", 'https://x.example/"><b>', ""]
)
def test_bad_manage_url_is_refused(url: str) -> None:
    if not url:  # empty: no link at all
        assert (
            "Manage your"
            not in render_digest(sample_digest(), SETTINGS, links=DigestLinks(manage=url)).html
        )
        return
    with pytest.raises(ValueError, match="manage_url"):
        render_digest(sample_digest(), SETTINGS, links=DigestLinks(manage=url))


# -- formats and headers --------------------------------------------------------------


def test_text_only_format_is_a_single_plain_part() -> None:
    subscriber = replace(sample_digest().subscriber, email_format="text")
    links = DigestLinks(unsubscribe="https://bell.example.org/u/t")
    msg = parse(build_message(sample_digest(subscriber=subscriber), SETTINGS, now=NOW, links=links))
    assert not msg.is_multipart()
    assert msg.get_content_type() == "text/plain"
    assert msg.get_content_charset() == "utf-8"
    body = msg.get_content()
    assert "*diffusion policy*" in tidy(body)
    assert "<p" not in body and "<mark" not in body and "<html" not in body
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert msg["Message-ID"] == "<d-2024-11-28-alice-3f9a@bell.example.org>"


def test_html_format_is_text_then_html() -> None:
    subscriber = replace(sample_digest().subscriber, email_format="html")
    msg = parse(build_message(sample_digest(subscriber=subscriber), SETTINGS, now=NOW))
    assert [p.get_content_type() for p in msg.iter_parts()] == ["text/plain", "text/html"]


def test_cafe_from_name_and_non_ascii_subject_are_rfc2047() -> None:
    settings = EmailSettings(from_addr="digest@papers.lab.example", from_name="Café Lab Bot")
    digest = one_paper_digest()
    digest = replace(digest, groups=(replace(digest.groups[0], rule="Schrödinger brücken"),))
    raw = build_message(digest, settings, now=NOW).as_bytes()
    raw.decode("ascii")
    lines = raw.split(b"\r\n\r\n", 1)[0].decode("ascii").replace("\r\n ", " ").split("\r\n")
    from_line = next(line for line in lines if line.startswith("From:"))
    subject_line_ = next(line for line in lines if line.startswith("Subject:"))
    assert re.fullmatch(
        r"From: =\?utf-8\?[qQbB]\?\S+\?=[ -~]* <digest@papers\.lab\.example>", from_line
    )
    assert "=?utf-8?" in subject_line_
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert parsed["From"].addresses[0].display_name == "Café Lab Bot"
    assert parsed["Subject"] == "1 new paper: Schrödinger brücken \u2014 Thu 28 Nov"


@pytest.mark.parametrize(
    ("links", "post"),
    [
        (None, False),
        (DigestLinks(manage="https://bell.example.org/m/t"), False),
        (DigestLinks(unsubscribe="https://bell.example.org/u/t"), True),
    ],
)
def test_one_click_post_header_only_with_an_https_url(
    links: DigestLinks | None, post: bool
) -> None:
    msg = parse(build_message(sample_digest(), SETTINGS, now=NOW, links=links))
    assert ("List-Unsubscribe-Post" in msg) is post
    unsubscribe = msg["List-Unsubscribe"]
    assert unsubscribe.endswith("<mailto:off@bell.example.org?subject=unsubscribe%20alice>")
    assert unsubscribe.startswith("<https://") is post
    assert "/m/t" not in unsubscribe  # the manage page is not an unsubscribe URL


# -- TeX (tests/render/test_tex.py tests the conversion itself) ----------------------------------


def test_math_in_title_renders_as_unicode_in_both_parts() -> None:
    title = r"Learning $\epsilon$-optimal policies in $O(\sqrt{T})$ rounds"
    digest = one_paper_digest()
    item = digest.groups[0].items[0]
    item = replace(item, paper=replace(item.paper, title=title), hits=())
    digest = replace(digest, groups=(replace(digest.groups[0], items=(item,)),))
    rendered = render_digest(digest, SETTINGS)
    assert "Learning ϵ-optimal policies in O(√T) rounds</a>" in rendered.html
    assert "Learning ϵ-optimal policies in O(√T) rounds" in rendered.text


# Each email shows its own numbers and 👍 / 👎 links, whatever was rendered before it: it
# is exactly what rendering it alone gives.


def _alone(digest: Digest, links: DigestLinks) -> tuple[str, str]:
    """The digest's text and HTML parts."""
    rendered = render_digest(digest, SETTINGS, links=links)
    return rendered.text, rendered.html


def _votes(digest: Digest, who: str) -> DigestLinks:
    return DigestLinks(
        feedback={
            item.paper.id: VoteLinks(
                like=f"https://bell.example.org/feedback/{who}-{item.paper.id}-up?a=1&b=2",
                dislike=f"https://bell.example.org/feedback/{who}-{item.paper.id}-down",
            )
            for item in digest.items
        }
    )


def test_emails_showing_the_same_papers_each_get_their_own_numbers_and_votes() -> None:
    first = sample_digest()
    # The same papers in another order, for another reader with other links.
    group = first.groups[0]
    second = replace(
        first,
        subscriber=replace(first.subscriber, name="bob", email="bob@uni.example.edu"),
        groups=(replace(group, items=group.items[::-1]), *first.groups[1:]),
        digest_id="d-2024-11-28-bob-77aa",
    )
    expected = [_alone(d, _votes(d, d.subscriber.name)) for d in (first, second)]
    for digest, (text, html) in zip((first, second), expected, strict=True):
        rendered = render_digest(digest, SETTINGS, links=_votes(digest, digest.subscriber.name))
        assert (rendered.text, rendered.html) == (text, html)
    assert "bob-2411.00003-up?a=1&amp;b=2" in expected[1][1]


def test_views_of_a_paper_shown_alike_are_equal_and_survive_a_pickle() -> None:
    """Two digests showing a paper alike give equal views, hashed alike; a pickled view
    comes back equal and carries nothing but its fields."""
    first = sample_digest()
    second = replace(first, subscriber=replace(first.subscriber, name="bob"))
    one, two = (group_views(d)[0].items[0] for d in (first, second))
    assert one is not two and one == two
    assert hash(one) == hash(two) == hash(replace(one, number=one.number))
    back = pickle.loads(pickle.dumps(one))
    assert back == one and "_hash" not in back.__dict__


@pytest.mark.parametrize(
    "title",
    [
        "A title that holds \ue000\ue001. the placeholder of a number",
        "Votes \ue002 and \ue003 in a title",
        "A title that holds \ue0100\ue011, the place of the first block",
        "An unclosed place \ue010 in a title",
    ],
)
def test_a_paper_whose_text_holds_private_use_characters_shows_them(title: str) -> None:
    digest = sample_digest()
    group = digest.groups[0]
    odd = replace(group.items[1], paper=replace(group.items[1].paper, title=title), hits=())
    digest = replace(
        digest, groups=(replace(group, items=(group.items[0], odd)), *digest.groups[1:])
    )
    text, html = _alone(digest, _votes(digest, "alice"))
    assert f"\n2.  {title}\n" in text  # its own text is kept as it is
    assert re.search(r"<h3[^>]*>2\. ", html) and html_module.escape(title) in html
    assert html.count("alice-2411.00003-up") == 1


def test_papers_numbered_from_100_wrap_as_rendered_alone() -> None:
    papers = [
        make_paper(n, title=f"A long title about multi-agent planning for paper {n} " * 2)
        for n in range(1, 106)
    ]
    items = tuple(DigestItem(paper=p, rules=("multi-agent",), hits=()) for p in papers)
    digest = replace(
        sample_digest(),
        subscriber=replace(sample_digest().subscriber, max_papers=200, abstracts="none"),
        groups=(DigestGroup(rule="multi-agent", items=items),),
        omitted=(),
    )
    text, html = _alone(digest, _votes(digest, "alice"))
    assert "\n100. A long title" in text and "\n99. A long title" in text
    again = render_digest(digest, SETTINGS, links=_votes(digest, "alice"))
    assert (again.text, again.html) == (text, html)


@given(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=300),
    st.integers(min_value=0, max_value=20_000),
)
@example("A title " * 20, 12)
@example("\ue000\ue000 marked title", 3)
@example("量子" * 60, 7)
def test_a_numbered_entry_wraps_as_the_number_itself_would(text: str, number: int) -> None:
    """`numbered` gives the lines of the title wrapped behind its number, right-aligned in
    five columns."""
    assert numbered(text, number) == wrap(text, 72, " " * 6, f"{number}.".rjust(5) + " ")
