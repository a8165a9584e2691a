"""Where the tests' data lives: tests/fixtures/, real payloads (see its SOURCES.md), and the
checkout the tests read (README, the manual in docs/, config.example.toml, the deploy
files)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent  # the checkout
FIXTURES = TESTS / "fixtures"
DOCS = ROOT / "docs"  # the manual (MkDocs): Markdown pages, its hooks in docs/hooks/
GOLDEN = TESTS / "golden"  # the demo digests as mailed (tests/render/test_email_golden.py)
# The real arXiv listing of all archives on 28 Nov 2024 (1,504 papers): the day most tests use.
FULL_FEED = FIXTURES / "arxiv_rss" / "rss_all-archives-combined_2024-11-28.xml"
# The "two years ahead" switch: put on PYTHONPATH, with TEST_CLOCK_AHEAD_DAYS set.
FUTURE = TESTS / "support" / "future"


def manual_text() -> str:
    """Every page of the manual, one after another: the tests that hold a fact of the docs
    to the code read it wherever it stands, so moving a paragraph breaks nothing."""
    return "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md")))
