"""Crash test: a delivery of 200 digests killed with SIGKILL, then restarted; one test for each
point of the delivery the kill comes at.

A subprocess runs `paperbell digest` (the same code the daemon's worker runs) against an SMTP
server on loopback that answers slowly. The test kills it, runs it again to the end, and
counts what the server received: every digest at least once; a digest twice only when the
process died after the server took a message and before its record was written (at most
once per SMTP connection). The figures are printed (`pytest -s` shows them).

The day is the real listing's first 100 papers: every rule finds papers to fill a digest,
and matching all of 1,504 for 200 subscribers would add only time.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from support.cli import invoke, start
from support.config import sink_email, toml_table
from support.servers import Route, feed_server, first_items, smtp_sink

pytestmark = pytest.mark.database

SUBSCRIBERS = 200
WORDS = ["quantum", "learning", "model", "network", "data", "field", "energy", "graph"]
KILL_AFTER = [1, 40, 90, 150]  # messages received when the kill happens, one test each
PAPERS = 100  # of the day's listing
# Batches sent side by side ([delivery] connections): at a kill, each connection may hold one
# message the server took and the process had not recorded yet.
CONNECTIONS = 3


def config_text(database_url: str, feed_url: str, smtp_port: int) -> str:
    head = f"""version = 1
[database]
url = "{database_url}"
[delivery]
lease_seconds = 2
batch = 10
connections = {CONNECTIONS}
[[sources]]
kind = "arxiv"
categories = ["cs", "physics", "quant-ph", "math"]
url = "{feed_url}"
"""
    head += toml_table(
        "email", sink_email(smtp_port, sender="papers@paperbell.example", timeout=10)
    )
    subs = [
        f'[[subscribers]]\nname = "s{i:03d}"\nemail = "s{i:03d}@lab.example"\n'
        f'rules = ["{WORDS[i % len(WORDS)]}"]\nmax_papers = 5\n'
        for i in range(SUBSCRIBERS)
    ]
    return head + "\n".join(subs)


def digest_process(config: Path) -> subprocess.Popen[str]:
    return start("digest", "-c", str(config), "--since", "2024-11-28")


@pytest.mark.parametrize("threshold", KILL_AFTER)
def test_a_sigkill_during_a_delivery_loses_no_digest(
    tmp_path: Path, database_url: str, full_feed_bytes: bytes, threshold: int
) -> None:
    with feed_server() as feed, smtp_sink() as (sink, port):
        feed.routes["/rss/all"] = Route(first_items(full_feed_bytes, PAPERS))
        config = tmp_path / "config.toml"
        config.write_text(config_text(database_url, feed.url("/rss/all"), port))
        assert invoke("poll", config=config).exit_code == 0
        sink.delay = 0.01  # a slow server: each message takes a while to be accepted

        process = digest_process(config)
        deadline = time.monotonic() + 60
        while len(sink.messages) < threshold:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the delivery stalled"
            time.sleep(0.002)
        process.send_signal(signal.SIGKILL)
        process.communicate()
        time.sleep(2.1)  # the dead worker's leases expire
        # The runs after the kill are the library's, in this process: what is checked is
        # what the killed process left behind.
        final = invoke("digest", "--since", "2024-11-28", config=config)
        assert final.exit_code == 0, final.output

        again = invoke("digest", "--since", "2024-11-28", config=config)  # nothing more to send
        assert again.exit_code == 0
        assert again.output.count("no new matching papers") == SUBSCRIBERS
        status = invoke("status", config=config)  # the truth, after all that
        assert f"outbox: 0 pending, {SUBSCRIBERS} sent, 0 failed, 0 in flight" in status.output

    received = Counter(str(m["Message-ID"]) for m in sink.messages)
    recipients = {str(m["To"]) for m in sink.messages}
    duplicates = sum(n - 1 for n in received.values())
    print(
        f"\ncrash test: {SUBSCRIBERS} digests, a SIGKILL at {threshold} messages received;"
        f" server received {len(sink.messages)} messages, {len(received)} distinct digests,"
        f" {duplicates} duplicates"
    )
    assert len(recipients) == SUBSCRIBERS  # every digest arrived
    assert len(received) == SUBSCRIBERS  # one digest each (stable Message-ID)
    # Only the messages in flight at the kill can come twice: one a connection at most.
    assert duplicates <= CONNECTIONS
