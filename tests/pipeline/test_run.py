"""`paperbell run` as a user runs it: a real process, a feed server playing rss.arxiv.org, an
SMTP server on loopback, the web app; digests arrive at each subscriber's local time.

The process runs on a fast clock (hidden `--clock-start`/`--clock-speed` options: simulated
time starts on a Monday evening in New York and runs 1,800 times faster), so five hours of
a night pass in seconds. Then SIGTERM stops it cleanly and `status` tells what happened.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from support.cli import run, run_here, start
from support.config import sink_email, toml_table
from support.servers import ArxivDays, Route, feed_server, smtp_sink

from bot.core.calendar import ArxivCalendar
from bot.demo import free_port

# Monday 21:00 in New York: the first digest is due 4 simulated hours (8 s) later, time for
# the daemon's planner process to start on a busy machine.
START = datetime(2026, 11, 24, 2, 0, tzinfo=UTC)
SPEED = 1800.0


def config_head(feed_url: str, smtp_port: int, *, grace: int, web_port: int = 0) -> str:
    """A config up to its subscribers: the feed, the SMTP sink, a 60 s tick."""
    web = f"[web]\nport = {web_port}\n" if web_port else ""
    head = f"""
version = 1
[database]
url = "sqlite:///paperbell.sqlite"
[daemon]
tick_seconds = 60
shutdown_grace_seconds = {grace}
{web}[[sources]]
kind = "arxiv"
categories = ["cs"]
url = "{feed_url}"
api_url = "{feed_url}/api"
"""
    return head + toml_table(
        "email", sink_email(smtp_port, sender="paperbell <papers@example.org>")
    )


def test_run_delivers_at_local_times(
    tmp_path: Path, full_feed_bytes: bytes, fixtures_dir: Path
) -> None:
    empty = (
        fixtures_dir / "arxiv_rss" / "edge_empty-feed_test-archive_2024-11-28.xml"
    ).read_bytes()
    days = ArxivDays(full_feed_bytes, empty, ArxivCalendar.default())
    web_port = free_port()
    with feed_server() as feed, smtp_sink() as (sink, smtp_port):
        origin = time.monotonic()

        def fake_now() -> datetime:
            return START + timedelta(seconds=(time.monotonic() - origin) * SPEED)

        feed.bodies["/rss/cs"] = lambda: days.body(fake_now())
        config = tmp_path / "config.toml"
        config.write_text(
            config_head(feed.url("/rss/cs"), smtp_port, grace=5, web_port=web_port)
            + """
