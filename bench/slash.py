"""Benchmark: how fast `/papers list` is answered with many subscribers, under concurrent
signed requests, also while a digest run goes on in the same process.

Owns the figures behind the slash command's latency target (issue 24: p99 <= 300 ms at
10,000 subscribers under 50 concurrent requests). It builds a real SQLite file with N
subscribers (Slack users, each with a confirmed address and 1-3 title-word rules drawn from
the real listing of 2024-11-28, which is stored too), inserted directly with SQL; serves the
real web app in a child process the way `paperbell run` does (`bot.cli.wiring.Front`: the
pages, `POST /slack/commands`, `/healthz` of a `Daemon`, uvicorn on loopback); and sends it
`/papers list` from C concurrent clients in this process, each request signed exactly as
Slack signs it (v0, HMAC-SHA256 of `v0:{timestamp}:{body}`), each with its own user and
trigger id. A request's time runs until its answer arrives: in the HTTP reply, or, when
the reply is "Working on it", at its `response_url`, a local stand-in here that timestamps
each post. Printed per run: p50 / p95 / p99 / max and requests per second.

Runs, each on its own copy of the database and its own server process:
  baseline   `/papers list` with --baseline-subscribers (2) subscribers
  health     `GET /healthz` on the N-subscriber server (the web stack alone)
  list       `/papers list` with N subscribers
  digest     the same, while a real digest run for every subscriber goes on as `paperbell
             run` runs it: the server's daemon asks its planner process to plan and queue
             the digests due (`Daemon.digests_due`, `bot.cli.planner`) and waits for the
             reports, while sender processes (`bot.cli.senders`, [delivery] workers) send
             email to Postfix's `smtp-sink` on loopback (aiosmtpd if it is absent; by email
             only: the Slack channel is left out); started --digest-lead seconds before the
             load; answers later than --timeout count at --timeout
  standin    the same beside a stand-in for a digest run in the server's own process that
             streams and gives the loop back after each subscriber (`StandIn`: --standin-ms
             of real rule matching and one committed 30 KB write per subscriber; its CPU on
             the loop, or with --standin-mode thread in a thread)

Each row also says the server process's CPU time per request (all its threads, during the
load; it too grows when other work shares the cores), how long its event loop was held at
most (a 10 ms timer's lateness) and its longest garbage collection.

    .venv/bin/python bench/slash.py                        # every run, 10,000 subscribers
    .venv/bin/python bench/slash.py --runs baseline list --requests 500
    .venv/bin/python bench/slash.py --runs list --py-spy /tmp/spy   # sample the server
    .venv/bin/python bench/slash.py --runs digest --digest-lead 30      # later in the run

Not part of the test suite. Deterministic data for a `--seed`; the times are wall times on a
shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import hashlib
import hmac
import io
import itertools
import multiprocessing
import os
import pstats
import random
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.config import Config, parse_config  # noqa: E402
from bot.core.models import Paper  # noqa: E402
from bot.demo.data import bundled_papers  # noqa: E402
from bot.store import Store  # noqa: E402
from bot.store.tables import RuleRow, SubscriberRow  # noqa: E402

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)  # the listing's day: its papers are due
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
WEB_SECRET = "bench-secret-key-that-is-long-enough-0123456789"
SMTP_SINK = Path("/usr/sbin/smtp-sink")
TARGET_P99 = 0.300  # seconds
TRIGGERS = itertools.count(0x8088930838D88F008E0)


# -- the data ---------------------------------------------------------------------------------


def title_words(papers: Sequence[Paper]) -> list[str]:
    """Topical title words (at least 5 letters, in at most 2% of the titles), most
    frequent first."""
    counts: Counter[str] = Counter()
    for paper in papers:
        counts.update({w.lower() for w in re.findall(r"[A-Za-z]{5,}", paper.title)})
    most = len(papers) * 0.02
    # Ties by the word (not in the order sets gave, which changes from run to run).
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [w for w, n in ranked if n <= most]


def user_id(number: int) -> str:
    """A Slack user id ("U" and 10 upper-case letters and digits, as Slack's look)."""
    return f"U{number:010X}"


def make_database(path: Path, subscribers: int, papers: Sequence[Paper], *, seed: int) -> None:
    """A new SQLite file with the listing's papers and `subscribers` Slack users, each with
    a confirmed address and 1-3 title-word rules (Zipf-like: popular words repeat)."""
    rng = random.Random(seed)
    words = title_words(papers)
    weights = [1 / (rank + 5) ** 1.1 for rank in range(len(words))]
    with Store.open(f"sqlite:///{path}") as store:
        store.papers.upsert(papers, now=NOW)
        people = [
            {
                "name": f"slack.user{i}",
                "email": f"user{i}@lab.example",
                "email_confirmed": True,
                "origin": "database",
                "active": True,
                "categories": "[]",
                "max_papers": 50,
                "include": '["cross", "new"]',
                "created_at": NOW - timedelta(days=1),  # before the day's slot: it is due
                "slack_user": user_id(i),
                "email_format": "html",
                "abstracts": "short",
                "summaries": False,
                "similar_max": 5,
            }
            for i in range(subscribers)
        ]
        with store.database.engine.begin() as connection:
            connection.execute(SubscriberRow.__table__.insert(), people)  # type: ignore[attr-defined]
            ids = dict(connection.exec_driver_sql("SELECT name, id FROM subscribers").fetchall())
            rules = []
            for i in range(subscribers):
                chosen = dict.fromkeys(rng.choices(words, weights, k=rng.randint(1, 3)))
                rules += [
                    {
                        "subscriber_id": ids[f"slack.user{i}"],
                        "text": word,
                        "created_at": NOW,
                    }
                    for word in chosen
                ]
            connection.execute(RuleRow.__table__.insert(), rules)  # type: ignore[attr-defined]


def make_config(database: Path, smtp_port: int) -> Config:
    """`paperbell run`'s config: the database, Slack's slash command (signed requests),
    email to the sink, the web pages (signed links)."""
    data = {
        "version": 1,
        "database": {"url": f"sqlite:///{database}"},
        "slack": {
            "bot_token_env": "SLACK_BOT_TOKEN",
            "signing_secret_env": "SLACK_SIGNING_SECRET",
            "api_url": "http://127.0.0.1:9/api/",  # `list` asks Slack nothing
        },
        "email": {
            "from": "paperbell <digest@papers.lab.example>",
            "host": "127.0.0.1",
            "port": smtp_port,
            "security": "none",
        },
        "web": {
            "public_url": "https://papers.lab.example",
            "secret_key_env": "PAPERBELL_SECRET_KEY",
        },
    }
    environ = {
        "SLACK_BOT_TOKEN": "xoxb-bench",
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "PAPERBELL_SECRET_KEY": WEB_SECRET,
    }
    return parse_config(data, environ=environ)


def sender_config(database: Path, smtp_port: int) -> Path:
    """The config file the sender processes read: the database and email of `make_config`."""
    path = database.with_suffix(".toml")
    path.write_text(
        f"""version = 1
[database]
url = "sqlite:///{database}"
[email]
from = "paperbell <digest@papers.lab.example>"
host = "127.0.0.1"
port = {smtp_port}
security = "none"
[web]
public_url = "https://papers.lab.example"
secret_key_env = "PAPERBELL_SECRET_KEY"
""",
        encoding="utf-8",
    )
    return path


# -- the server (a child process, as `paperbell run`) --------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(
    database: str, smtp_port: int, pipe: Connection, profile: bool, mode: str, cpu_ms: float
) -> None:
    """The child process: the web app as `paperbell run` serves it; told "digest", a digest
    run for every subscriber as the daemon runs one (a planner process plans, sender
    processes send); told "standin", the stand-in, its CPU on the web app's event loop
    (`mode` "loop") or in a thread ("thread"); told "stop", the figures."""
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    asyncio.run(_serve(Path(database), smtp_port, pipe, mode, cpu_ms))
    if profiler is not None:
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        pipe.send(("profile", out.getvalue()))
    pipe.close()


