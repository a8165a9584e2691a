"""`paperbell demo`: the whole pipeline, offline, on the real listings bundled with the package.

Starts an SMTP server on loopback that saves what it receives (`bot.demo.smtp`) and the
Slack stand-in, polls the bundled feeds (`bot.demo.data`) through the ordinary sources
(file:// URLs), and delivers real digests to example subscribers over real SMTP and the
Slack Web API. State lives in the output folder, so a second run shows that nothing is sent
twice. Wiring and what it tells the reader only: every stage is the pipeline's own.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

from bot.channels import Channel
from bot.config import Config
from bot.core.plurals import plural
from bot.demo.data import (
    ALL_ARCHIVES,
    ARXIV_SOURCE,
    DEMO_CHANNEL,
    DEMO_DAY,
    DEMO_FEED,
    DEMO_HF_DAY_FILE,
    DEMO_SUBSCRIBERS,
    HF_SOURCE,
    IN_CONFIG,
    bundled_feed_bytes,
    bundled_hf_bytes,
)
from bot.demo.slack_standin import SlackStandIn
from bot.demo.smtp import SavingHandler, mail_server
from bot.pipeline import DeliveryReport, DeliveryRequest, build_channels, deliver, poll, wire
from bot.pipeline.wiring import parse_config
from bot.sources.http import PoliteFetcher, make_client
from bot.store import Store, utcnow
from bot.web.app import create_app, make_server, serve_listening
from bot.web.pages import build_pages

DEMO_TOKEN_VARIABLE = "PAPERBELL_DEMO_SLACK_TOKEN"
DEMO_SECRET_VARIABLE = "PAPERBELL_DEMO_SECRET_KEY"
DEMO_WEB_PORT = 8025


def demo_secret(out_dir: Path) -> str:
    """The demo's key for signing links, made once and kept in the output folder, so the
    links in the demo emails keep working."""
    path = out_dir / "web-secret-key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(32), encoding="utf-8")
        path.chmod(0o600)
    return path.read_text(encoding="utf-8").strip()


def demo_config(
    out_dir: Path,
    *,
    feed: Path,
    hf_day: Path,
    smtp_port: int,
    slack: SlackStandIn,
    web_port: int,
) -> Config:
    """The demo's config: the bundled feed, SMTP and Slack stand-ins on loopback, and the
    web pages at http://localhost:PORT (what `demo --serve` serves)."""
    return parse_config(
        {
            "version": 1,
            "database": {"url": f"sqlite:///{out_dir / 'paperbell-demo.sqlite'}"},
            "digest": {"window_days": 7},
            "sources": [
                {
                    "kind": "arxiv",
                    "name": ARXIV_SOURCE,
                    "categories": ALL_ARCHIVES,
                    "url": feed.as_uri(),
                },
                {"kind": "huggingface", "name": HF_SOURCE, "url": hf_day.as_uri()},
            ],
            "email": {
                "from": "paperbell demo <digest@paperbell.example>",
                "host": "127.0.0.1",
                "port": smtp_port,
                "security": "none",
            },
            "slack": {
                "bot_token_env": DEMO_TOKEN_VARIABLE,
                "api_url": slack.base_url,
                "post_interval_seconds": 0,
            },
            "web": {
                "public_url": f"http://localhost:{web_port}",
                "secret_key_env": DEMO_SECRET_VARIABLE,
                "port": web_port,
            },
            "subscribers": [s for s in DEMO_SUBSCRIBERS if s["name"] in IN_CONFIG],
        },
        source="demo config",
        environ={DEMO_TOKEN_VARIABLE: slack.token, DEMO_SECRET_VARIABLE: demo_secret(out_dir)},
    )


