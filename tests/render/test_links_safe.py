"""Only plain http(s) URLs become links, in every renderer (issue 17, fault 4: stored XSS
through feed links).

The papers are built directly, with a `javascript:` link and a `data:` code repository, as
if a source had let them through: the renderers are safe on their own. Emails are built and
parsed back, Slack messages built as posted, the manage page served over HTTP (uvicorn on
loopback, the `site` fixture), `paperbell try`'s lines rendered.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, date, datetime
from email.message import EmailMessage
from html.parser import HTMLParser
from typing import Any

import httpx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from support.pages import START, Site
from support.servers import web_server

from bot.core.links import web_url
from bot.core.models import Digest, DigestGroup, DigestItem, Paper, Subscriber
from bot.match.digest import Trial
from bot.render.email import DigestLinks, EmailSettings, render_digest
from bot.render.message import build_message
from bot.render.slack import build_posts
from bot.render.terminal import render_trial
from bot.rules import parse_rule
from bot.web.app import create_app

NOW = datetime(2024, 11, 28, 15, 0, tzinfo=UTC)
HOSTILE_LINKS = [
    "javascript:alert(1)",
    "JavaScript:alert(document.cookie)",
    " javascript:alert(1)",
    "java\tscript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "file:///etc/passwd",
    "https:\\\\evil.example",
    "https://arxiv.org@evil.example/",
    "https://evil.example/\u202egpj.exe",
    "https://evil.example/a b",
    "https://evil.example/\x00",
    "//evil.example/",
    "https://",
    "http://[::1",
    "https://x.example:port/",
    "https://" + "a" * 3000 + ".example/",
]
PLAIN_LINKS = [
    "https://arxiv.org/abs/2411.17700",
    "http://example.org/paper?id=1&v=2",
    "https://doi.org/10.1000/182",
    "https://例え.jp/論文",
    "HTTPS://EXAMPLE.ORG/",
]


@pytest.mark.parametrize("url", HOSTILE_LINKS)
def test_web_url_refuses_what_is_not_plain_http(url: str, caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="bot.core.links"):
        assert web_url(url, what="paper x: a link") is None
    assert "paper x: a link is left out" in caplog.text


@pytest.mark.parametrize("url", PLAIN_LINKS)
def test_web_url_keeps_plain_http_links(url: str) -> None:
    assert web_url(url) == url
    assert web_url(f"  {url}\n") == url  # a feed's surrounding whitespace goes


@settings(max_examples=300)
@given(st.one_of(st.text(), st.text().map(lambda t: "https://" + t)))
@example("https://a.example/\u2028")
@example("https://a.example/\x85")
def test_whatever_web_url_passes_is_a_plain_http_url(url: str) -> None:
    passed = web_url(url)
    if passed is not None:
        assert re.match(r"(?i)https?://[^/?#@\\]", passed)
        assert all(c.isprintable() and not c.isspace() for c in passed)
        assert not set(passed) & set('<>"`\\')


def hostile_digest(email: str | None = "ada@lab.example") -> Digest:
    """An arXiv paper whose code link is `data:`, and a feed paper whose own page is
    `javascript:`, both on Hugging Face."""
    arxiv = Paper(
        id="2411.17700",
        version=1,
        title="Robot learning with a data: code link",
        abstract="We study robots. " * 40,
        authors=("Ada Lovelace",),
        categories=("cs.RO",),
        announced=date(2024, 11, 28),
        github="data:text/html,<script>alert(1)</script>",
        github_stars=12,
        upvotes=3,
    )
    feed = Paper(
        id="url:javascript:alert(1)",
        version=1,
        title="Robot learning from a journal feed",
        abstract="A journal's robots. " * 40,
        authors=("Grace Hopper",),
        categories=(),
        announced=date(2024, 11, 28),
        link="javascript:alert(1)",
        github="javascript:alert(2)",
        dois=("10.1000/x\u202e",),
        upvotes=5,
    )
    items = tuple(DigestItem(paper=p, rules=("robot",), hits=()) for p in (arxiv, feed))
    return Digest(
        subscriber=Subscriber(name="ada", email=email, rules=("robot",)),
        digest_id="d1",
        created=NOW,
        groups=(DigestGroup(rule="robot", items=items),),
        announced=(date(2024, 11, 28),),
    )


class Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [value or "" for name, value in attrs if name in ("href", "src", "action")]


def hrefs(html: str) -> list[str]:
    parser = Hrefs()
    parser.feed(html)
    return parser.hrefs


def assert_only_plain_links(found: list[str]) -> None:
    bad = [h for h in found if not re.match(r"(https?://|mailto:|#)", h)]
    assert not bad, bad


def test_an_email_links_only_plain_http_urls(caplog: Any) -> None:
    digest = hostile_digest()
    with caplog.at_level(logging.WARNING, logger="bot.core.links"):
        message = build_message(
            digest,
            EmailSettings(from_addr="digest@papers.lab.example"),
            now=NOW,
            links=DigestLinks(unsubscribe="https://papers.lab.example/unsubscribe/t"),
        )
    html_part, text_part = message.get_body(("html",)), message.get_body(("plain",))
    assert isinstance(html_part, EmailMessage) and isinstance(text_part, EmailMessage)
    html, text = str(html_part.get_content()), str(text_part.get_content())
    found = hrefs(html)
    assert_only_plain_links(found)
    assert "https://arxiv.org/abs/2411.17700" in found  # the good links are all still there
    assert "https://huggingface.co/papers/2411.17700" in found
    for bad in ("javascript:", "data:text", "alert("):
        assert bad not in html and bad not in text, bad
    assert "Robot learning from a journal feed" in html  # the paper is there, unlinked
    assert not re.search(r"(?m)^\s*(javascript|data):", text)
    assert "Code" not in text.split("Robot learning with")[1].split("Robot learning from")[0]
    assert "left out" in caplog.text and "javascript:alert(1)" in caplog.text


def test_the_html_part_has_no_link_to_a_script_even_as_text() -> None:
    """The `url:` id is the only place the link's text shows: never in an attribute."""
    rendered = render_digest(hostile_digest())
    assert not re.search(
        r"""(href|src)\s*=\s*["']?\s*(javascript|data|vbscript):""", rendered.html, re.I
    )