class Pauses:
    """What holds the server up: the event loop's longest lag (a 10 ms timer's lateness)
    and the garbage collector's longest pause; and the CPU the process spent since `reset`."""

    def __init__(self) -> None:
        self.loop_lag = 0.0
        self.gc_pause = 0.0
        self.cpu_start = cpu_seconds()
        self._gc_start = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.gc_pause = max(self.gc_pause, time.perf_counter() - self._gc_start)

    async def watch(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            self.loop_lag = max(self.loop_lag, time.perf_counter() - before - 0.01)

    def reset(self) -> None:
        self.loop_lag = self.gc_pause = 0.0
        self.cpu_start = cpu_seconds()


def cpu_seconds() -> float:
    """This process's CPU time so far, all its threads (user and system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class StandIn:
    """A digest run's shape, standing in for one that streams and gives the event loop
    back: per subscriber, its rules matched against the listing's papers (the real
    evaluator, `bot.rules.match`) for `cpu_ms` of CPU, and one committed write of a 30 KB
    row (what queueing its digest costs); the loop is given back after each subscriber.
    `in_thread`: the CPU work in a thread (the write always is)."""

    def __init__(self, store: Store, *, cpu_ms: float, in_thread: bool) -> None:
        self.store = store
        self.cpu = cpu_ms / 1000
        self.in_thread = in_thread
        self.texts: list[Any] = []
        self.rules: dict[int, list[Any]] = {}
        self.done = 0

    def prepare(self) -> None:
        from bot.rules import analyze, parse_rule

        self.texts = [analyze(paper) for paper in tuple(bundled_papers(source="arxiv"))]
        with self.store.database.engine.begin() as connection:
            rows = connection.exec_driver_sql("SELECT subscriber_id, text FROM rules").all()
            connection.exec_driver_sql(
                "CREATE TABLE IF NOT EXISTS bench_standin (id INTEGER PRIMARY KEY, "
                "subscriber_id INTEGER, payload BLOB)"
            )
        for sid, text in rows:
            self.rules.setdefault(sid, []).append(parse_rule(text))

    def match(self, rules: list[Any], start: int) -> int:
        from bot.rules import match

        until, found, n = time.perf_counter() + self.cpu, 0, start
        while time.perf_counter() < until:
            text = self.texts[n % len(self.texts)]
            found += sum(1 for rule in rules if match(rule, text) is not None)
            n += 1
        return found

    def write(self, sid: int) -> None:
        with self.store.database.engine.begin() as connection:
            connection.exec_driver_sql(
                "INSERT INTO bench_standin (subscriber_id, payload) VALUES (?, ?)",
                (sid, bytes(30_000)),
            )

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.to_thread(self.prepare)
        for number, (sid, rules) in enumerate(self.rules.items()):
            if stop.is_set():
                return
            if self.in_thread:
                await asyncio.to_thread(self.match, rules, number * 7)
            else:
                self.match(rules, number * 7)
            await asyncio.to_thread(self.write, sid)
            self.done += 1


async def _serve(
    database: Path, smtp_port: int, pipe: Connection, mode: str, cpu_ms: float
) -> None:
    from bot.cli.planner import PlannerProcess
    from bot.cli.senders import start_senders
    from bot.cli.wiring import Front
    from bot.pipeline import build_channels, build_fetcher, wire, wire_daemon
    from bot.pipeline.scheduler import Daemon
    from bot.sources.http import make_client

    os.environ["PAPERBELL_SECRET_KEY"] = WEB_SECRET  # the planner's and senders' links
    config = make_config(database, smtp_port)
    config_file = sender_config(database, smtp_port)
    planner = PlannerProcess(config_file)
    store = Store.open(config.database.url)
    parts = wire(config, store, build_channels(config, store=store))
    stop = asyncio.Event()
    front = Front(config, parts, clock=lambda: NOW, stop=stop)
    digest: asyncio.Future[Any] | None = None
    times: dict[str, float] = {}
    pauses = Pauses()
    watch = asyncio.create_task(pauses.watch())

    standin = StandIn(store, cpu_ms=cpu_ms, in_thread=mode == "thread")
    done_before = 0

    async def run_digest(kind: str) -> Any:
        times["digest_start"] = time.time()
        try:
            if kind == "standin":
                return await standin.run(stop)
            # As `paperbell run` runs it: its planner process plans and queues, its sender
            # processes ([delivery] workers, by email only) render and send; this process
            # (the web app's) waits for the reports.
            senders = start_senders(config_file, config.delivery.workers, until_idle=True)
            try:
                reports = await daemon.digests_due(NOW)
                times["planned_end"] = time.time()
                times["queued"] = sum(1 for r in reports if r.status == "queued")
            finally:
                if stop.is_set():
                    await asyncio.to_thread(senders.stop, 5.0)
                else:
                    await asyncio.to_thread(senders.finish)
        finally:
            times["digest_end"] = time.time()

    async with make_client() as client:
        daemon = Daemon(
            parts,
            wire_daemon(config, parts, clock=lambda: NOW),
            fetcher=build_fetcher(config, client),
            clock=lambda: NOW,
            sends=False,
            planner=planner.plan,
        )
        port = free_port()
        server = front.server(("127.0.0.1", port), daemon)
        web = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        pipe.send(("ready", port))
        while True:
            message = await asyncio.to_thread(pipe.recv)
            if message in ("digest", "standin"):
                digest = asyncio.create_task(run_digest(message))
                pipe.send(("digest", time.time()))
            elif message == "load":
                pauses.reset()
                done_before = standin.done
            elif message == "stop":
                break
        figures = {
            "cpu": cpu_seconds() - pauses.cpu_start,
            "loop_lag": pauses.loop_lag,
            "gc_pause": pauses.gc_pause,
            "standin_done": standin.done - done_before,
            **times,
        }
        pipe.send(("figures", figures))
        stop.set()
        daemon.stopping = True
        await asyncio.to_thread(planner.stop, 5.0)  # a run still planning is cut short
        if digest is not None:
            await asyncio.gather(digest, return_exceptions=True)
        server.should_exit = True
        await web
        await front.close(5.0)  # as the planner: a stop of a few seconds
    watch.cancel()
    store.close()
    pipe.send(("stopped", times))


# -- the load (this process) ------------------------------------------------------------------


def signed(body: bytes, *, secret: str = SIGNING_SECRET) -> dict[str, str]:
    """Slack's v0 signature headers over the raw body, made now."""
    stamp = str(int(time.time()))
    digest = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256)
    return {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest.hexdigest()}",
        "Content-Type": "application/x-www-form-urlencoded",
    }


