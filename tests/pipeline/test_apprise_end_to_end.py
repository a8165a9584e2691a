"""Issue 23's "done when", on real parts through the real command line: a config with an
email subscriber (SMTP to an aiosmtpd sink on loopback) who also has an ntfy and a `json://`
Apprise URL (stand-ins on loopback, reached by Apprise's own plugins) gets one digest at
each, every paper present and none cut; a third service (a Mattermost webhook whose URL
holds its token, so it comes from apprise_env) fails, is retried, shows in `paperbell
status`, and delays none of the others; once it answers, it catches up, and nothing is sent
twice anywhere; and the subscriber's personal Atom feed, served by the web app, lists every
paper delivered (valid Atom, RFC 4287's schema)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from click.testing import Result
from support.atom import atom_problems, parsed_feed
from support.chat import ChatServer, chat_server
from support.cli import invoke
from support.config import WEB_SECRET, sink_email, toml_table
from support.servers import SinkHandler, smtp_sink, web_server

from bot.channels.apprise_urls import destination
from bot.pipeline.wiring import build_channels, load_config
from bot.store import Store
from bot.web.app import create_app
from bot.web.pages import build_pages

pytestmark = pytest.mark.database

CONFIG = """\
version = 1

[database]
url = "{database_url}"

[digest]
window_days = 7

[web]
public_url = "https://papers.lab.example"
secret_key_env = "PAPERBELL_SECRET_KEY"

[apprise]
pace_seconds = 0
deadline_seconds = 20

[delivery]
retry_first_seconds = 1
retry_max_seconds = 1

[[sources]]
kind = "arxiv"
name = "arxiv-all"
categories = ["cs", "math", "quant-ph", "physics", "cond-mat", "astro-ph", "stat"]
url = "{feed_url}"

{email}
[[subscribers]]
name = "ada"
email = "ada@lab.example"
rules = ['tetraquark', '"shoulder surfing"', 'Schrödinger cat:math.AP', 'quantum']
max_papers = 40
apprise = ["{ntfy}", "{json}"]
apprise_env = "ADA_CHATS"
"""


@dataclass
class World:
    config: Path
    sink: SinkHandler
    ntfy: ChatServer
    webhook: ChatServer
    mattermost: ChatServer
    env: dict[str, str]

    def run(self, *args: str) -> Result:
        return invoke(*args, config=self.config, env=self.env)


@pytest.fixture
def world(tmp_path: Path, database_url: str, fixtures_dir: Path) -> Iterator[World]:
    listing = fixtures_dir / "arxiv_rss" / "rss_all-archives-combined_2024-11-28.xml"
    with (
        smtp_sink() as (sink, port),
        chat_server("ntfy") as ntfy,
        chat_server("json") as webhook,
        chat_server("mattermost") as mattermost,
    ):
        config = tmp_path / "config.toml"
        config.write_text(
            CONFIG.format(
                database_url=database_url,
                feed_url=listing.as_uri(),
                email=toml_table("email", sink_email(port, timeout=5)),
                ntfy=ntfy.url("papers"),
                json=webhook.url("hooks/papers"),
            )
        )
        token = "s3cr3tMattermostToken42"
        env = {"ADA_CHATS": mattermost.url(token), "PAPERBELL_SECRET_KEY": WEB_SECRET}
        yield World(config, sink, ntfy, webhook, mattermost, env)


def sent_papers(output: str) -> dict[str, int]:
    """Per place in `digest`'s report, the papers sent there."""
    found = {}
    for line in output.splitlines():
        match = re.match(r"ada (.+?): sent (\d+) papers?", line.strip())
        if match:
            found[match.group(1)] = int(match.group(2))
    return found


def paper_ids(text: str) -> list[str]:
    """The arXiv ids a message links to, in order (each paper's title links its page)."""
    return list(dict.fromkeys(re.findall(r"arxiv\.org/abs/(\d{4}\.\d{4,5})", text)))


