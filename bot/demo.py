"""`paperbell demo`: the whole pipeline, offline, on a real arXiv listing bundled with the package.

Starts an SMTP server (aiosmtpd) on loopback that saves what it receives, polls the bundled
feed through the ordinary arXiv source (a file:// URL), and delivers real digests to example
subscribers over real SMTP. State lives in the output folder, so a second run shows that
nothing is sent twice.
"""

from __future__ import annotations

import gzip
import re
import socket
from collections.abc import Callable
from datetime import date
from email import message_from_bytes, policy
from importlib.resources import files
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

from bot.checks import ARCHIVES
from bot.config import parse_config
from bot.models import Paper
from bot.pipeline import build_channels, deliver, poll
from bot.slack_standin import SlackStandIn
from bot.sources.arxiv import parse_listing
from bot.sources.http import PoliteFetcher, make_client
from bot.store import Store, utcnow

DEMO_FEED = "rss_all-archives-combined_2024-11-28.xml.gz"
DEMO_DAY = date(2024, 11, 28)
ALL_ARCHIVES = sorted(ARCHIVES)  # the bundled feed is the whole of arXiv

DEMO_CHANNEL = "#robot-learning"
DEMO_TOKEN_VARIABLE = "PAPERBELL_DEMO_SLACK_TOKEN"

DEMO_SUBSCRIBERS: list[dict[str, Any]] = [
    {
        "name": "ada",
        "email": "ada@lab.example",
        "rules": ['"large language models" reasoning', '"reinforcement learning" -survey'],
        "max_papers": 15,
    },
    {
        "name": "grace",
        "email": "grace@lab.example",
        "rules": ['"quantum error correction"', "qubit cat:quant-ph"],
        "max_papers": 10,
    },
    {
        "name": "robotics-lab",
        "email": "robotics@lab.example",
        "rules": ["robot cat:cs.RO", '"diffusion policy"', "multi-agent"],
        "categories": ["cs"],
        "slack_channel": DEMO_CHANNEL,  # beside the email: the lab's channel
    },
]


class SavingHandler:
    """An aiosmtpd handler that saves each message as .eml, and its HTML part as .html."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.saved: dict[str, list[Path]] = {}

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        content: bytes = envelope.original_content or envelope.content
        message = message_from_bytes(content, policy=policy.default)
        recipient = envelope.rcpt_tos[0]
        local = re.sub(r"[^A-Za-z0-9_.-]", "_", recipient.split("@")[0])
        msgid = str(message.get("Message-ID", "")).strip("<>").split("@")[0]
        digest = msgid.rsplit(".", 1)[-1][:10] or str(len(self.saved))
        day = date.today().isoformat()
        stem = self.folder / f"{local}-{day}-{digest}"
        self.folder.mkdir(parents=True, exist_ok=True)
        stem.with_suffix(".eml").write_bytes(content)
        html = message.get_body(preferencelist=("html",))
        if html is not None:
            stem.with_suffix(".html").write_text(html.get_content(), encoding="utf-8")
        self.saved.setdefault(recipient, []).append(stem.with_suffix(".eml"))
        return "250 Message accepted for delivery"


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bundled_feed_bytes() -> bytes:
    """The real arXiv listing shipped with the package, decompressed."""
    return gzip.decompress((files("bot") / "data" / "demo" / DEMO_FEED).read_bytes())


def bundled_papers() -> list[Paper]:
    """The papers of the bundled listing, parsed as the arXiv source parses them."""
    return list(parse_listing(bundled_feed_bytes(), source="demo").papers)


async def run_demo(out_dir: Path, *, echo: Callable[[str], None] = print) -> int:
    """Run the demo into `out_dir`; return an exit code."""
    out_dir = out_dir.resolve()
    feed = out_dir / "feed" / DEMO_FEED.removesuffix(".gz")
    if not feed.exists():
        feed.parent.mkdir(parents=True, exist_ok=True)
        feed.write_bytes(bundled_feed_bytes())
    mail_dir = out_dir / "mail"
    handler = SavingHandler(mail_dir)
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    slack = SlackStandIn().start()
    slack.add_channel("C0DEMOROBOT", DEMO_CHANNEL.removeprefix("#"))
    config = parse_config(
        {
            "version": 1,
            "database": {"url": f"sqlite:///{out_dir / 'paperbell-demo.sqlite'}"},
            "digest": {"window_days": 7},
            "sources": [
                {
                    "kind": "arxiv",
                    "name": "arxiv-all",
                    "categories": ALL_ARCHIVES,
                    "url": feed.as_uri(),
                }
            ],
            "email": {
                "from": "paperbell demo <digest@paperbell.example>",
                "host": "127.0.0.1",
                "port": port,
                "security": "none",
            },
            "slack": {
                "bot_token_env": DEMO_TOKEN_VARIABLE,
                "api_url": slack.base_url,
                "post_interval_seconds": 0,
            },
            "subscribers": DEMO_SUBSCRIBERS,
        },
        source="demo config",
        environ={DEMO_TOKEN_VARIABLE: slack.token},
    )
    store = Store.open(config.database_url())
    controller.start()
    slack_file = out_dir / "slack" / "posted.json"
    try:
        now = utcnow()
        echo(f"SMTP server listening on 127.0.0.1:{port}; mail is saved in {mail_dir}")
        echo(f"Slack stand-in on {slack.base_url}; what is posted is saved in {slack_file}")
        async with make_client() as client:
            reports = await poll(config, store, PoliteFetcher(client), now=now)
        for r in reports:
            if r.result == "error":
                echo(f"poll {r.source}: ERROR {r.error}")
                return 1
            echo(
                f"poll {r.source}: {r.items} papers in the {r.announced} listing, "
                f"{r.new} new, {r.unchanged} already stored"
            )
        results = await deliver(config, store, build_channels(config), now=now, since=DEMO_DAY)
    finally:
        controller.stop()
        store.close()
        slack.stop()
    if slack.messages():
        slack_file.parent.mkdir(parents=True, exist_ok=True)
        slack.save_json(slack_file)
    failed = 0
    for d in results:
        if d.status == "sent" and d.channel == "slack":
            posts = len(slack.messages())
            echo(
                f"digest {d.subscriber} {d.target}: {d.count} papers posted "
                f"(a summary and its thread, {posts} messages) -> {slack_file}"
            )
        elif d.status == "sent":
            files_ = handler.saved.get(d.address or "", [])
            where = f" -> {files_[-1]} (+ .html)" if files_ else ""
            echo(f"digest {d.subscriber} {d.target}: {d.count} papers sent{where}")
        elif d.status == "nothing":
            echo(f"digest {d.subscriber} {d.target}: nothing new (already delivered)")
        else:
            failed += 1
            echo(f"digest {d.subscriber}: {d.status.upper()} {d.error or ''}")
    sent = sum(1 for d in results if d.status == "sent")
    if slack.messages():
        echo(f"the Slack posts (Block Kit JSON, as Slack would receive them): {slack_file}")
    if sent == 0 and not failed:
        echo("nothing was sent twice: every matching paper had already been delivered.")
    echo(f"done: {sent} digests sent; open the .html files in {mail_dir} to see them.")
    echo("try a rule of your own on the same papers: paperbell try '\"diffusion policy\"' --demo")
    return 1 if failed else 0