def command_body(user: str, text: str, response_url: str) -> bytes:
    """A slash command's body, field for field as Slack posts it."""
    fields = {
        "token": "gIkuvaNzQIHg97ATvDxqgjtO",
        "team_id": "T0BENCH01",
        "team_domain": "lab",
        "channel_id": "D0BENCH01",
        "channel_name": "directmessage",
        "user_id": user,
        "user_name": user.lower(),
        "command": "/papers",
        "text": text,
        "api_app_id": "A0PAPERBELL",
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": f"13345224609.738474920.{next(TRIGGERS):x}",
    }
    return urlencode(fields).encode()


@dataclass
class ResponseSink:
    """The `response_url` stand-in: when each later answer arrived, by request number."""

    port: int = 0
    arrived: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    waiting: dict[str, asyncio.Future[None]] = field(default_factory=dict)

    async def start(self) -> Any:
        from aiohttp import web

        async def receive(request: web.Request) -> web.Response:
            at = time.perf_counter()
            key = request.match_info["key"]
            self.arrived[key] = (at, await request.json())
            future = self.waiting.get(key)
            if future is not None and not future.done():
                future.set_result(None)
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_post("/r/{key}", receive)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self.port = free_port()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        return runner

    async def answer(self, key: str, timeout: float) -> float | None:
        if key not in self.arrived:
            future = self.waiting.setdefault(key, asyncio.get_running_loop().create_future())
            try:
                await asyncio.wait_for(future, timeout)
            except TimeoutError:
                return None
        return self.arrived[key][0]