def test_one_digest_at_each_place_and_a_failing_service_retried_without_delaying_them(
    world: World,
) -> None:
    polled = world.run("poll")
    assert polled.exit_code == 0, polled.output
    world.mattermost.fail = [500, 500]  # down for two attempts, and slow to say so
    world.mattermost.delay = 2.0
    mailed: list[float] = []
    world.sink.on_accept = lambda _: mailed.append(time.monotonic())
    check = world.run("check-config")
    assert check.exit_code == 0, check.output

    first = world.run("digest", "--since", "2024-11-28")
    print(first.output)  # what the operator sees (pytest -s)
    assert first.exit_code == 1, first.output  # a digest failed: exit code 1
    sent = sent_papers(first.output)
    mail = world.sink.messages
    assert len(mail) == 1 and mail[0]["To"] == "ada@lab.example"
    count = sent["<ada@lab.example>"]
    email_text = mail[0].get_body(("plain",)).get_content()  # type: ignore[union-attr]
    expected = paper_ids(email_text)
    assert len(expected) == count > 10

    # ntfy and the JSON webhook: the same papers, in the same order, each whole in one
    # message, within each plugin's limits; the ntfy digest took several messages.
    for server, path in ((world.ntfy, "papers"), (world.webhook, "hooks/papers")):
        url = server.url(path)
        label = destination(url).label
        assert sent[f"apprise {label}"] == count
        texts = server.texts
        assert paper_ids("\n".join(texts)) == expected
        for text in texts:
            assert len(text) <= destination(url).shape.body
        numbers = [int(n) for t in texts for n in re.findall(r"^\**(\d+)\.\**", t, re.M)]
        assert numbers == list(range(1, count + 1))  # numbered in the order shown, none cut
        assert "Thank you to arXiv" in texts[-1]
    assert len(world.ntfy.messages) > 1  # ntfy's limit split it, between papers
    first_title = world.ntfy.messages[0].title or ""
    assert first_title.endswith(f"(1/{len(world.ntfy.messages)})")
    # Markdown for the webhook where its plugin takes it (Apprise 2), escaped; plain for ntfy.
    markdown = destination(world.webhook.url("hooks/papers")).shape.markdown
    assert ("\\." in world.webhook.texts[0]) == markdown
    assert "\\." not in world.ntfy.texts[0]

    # The third service failed: retried, in `status`, its token never shown.
    assert world.mattermost.requests and not world.mattermost.messages
    mm = destination(world.env["ADA_CHATS"])
    failure = next(line for line in first.output.splitlines() if mm.label in line)
    assert "HTTP 500" in failure and "queued: next attempt" in failure, first.output
    assert "s3cr3tMattermostToken42" not in first.output
    status = world.run("status")
    assert status.exit_code == 0, status.output
    print(status.output)
    # Papers sent counts each paper once, however many places it went to.
    (ada_row,) = [line for line in status.output.splitlines() if line.startswith("ada ")]
    assert f" {count} " in ada_row and f" {3 * count} " not in ada_row, ada_row
    lines = [line for line in status.output.splitlines() if mm.label in line]
    assert lines and "retry at" in lines[0] and "HTTP 500" in lines[0], status.output
    assert "s3cr3tMattermostToken42" not in status.output
    ntfy_line = next(line for line in status.output.splitlines() if "ntfy://" in line)
    assert "last sent" in ntfy_line

    # The others were not held up by it: all delivered before it even answered.
    refused = world.mattermost.answered[0]
    assert mailed[0] < refused
    assert max(m.at for m in world.ntfy.messages + world.webhook.messages) < refused
    world.mattermost.delay = 0.0

    # A later run: the Mattermost webhook fails once more, then catches up; nothing else
    # is sent again.
    before = (len(world.sink.messages), len(world.ntfy.messages), len(world.webhook.messages))
    second = world.run("digest", "--since", "2024-11-28")
    third = world.run("digest", "--since", "2024-11-28")
    assert world.mattermost.messages, (second.output, third.output)
    assert paper_ids("\n".join(world.mattermost.texts)) == expected
    assert before == (
        len(world.sink.messages),
        len(world.ntfy.messages),
        len(world.webhook.messages),
    )
    after = world.run("status")
    line = next(line for line in after.output.splitlines() if mm.label in line)
    assert "last sent" in line and "retry" not in line
    assert "s3cr3tMattermostToken42" not in json.dumps([second.output, third.output, after.output])

    # Ada's personal Atom feed, from the web app the daemon serves: every paper delivered,
    # by any channel, once; valid Atom.
    config = load_config(world.config, environ=world.env)
    with Store.open(config.database_url()) as store:
        (ada,) = [
            s for s in store.subscribers.all(config.declared_subscribers()) if s.name == "ada"
        ]
        delivered = {each.paper.id for each in store.archive.delivered(ada.id, limit=10_000)}
        signer = config.web.link_signer()
        assert signer is not None and ada.id is not None
        feed_url = signer.feed_url(ada)
        channels = build_channels(config, store=store)
        pages = build_pages(config, store, channels, clock=lambda: datetime.now(UTC))
        with web_server(create_app(routes=pages or [])) as base:
            local = base.rstrip("/") + feed_url.removeprefix("https://papers.lab.example")
            answer = httpx.get(local, timeout=10)
    assert answer.status_code == 200, answer.text
    assert atom_problems(answer.content) == []
    entries = parsed_feed(answer.content).entries
    in_feed = [re.search(r"abs/(\d{4}\.\d{4,5})", e.link).group(1) for e in entries]
    assert len(in_feed) == len(set(in_feed)) == len(delivered)
    assert set(in_feed) == delivered and set(expected) <= delivered
    print(f"feed: {len(entries)} entries, {len(delivered)} papers delivered, valid Atom")


