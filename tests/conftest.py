"""Shared test fixtures: paths to the real payloads in tests/fixtures/; the
`--regenerate-golden` option (tests/test_email_golden.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.models import Paper
from bot.store import Store

FIXTURES = Path(__file__).parent / "fixtures"
FULL_FEED = FIXTURES / "arxiv_rss" / "rss_all-archives-combined_2024-11-28.xml"


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
def database_url(tmp_path: Path) -> str:
    """A fresh database: a SQLite file, or the PostgreSQL named by PAPERBELL_TEST_DATABASE_URL
    (emptied first, so every test starts clean)."""
    url = os.environ.get("PAPERBELL_TEST_DATABASE_URL")
    if not url:
        return f"sqlite:///{tmp_path / 'paperbell-test.sqlite'}"
    from sqlmodel import SQLModel, create_engine

    from bot import store

    engine = create_engine(store.normalize_url(url))
    SQLModel.metadata.drop_all(engine)
    engine.dispose()
    return url


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = Store.open(database_url)
    yield opened
    opened.close()


@pytest.fixture(scope="session")
def full_feed_papers(full_feed_bytes: bytes) -> tuple[Paper, ...]:
    from bot.sources.arxiv import parse_listing

    return parse_listing(full_feed_bytes, source="arxiv").papers
