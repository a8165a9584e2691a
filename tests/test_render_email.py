"""The email renderer: MIME structure, headers, escaping, highlighting and wording."""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone
from email.message import EmailMessage

import pytest

from bot.models import Digest, DigestGroup, DigestItem, Hit, Paper, Subscriber
from bot.render import template_env, templates_dir
from bot.render.email import (
    ACKNOWLEDGEMENT,
    EmailSettings,
    build_message,
    check_address,
    render_digest,
    subject_line,
)
from bot.render.text import (
    highlight,
    highlight_segments,
    shorten_authors,
    star_marks,
    tidy,
    wrap,
)

NOW = datetime(2024, 11, 28, 6, 30, tzinfo=UTC)
SETTINGS = EmailSettings(
    from_addr="digest@bell.example.org", unsubscribe_mailto="off@bell.example.org"
)

NASTY_TITLE = 'Schr\\"odinger bridges & <b>bold</b> $x<y$ for diffusion policy learning'
ABSTRACT = (
    "We study diffusion policy models for robot control.\n"
    "A multi-agent variant with $a<b$ & <script>alert(1)</script> is proposed; "
    "diffusion policy learning scales."
)


def hits_for(text: str, term: str, field: str) -> list[Hit]:
    """Every occurrence of `term` in `text`, as hits (what the matcher produces)."""
    return [
        Hit(field=field, start=m.start(), end=m.end(), term=term)  # type: ignore[arg-type]
        for m in re.finditer(re.escape(term), text)
    ]


def make_paper(number: int, **changes: object) -> Paper:
    base = Paper(
        id=f"2411.{number:05d}",
        version=1,
        title=f"Paper number {number}",
        abstract=f"Abstract of paper {number}.",
        authors=("Ada Lovelace", "Alan Turing"),
        categories=("cs.LG", "cs.AI"),
        announce_type="new",
        announced=date(2024, 11, 28),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def sample_digest(**changes: object) -> Digest:
    nasty = make_paper(
        1,
        title=NASTY_TITLE,
        abstract=ABSTRACT,
        categories=("cs.RO", "cs.LG"),
        dois=("10.1000/xyz<123>",),
        journal_ref="J. Robots 12 (2024) 1-10",
    )
    nasty_hits = (
        *hits_for(NASTY_TITLE, "diffusion policy", "title"),
        *hits_for(ABSTRACT, "diffusion policy", "abstract"),
        *hits_for(ABSTRACT, "multi-agent", "abstract"),
    )
    cross = make_paper(
        2,
        title="Cross-listed multi-agent planning",
        categories=("cs.AI", "cs.MA", "cs.LG"),
        announce_type="cross",
    )
    update = make_paper(3, title="An updated diffusion policy", version=3, announce_type="replace")
    many = make_paper(
        4,
        title="A very large collaboration on multi-agent systems",
        authors=tuple(f"Author {i:02d}" for i in range(1, 41)),
    )
    subscriber = Subscriber(
        name="alice",
        email="alice@uni.example.edu",
        rules=('"diffusion policy"', "multi-agent"),
        max_papers=4,
    )
    groups = (
        DigestGroup(
            rule='"diffusion policy"',
            items=(
                DigestItem(
                    paper=nasty,
                    rules=('"diffusion policy"', "multi-agent"),
                    hits=nasty_hits,
                    score=2.0,
                ),
                DigestItem(
                    paper=update,
                    rules=('"diffusion policy"',),
                    hits=tuple(hits_for(update.title, "diffusion policy", "title")),
                ),
            ),
        ),
        DigestGroup(
            rule="multi-agent",
            items=(
                DigestItem(
                    paper=cross,
                    rules=("multi-agent",),
                    hits=tuple(hits_for(cross.title, "multi-agent", "title")),
                ),
                DigestItem(
                    paper=many,
                    rules=("multi-agent",),
                    hits=tuple(hits_for(many.title, "multi-agent", "title")),
                ),
            ),
        ),
    )
    digest = Digest(
        subscriber=subscriber,
        digest_id="d-2024-11-28-alice-3f9a",
        created=NOW,
        groups=groups,
        omitted=(make_paper(5), make_paper(6)),
        announced=(date(2024, 11, 28),),
    )
    return replace(digest, **changes)  # type: ignore[arg-type]


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
    msg = parse(build_message(sample_digest(), SETTINGS, now=NOW, unsubscribe_url=url))
    assert msg["List-Unsubscribe"] == (
        f"<{url}>, <mailto:off@bell.example.org?subject=unsubscribe%20alice>"
    )
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    text, html = parts(msg)
    assert url in text
    assert f'href="{url}"' in html


@pytest.mark.parametrize(
    "url", ["http://bell.example.org/u", "https://x.example/u\r\nBcc: a@b.c", "javascript:x"]
)
def test_bad_one_click_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        build_message(sample_digest(), SETTINGS, now=NOW, unsubscribe_url=url)


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
    assert message["Subject"] == '4 new papers: "diffusion policy", "multi-agent"'


def test_subject_one_paper() -> None:
    assert subject_line(one_paper_digest()) == '1 new paper: "diffusion policy"'


def test_subject_many_rules_is_capped() -> None:
    rules = tuple(f"rule number {i} about something rather long" for i in range(8))
    digest = sample_digest()
    item = digest.groups[0].items[0]
    groups = tuple(DigestGroup(rule=rule, items=(item,)) for rule in rules)
    subject = subject_line(replace(digest, groups=groups))
    assert len(subject) <= 120
    assert subject.startswith('8 new papers: "rule number 0 about something rather long"')
    assert re.search(r"\(\+\d rules\)$", subject)


def test_subject_single_huge_rule_is_cut() -> None:
    digest = one_paper_digest()
    group = replace(digest.groups[0], rule="x" * 300)
    subject = subject_line(replace(digest, groups=(group,)))
    assert len(subject) <= 120
    assert subject.startswith('1 new paper: "xxx')


def test_subject_strips_line_breaks() -> None:
    digest = one_paper_digest()
    group = replace(digest.groups[0], rule="evil\r\nBcc: x@y.example")
    msg = build_message(replace(digest, groups=(group,)), SETTINGS, now=NOW)
    assert msg["Subject"] == '1 new paper: "evil Bcc: x@y.example"'
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
    assert "$x&lt;y$" in html
    assert "$a&lt;b$" in html
    assert "<b>bold</b>" not in html
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert "Schr\\&#34;odinger" in html or "Schr\\&quot;odinger" in html
    assert "bridges &amp; " in html


def test_text_part_is_literal(text: str) -> None:
    assert 'Schr\\"odinger bridges & <b>bold</b> $x<y$' in text
    assert "<script>alert(1)</script>" in text
    assert "&lt;" not in text and "&amp;" not in text


def test_html_has_no_external_resources_or_style_block(html: str) -> None:
    assert "<style" not in html
    assert "<img" not in html
    assert "<link" not in html
    assert "<script" not in html
    assert 'style="' in html


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
        "https://arxiv.org/html/2411.00001v1",
        "https://arxiv.org/pdf/2411.00003v3",
    ):
        assert f'href="{url}"' in html
        assert url in text


