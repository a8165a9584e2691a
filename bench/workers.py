"""Benchmark: 1, 2 and 3 worker processes sending one PostgreSQL outbox into Postfix's
smtp-sink, against a bare smtplib loop sending the same messages.

Owns the figure behind "more than one machine" (docs/workers.md). It makes a
scratch database on the PostgreSQL server (`--server`; dropped at the end), queues N digests
(default 3,000: a two-part text and HTML message of about 30 KB each, built from the real
listing's papers, three papers recorded per digest as a real digest's are), starts
Postfix's `smtp-sink` on a free loopback port, and then:

- baseline: one process, Python's smtplib, one new connection per message (how rss2email
  sends), over the same N messages read from the outbox beforehand; measured first and last,
  so that the machine's drift shows;
- W workers (W = 1, 2, 3): W processes, each with its own connections to the database,
  running what every `paperbell run` runs to send (`Daemon.send_due`: claim a batch, send it
  over one SMTP connection, record each message) until the outbox is empty. The queue is put
  back as it was between runs. Each process is started and connected before the clock
  starts; the clock stops when the database says every digest was sent.

It checks that the sink received exactly N messages per run (its own counter) and the
outbox recorded N sent, and prints messages per second, each run against the baseline.

    .venv/bin/python bench/workers.py [--digests N] [--workers 1,2,3] [--server URL]

Needs PostgreSQL (the server's `postgres` database reachable as a role that may create
databases) and `/usr/sbin/smtp-sink` (Debian's `postfix` package). Not part of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import smtplib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, text, update  # noqa: E402

from bot.core.mail import MAIL_POLICY  # noqa: E402
from bot.core.models import Paper  # noqa: E402
from bot.demo.data import bundled_papers  # noqa: E402
from bot.store import Store, normalize_url, utcnow  # noqa: E402
from bot.store.tables import DeliveryRow, OutboxRow, SubscriberRow  # noqa: E402

SMTP_SINK = "/usr/sbin/smtp-sink"
SENDER = "papers@paperbell.example"
MESSAGE_BYTES = 30_000
PAPERS_PER_DIGEST = 3


# -- the data -------------------------------------------------------------------------------


def digest_message(number: int, papers: tuple[Paper, ...]) -> bytes:
    """A two-part message of about MESSAGE_BYTES: papers' titles and abstracts as text and
    as HTML, each message different (its Message-ID and its papers), written as paperbell
    writes its digests (`MAIL_POLICY`: CRLF line endings; until the eighth session this
    was the email package's default, LF, which aiosmtplib then rewrote for each send)."""
    text_parts: list[str] = []
    html_parts: list[str] = []
    size, i = 0, number
    while size < MESSAGE_BYTES // 2:
        paper = papers[i % len(papers)]
        i += 7
        entry = f"{paper.title}\n{', '.join(paper.authors[:6])}\n{paper.abstract}\n"
        text_parts.append(entry)
        html_parts.append(
            f"<h3>{paper.title}</h3><p><i>{', '.join(paper.authors[:6])}</i></p>"
            f"<p>{paper.abstract}</p>"
        )
        size += len(entry.encode())
    msg = EmailMessage(policy=MAIL_POLICY)
    msg["From"] = f"paperbell <{SENDER}>"
    msg["To"] = f"reader{number:06d}@lab.example"
    msg["Subject"] = f"Your papers: {len(text_parts)} new"
    msg["Message-ID"] = f"<bench-{number:06d}@paperbell.example>"
    msg.set_content("\n".join(text_parts))
    msg.add_alternative("<html><body>" + "".join(html_parts) + "</body></html>", subtype="html")
    return bytes(msg)


def fill(store: Store, papers: tuple[Paper, ...], count: int) -> list[tuple[str, bytes]]:
    """Queue `count` digests (not due yet), each to its own subscriber; (recipient, payload)
    of each, in the order queued."""
    now = utcnow()
    with store.database.session() as session:  # subscribers in bulk: the bench's setup only
        session.add_all(
            SubscriberRow(name=f"reader{n:06d}", email=f"reader{n:06d}@lab.example", created_at=now)
            for n in range(count)
        )
        session.commit()
        ids = dict(session.execute(text("SELECT name, id FROM subscribers")).all())
    queued = []
    later = now + timedelta(days=1)
    for n in range(count):
        recipient = f"reader{n:06d}@lab.example"
        payload = digest_message(n, papers)
        start = (n * PAPERS_PER_DIGEST) % (len(papers) - PAPERS_PER_DIGEST)
        store.outbox.enqueue(
            ids[f"reader{n:06d}"],
            channel="email",
            period="daily:2026-11-23",
            digest_id=f"bench-{n:06d}",
            recipient=recipient,
            payload=payload,
            sent=papers[start : start + PAPERS_PER_DIGEST],
            now=later,
        )
        queued.append((recipient, payload))
    return queued


def reset(store: Store, *, due: bool) -> None:
    """Put the outbox back as queued: not due (`due` False) or due now."""
    when = utcnow() - timedelta(seconds=1) if due else utcnow() + timedelta(days=1)
    with store.database.session() as session:
        session.execute(
            update(OutboxRow).values(
                status="pending",
                sent_at=None,
                lease_owner=None,
                lease_until=None,
                attempts=0,
                last_error=None,
                next_attempt=when,
            )
        )
        session.execute(update(DeliveryRow).values(status="queued"))
        session.commit()


def sent(store: Store) -> int:
    with store.database.engine.connect() as connection:
        query = "SELECT count(*) FROM outbox WHERE status = 'sent'"
        return int(connection.execute(text(query)).scalar_one())


# -- the sink and the database ----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Sink:
    """Postfix's smtp-sink on loopback; `received()` reads its counter of messages."""

    def __init__(self, folder: Path) -> None:
        if not Path(SMTP_SINK).exists():
            sys.exit(f"{SMTP_SINK} is missing: install Debian's `postfix` package")
        self.port = free_port()
        self.log = folder / "smtp-sink.out"
        user = ["-u", "nobody"] if os.geteuid() == 0 else []  # it refuses to run as root
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [SMTP_SINK, *user, "-c", f"127.0.0.1:{self.port}", "1000"],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    sys.exit(f"smtp-sink did not start: {self.log.read_text()}")
                time.sleep(0.05)
        self.base = self.received()  # the connection above counts as a session only

    def received(self) -> int:
        counts = re.findall(rb"mesg=(\d+)", self.log.read_bytes())
        return int(counts[-1]) if counts else 0

    def close(self) -> None:
        self.process.terminate()
        self.process.wait()


@contextmanager
def scratch_database(server: str) -> Iterator[str]:
    """A new database on `server`, dropped afterwards: its URL."""
    name = f"paperbell_bench_workers_{os.getpid()}"
    admin = create_engine(
        normalize_url(server.rstrip("/") + "/postgres"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield server.rstrip("/") + "/" + name
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


# -- the two contenders ---------------------------------------------------------------------


def baseline(queued: list[tuple[str, bytes]], port: int) -> float:
    """A bare smtplib loop: one new connection per message. Seconds for all of them."""
    began = time.perf_counter()
    for recipient, payload in queued:
        with smtplib.SMTP("127.0.0.1", port, timeout=30) as smtp:
            smtp.sendmail(SENDER, [recipient], payload)
    return time.perf_counter() - began


def workers_run(
    count: int, url: str, port: int, store: Store, digests: int, batch: int, folder: Path
) -> tuple[float, list[int], float]:
    """`count` worker processes send the whole outbox: seconds (from "go" to the last
    worker's last record), how many each sent, and their CPU seconds together."""
    reset(store, due=False)
    processes = []
    for n in range(count):
        log = (folder / f"worker{n}.log").open("w")
        processes.append(
            subprocess.Popen(
                [sys.executable, __file__, "--worker", url, str(port), str(batch), str(n)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        )
    for process in processes:  # each connected and ready
        assert process.stdout is not None
        line = process.stdout.readline()
        if line.strip() != "ready":
            sys.exit(f"a worker did not start: {line!r}; see {folder}/worker*.log")
    reset(store, due=True)
    began = time.time()  # the workers' clocks are this machine's: they say when they ended
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    reports = []
    for process in processes:
        out, _ = process.communicate(timeout=3600)
        if process.returncode != 0:
            sys.exit(f"a worker failed; see {folder}/worker*.log")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    if sent(store) != digests:
        sys.exit(f"the workers stopped with {digests - sent(store)} digests unsent")
    seconds = max(r["ended"] for r in reports) - began
    return seconds, [r["sent"] for r in reports], sum(r["cpu"] for r in reports)


def worker(url: str, port: int, batch: int, number: int) -> None:
    """One worker process: what `paperbell run` does to send, until the outbox is empty."""
    from bot.config import parse_config
    from bot.pipeline import build_channels, wire, wire_daemon
    from bot.pipeline.scheduler import Daemon

    config = parse_config(
        {
            "version": 1,
            "database": {"url": url},
            "delivery": {"batch": batch},
            "email": {"from": SENDER, "host": "127.0.0.1", "port": port, "security": "none"},
        },
        environ={},
    )
    store = Store.open(url)
    parts = wire(config, store, build_channels(config, store=store))
    own = wire_daemon(config, parts, clock=utcnow)
    daemon = Daemon(parts, own, fetcher=None, clock=utcnow, owner=f"bench-{number}")
    sent(store)  # connected
    print("ready", flush=True)
    sys.stdin.readline()

    async def send() -> tuple[int, float]:
        done, ended = 0, time.time()
        while True:
            attempts = await daemon.send_due()
            if attempts:
                done += sum(1 for a in attempts if a.status == "sent")
                ended = time.time()
            elif store.outbox.totals(now=utcnow())["pending"] == 0:
                return done, ended
            else:
                await asyncio.sleep(0.02)  # the others hold the rest

    cpu = time.process_time()
    done, ended = asyncio.run(send())
    cpu = time.process_time() - cpu
    print(json.dumps({"sent": done, "ended": ended, "cpu": cpu}), flush=True)
    store.close()


# -- the run --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--digests", type=int, default=3000)
    parser.add_argument("--workers", default="1,2,3", help="worker counts to run, e.g. 1,2,3")
    parser.add_argument("--batch", type=int, default=20, help="[delivery] batch (default 20)")
    parser.add_argument(
        "--server",
        default=os.environ.get("PAPERBELL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432"),
        help="PostgreSQL server URL without a database (a scratch one is made and dropped)",
    )
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        url, port, batch, number = args.worker
        worker(url, int(port), int(batch), int(number))
        return
    counts = [int(n) for n in args.workers.split(",")]
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"paperbell-bench-workers-{os.getpid()}"
    folder.mkdir(parents=True)
    print(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"{args.digests:,} digests of ~{MESSAGE_BYTES // 1000} KB"
    )
    sink = Sink(folder)
    try:
        with scratch_database(args.server) as url:
            store = Store.open(url)
            queued = fill(store, tuple(bundled_papers(source="arxiv")), args.digests)
            size = sum(len(p) for _, p in queued) / len(queued)
            print(f"queued {len(queued):,} digests, {size / 1000:.1f} KB each, into {url}")
            results: dict[str, Any] = {}

            def check(what: str, before: int) -> None:
                time.sleep(0.2)  # the sink's counter is written as it goes
                got = sink.received() - before
                if got != args.digests:
                    sys.exit(f"{what}: the sink received {got} messages, not {args.digests}")

            before = sink.received()
            first = baseline(queued, sink.port)
            check("baseline", before)
            for count in counts:
                before = sink.received()
                seconds, each, cpu = workers_run(
                    count, url, sink.port, store, args.digests, args.batch, folder
                )
                check(f"{count} workers", before)
                if sum(each) != args.digests:
                    sys.exit(f"{count} workers sent {sum(each)}, not {args.digests}")
                results[f"{count}"] = (seconds, each, cpu)
            before = sink.received()
            last = baseline(queued, sink.port)
            check("baseline", before)
            store.close()
    finally:
        sink.close()
        shutil.rmtree(folder, ignore_errors=True)

    rate = args.digests / ((first + last) / 2)
    print(
        f"\nbaseline, smtplib, a new connection per message: {args.digests / first:,.0f} msg/s "
        f"first, {args.digests / last:,.0f} msg/s last; mean {rate:,.0f} msg/s"
    )
    one = None
    print(
        f"{'workers':>8} {'seconds':>8} {'msg/s':>7} {'vs baseline':>12} {'vs 1':>6} "
        f"{'CPU s':>6} {'ms CPU/msg':>10}  sent by each"
    )
    for count, (seconds, each, cpu) in results.items():
        speed = args.digests / seconds
        one = one or speed
        print(
            f"{count:>8} {seconds:>8.2f} {speed:>7,.0f} {speed / rate:>11.2f}x "
            f"{speed / one:>5.2f}x {cpu:>6.1f} {cpu / args.digests * 1000:>10.2f}  "
            + ", ".join(map(str, each))
        )
    print(
        f"\nload average at the end {os.getloadavg()[0]:.1f}. "
        "CPU s: the worker processes' own (user + system), PostgreSQL's not counted. "
        f"{os.cpu_count()} CPUs shared by the workers, PostgreSQL, smtp-sink and whatever else "
        "runs: past the CPUs, more workers only share them."
    )


if __name__ == "__main__":
    main()