@dataclass
class Load:
    latencies: list[float]
    late: int  # answers that came at response_url
    timeouts: int
    wrong: int  # answers that were not a subscription's list
    seconds: float


async def run_load(
    port: int,
    users: Sequence[str],
    *,
    requests: int,
    concurrency: int,
    health: bool = False,
    timeout: float = 30.0,
    seed: int = 1,
    warmed_up: Callable[[], Awaitable[None]] | None = None,
) -> Load:
    """`requests` commands (or /healthz) from `concurrency` clients, each timed to its
    answer (one later than `timeout` seconds is counted at `timeout`); a warm-up round of
    `concurrency` first, not counted, then `warmed_up()` (the digest started)."""
    import aiohttp

    sink = ResponseSink()
    runner = await sink.start()
    rng = random.Random(seed)
    numbers = itertools.count()
    latencies: list[float] = []
    counts = Counter[str]()
    base = f"http://127.0.0.1:{port}"

    async def ask(
        session: aiohttp.ClientSession, key: str, start: float
    ) -> tuple[float | None, bool]:
        """When the answer came (None: not within `timeout`), and whether it was right."""
        if health:
            async with session.get(f"{base}/healthz") as response:
                await response.read()
                return time.perf_counter(), response.status in (200, 503)
        user = rng.choice(users)
        body = command_body(user, "list", f"http://127.0.0.1:{sink.port}/r/{key}")
        async with session.post(
            f"{base}/slack/commands", data=body, headers=signed(body)
        ) as response:
            reply = await response.json(content_type=None)
        end: float | None = time.perf_counter()
        if "Working on it" in reply.get("text", ""):
            counts["late"] += 1
            end = await sink.answer(key, timeout - (end - start))
            reply = sink.arrived[key][1] if end is not None else {}
        text = reply.get("text", "")
        return end, "Digests come" in text or "no subscription" in text

    async def one(session: aiohttp.ClientSession, count: bool) -> None:
        key = str(next(numbers))
        start = time.perf_counter()
        try:
            end, ok = await ask(session, key, start)
        except (TimeoutError, aiohttp.ClientError):
            end, ok = None, True
        if not count:
            return
        if end is None:
            counts["timeouts"] += 1
            latencies.append(timeout)
        else:
            latencies.append(end - start)
        if not ok:
            counts["wrong"] += 1

    async def client(session: aiohttp.ClientSession, todo: Any) -> None:
        for _ in todo:
            await one(session, True)

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=timeout), connector=connector
    ) as session:
        await asyncio.gather(*(one(session, False) for _ in range(concurrency)))
        if warmed_up is not None:
            await warmed_up()
        todo = iter(range(requests))
        started = time.perf_counter()
        await asyncio.gather(*(client(session, todo) for _ in range(concurrency)))
        seconds = time.perf_counter() - started
    await runner.cleanup()
    return Load(latencies, counts["late"], counts["timeouts"], counts["wrong"], seconds)


