"""`paperbell backfill`: past days from the arXiv API and Hugging Face, served by a real HTTP
server on loopback from the real API and Hugging Face payloads, into a real database.

The library runs with a controlled clock (the fetcher's waits advance it instead of
sleeping), so the 3 s spacing is measured exactly; the command runs for real, is
interrupted with SIGINT and run again, on few days: each of its requests waits 3 s.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from datetime import UTC, date, datetime
from itertools import pairwise
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from support.cli import run, run_here, start
from support.clock import FakeTime
from support.paths import FIXTURES
from support.servers import FeedServer, Route, feed_server

from bot.config import load_config
from bot.core.errors import IncompleteResults
from bot.pipeline import build_sources
from bot.pipeline.backfill import BackfillReport, backfill, plan
from bot.sources.arxiv_query import BACKFILL_DAY_LIMIT, day_pages, search
from bot.sources.http import PoliteFetcher
from bot.store import Store

pytestmark = pytest.mark.database

API_PAGE = FIXTURES / "arxiv_api" / "api2026_search_cat-math.NT-OR-math.AG_max5_2026-06-29.xml"
API_EMPTY = FIXTURES / "arxiv_api" / "edge_api2026_empty-result_idlist_0000.0000.xml"
HF_DAY = FIXTURES / "hf_daily_papers" / "hf_daily_papers_2026-06-03.json"
NOW = datetime(2026, 6, 30, 12, 0, tzinfo=UTC)

CONFIG = """\
version = 1

[database]
url = "{database_url}"

[[sources]]
kind = "arxiv_query"
name = "number-theory"
query = "cat:math.NT OR cat:math.AG"
url = "{base}/api/query"
page_size = 100

[[sources]]
kind = "huggingface"
name = "hf"
url = "{base}"

