"""The web pages on loopback for the tests: the app served by uvicorn (support.servers), a
real store, a clock the test moves, and mail to the SMTP sink. tests/conftest.py hands it
out as the `site` fixture."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

import httpx

from bot.config import Config
from bot.demo import bundled_papers
from bot.pipeline import DeliveryRequest, build_channels, deliver, wire
from bot.store import Store
from bot.web.app import create_app
from bot.web.pages import build_pages
from support.clock import Clock
from support.config import web_config
from support.servers import SinkHandler, smtp_sink, web_server

START = datetime(2024, 11, 28, 15, 0, tzinfo=UTC)
SITE = "https://papers.lab.example"


class Site:
    """The app on loopback, its store, its clock, and the mail it sent."""

    def __init__(self, config: Config, store: Store, clock: Clock, base: str, sink: SinkHandler):
        self.config, self.store, self.clock, self.base, self.sink = config, store, clock, base, sink
        self.http = httpx.Client(base_url=base, follow_redirects=False, timeout=10)

    def local(self, url: str) -> str:
        """A link from an email, pointed at the app on loopback."""
        assert url.startswith(SITE + "/"), url
        return url[len(SITE) :]

    def link(self, purpose: str, name: str) -> str:
        sub = self.subscriber(name)
        signer = self.config.web.link_signer()
        assert signer is not None and sub.id is not None
        return self.local(signer.url(purpose, sub, now=self.clock()))  # type: ignore[arg-type]

    def subscriber(self, name: str) -> Any:
        everyone = self.store.subscribers.all(
            self.config.declared_subscribers(), include_inactive=True
        )
        return next(s for s in everyone if s.name == name)

    def csrf(self, path: str) -> str:
        """Open a page (which sets the cookie) and read its form's token."""
        page = self.http.get(path)
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found, page.text
        return found.group(1)

    def post(self, path: str, data: dict[str, str], *, page: str | None = None) -> httpx.Response:
        token = self.csrf(page or path.rsplit("/", 1)[0] or path)
        return self.http.post(path, data={**data, "csrf": token})

    def deliver(self) -> list[Any]:
        return asyncio.run(
            deliver(
                wire(self.config, self.store),
                DeliveryRequest(since=START.date()),
                now=self.clock(),
                clock=self.clock,
            )
        )


# The lab's own chat servers (the tests' stand-ins) listen on loopback: the operator lets
# destinations given on the manage page reach them.
# The stand-ins on loopback may be reached, and are not paced: the pages' tests send whole
# digests to them, and pacing is the channel's tests' to check (tests/channels).
LAB_APPRISE = {"self_service_allow": ["127.0.0.1"], "pace_seconds": 0}


@contextmanager
def open_site(
    database_url: str,
    *,
    apprise: dict[str, Any] | None = None,
    web: dict[str, Any] | None = None,
    digest: dict[str, Any] | None = None,
) -> Iterator[Site]:
    """The pages with sign-up open to lab.example, the bundled papers stored, a subscriber
    from the config (lab) and one from the database (ada), the clock at START; `apprise`:
    the [apprise] section (by default LAB_APPRISE); `web`: more of [web]
    (trusted_proxies ...); `digest`: the [digest] section (max_rules ...)."""
    with smtp_sink() as (sink, port):
        config = web_config(
            database_url,
            port,
            subscribers=[
                {"name": "lab", "email": "lab@lab.example", "rules": ['"diffusion policy"']}
            ],
            web={"signup": True, "signup_domains": ["lab.example"], **(web or {})},
            apprise=LAB_APPRISE if apprise is None else apprise,
            digest=digest,
        )
        store = Store.open(config.database_url())
        clock = Clock(START)
        store.papers.upsert(bundled_papers(), now=START)
        store.subscribers.add(
            "ada",
            email="ada@lab.example",
            rules=['"large language models" reasoning', "robot cat:cs.RO"],
            now=START,
        )
        channels = build_channels(config, store=store)
        pages = build_pages(config, store, channels, clock=clock)
        app = create_app(routes=pages or [])
        with web_server(app, trusted_proxies=tuple(config.web.trusted_proxies)) as base:
            site = Site(config, store, clock, base, sink)
            yield site
            site.http.close()
        store.close()


ABS = re.compile(r"https://arxiv\.org/abs/(\S+?)(?=[\s\"<])")


def mail_to(site: Site, address: str) -> list[EmailMessage]:
    return [m for m in site.sink.messages if m["To"] == address]


def body(message: EmailMessage, kind: str) -> str:
    part = message.get_body((kind,))
    assert part is not None
    return str(part.get_content())


def emailed_papers(message: EmailMessage) -> set[str]:
    """The papers an email shows: each title's link (the text part lists each once)."""
    return set(ABS.findall(body(message, "plain")))


def feed_path(site: Site, name: str) -> str:
    signer = site.config.web.link_signer()
    assert signer is not None
    return site.local(signer.feed_url(site.subscriber(name)))


def archive_path(site: Site, name: str) -> str:
    signer = site.config.web.link_signer()
    assert signer is not None
    return site.local(signer.archive_url(site.subscriber(name)))
