"""Crash test: a delivery of 200 digests killed with SIGKILL at several points, then restarted.

A subprocess runs `paperbell digest` (the same code the daemon's worker runs) against an SMTP
server on loopback that answers slowly. The test kills it at several points, restarts it, and
counts what the server received: every digest at least once; a digest twice only when the
process died after the server took a message and before its record was written (at most
once per kill and SMTP connection). The figures are printed (`pytest -s` shows them).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from support.cli import invoke, run, start
from support.config import sink_email, toml_table
from support.servers import Route, feed_server, smtp_sink

pytestmark = pytest.mark.database

SUBSCRIBERS = 200
WORDS = ["quantum", "learning", "model", "network", "data", "field", "energy", "graph"]
KILL_AFTER = [1, 40, 90, 150]  # messages received when each kill happens
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


def test_sigkill_at_several_points_loses_no_digest(
    tmp_path: Path, database_url: str, full_feed_bytes: bytes
) -> None:
    with feed_server() as feed, smtp_sink() as (sink, port):
        feed.routes["/rss/all"] = Route(full_feed_bytes)
        config = tmp_path / "config.toml"
        config.write_text(config_text(database_url, feed.url("/rss/all"), port))
        assert invoke("poll", config=config).exit_code == 0
        sink.delay = 0.01  # a slow server: each message takes a while to be accepted

        kills = 0
        for threshold in KILL_AFTER:
            process = digest_process(config)
            deadline = time.monotonic() + 60
            while len(sink.messages) < threshold:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the delivery stalled"
                time.sleep(0.002)
            process.send_signal(signal.SIGKILL)
            process.communicate()
            kills += 1
            time.sleep(2.1)  # the dead worker's leases expire
        final = digest_process(config)
        out, err = final.communicate(timeout=120)
        assert final.returncode == 0, out + err

        again = digest_process(config)  # a run after everything: nothing more to send
        out2, _ = again.communicate(timeout=120)
        assert again.returncode == 0 and out2.count("no new matching papers") == SUBSCRIBERS
        status = run("status", "-c", str(config), cwd=tmp_path)  # the truth, after all that
        assert f"outbox: 0 pending, {SUBSCRIBERS} sent, 0 failed, 0 in flight" in status.stdout

    received = Counter(str(m["Message-ID"]) for m in sink.messages)
    recipients = {str(m["To"]) for m in sink.messages}
    duplicates = sum(n - 1 for n in received.values())
    print(
        f"\ncrash test: {SUBSCRIBERS} digests, {kills} SIGKILLs at {KILL_AFTER} messages received;"
        f" server received {len(sink.messages)} messages, {len(received)} distinct digests,"
        f" {duplicates} duplicates"
    )
    assert len(recipients) == SUBSCRIBERS  # every digest arrived
    assert len(received) == SUBSCRIBERS  # one digest each (stable Message-ID)
    # Only the messages in flight at a kill can come twice: one a connection at most.
    assert duplicates <= kills * CONNECTIONS