[[subscribers]]
name = "newyork"
email = "newyork@example.org"
rules = ["learning"]
time = "01:00"
timezone = "America/New_York"
[[subscribers]]
name = "la"
email = "la@example.org"
rules = ["learning"]
time = "22:30"
timezone = "America/Los_Angeles"
[[subscribers]]
name = "berlin"
email = "berlin@example.org"
rules = ["learning"]
time = "08:00"
timezone = "Europe/Berlin"
"""
        )
        process = start(
            "run",
            "-c",
            str(config),
            "--clock-start",
            f"{START:%Y-%m-%dT%H:%M}",
            "--clock-speed",
            str(SPEED),
            cwd=tmp_path,
        )
        try:
            deadline = time.monotonic() + 60
            while len(sink.messages) < 3 and time.monotonic() < deadline:
                assert process.poll() is None, process.communicate()
                time.sleep(0.1)
            health = json.load(urllib.request.urlopen(f"http://127.0.0.1:{web_port}/healthz"))
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{web_port}/metrics").read().decode()
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=30)

        assert process.returncode == 0, err
        assert "stopped" in err

        # Each digest left at its subscriber's local time (the Date header is the daemon's
        # clock when it was built), in that order: 01:00 New York, 22:30 Los Angeles (the
        # evening before), 08:00 Berlin. Never before its time, and within a few simulated
        # minutes after it: at 1,800x a tick is 33 ms of real time, and a loaded machine may
        # skip a beat or two (5 minutes here are 0.17 s).
        zones = {
            "newyork": "America/New_York",
            "la": "America/Los_Angeles",
            "berlin": "Europe/Berlin",
        }
        local = {
            m["To"].split("@")[0]: m["Date"].datetime.astimezone(
                ZoneInfo(zones[m["To"].split("@")[0]])
            )
            for m in sink.messages
        }
        due = {"newyork": (1, 0), "la": (22, 30), "berlin": (8, 0)}
        for name, (hour, minute) in due.items():
            at = local[name].replace(hour=hour, minute=minute, second=0, microsecond=0)
            assert at <= local[name] < at + timedelta(minutes=5), (name, local[name])
        assert local["la"].strftime("%a") == "Mon" and local["berlin"].strftime("%a") == "Tue"
        assert local["newyork"].strftime("%a") == "Tue"
        # ... with Tuesday's listing, polled once after 00:05 ET.
        tuesday = b"".join(days.papers_of(date(2026, 11, 24)))
        for message in sink.messages:
            text = message.get_body(("plain",)).get_content()
            assert "Tuesday 24 November 2026" in text
            assert b"2411." in tuesday and "new paper" in message["Subject"]

        assert health["status"] == "ok" and health["ticks"] > 0
        assert 'paperbell_outbox_digests{state="sent"} 3.0' in metrics
        assert 'paperbell_source_late{source="arxiv"} 0.0' in metrics
        assert "paperbell_ticks_total" in metrics

    status = run("status", "-c", str(config), cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    print(status.stdout)
    assert "outbox: 0 pending, 3 sent, 0 failed" in status.stdout


def test_sigterm_while_sending_loses_and_repeats_nothing(
    tmp_path: Path, full_feed_bytes: bytes, fixtures_dir: Path
) -> None:
    """SIGTERM while a slow SMTP server takes 30 digests: the message being sent is finished,
    the rest go back to the queue at once (no lease left to expire), and the next run (here
    `paperbell digest` from cron) sends exactly those."""
    empty = (
        fixtures_dir / "arxiv_rss" / "edge_empty-feed_test-archive_2024-11-28.xml"
    ).read_bytes()
    days = ArxivDays(full_feed_bytes, empty, ArxivCalendar.default())
    # 07:20 in Berlin: 40 minutes before the digests, 4 s at 600x, room for a slow start (a
    # daemon that starts after the slot records its subscribers after it: nothing is due)
    start_at = datetime(2026, 11, 24, 6, 20, tzinfo=UTC)
    with feed_server() as feed, smtp_sink() as (sink, smtp_port):
        feed.routes["/rss/cs"] = Route(days.body(start_at))
        sink.delay = 0.5  # a batch of 20 would take 10 s
        people = "".join(
            f'[[subscribers]]\nname = "p{i:02d}"\nemail = "p{i:02d}@example.org"\n'
            f'rules = ["learning"]\ntime = "08:00"\ntimezone = "Europe/Berlin"\n'
            for i in range(30)
        )
        config = tmp_path / "config.toml"
        config.write_text(config_head(feed.url("/rss/cs"), smtp_port, grace=10) + people)
        process = start(
            "run",
            "-c",
            str(config),
            "--no-web",
            "--clock-start",
            f"{start_at:%Y-%m-%dT%H:%M}",
            "--clock-speed",
            "600",
            cwd=tmp_path,
        )
        deadline = time.monotonic() + 60
        while len(sink.messages) < 3 and time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
        stopped_at = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert time.monotonic() - stopped_at < 5  # one message to finish, not the batch
        first = len(sink.messages)
        assert 3 <= first < 30

        # What the stopped process left: the commands read it in this process.
        status = run_here("status", "-c", str(config))
        assert f"outbox: {30 - first} pending, {first} sent, 0 failed, 0 in flight" in status.stdout

        sink.delay = 0
        cron = run_here("digest", "-c", str(config))
        assert cron.returncode == 0, cron.stderr
        ids = [m["Message-ID"] for m in sink.messages]
        assert len(ids) == 30 and len(set(ids)) == 30  # everyone once, no one twice
        print(f"stopped after {first} of 30 digests; the next run sent the other {30 - first}")