# -- the runs ---------------------------------------------------------------------------------


@dataclass
class Figures:
    name: str
    subscribers: int
    load: Load
    notes: str = ""

    def percentile(self, q: float) -> float:
        values = sorted(self.load.latencies)
        return values[min(len(values) - 1, max(0, round(q / 100 * len(values)) - 1))]

    def row(self) -> str:
        ms = [self.percentile(q) * 1000 for q in (50, 95, 99)] + [max(self.load.latencies) * 1000]
        rate = len(self.load.latencies) / self.load.seconds
        extra = f" late {self.load.late}" if self.load.late else ""
        extra += f" TIMEOUTS {self.load.timeouts}" if self.load.timeouts else ""
        extra += f" WRONG {self.load.wrong}" if self.load.wrong else ""
        return (
            f"{self.name:<9} {self.subscribers:>7,}  "
            + "  ".join(f"{v:>8.0f}" for v in ms)
            + f"  {rate:>7.1f}/s{extra}{'  ' + self.notes if self.notes else ''}"
        )


@dataclass
class Sink:
    """The SMTP sink the digest sends to: Postfix's smtp-sink, else aiosmtpd."""

    port: int
    process: subprocess.Popen[bytes]
    kind: str

    @classmethod
    def start(cls) -> Sink:
        port = free_port()
        if SMTP_SINK.exists():
            user = ["-u", "nobody"] if os.geteuid() == 0 else []
            command = [str(SMTP_SINK), *user, f"127.0.0.1:{port}", "1000"]
            kind = "Postfix smtp-sink"
        else:
            command = [sys.executable, "-m", "aiosmtpd", "-n", "-l", f"127.0.0.1:{port}"]
            kind = "aiosmtpd"
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        return cls(port, process, kind)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()