[[sources]]
kind = "feed"
name = "zoology"
url = "{base}/journal.rss"
"""


def answer(path: str, headers: dict[str, str]) -> Route | None:
    parts = urlsplit(path)
    query = parse_qs(parts.query)
    if parts.path == "/api/daily_papers":
        return Route(HF_DAY.read_bytes(), content_type="application/json")
    if parts.path == "/api/query":
        on_the_26th = "submittedDate:[202606260000 TO 202606262359]" in query["search_query"][0]
        body = API_PAGE if on_the_26th and query["start"] == ["0"] else API_EMPTY
        return Route(body.read_bytes(), content_type="application/atom+xml")
    return None


@pytest.fixture
def server() -> Iterator[FeedServer]:
    with feed_server() as feed:
        feed.answer = answer
        yield feed


@pytest.fixture
def config_path(tmp_path: Path, database_url: str, server: FeedServer) -> Path:
    path = tmp_path / "config.toml"
    base = server.url("").rstrip("/")
    path.write_text(CONFIG.format(database_url=database_url, base=base))
    return path


async def _backfill(
    config_path: Path,
    fake: FakeTime,
    *,
    stop_after: int | None = None,
    since: date = date(2026, 6, 25),
    only: str | None = None,
) -> list[BackfillReport]:
    config = load_config(config_path)
    sources = [s for s in build_sources(config) if only in (None, s.name)]
    planned = plan(sources, since, date(2026, 6, 29))
    seen: list[str] = []

    def advance(report: BackfillReport, part: str, count: int) -> None:
        seen.append(f"{report.source} {part}")
        if stop_after is not None and len(seen) == stop_after:
            raise KeyboardInterrupt  # Ctrl-C while a backfill runs

    with Store.open(config.database.url) as store:
        async with httpx.AsyncClient() as client:
            fetcher = PoliteFetcher(client, min_interval=3.0, clock=fake.clock, sleep=fake.sleep)
            return await backfill(planned, store, fetcher, now=lambda: NOW, advance=advance)


def test_backfill_fetches_each_day_politely_and_goes_on_after_an_interruption(
    config_path: Path, server: FeedServer
) -> None:
    fake = FakeTime()
    server.clock = fake.clock
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(_backfill(config_path, fake, stop_after=3))
    first_run = len(server.requests)
    assert first_run == 4  # 25, 26 (a page of 5, then the end), 27; then interrupted

    reports = {r.source: r for r in asyncio.run(_backfill(config_path, fake))}
    # The arXiv query: 25..29 June, every day (papers are submitted at weekends too);
    # Hugging Face: the weekdays only; the journal feed cannot look back.
    assert set(reports) == {"number-theory", "hf"}
    query = reports["number-theory"]
    assert (query.parts, query.done_before, query.done, query.papers) == (5, 3, 2, 0)
    hf = reports["hf"]
    assert (hf.parts, hf.done_before, hf.done, hf.papers) == (3, 0, 3, 3 * 23)

    asked = [urlsplit(path) for path, _ in server.requests]
    days_asked = [
        (
            parse_qs(p.query)["search_query"][0].rsplit("submittedDate:[", 1)[1][:8],
            parse_qs(p.query)["start"][0],
        )
        for p in asked
        if p.path == "/api/query"
    ]
    # 25, 26 (the real page of 5, then start=5: the end), 27; the rerun asks 28 and 29 only.
    assert days_asked == [
        ("20260625", "0"),
        ("20260626", "0"),
        ("20260626", "5"),
        ("20260627", "0"),
        ("20260628", "0"),
        ("20260629", "0"),
    ]
    first = parse_qs(asked[0].query)
    assert first["sortBy"] == ["submittedDate"] and first["sortOrder"] == ["ascending"]
    assert first["max_results"] == ["100"]
    assert [parse_qs(p.query)["date"] for p in asked if p.path == "/api/daily_papers"] == [
        ["2026-06-25"],
        ["2026-06-26"],
        ["2026-06-29"],
    ]
    # arXiv's terms: at least 3 s between the starts of two requests, by the fetcher's clock.
    for times in (server.times[:first_run], server.times[first_run:]):  # each run
        gaps = [later - earlier for earlier, later in pairwise(times)]
        assert gaps and min(gaps) >= 3.0, gaps

    config = load_config(config_path)
    with Store.open(config.database.url) as store:
        papers = {p.id: p for p in store.papers.announced_since(date(2000, 1, 1))}
        assert store.papers.backfilled("number-theory") == {f"2026-06-{d}" for d in range(25, 30)}
    from_api = [p for p in papers.values() if "number-theory" in p.sources]
    assert len(from_api) == 5
    # Submitted Friday 26 June (before 14:00 Eastern or after): listed Monday or Tuesday.
    assert {p.announced for p in from_api} <= {date(2026, 6, 29), date(2026, 6, 30)}
    assert all({"math.NT", "math.AG"} & set(p.categories) for p in from_api)


def _on_a_terminal(*args: str) -> tuple[str, str]:
    """Run paperbell with its stderr on a terminal (a pseudo-terminal): stdout and what the
    terminal showed."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import termios

    from support.cli import PAPERBELL, clean_env

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 wide
    with subprocess.Popen(
        [*PAPERBELL, *args], stdout=subprocess.PIPE, stderr=follower, text=True, env=clean_env()
    ) as process:
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the command ended: the terminal is gone
                break
            if not chunk:
                break
            shown += chunk
        out = process.stdout.read() if process.stdout else ""
        assert process.wait(timeout=60) == 0, (out, shown)
    os.close(leader)
    return out, shown.decode(errors="replace")


def test_the_command_shows_progress_on_a_terminal(config_path: Path) -> None:
    args = ["backfill", "-c", str(config_path), "--source", "number-theory"]
    out, bar = _on_a_terminal(*args, "--since", "2026-06-28", "--until", "2026-06-29")
    assert "2/2" in bar and "day" in bar  # tqdm's bar, where a person watches
    assert "number-theory: 2 days fetched, 0 already done" in out
    # ... and its stdout, kept in a file or a pipe here (`backfill > log` on a terminal),
    # still gets a line per day.
    assert "number-theory 2026-06-28: 0 papers" in out
    assert "number-theory 2026-06-28: 0 papers" not in bar  # the bar names the day itself


