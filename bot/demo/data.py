"""The demo's data: a real arXiv listing and a real Hugging Face Daily Papers day, shipped
with the package and parsed as their sources parse them, and the example subscribers the
demo delivers to.

Reads the package's own files only: no network, no clock, no database.
"""

from __future__ import annotations

import functools
import gzip
from datetime import date
from importlib.resources import files
from typing import Any

from bot.core.checks import ARCHIVES
from bot.core.models import Paper
from bot.sources.arxiv import ArxivListingSource, parse_listing
from bot.sources.huggingface import parse_daily_papers

DEMO_FEED = "rss_all-archives-combined_2024-11-28.xml.gz"
DEMO_DAY = date(2024, 11, 28)
# A real Hugging Face Daily Papers day: a second source, merged into the same store and
# digests (bot/data/demo/SOURCES.md says where both files come from).
DEMO_HF_DAY_FILE = "hf_daily_papers_2026-08-21.json.gz"
DEMO_HF_DAY = date(2026, 8, 21)
ALL_ARCHIVES = sorted(ARCHIVES)  # the bundled feed is the whole of arXiv
# The demo's sources, by name (what `src:` finds their papers by, beside their kinds).
ARXIV_SOURCE = "arxiv-all"
HF_SOURCE = "hf-daily"

DEMO_CHANNEL = "#robot-learning"
# The lab's subscription is in the config file (read-only on its manage page); Ada, Grace
# and Lin (who follows what is trending on Hugging Face) subscribed themselves (stored in
# the database, as `paperbell subscribe` or Slack would), so their manage pages can change
# everything.
IN_CONFIG = ("robotics-lab",)

DEMO_SUBSCRIBERS: list[dict[str, Any]] = [
    {
        "name": "ada",
        "email": "ada@lab.example",
        "rules": ['"large language models" reasoning', '"reinforcement learning" -survey'],
        "max_papers": 15,
    },
    {
        "name": "grace",
        "email": "grace@lab.example",
        "rules": ['"quantum error correction"', "qubit cat:quant-ph"],
        "max_papers": 10,
    },
    {
        # "Trending": the five most upvoted papers of each Hugging Face day.
        "name": "lin",
        "email": "lin@lab.example",
        "rules": ["hf:top5"],
    },
    {
        "name": "robotics-lab",
        "email": "robotics@lab.example",
        # A rule with a label: the digests show "Robotics (cs.RO)" in its place.
        "rules": [
            {"rule": "robot cat:cs.RO", "label": "Robotics (cs.RO)"},
            '"diffusion policy"',
            "multi-agent",
        ],
        "categories": ["cs"],
        "slack_channel": DEMO_CHANNEL,  # beside the email: the lab's channel
    },
]


def bundled_feed_bytes() -> bytes:
    """The real arXiv listing shipped with the package, decompressed."""
    return gzip.decompress((files("bot") / "data" / "demo" / DEMO_FEED).read_bytes())


def bundled_papers(source: str = "demo") -> list[Paper]:
    """The papers of the bundled listing, parsed as the arXiv source named `source` parses
    them (the benchmarks read them too: bench/)."""
    return list(parse_listing(bundled_feed_bytes(), source=source).papers)


def bundled_hf_bytes() -> bytes:
    """The real Hugging Face Daily Papers day shipped with the package, decompressed."""
    return gzip.decompress((files("bot") / "data" / "demo" / DEMO_HF_DAY_FILE).read_bytes())


def bundled_hf_papers() -> list[Paper]:
    """The papers of the bundled Hugging Face day, as the huggingface source reads them."""
    return list(parse_daily_papers(bundled_hf_bytes(), source=HF_SOURCE).papers)


def demo_papers() -> list[Paper]:
    """Every paper the demo stores, as its sources store them (tagged with their names and
    kinds, for `src:`): the bundled listing's, then the Hugging Face day's. What `paperbell
    try --demo` tries a rule on."""
    return list(_demo_papers())


@functools.cache
def _demo_papers() -> tuple[Paper, ...]:
    """`demo_papers`, read once a process: the bundled files never change, and a process
    that tries many rules on them (a test run) would parse them each time."""
    listing = ArxivListingSource(ARXIV_SOURCE, categories=ALL_ARCHIVES)
    papers = parse_listing(bundled_feed_bytes(), source=ARXIV_SOURCE).papers
    return (*listing.tagged(papers), *bundled_hf_papers())