async def measure(
    name: str,
    database: Path,
    subscribers: int,
    args: argparse.Namespace,
    *,
    smtp: Sink,
    health: bool = False,
    digest: str | None = None,
) -> Figures:
    """One run on its own copy of `database` and its own server process."""
    copy = database.with_name(f"{name}.sqlite")
    shutil.copyfile(database, copy)
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    child = context.Process(
        target=serve,
        args=(str(copy), smtp.port, theirs, args.profile, args.standin_mode, args.standin_ms),
    )
    child.start()
    kind, port = await asyncio.to_thread(ours.recv)
    assert kind == "ready"
    spy = None
    if args.py_spy:
        out = Path(f"{args.py_spy}.{name}.txt")
        spy = subprocess.Popen(
            [
                args.py_spy_command,
                "record",
                "--pid",
                str(child.pid),
                "--format",
                "raw",
                "--output",
                str(out),
                "--rate",
                "200",
                "--nonblocking",
                *args.py_spy_args.split(),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await asyncio.sleep(1)
    notes, began = "", 0.0

    async def warmed_up() -> None:
        nonlocal began
        if digest:
            ours.send(digest)
            await asyncio.to_thread(ours.recv)
            await asyncio.sleep(args.digest_lead)
        ours.send("load")
        began = time.time()

    users = [user_id(i) for i in range(subscribers)]
    load = await run_load(
        port,
        users,
        requests=args.requests,
        concurrency=args.concurrency,
        health=health,
        timeout=args.timeout,
        warmed_up=warmed_up,
    )
    ended = time.time()
    if spy is not None:
        spy.send_signal(2)
        spy.wait()
    ours.send("stop")
    profile, figures, stopped = "", None, None
    deadline = time.monotonic() + args.stop_within
    while time.monotonic() < deadline and (stopped is None or (args.profile and not profile)):
        if not await asyncio.to_thread(ours.poll, 1.0):
            continue
        kind, value = ours.recv()
        if kind == "profile":
            profile = value
        elif kind == "figures":
            figures = value
        elif kind == "stopped":
            stopped = value
    if stopped is None:  # a digest holding the event loop: the server is stopped by force
        child.terminate()
    notes = (
        "the server's loop never came back to answer"
        if figures is None
        else (
            f"server CPU {figures['cpu'] / len(load.latencies) * 1000:.2f} ms a request, "
            f"loop held <= {figures['loop_lag'] * 1000:.0f} ms, "
            f"gc <= {figures['gc_pause'] * 1000:.0f} ms"
        )
    )
    if digest:
        seen = figures or {}
        end = seen.get("digest_end", ended)
        running = "still running" if end >= ended else f"ended {end - began:.1f}s in"
        lead = f"{began - seen['digest_start']:.1f}s" if "digest_start" in seen else "?"
        where = "in a planner process" if digest == "digest" else f"on the {args.standin_mode}"
        notes += (
            f" ({digest} {where}: began {lead} before the load, {running}"
            f"{'' if stopped else ', server stopped by force'}; load {ended - began:.1f}s"
        )
        after = stopped or {}
        if digest == "digest" and "planned_end" in after:
            notes += (
                f"; {int(after['queued']):,} digests planned and queued in "
                f"{after['planned_end'] - after['digest_start']:.1f}s"
            )
        if digest == "standin" and figures is not None:
            done = figures["standin_done"]
            notes += f"; stand-in: {done:,} subscribers in it, {done / (ended - began):.0f}/s"
        notes += ")"
    child.join()
    copy.unlink()
    if profile:
        print(f"--- profile of the server, run {name} ---\n{profile}")
    return Figures(name, subscribers, load, notes)


async def main_async(args: argparse.Namespace) -> int:
    papers = tuple(bundled_papers(source="arxiv"))
    work = Path(tempfile.mkdtemp(prefix="bench-slash-"))
    smtp = Sink.start()
    try:
        started = time.perf_counter()
        big = work / "big.sqlite"
        make_database(big, args.subscribers, papers, seed=args.seed)
        small = work / "small.sqlite"
        make_database(small, args.baseline_subscribers, papers, seed=args.seed)
        print(
            f"databases: {args.subscribers:,} and {args.baseline_subscribers} subscribers "
            f"with {len(papers):,} papers in {time.perf_counter() - started:.1f}s; "
            f"{args.requests} requests per run, {args.concurrency} at a time, "
            f"digest sink: {smtp.kind}",
            flush=True,
        )
        print(f"{'run':<9} {'subs':>7}  {'p50 ms':>8}  {'p95 ms':>8}  {'p99 ms':>8}  {'max ms':>8}")
        results: dict[str, Figures] = {}
        plan = {
            "baseline": (small, args.baseline_subscribers, {}),
            "health": (big, args.subscribers, {"health": True}),
            "list": (big, args.subscribers, {}),
            "digest": (big, args.subscribers, {"digest": "digest"}),
            "standin": (big, args.subscribers, {"digest": "standin"}),
        }
        for name in args.runs:
            database, count, options = plan[name]
            figures = await measure(name, database, count, args, smtp=smtp, **options)
            results[name] = figures
            print(figures.row(), flush=True)
    finally:
        smtp.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    base = results.get("baseline")
    failed = False
    for name in ("list", "digest", "standin"):
        if name not in results:
            continue
        p99 = results[name].percentile(99)
        ratio = f", {p99 / base.percentile(99):.1f}x the baseline's" if base else ""
        ok = p99 <= TARGET_P99 and not results[name].load.timeouts
        failed |= not ok
        print(
            f"{name}: p99 {p99 * 1000:.0f} ms{ratio} "
            f"(target <= {TARGET_P99 * 1000:.0f} ms): {'PASS' if ok else 'MISS'}"
        )
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", type=int, default=10_000)
    parser.add_argument("--baseline-subscribers", type=int, default=2)
    parser.add_argument("--requests", type=int, default=300, help="per run (after a warm-up)")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument(
        "--runs",
        nargs="+",
        default=["baseline", "health", "list", "digest", "standin"],
        choices=["baseline", "health", "list", "digest", "standin"],
    )
    parser.add_argument(
        "--digest-lead", type=float, default=3.0, help="seconds the digest runs before the load"
    )
    parser.add_argument(
        "--stop-within", type=float, default=30.0, help="seconds the server gets to stop"
    )
    parser.add_argument(
        "--standin-mode",
        choices=["loop", "thread"],
        default="loop",
        help="the stand-in's CPU work on the server's event loop, or in a thread",
    )
    parser.add_argument(
        "--standin-ms",
        type=float,
        default=2.0,
        help="the stand-in's CPU per subscriber (2 ms: 10,000 digests in 20 s)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds an answer may take (counted at this when later)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="cProfile the server of each run")
    parser.add_argument("--keep", action="store_true", help="keep the databases (printed dir)")
    parser.add_argument(
        "--py-spy",
        metavar="PREFIX",
        help="sample the server with py-spy during the load: PREFIX.RUN.txt (collapsed stacks)",
    )
    parser.add_argument("--py-spy-command", default=shutil.which("py-spy") or "py-spy")
    parser.add_argument("--py-spy-args", default="", help='more arguments, e.g. "--gil"')
    args = parser.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