def test_doi_link_is_quoted(html: str, text: str) -> None:
    assert 'href="https://doi.org/10.1000/xyz%3C123%3E"' in html
    assert "10.1000/xyz&lt;123&gt;" in html
    assert "https://doi.org/10.1000/xyz%3C123%3E" in text
    assert "Journal ref: J. Robots 12 (2024) 1-10" in text
    assert "J. Robots 12 (2024) 1-10" in html


def test_authors_shortened_with_count(html: str, text: str) -> None:
    assert "Author 01, Author 02, Author 03 et al. (40 authors)" in html
    assert "Author 01, Author 02, Author 03 et al. (40 authors)" in text
    assert "Author 04" not in html
    assert "Ada Lovelace, Alan Turing" in text


def test_primary_category_marked(html: str, text: str) -> None:
    assert "<strong" in html and ">cs.RO</strong> (primary)" in html
    assert "cs.RO (primary), cs.LG" in text


def test_cross_and_update_markers(html: str, text: str) -> None:
    assert "cross-list from cs.AI" in html
    assert "cross-list from cs.AI" in text
    assert "updated: v3" in html
    assert "updated: v3" in text
    assert text.count("cross-list from") == 1
    assert text.count("updated: v") == 1


def test_groups_and_matched_rules(html: str, text: str) -> None:
    assert '== "diffusion policy" · 2 papers ==' in text
    assert '== "multi-agent" · 2 papers ==' in text
    assert 'Matched: "diffusion policy", "multi-agent"' in text
    assert "&middot; 2 papers" in html
    assert text.index('diffusion policy" · 2 papers') < text.index('"multi-agent" · 2 papers')


def test_omitted_papers_are_counted(html: str, text: str) -> None:
    assert "2 more matching papers were left out (max_papers = 4)." in text
    assert "2 more matching papers were left out (max_papers = 4)." in html
    one = render_digest(replace(sample_digest(), omitted=(make_paper(9),)))
    assert "1 more matching paper was left out (max_papers = 4)." in one.text
    assert "left out" not in render_digest(one_paper_digest()).text


def test_footer_in_both_parts(html: str, text: str) -> None:
    assert text.count(ACKNOWLEDGEMENT) == 1
    assert html.count(ACKNOWLEDGEMENT) == 1
    why = "You receive this because alice subscribed with these rules:"
    assert why in text and why in html
    assert "paperbell unsubscribe alice" in tidy(text)
    assert "paperbell unsubscribe alice" in html
    assert 'subject "unsubscribe alice"' in tidy(text)
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
    assert "&lt;i&gt;eve&lt;/i&gt;" in rendered.html
    assert "paperbell unsubscribe '<i>eve</i>'" in tidy(rendered.text)


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
