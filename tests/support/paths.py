"""Where the tests' data lives: tests/fixtures/, real payloads (see its SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).parent.parent / "fixtures"
# The real arXiv listing of all archives on 28 Nov 2024 (1,504 papers): the day most tests use.
FULL_FEED = FIXTURES / "arxiv_rss" / "rss_all-archives-combined_2024-11-28.xml"