def test_slack_posts_link_only_plain_http_urls() -> None:
    posts = build_posts(hostile_digest(email=None))
    blob = " ".join(str(p.to_dict()) for p in posts)
    links = re.findall(r"<([^|>]*)[|>]", blob)
    assert len(links) >= 4, blob
    assert all(re.match(r"https?://", link) for link in links), links
    assert "javascript:" not in blob and "data:text" not in blob
    assert "Robot learning from a journal feed" in blob


def test_paperbell_try_prints_no_terminal_escape_from_a_feed() -> None:
    paper = Paper(
        id="url:https://x.example/\x1b]8;;javascript:alert(1)\x1b\\",
        version=1,
        title="Robot \x1b[2J\x1b[31mlearning\x07",
        abstract="robots \x9b31m here",
        authors=("Ada\x1b[0m",),
        categories=("cs.RO",),
        announced=date(2024, 11, 28),
    )
    item = DigestItem(paper=paper, rules=("robot",), hits=())
    trial = Trial(rule=parse_rule("robot"), items=(item,), papers=1, days=())
    lines = render_trial(trial, mark=lambda text: f"\x1b[1m{text}\x1b[0m")
    printed = "\n".join(lines).replace("\x1b[1m", "").replace("\x1b[0m", "")
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", printed), printed
    assert "Robot \ufffd[2J\ufffd[31mlearning\ufffd" in printed


def test_the_manage_page_links_no_script_from_a_feed(site: Site, caplog: Any) -> None:
    hostile = Paper(
        id="url:javascript:alert(1)",
        version=1,
        title="A robot that dances",
        abstract="robot robot",
        authors=("Mallory",),
        categories=("cs.RO",),
        announced=START.date(),
        link="javascript:alert(document.cookie)",
    )
    site.store.papers.upsert([hostile], now=START)
    # the paper is this rule's example
    site.store.subscribers.add_rule("ada", "ti:dances", now=START)
    site.deliver()  # the page shows what each rule matched, counted when digests are built
    with caplog.at_level(logging.WARNING, logger="bot.core.links"):
        page = site.http.get(site.link("manage", "ada"))
    assert page.status_code == 200
    assert_only_plain_links(
        [h for h in hrefs(page.text) if not h.startswith(("/", "https://papers.lab.example/"))]
    )
    assert "javascript:" not in page.text
    assert "A robot that dances" in page.text, "the paper should be among the examples"
    # Dropped before it was stored (bot.sources.feedtext), or else by the page (bot.core.links).
    assert "dropped the link" in caplog.text or "left out" in caplog.text


def test_every_response_carries_the_security_headers(site: Site) -> None:
    for response in (
        site.http.get(site.link("manage", "ada")),
        site.http.get("/manage/forged.token"),
        site.http.get("/subscribe"),
        site.http.post("/rules/check", data={"rule": "a"}),
        site.http.get("/static/rule-check.js"),
        site.http.get("/no/such/page"),
    ):
        headers = response.headers
        policy = headers["content-security-policy"]
        scripts = re.search(r"script-src([^;]*)", policy)
        assert scripts is not None and "unsafe-inline" not in scripts.group(1), policy
        assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
    script = site.http.get("/static/rule-check.js")
    assert script.status_code == 200 and "/rules/check" in script.text
    assert script.headers["content-type"].startswith("text/javascript")


def test_hsts_only_when_the_public_url_is_https() -> None:
    async def ok(request: Any) -> Any:
        return PlainTextResponse("ok")

    routes = [Route("/ok", ok)]
    for public_url, expected in (
        ("https://papers.lab.example", "max-age=31536000"),
        ("http://localhost:8025", None),
        (None, None),
    ):
        with web_server(create_app(routes=routes, public_url=public_url)) as base:
            response = httpx.get(base + "/ok")
        assert response.headers.get("strict-transport-security") == expected, public_url


def test_no_page_has_inline_script_or_event_handlers(site: Site) -> None:
    """What the policy would block must not be needed: every script is a file."""
    for path in (site.link("manage", "ada"), "/subscribe", site.link("unsubscribe", "ada")):
        page = site.http.get(path).text
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page), path
        assert not re.search(r"\son[a-z]+\s*=", page), path
        assert "javascript:" not in page
