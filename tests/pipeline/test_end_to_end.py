"""The whole path on real parts: the real feed over HTTP on loopback, a real database, the CLI,
and digests delivered over SMTP to an aiosmtpd server, then parsed and checked."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

import pytest
from click.testing import Result
from support.cli import clean_env, invoke
from support.config import sink_email, toml_table
from support.servers import FeedServer, Route, SinkHandler, feed_server, smtp_sink

from bot.demo import free_port

pytestmark = pytest.mark.database

ARCHIVES = '["astro-ph", "cond-mat", "physics", "quant-ph", "math", "cs", "stat"]'
CONFIG = """\
version = 1

[database]
url = "{database_url}"

[digest]
window_days = 7

[[sources]]
kind = "arxiv"
name = "arxiv-all"
categories = {archives}
url = "{feed_url}"

{email}
[[subscribers]]
name = "ada"
email = "ada@lab.example"
rules = ['tetraquark', '"shoulder surfing"', 'Schrödinger cat:math.AP']

[[subscribers]]
name = "grace"
email = "grace@lab.example"
rules = ['"quantum error correction"']
include = ["new", "cross", "replace"]
"""


@dataclass
class World:
    config: Path
    feed: FeedServer
    sink: SinkHandler

    def run(self, *args: str) -> Result:
        return invoke(*args, config=self.config)


@pytest.fixture
def world(tmp_path: Path, database_url: str, full_feed_bytes: bytes) -> Iterator[World]:
    with feed_server() as feed, smtp_sink() as (sink, port):
        feed.routes["/rss/all"] = Route(full_feed_bytes)
        config = tmp_path / "config.toml"
        config.write_text(
            CONFIG.format(
                database_url=database_url,
                archives=ARCHIVES,
                feed_url=feed.url("/rss/all"),
                email=toml_table("email", sink_email(port, timeout=5)),
            )
        )
        yield World(config, feed, sink)


def by_recipient(sink: SinkHandler) -> dict[str, list[EmailMessage]]:
    out: dict[str, list[EmailMessage]] = {}
    for message in sink.messages:
        out.setdefault(str(message["To"]), []).append(message)
    return out


def test_poll_then_digest_delivers_each_paper_once(world: World) -> None:
    result = world.run("poll")
    assert result.exit_code == 0, result.output
    assert "arxiv-all: 1,504 items read, 1,504 new, 0 updated" in result.output
    assert world.feed.requests[0][1]["User-Agent"].startswith("paperbell/")

    again = world.run("poll")  # the server answers 304 to the stored ETag
    assert again.exit_code == 0 and "unchanged (HTTP 304)" in again.output
    assert world.feed.requests[1][1].get("If-None-Match")

    dry = world.run("digest", "--dry-run", "--since", "2024-11-28")
    assert dry.exit_code == 0, dry.output
    assert "would get" in dry.output and "nothing was sent or recorded" in dry.output
    assert world.sink.messages == []

    sent = world.run("digest", "--since", "2024-11-28")
    assert sent.exit_code == 0, sent.output
    assert re.search(r"ada <ada@lab.example>: sent \d+ papers", sent.output)
    mail = by_recipient(world.sink)
    assert set(mail) == {"ada@lab.example", "grace@lab.example"}
    check_message(mail["ada@lab.example"][0])

    rerun = world.run("digest", "--since", "2024-11-28")
    assert rerun.exit_code == 0
    assert rerun.output.count("no new matching papers") == 2
    assert len(world.sink.messages) == 2  # nothing sent twice


def test_an_email_run_where_nobody_gave_a_verdict_loads_no_ranking_or_slack_library(
    world: World,
) -> None:
    """Papers like these rank with numpy and scipy, Slack's async clients bring aiohttp:
    together over half a second and some 40 MB of a run's start. An email-only run on a
    site where nobody liked or disliked a paper loads none of them."""
    assert world.run("poll").exit_code == 0
    code = (
        "import sys\n"
        "from bot.cli import main\n"
        "try:\n"
        f"    main(['digest', '-c', {str(world.config)!r}, '--dry-run', '--since', '2024-11-28'])\n"
        "finally:\n"
        "    heavy = ('numpy', 'scipy', 'aiohttp')\n"
        "    print('loaded:', sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=clean_env()
    )
    assert done.returncode == 0, done.stderr
    assert "would get" in done.stdout and "loaded: []" in done.stdout, done.stdout


def check_message(message: EmailMessage) -> None:
    assert message.get_content_type() == "multipart/alternative"
    parts = [p.get_content_type() for p in message.iter_parts()]
    assert parts == ["text/plain", "text/html"]
    assert re.fullmatch(r"<paperbell\.[0-9a-f]{32}@paperbell\.example>", message["Message-ID"])
    assert message["Date"] and message["List-Id"]
    assert message["List-Unsubscribe"].startswith("<mailto:papers@paperbell.example")
    assert message["From"].addresses[0].addr_spec == "papers@paperbell.example"
    assert re.match(r"\d+ new papers: ", message["Subject"])

    text = message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    html = message.get_body(("html",)).get_content()  # type: ignore[union-attr]
    ack = "Thank you to arXiv for use of its open access interoperability."
    assert ack in text and ack in html
    # The tetraquark paper: TeX math with '<' ($M<7$, shown as M<7 when the abstract is not
    # cut before it) is escaped in HTML, literal in the text part.
    assert "https://arxiv.org/abs/2411.17962" in html and "https://arxiv.org/abs/2411.17962" in text
    assert "M<7" not in html
    assert ("M<7" in text) == ("M&lt;7" in html)
    assert 'href="https://arxiv.org/pdf/2411.17962v1"' in html
    assert html.count('href="https://arxiv.org/abs/2411.17962"') == 1  # its title: one link
    assert re.search(r"<mark[^>]*>[Tt]etraquark</mark>", html)
    # '&' in a title (TeX's \&, shown as &) is escaped once, never doubled or raw.
    assert "Attributes &amp; Preferences" in html
    assert "&amp;amp;" not in html


def test_v1_then_v2_replacement(world: World, full_feed_bytes: bytes) -> None:
    assert world.run("poll").exit_code == 0
    assert world.run("digest", "--since", "2024-11-28").exit_code == 0
    grace_first = by_recipient(world.sink)["grace@lab.example"]
    assert len(grace_first) == 1
    qec = re.findall(
        r"https://arxiv.org/abs/([\d.]+)", grace_first[0].get_body(("plain",)).get_content()
    )  # type: ignore[union-attr]
    paper_id = qec[0]

    # The next day's listing announces a v2 of that paper (a real item, re-versioned).
    body = full_feed_bytes.decode()
    item = next(i for i in re.findall(r"<item>.*?</item>", body, re.S) if f"/abs/{paper_id}<" in i)
    version = int(re.search(rf"{re.escape(paper_id)}v(\d+)", item).group(1))  # type: ignore[union-attr]
    v2 = (
        item.replace(f"{paper_id}v{version}", f"{paper_id}v{version + 1}")
        .replace("Announce Type: new", "Announce Type: replace")
        .replace("Announce Type: cross", "Announce Type: replace-cross")
        .replace(">new<", ">replace<")
        .replace("Thu, 28 Nov 2024", "Fri, 29 Nov 2024")
    )
    channel = body.split("<item>")[0].replace("Thu, 28 Nov 2024", "Fri, 29 Nov 2024")
    world.feed.routes["/rss/all"] = Route((channel + v2 + "</channel>\n</rss>\n").encode())
    result = world.run("poll")
    assert "1 item read, 0 new, 1 updated" in result.output, result.output

    out = world.run("digest", "--since", "2024-11-28")
    assert out.exit_code == 0, out.output
    mail = by_recipient(world.sink)
    assert len(mail["grace@lab.example"]) == 2  # she asked for updates: v2 comes once
    update = mail["grace@lab.example"][1].get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert paper_id in update and f"v{version + 1}" in update
    assert len(mail["ada@lab.example"]) == 1
    assert world.run("digest", "--since", "2024-11-28").output.count("no new matching") == 2


def test_unreachable_smtp_records_nothing(world: World, tmp_path: Path) -> None:
    assert world.run("poll").exit_code == 0
    text = world.config.read_text()
    good_port = re.search(r"port = (\d+)", text).group(1)  # type: ignore[union-attr]
    world.config.write_text(text.replace(f"port = {good_port}", f"port = {free_port()}"))
    down = world.run("digest", "--since", "2024-11-28")
    assert down.exit_code == 1
    assert "cannot connect to the SMTP server 127.0.0.1:" in down.output
    assert "(queued: next attempt" in down.output
    assert "Traceback" not in down.output
    status = world.run("status")
    assert status.exit_code == 0, status.output
    assert re.search(
        r"^ada +active +daily at 08:00 \(UTC\) +.+? +0 +never +1 +0 +retry .*cannot connect",
        status.output,
        re.M,
    )
    assert "outbox: 2 pending, 0 sent, 0 failed, 0 in flight" in status.output
    assert re.search(r"^arxiv-all +\S+ \S+ +ok +1504 +1504 +2024-11-28", status.output, re.M)

    world.config.write_text(text)  # the server is back: everything is still owed
    up = world.run("digest", "--since", "2024-11-28")
    assert up.exit_code == 0 and up.output.count(": sent ") == 2
    status = world.run("status")
    assert re.search(
        r"^grace +active +daily at 08:00 \(UTC\) +.+? +\d+ +\d{4}-\d\d-\d\d \S+ +0 +0",
        status.output,
        re.M,
    )
    assert "outbox: 0 pending, 2 sent, 0 failed, 0 in flight" in status.output


def test_refused_recipient_does_not_stop_the_others(world: World) -> None:
    assert world.run("poll").exit_code == 0
    world.sink.refuse["ada@lab.example"] = "550 5.1.1 no such mailbox"
    result = world.run("digest", "--since", "2024-11-28")
    assert result.exit_code == 1
    assert "ada <ada@lab.example>: FAILED" in result.output and "550" in result.output
    assert "grace <grace@lab.example>: sent" in result.output
    status = world.run("status").output
    assert re.search(
        r"^ada +active +daily at 08:00 \(UTC\) +.+? +0 +never +0 +1 +recipient refused: .*550",
        status,
        re.M,
    )
    del world.sink.refuse["ada@lab.example"]
    retry = world.run("digest", "--since", "2024-11-28")
    assert "ada <ada@lab.example>: sent" in retry.output
    assert "grace <grace@lab.example>: no new matching papers" in retry.output
    assert "outbox: 0 pending, 2 sent, 1 failed, 0 in flight" in world.run("status").output


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        (Route(b"<html><body>Service unavailable</body></html>", 200, "text/html"), "HTML"),
        (Route(b"\x00\x01garbage"), "binary data"),
        (Route(b"", 200), "empty"),
    ],
)
def test_bad_feed_is_a_clear_error_and_stores_nothing(
    world: World, route: Route, expected: str
) -> None:
    world.feed.routes["/rss/all"] = route
    result = world.run("poll")
    assert result.exit_code == 1
    assert "arxiv-all: ERROR" in result.output and expected in result.output
    assert "Traceback" not in result.output
    assert world.run("digest", "--since", "2024-11-28").output.count("no new matching") == 2


def test_error_feed_names_the_category(world: World, fixtures_dir: Path) -> None:
    error = fixtures_dir / "arxiv_rss" / "edge_error-feed_bad-archive-astroph_2024-11-28.xml"
    world.feed.routes["/rss/all"] = Route(error.read_bytes(), status=400)
    result = world.run("poll")
    assert result.exit_code == 1
    assert "astroph" in result.output and "Traceback" not in result.output


def test_bad_config_lists_problems_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'version = 1\n[[subscribers]]\nname = "x"\nemail = "nope"\nrules = ["ok", "\\"open"]\n'
    )
    result = invoke("check-config", config=bad)
    assert result.exit_code == 2
    assert "subscribers[0].email:" in result.output
    assert "subscribers[0].rules[1]:" in result.output
    assert "Traceback" not in result.output


def test_smtp_timeout_mid_batch_fails_those_digests_cleanly(world: World) -> None:
    """A server that stalls after DATA: each digest times out, is reported, not recorded."""
    assert world.run("poll").exit_code == 0
    world.sink.stall = 2.0
    text = world.config.read_text()
    world.config.write_text(text.replace("timeout = 5", "timeout = 0.5"))
    result = world.run("digest", "--since", "2024-11-28")
    assert result.exit_code == 1
    assert result.output.count("FAILED SMTP error") == 2, result.output
    assert "Traceback" not in result.output
    world.sink.stall = 0.0
    world.config.write_text(text)
    retry = world.run("digest", "--since", "2024-11-28")
    assert retry.exit_code == 0 and retry.output.count(": sent ") == 2
