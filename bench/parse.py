"""Benchmark: reading a whole day of arXiv, as the listing source parses it.

Times `bot.sources.arxiv.parse_listing` on the real listing of 28 November 2024 (all
archives, 1,504 papers, 2.8 MB), and beside it, in the same run, feedparser alone reading
the same bytes: the library's share of the work and what paperbell adds (ids, versions,
authors, TeX left as written, hostile items checked). Prints the median of `--runs` CPU
times of each and their ratio. Not part of the test suite.

    .venv/bin/python bench/parse.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import feedparser  # noqa: E402

from bot.sources.arxiv import parse_listing  # noqa: E402

LISTING = ROOT / "tests" / "fixtures" / "arxiv_rss" / "rss_all-archives-combined_2024-11-28.xml"


def cpu_seconds(work: Callable[[], object], runs: int) -> float:
    """The median CPU time of `runs` calls of `work` (this process's own: other load on the
    machine does not count)."""
    times = []
    for _ in range(runs):
        started = time.process_time()
        work()
        times.append(time.process_time() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    body = LISTING.read_bytes()
    papers = len(parse_listing(body).papers)
    baseline = cpu_seconds(lambda: feedparser.parse(body), runs)
    ours = cpu_seconds(lambda: parse_listing(body), runs)
    print(f"{LISTING.name}: {len(body) / 1e6:.1f} MB, {papers:,} papers, median of {runs} runs")
    print(f"  feedparser alone (baseline): {baseline:.3f} s CPU")
    print(f"  parse_listing:               {ours:.3f} s CPU ({ours / baseline:.2f}x the baseline)")


if __name__ == "__main__":
    main()