def test_the_command_writes_a_line_a_day_into_a_log(config_path: Path, tmp_path: Path) -> None:
    args = ["backfill", "-c", str(config_path), "--source", "number-theory"]
    plain = run(*args, "--since", "2026-06-20", "--until", "2026-06-21", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert "/2" not in plain.stderr and "\r" not in plain.stderr  # no bar into a log
    assert plain.stdout.splitlines() == [
        "number-theory 2026-06-20: 0 papers",
        "number-theory 2026-06-21: 0 papers",
        "number-theory: 2 days fetched, 0 already done, 0 papers (0 new)",
    ]


def test_the_command_stops_on_ctrl_c_and_resumes(
    config_path: Path, server: FeedServer, tmp_path: Path
) -> None:
    # 27 to 29 June done by an earlier backfill (the library's, on a controlled clock): the
    # command is left 25 June, then 26 with its page of 5 papers. It fetches a day every 3 s.
    asyncio.run(_backfill(config_path, FakeTime(), since=date(2026, 6, 27), only="number-theory"))
    args = ["backfill", "-c", str(config_path), "--source", "number-theory"]
    days, done_before = 5, 3
    process = start(
        *args, "--since", "2026-06-25", "--until", "2026-06-29", "--no-progress", cwd=tmp_path
    )
    try:
        assert process.stdout is not None
        resuming = f"resuming: {done_before} of {days} days already done"
        assert process.stdout.readline().startswith(resuming)
        line = process.stdout.readline()  # the first day is done (requests are 3 s apart)
        assert line.startswith("number-theory 2026-06-25: 0 papers"), line
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, (out, err)
    assert "interrupted:" in err and "run the same command again" in err

    # Run again, in this process (the command line without a process start).
    again = run_here(*args, "--since", "2026-06-25", "--until", "2026-06-29")
    assert again.returncode == 0, again.stderr
    resumed = [line for line in again.stdout.splitlines() if line.startswith("resuming:")]
    assert resumed and f"of {days} days already done" in resumed[0], again.stdout
    skipped = int(resumed[0].split()[1])
    # 27 to 29 from before, 25 at least from the interrupted run; 26 is left.
    assert done_before + 1 <= skipped <= days - 1
    fetched = f"{days - skipped} day{'s' if days - skipped != 1 else ''} fetched"
    assert f"{fetched}, {skipped} already done, 5 papers" in again.stdout


def test_a_source_that_cannot_look_back_is_said_clearly(config_path: Path, tmp_path: Path) -> None:
    result = run(
        "backfill",
        "-c",
        str(config_path),
        "--source",
        "zoology",
        "--since",
        "2026-06-01",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "none of the sources can look back" in result.stderr
    assert "a feed only holds its latest entries" in result.stderr


def test_a_day_that_fails_in_any_way_is_reported_and_the_others_go_on(
    tmp_path: Path, database_url: str
) -> None:
    """A bug reading one day (not a SourceError) stopped the whole backfill."""
    from bot.core.errors import SourceError
    from bot.core.models import Paper
    from bot.sources import Source

    class Flaky(Source):
        kind = "flaky"

        async def backfill_day(self, http: object, day: date) -> list[Paper]:
            if day.day == 2:
                raise OverflowError("date value out of range")
            if day.day == 3:
                raise SourceError("HTTP 503")
            return [
                Paper(
                    id=f"2601.0000{day.day}",
                    version=1,
                    title="A paper",
                    abstract="",
                    authors=(),
                    categories=("cs.RO",),
                    announced=day,
                )
            ]

    parts = ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"]
    with Store.open(database_url) as store:
        (report,) = asyncio.run(
            backfill([(Flaky("flaky"), parts)], store, None, now=lambda: datetime.now(UTC))
        )
        assert report.done == 2 and report.papers == 2
        assert report.errors == [
            "2026-01-02: OverflowError: date value out of range",
            "2026-01-03: HTTP 503",
        ]
        assert set(store.papers.backfilled("flaky")) == {"2026-01-01", "2026-01-04"}


def _looping(path: str, headers: dict[str, str]) -> Route | None:
    """arXiv's API at its worst: the first page again, whatever `start` asks for, and
    101,536 results announced (a new user sat 10.5 minutes on this)."""
    parts = urlsplit(path)
    if parts.path == "/api/query":
        on_the_26th = "202606260000" in parse_qs(parts.query)["search_query"][0]
        body = API_PAGE if on_the_26th else API_EMPTY
        return Route(body.read_bytes(), content_type="application/atom+xml")
    return answer(path, headers)


def test_a_page_the_api_repeats_ends_that_day_and_keeps_what_came(
    config_path: Path, server: FeedServer
) -> None:
    server.answer = _looping
    fake = FakeTime()
    server.clock = fake.clock
    reports = {r.source: r for r in asyncio.run(_backfill(config_path, fake))}
    query = reports["number-theory"]
    assert (query.done, query.papers) == (4, 5)  # 25, 27, 28, 29; the 26th's first page kept
    (error,) = query.errors
    assert (
        error.startswith("2026-06-26: http://127.0.0.1:")
        and "the arXiv API answered with a page it gave already (start=5): stopped after " in error
    )
    assert "5 results of the 101,536 it announced" in error
    starts = [
        parse_qs(urlsplit(path).query)["start"][0]
        for path, _ in server.requests
        if "202606260000" in path
    ]
    assert starts == ["0", "5"]  # not 20,000 pages
    config = load_config(config_path)
    with Store.open(config.database.url) as store:
        assert "2026-06-26" not in store.papers.backfilled("number-theory")  # asked again
        kept = store.papers.announced_since(date(2000, 1, 1))
        assert sum("number-theory" in p.sources for p in kept) == 5

    # The command says so, a line for the day, and fails (exit 1) so that a script knows.
    args = ["--source", "number-theory", "--since", "2026-06-26", "--until", "2026-06-26"]
    done = run("backfill", "-c", str(config_path), *args, cwd=config_path.parent)
    assert done.returncode == 1
    (line, *_) = done.stdout.splitlines()
    assert line.startswith("number-theory 2026-06-26: ERROR http://127.0.0.1:")
    assert line.endswith("of the 101,536 it announced (5 papers kept)")
    assert "some days failed; run the same command again to retry them" in done.stderr


def test_a_day_reads_at_most_its_pages(server: FeedServer) -> None:
    """Every page new, and more of them than a day can hold: the pages stop at the limit."""

    def endless(path: str, headers: dict[str, str]) -> Route:
        start = int(parse_qs(urlsplit(path).query)["start"][0])
        body = API_PAGE.read_bytes().replace(b"2606.28", b"2606.%02d" % (start // 5))
        return Route(body, content_type="application/atom+xml")

    server.answer = endless
    fake = FakeTime()

    async def main() -> IncompleteResults:
        async with httpx.AsyncClient() as client:
            fetcher = PoliteFetcher(client, clock=fake.clock, sleep=fake.sleep)
            with pytest.raises(IncompleteResults) as caught:
                await search(
                    fetcher,
                    base_url=server.url("/api/query"),
                    query="cat:math.NT",
                    page_size=5,
                    source="number-theory",
                    sort_by="submittedDate",
                    sort_order="ascending",
                    max_pages=3,
                )
        return caught.value

    error = asyncio.run(main())
    assert len(server.requests) == 3 and len(error.found) == 15
    assert error.message == "more than 3 pages of 5 results: stopped after 15 results"
    assert day_pages(500) == 21 and day_pages(2000) == 6 and day_pages(1) == 10_001
    assert BACKFILL_DAY_LIMIT == 10_000