async def run_demo(
    out_dir: Path,
    *,
    echo: Callable[[str], None] = print,
    web_port: int | None = None,
    serve: asyncio.Event | None = None,
) -> int:
    """Run the demo into `out_dir`; return an exit code. With `serve`, then serve the pages
    the emails link to (manage, unsubscribe) on `web_port` until `serve` is set."""
    out_dir = out_dir.resolve()
    feed = out_dir / "feed" / DEMO_FEED.removesuffix(".gz")
    hf_day = out_dir / "feed" / DEMO_HF_DAY_FILE.removesuffix(".gz")
    for path, content in ((feed, bundled_feed_bytes), (hf_day, bundled_hf_bytes)):
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content())
    mail_dir = out_dir / "mail"
    controller, handler = mail_server(mail_dir)
    port = controller.port
    slack = SlackStandIn().start()
    slack.add_channel("C0DEMOROBOT", DEMO_CHANNEL.removeprefix("#"))
    web_port = web_port or DEMO_WEB_PORT
    config = demo_config(
        out_dir, feed=feed, hf_day=hf_day, smtp_port=port, slack=slack, web_port=web_port
    )
    store = Store.open(config.database_url(), upgrade=True)  # its own: an older demo's too
    _add_demo_people(store)
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
            merged = f", {r.merged:,} merged with stored papers" if r.merged else ""
            echo(
                f"poll {r.source}: {plural(r.items, 'paper')} in the {r.announced} listing, "
                f"{r.new:,} new, {r.unchanged:,} already stored{merged}"
            )
        channels = build_channels(config, store=store)
        parts = wire(config, store, channels)
        results = await deliver(parts, DeliveryRequest(since=DEMO_DAY), now=now)
        if slack.messages():
            slack_file.parent.mkdir(parents=True, exist_ok=True)
            slack.save_json(slack_file)
        code = _summary(results, handler, slack, slack_file, mail_dir, echo)
        if serve is not None:
            if not await _serve_pages(config, store, channels, web_port, serve, echo):
                return 1
        else:
            echo(
                "the emails link to their manage and unsubscribe pages: "
                "`paperbell demo --serve` serves them on localhost"
            )
        return code
    finally:
        controller.stop()
        store.close()
        slack.stop()


def _add_demo_people(store: Store) -> None:
    """Store the demo's self-subscribed people, on the first run only (later runs keep what
    their manage pages changed)."""
    for sub in DEMO_SUBSCRIBERS:
        if sub["name"] in IN_CONFIG or store.subscribers.get(sub["name"]) is not None:
            continue
        store.subscribers.add(
            sub["name"],
            email=sub["email"],
            rules=sub["rules"],
            max_papers=sub.get("max_papers"),
            categories=sub.get("categories", ()),
            now=utcnow(),
        )


async def _serve_pages(
    config: Config,
    store: Store,
    channels: Mapping[str, Channel],
    port: int,
    stop: asyncio.Event,
    echo: Callable[[str], None],
) -> bool:
    """Serve the pages the demo emails link to, until `stop` is set; False if they could
    not be served (the port taken)."""
    pages = build_pages(config, store, channels, clock=utcnow)
    server = make_server(create_app(routes=pages or []), host="127.0.0.1", port=port)
    task = asyncio.create_task(serve_listening(server))
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    if task.done():
        echo(f"cannot serve the pages: is port {port} free? (`--port`)")
        return False
    echo(
        f"serving the pages the emails link to on http://localhost:{port} "
        "(open a digest's .html and click “Manage your subscription”); Ctrl-C stops"
    )
    await stop.wait()
    server.should_exit = True
    return await task


def _summary(
    results: list[DeliveryReport],
    handler: SavingHandler,
    slack: SlackStandIn,
    slack_file: Path,
    mail_dir: Path,
    echo: Callable[[str], None],
) -> int:
    """Say what the demo delivered; the exit code."""
    failed = 0
    for d in results:
        if d.status == "sent" and d.channel == "slack":
            posts = len(slack.messages())
            echo(
                f"digest {d.subscriber} {d.target}: {plural(d.count, 'paper')} posted "
                f"(a summary and its thread, {plural(posts, 'message')}) -> {slack_file}"
            )
        elif d.status == "sent":
            files_ = handler.saved.get(d.address or "", [])
            where = f" -> {files_[-1]} (+ .html)" if files_ else ""
            echo(f"digest {d.subscriber} {d.target}: {plural(d.count, 'paper')} sent{where}")
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
    echo(f"done: {plural(sent, 'digest')} sent; open the .html files in {mail_dir} to see them.")
    echo("try a rule of your own on the same papers: paperbell try '\"diffusion policy\"' --demo")
    return 1 if failed else 0
