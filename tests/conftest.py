"""Shared test fixtures: paths to the real payloads in tests/fixtures/."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
FULL_FEED = FIXTURES / "arxiv_rss" / "rss_all-archives-combined_2024-11-28.xml"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def full_feed_bytes() -> bytes:
    return FULL_FEED.read_bytes()
