"""A port another program holds: `run`, `serve` and `demo --serve` say which port and stop
with a failure (systemd's Restart=on-failure then tries again), never a traceback and never
"stopped" with exit code 0."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run
from support.config import WEB_SECRET, local_feed_config

PAGES_AND_A_QUICK_STOP = """
[web]
public_url = "https://papers.lab.example"
secret_key_env = "PB_SECRET_KEY"
[daemon]
shutdown_grace_seconds = 2
"""


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another program listens on for the whole test."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def pages_config(folder: Path) -> Path:
    """A config with a local listing and the pages (so `serve` has something to serve)."""
    config = folder / "config.toml"
    config.write_text(local_feed_config("sqlite:///paperbell.sqlite") + PAGES_AND_A_QUICK_STOP)
    return config


def test_run_on_a_taken_port_fails_and_names_the_port(tmp_path: Path, taken_port: int) -> None:
    config = pages_config(tmp_path)
    done = run(
        "run", "-c", str(config), "--port", str(taken_port),
        cwd=tmp_path, env={"PB_SECRET_KEY": WEB_SECRET},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert f"the web app stopped (is port {taken_port} free?)" in done.stderr


def test_serve_on_a_taken_port_fails_and_names_the_port(tmp_path: Path, taken_port: int) -> None:
    config = pages_config(tmp_path)
    done = run(
        "serve", "-c", str(config), "--port", str(taken_port),
        cwd=tmp_path, env={"PB_SECRET_KEY": WEB_SECRET},
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr
    assert f"error: cannot listen on 127.0.0.1:{taken_port}: is the port free?" in done.stderr


def test_demo_serve_on_a_taken_port_says_so(tmp_path: Path, taken_port: int) -> None:
    done = run("demo", "--serve", "--port", str(taken_port), cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr
    assert "digest ada <ada@lab.example>: 15 papers sent" in done.stdout  # sent before
    assert f"cannot serve the pages: is port {taken_port} free? (`--port`)" in done.stdout
