"""Shared test fixtures: paths to the real payloads in tests/fixtures/, a fresh database and
its store, the web pages on loopback (`site`); the `--regenerate-golden` option
(tests/render/test_email_golden.py); the Hypothesis profiles. The helpers the tests share are in
tests/support/.

Hypothesis runs derandomized in CI (`CI` set, as .ci/run is run): the same examples every
run, so a red CI is the code's fault, not the dice's. Locally it explores afresh each run
and keeps what it found in .hypothesis/; a failure it finds is fixed and pinned with
`@example`. `HYPOTHESIS_PROFILE=ci` (or `dev`) picks one by hand.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings
from support.paths import FIXTURES, FULL_FEED

from bot.core.models import Paper
from bot.store import Store

if TYPE_CHECKING:
    from support.pages import Site

# The daemon in a simulated world (`world`), for the scheduler's and the sources' tests.
pytest_plugins = ["support.world"]

# No deadline in either: the machines are small and shared, and a slow example is a
# benchmark's business (bench/), not a reason for a red suite.
settings.register_profile("ci", derandomize=True, deadline=None, database=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


# Each test's time budget (seconds, setup to teardown): a test over it is named at the end of
# the run. A scenario that needs longer is split, or made cheaper on less data.
BUDGET_SECONDS = 20.0


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name the tests over BUDGET_SECONDS, slowest first."""
    spent: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                spent[report.nodeid] = spent.get(report.nodeid, 0.0) + report.duration
    over = sorted(((t, n) for n, t in spent.items() if t > BUDGET_SECONDS), reverse=True)
    if over:
        terminalreporter.section(f"over the {BUDGET_SECONDS:g} s budget of a test")
        for seconds, nodeid in over:
            terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regenerate-golden",
        action="store_true",
        default=False,
        help="rewrite the golden files in tests/golden/ from what the code renders now",
    )


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def full_feed_bytes() -> bytes:
    return FULL_FEED.read_bytes()


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    """A new, empty database of this test's own: a SQLite file in its temporary folder, or a
    database made for it on the PostgreSQL server PAPERBELL_TEST_DATABASE_URL names (dropped
    afterwards), so tests run in parallel never share one."""
    server = os.environ.get("PAPERBELL_TEST_DATABASE_URL")
    if not server:
        yield f"sqlite:///{tmp_path / 'paperbell-test.sqlite'}"
        return
    from support.database import scratch_database

    with scratch_database(server) as url:
        yield url


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = Store.open(database_url)
    yield opened
    opened.close()


@pytest.fixture(scope="session")
def full_feed_papers(full_feed_bytes: bytes) -> tuple[Paper, ...]:
    from bot.sources.arxiv import parse_listing

    return parse_listing(full_feed_bytes, source="arxiv").papers


@pytest.fixture
def site(database_url: str) -> Iterator[Site]:
    """The web pages on loopback with their store, clock and SMTP sink (support.pages)."""
    from support.pages import open_site

    with open_site(database_url) as opened:
        yield opened
