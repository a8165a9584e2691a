"""A stop (SIGTERM) ends `paperbell run` within `[daemon] shutdown_grace_seconds`, whatever
the daemon waits for at that moment: systemd kills a daemon that takes longer."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from support.cli import start
from support.servers import http_serving

GRACE = 1
REQUEST_DEADLINE = 10  # how long the slow server could hold a request


@contextmanager
def slow_server() -> Iterator[tuple[int, threading.Event]]:
    """A server that answers no request until the test ends (its port, and an event set
    once a request came)."""
    asked, done = threading.Event(), threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.set()
            done.wait(REQUEST_DEADLINE)
            self.send_response(503)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    with http_serving(Slow) as port:
        try:
            yield port, asked
        finally:
            done.set()


def test_a_stop_at_start_while_likes_are_asked_of_a_slow_api_keeps_the_grace(
    tmp_path: Path,
) -> None:
    """At start, the leader asks the arXiv API for its subscribers' liked papers; a stop
    then abandons the request after the grace, and the likes are asked again next start."""
    with slow_server() as (port, asked):
        config = tmp_path / "config.toml"
        config.write_text(
            f"""version = 1
[database]
url = "sqlite:///paperbell.sqlite"
[daemon]
shutdown_grace_seconds = {GRACE}
[delivery]
workers = 0
[polling]
request_deadline_seconds = {REQUEST_DEADLINE}
[[sources]]
kind = "arxiv"
categories = ["cs"]
url = "http://127.0.0.1:{port}/rss/cs"
api_url = "http://127.0.0.1:{port}/api"
[[subscribers]]
name = "ada"
rules = ["qubit"]
like = ["2411.17703"]
apprise = ["json://127.0.0.1:9/digests"]
"""
        )
        process = start("run", "-c", str(config), "--no-web", cwd=tmp_path)
        try:
            assert asked.wait(15), "the daemon never asked the API"
            stopping = time.monotonic()
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=REQUEST_DEADLINE + 10)
            took = time.monotonic() - stopping
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 0, err
    assert "Traceback" not in err, err
    assert took < GRACE + 4, f"stopped {took:.1f} s after SIGTERM (grace {GRACE} s)\n{err}"
    assert "stopped" in err