TWO_READERS = """\
version = 1

[database]
url = "{database_url}"

[digest]
window_days = 7

[apprise]
pace_seconds = 0
deadline_seconds = 20

[[sources]]
kind = "arxiv"
name = "arxiv-all"
categories = ["cs", "math", "quant-ph", "physics", "cond-mat", "astro-ph", "stat"]
url = "{feed_url}"

[[subscribers]]
name = "ada"
rules = ['quantum']
max_papers = 3
apprise = ["{hook}?+X-Reader=ada"]

[[subscribers]]
name = "bob"
rules = ['quantum']
max_papers = 5
apprise = ["{hook}?+X-Reader=bob"]
"""


def test_two_subscribers_with_one_destination_key_each_get_their_own_url(
    tmp_path: Path, database_url: str, fixtures_dir: Path
) -> None:
    """Two URLs that differ only in their query (a header, a thread) share a key: each
    subscriber's digest still goes with their own URL, never the other's."""
    listing = fixtures_dir / "arxiv_rss" / "rss_all-archives-combined_2024-11-28.xml"
    with chat_server("json") as webhook:
        config = tmp_path / "config.toml"
        config.write_text(
            TWO_READERS.format(
                database_url=database_url,
                feed_url=listing.as_uri(),
                hook=webhook.url("hook"),
            )
        )
        polled = invoke("poll", config=config, env={})
        assert polled.exit_code == 0, polled.output
        sent = invoke("digest", "--since", "2024-11-28", config=config, env={})
        assert sent.exit_code == 0, sent.output
    numbers: dict[str, list[int]] = {}
    for message in webhook.messages:
        reader = {k.lower(): v for k, v in message.headers.items()}.get("x-reader", "")
        found = re.findall(r"^\**(\d+)\.\**", message.text, re.M)
        numbers.setdefault(reader, []).extend(int(n) for n in found)
    assert numbers == {"ada": [1, 2, 3], "bob": [1, 2, 3, 4, 5]}
