"""Fan-out: one `paperbell digest` run for N email subscribers into Postfix's smtp-sink.

    .venv/bin/python bench/fanout.py                       # 10,000 subscribers
    .venv/bin/python bench/fanout.py --subscribers 100000  # the memory figure
    .venv/bin/python bench/fanout.py --subscribers 1000 --profile out.prof

Needs Debian's `postfix` package (/usr/sbin/smtp-sink). A fresh SQLite store is filled
with the real listing of 2024-11-28 (1,504 papers, polled from a file:// copy of the
bundled feed) and N subscribers, each with 1-3 one-word rules drawn from the listing's
title words (Zipf over their document frequency, seeded). Then, against the same sink:

- the anchor: a bare smtplib loop that sends one pre-built two-part ~30 KB message per
  new connection (how rss2email sends), `--anchor-messages` of them (default: N, at most
  10,000); for reference, the same loop with the bytes made once, and with a message
  of the digests' mean size (~58 KB);
- `paperbell digest -c config.toml --since 2024-11-28` as a child process: wall time,
  time to the first message the sink counts, messages per second, peak RSS (the child's
  ru_maxrss), and each process's CPU time and peak PSS (and its PSS when the first message
  arrived: mostly a sender's imports, before the run's data).

The sink's running counter (`smtp-sink -c`) counts what it accepted; every digest must
arrive (exit code 1 otherwise, or when the digest command fails).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import pty
import random
import re
import resource
import shutil
import smtplib
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FEED = ROOT / "bot" / "data" / "demo" / "rss_all-archives-combined_2024-11-28.xml.gz"
DAY = "2024-11-28"
SINK = Path("/usr/sbin/smtp-sink")
sys.path.insert(0, str(ROOT))
from bot.demo.data import ALL_ARCHIVES  # noqa: E402

WORD = re.compile(r"[a-z]{5,}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Sink:
    """Postfix's smtp-sink on loopback, its running counter read as it changes."""

    def __init__(self) -> None:
        if not SINK.exists():
            sys.exit(f"{SINK} is missing: apt-get install postfix (Debian's smtp-sink)")
        self.port = free_port()
        user = ["-u", "postfix"] if os.geteuid() == 0 else []
        # On a terminal: smtp-sink writes its counter at once, to a pipe only at exit.
        self._terminal, writer = pty.openpty()
        self.process = subprocess.Popen(
            [str(SINK), *user, "-c", f"127.0.0.1:{self.port}", "1000"],
            stdout=writer,
            stderr=writer,
        )
        os.close(writer)
        self.messages = 0
        self.first: float | None = None  # monotonic time of the first message after mark()
        self._mark = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        sys.exit("smtp-sink did not start")

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._terminal, 4096)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            *lines, buffer = re.split(rb"[\r\n]", buffer)
            for line in lines:
                found = re.search(rb"mesg=(\d+)", line)
                if found:
                    with self._lock:
                        self.messages = int(found.group(1))
                        if self.first is None and self.messages > self._mark:
                            self.first = time.monotonic()

    def mark(self) -> int:
        """Count from here; the first message after this is timed."""
        with self._lock:
            self._mark, self.first = self.messages, None
            return self.messages

    def wait_for(self, count: int, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.messages < count:
            time.sleep(0.05)
        return self.messages

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()


# The mean size of a digest's message in a run of this bench (bench/render.py prints it:
# 56.8 KiB = 58.2 KB in the eighth session), for a reference line: the anchor's loop
# sending messages as large as paperbell's (the ratio stays to issue 24's ~30 KB anchor).
DIGEST_SIZE = 60_800  # anchor_message(60_800): 58.2 KB
ANCHOR_SIZE = 30_000  # issue 24's anchor: anchor_message(30_000) is 29 KB


def anchor_message(size: int = ANCHOR_SIZE) -> EmailMessage:
    """A two-part (text + HTML) message of about `size` bytes, built once."""
    rng = random.Random(7)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
        for _ in range(500)
    ]
    body = " ".join(rng.choice(words) for _ in range(size // 14))
    message = EmailMessage()
    message["From"] = "paperbell <papers@bench.example>"
    message["To"] = "someone@bench.example"
    message["Subject"] = "Your papers"
    message.set_content(body)
    message.add_alternative(f"<html><body><p>{body}</p></body></html>", subtype="html")
    return message


def run_anchor(
    sink: Sink, count: int, *, as_bytes: bool = False, size: int = ANCHOR_SIZE
) -> tuple[float, int]:
    """A bare smtplib loop: one new connection per message, the message (about `size`
    bytes) built once and handed to `send_message` (how rss2email sends: written out again
    for each send), or (`as_bytes`) its bytes to `sendmail`. Seconds, bytes per message."""
    message = anchor_message(size)
    payload = bytes(message)
    start_count = sink.mark()
    start = time.perf_counter()
    for _ in range(count):
        smtp = smtplib.SMTP("127.0.0.1", sink.port)
        if as_bytes:
            smtp.sendmail("papers@bench.example", ["someone@bench.example"], payload)
        else:
            smtp.send_message(message)
        smtp.quit()
    seconds = time.perf_counter() - start
    sink.wait_for(start_count + count)
    return seconds, len(payload)


def title_words(papers_xml: bytes) -> list[tuple[str, int]]:
    """`topical_words` of the feed's item titles."""
    titles = re.findall(rb"<title>(.*?)</title>", papers_xml, re.S)[1:]
    return topical_words(title.decode("utf-8", "replace") for title in titles)


def topical_words(titles: Iterable[str]) -> list[tuple[str, int]]:
    """Topical title words (5+ letters, in at most 2% of titles), by document frequency."""
    counts: Counter[str] = Counter()
    seen = 0
    for title in titles:
        seen += 1
        counts.update(set(WORD.findall(title.lower())))
    ceiling = max(2, seen // 50)
    # Ties by the word itself, as bench/bulk.py ranks them: `most_common` would leave them
    # in the order sets gave, which hash randomization changes from run to run, and with
    # them the subscribers a seed draws.
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [(w, c) for w, c in ranked if 2 <= c <= ceiling]


def zipf_weights(count: int) -> list[float]:
    """Weights for words ranked by document frequency: popular topics repeat."""
    return [1 / (rank + 5) ** 1.1 for rank in range(count)]


def drawn_rules(
    rng: random.Random, words: list[tuple[str, int]], weights: list[float]
) -> list[str]:
    """A subscriber's 1-3 `ti:` one-word rules, drawn by `weights`, each once."""
    chosen = rng.choices(words, weights, k=rng.randint(1, 3))
    return [f"ti:{word}" for word, _ in dict.fromkeys(chosen)]


def tree_pids(pid: int) -> list[int]:
    """A process and all its descendants (those still there)."""
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
        found.append(current)
    return found


def process_memory_mb(pid: int) -> tuple[float, float]:
    """One process's resident set and proportional set (PSS: a page it shares with others
    counted as its share), in MB (0: gone)."""
    rss = pss = 0
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0.0, 0.0
    for line in rollup.splitlines():
        if line.startswith("Rss:"):
            rss += int(line.split()[1])
        elif line.startswith("Pss:"):
            pss += int(line.split()[1])
    return rss / 1024, pss / 1024


def tree_memory_mb(pids: list[int]) -> tuple[float, float]:
    """The memory of processes, in MB (0: gone): the sum of their resident sets (a page
    two of them share counted twice), and of their proportional sets (PSS: a shared page
    counted once, split between those that share it)."""
    sizes = [process_memory_mb(pid) for pid in pids]
    return sum(rss for rss, _ in sizes), sum(pss for _, pss in sizes)


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """A process's CPU time so far (user + system), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


class TreeWatch:
    """While a process runs, every 0.1 s: the peaks of its tree's memory
    (`tree_memory_mb`), and each process's CPU time (`cpu`: the last seen, by pid;
    `cpu_at(moment)`: as it was at a monotonic moment) and PSS (`pss_at(moment)`)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self.peak_pss = 0.0
        self.pss: dict[int, float] = {}  # each process's peak PSS, by pid
        self.cpu: dict[int, float] = {}
        self.commands: dict[int, str] = {}
        self._samples: list[tuple[float, dict[int, float]]] = []
        self._pss_samples: list[tuple[float, dict[int, float]]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(0.1):
            pids = tree_pids(self.pid)
            sizes = {pid: process_memory_mb(pid) for pid in pids}
            self.peak = max(self.peak, sum(rss for rss, _ in sizes.values()))
            self.peak_pss = max(self.peak_pss, sum(pss for _, pss in sizes.values()))
            for pid, (_, pss) in sizes.items():
                self.pss[pid] = max(self.pss.get(pid, 0.0), pss)
            for pid in pids:
                if (seconds := cpu_seconds(pid)) is not None:
                    self.cpu[pid] = seconds
                if pid not in self.commands:
                    with contextlib.suppress(OSError):
                        command = Path(f"/proc/{pid}/cmdline").read_bytes()
                        self.commands[pid] = command.replace(b"\0", b" ").decode(errors="replace")
            now = time.monotonic()
            self._samples.append((now, dict(self.cpu)))
            self._pss_samples.append((now, {pid: pss for pid, (_, pss) in sizes.items()}))

    def cpu_at(self, moment: float) -> dict[int, float]:
        """Each process's CPU time at the last sample before `moment`."""
        before = [cpu for when, cpu in self._samples if when <= moment]
        return before[-1] if before else {}

    def pss_at(self, moment: float) -> dict[int, float]:
        """Each process's PSS at the last sample before `moment`, in MB."""
        before = [pss for when, pss in self._pss_samples if when <= moment]
        return before[-1] if before else {}

    def stop(self) -> tuple[float, float]:
        self._done.set()
        self._thread.join()
        return self.peak, self.peak_pss


def role_of(watch: TreeWatch, pid: int, main_pid: int) -> str | None:
    """What a process of the run is: the main process, a sender, another (None:
    multiprocessing's helper, which does no work of the run)."""
    command = watch.commands.get(pid, "")
    if pid == main_pid:
        return "main process"
    if "resource_tracker" in command:
        return None
    return "sender" if "spawn_main" in command else f"process {pid}"


def process_memory(watch: TreeWatch, main_pid: int, first: float | None) -> str:
    """Each process's peak PSS (what one more sender weighs), and its PSS when the first
    message arrived: a sender's then is mostly its imports, what it gains after, the run's."""
    at_first = watch.pss_at(first) if first is not None else {}
    parts = []
    for pid, pss in sorted(watch.pss.items(), key=lambda item: item[0] != main_pid):
        role = role_of(watch, pid, main_pid)
        if role is not None:
            parts.append(f"{role} {pss:.0f} MB ({at_first.get(pid, 0.0):.0f} MB)")
    return "peak PSS by process (at the first message): " + "; ".join(parts)


def process_cpu(watch: TreeWatch, main_pid: int, first: float | None, end: float) -> str:
    """Each process's CPU time, and how busy it was from the first message to the end:
    the process near 1.0 is the one the rate waits for."""
    since = watch.cpu_at(first) if first is not None else {}
    span = end - first if first is not None else float("nan")
    parts = []
    for pid, seconds in sorted(watch.cpu.items(), key=lambda item: item[0] != main_pid):
        role = role_of(watch, pid, main_pid)
        if role is None:
            continue
        busy = (seconds - since.get(pid, 0.0)) / span if span > 0 else float("nan")
        parts.append(f"{role} {seconds:.1f} s (busy {busy:.2f})")
    return "CPU by process (busy: its share of one core from the first message on): " + (
        "; ".join(parts)
    )


def write_setup(folder: Path, sink_port: int, workers: int | None = None) -> tuple[Path, bytes]:
    xml = gzip.decompress(FEED.read_bytes())
    feed = folder / "listing.xml"
    feed.write_bytes(xml)
    config = folder / "config.toml"
    categories = json.dumps(ALL_ARCHIVES)
    config.write_text(
        f"""version = 1
[database]
url = "sqlite:///{folder / "paperbell.sqlite"}"
[digest]
window_days = 7
[web]
public_url = "https://papers.bench.example"
secret_key_env = "PAPERBELL_BENCH_SECRET"
[[sources]]
kind = "arxiv"
name = "arxiv"
categories = {categories}
url = "{feed.as_uri()}"
[email]
host = "127.0.0.1"
port = {sink_port}
security = "none"
from = "paperbell <papers@bench.example>"
"""
        + (f"[delivery]\nworkers = {workers}\n" if workers else ""),
        encoding="utf-8",
    )
    return config, xml


def add_subscribers(database: Path, count: int, words: list[tuple[str, int]], seed: int) -> None:
    """N email subscribers, 1-3 one-word rules each, straight into the tables."""
    rng = random.Random(seed)
    weights = zipf_weights(len(words))
    now = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
    connection = sqlite3.connect(database)
    with connection:
        connection.executemany(
            "INSERT INTO subscribers (name, email, origin, active, categories, max_papers, "
            "include, created_at, email_confirmed, email_format, abstracts, summaries, "
            "similar_max) VALUES (?, ?, 'database', 1, '[]', 50, '[\"cross\", \"new\"]', ?, "
            "1, 'html', 'short', 0, 5)",
            ((f"reader{i:06d}", f"reader{i:06d}@bench.example", now) for i in range(count)),
        )
        ids = [row[0] for row in connection.execute("SELECT id FROM subscribers ORDER BY id")]
        rules = []
        for sub_id in ids:
            rules += [(sub_id, rule, now) for rule in drawn_rules(rng, words, weights)]
        connection.executemany(
            "INSERT INTO rules (subscriber_id, text, created_at) VALUES (?, ?, ?)", rules
        )
    connection.close()


def paperbell(*args: str, env: dict[str, str], out: Path | None = None) -> None:
    command = [sys.executable, "-m", "bot.cli", *args]
    with open(out or os.devnull, "wb") as sink:
        result = subprocess.run(command, env=env, stdout=sink, stderr=subprocess.PIPE, cwd=ROOT)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args[:1])} failed ({result.returncode}):\n{result.stderr.decode()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subscribers", type=int, default=10_000)
    parser.add_argument("--anchor-messages", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--workers", type=int, help="[delivery] workers (default: the config's default)"
    )
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument("--profile", type=Path, help="cProfile the digest run into this file")
    args = parser.parse_args()
    # Absolute: the digest run starts in ROOT (see below), not in the caller's directory.
    folder = (args.keep or Path(tempfile.mkdtemp(prefix="paperbell-fanout-"))).resolve()
    if args.profile:
        args.profile = args.profile.resolve()
    if args.keep:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    sink = Sink()
    env = {**os.environ, "PAPERBELL_BENCH_SECRET": "b" * 40, "PYTHONPATH": str(ROOT)}
    try:
        config, xml = write_setup(folder, sink.port, args.workers)
        paperbell("db", "upgrade", "-c", str(config), env=env)
        paperbell("poll", "-c", str(config), env=env)
        add_subscribers(folder / "paperbell.sqlite", args.subscribers, title_words(xml), args.seed)
        print(f"{args.subscribers:,} subscribers, the listing of {DAY}; sink on :{sink.port}")

        anchor_count = args.anchor_messages or min(args.subscribers, 10_000)
        anchor_seconds, anchor_size = run_anchor(sink, anchor_count)
        anchor_rate = anchor_count / anchor_seconds
        print(
            f"anchor: bare smtplib, new connection per message, send_message of one pre-built "
            f"{anchor_size / 1000:.0f} KB message (rss2email): {anchor_count:,} in "
            f"{anchor_seconds:.1f} s = {anchor_rate:.0f} msg/s"
        )
        raw_seconds, _ = run_anchor(sink, anchor_count, as_bytes=True)
        print(
            f"  (the same loop with the bytes made once, sendmail: {anchor_count / raw_seconds:.0f}"
            " msg/s)"
        )
        sized_seconds, sized = run_anchor(sink, anchor_count, size=DIGEST_SIZE)
        print(
            f"  (the same loop with a message of {sized / 1000:.0f} KB, the digests' mean size: "
            f"{anchor_count / sized_seconds:.0f} msg/s)"
        )

        before = sink.mark()
        digest = ["digest", "-c", str(config), "--since", DAY]
        command = [sys.executable, "-m", "bot.cli", *digest]
        if args.profile:
            command = [sys.executable, "-m", "cProfile", "-o", str(args.profile), "-m", "bot.cli"]
            command += digest
        before_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        with open(folder / "digest.out", "wb") as out:
            # In ROOT: `python -m` puts its working directory first on sys.path, so a run
            # started from another checkout would import that checkout's code instead.
            child = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.PIPE, cwd=ROOT)
            watch = TreeWatch(child.pid)
            _, stderr = child.communicate()
            end = time.monotonic()
            tree_peak, tree_pss = watch.stop()
        seconds = end - start
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_mb = usage.ru_maxrss / 1024
        cpu = usage.ru_utime + usage.ru_stime - before_cpu.ru_utime - before_cpu.ru_stime
        if child.returncode != 0:
            print(stderr.decode()[-3000:])
            print(f"digest failed: exit code {child.returncode}")
            return 1
        lines = (folder / "digest.out").read_text(encoding="utf-8").splitlines()
        sent = sum(1 for line in lines if ": sent " in line)
        received = sink.wait_for(before + sent, timeout=10) - before
        first = (sink.first - start) if sink.first is not None else float("nan")
        rate = received / seconds
        print(
            f"paperbell digest: {received:,} messages in {seconds:.1f} s = {rate:.0f} msg/s "
            f"(CPU {cpu:.1f} s), first after {first:.1f} s, peak RSS {peak_mb:.0f} MB "
            f"(the largest process; all processes: {tree_peak:.0f} MB resident, "
            f"{tree_pss:.0f} MB PSS) "
            f"({len(lines) - sent:,} subscribers with nothing new)"
        )
        print(f"ratio to the anchor: {rate / anchor_rate:.2f}x")
        print(process_cpu(watch, child.pid, sink.first, end))
        print(process_memory(watch, child.pid, sink.first))
        missing = sent - received
        if missing > 0:
            print(f"MISSING: {missing:,} digests did not reach the sink")
            return 1
        return 0
    finally:
        sink.stop()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
