"""Rendering in worker processes (bot.channels.renderpool): a large run's digests are
rendered by spawned workers while the main process queues and sends. What goes out is byte
for byte what the main process would have rendered; a worker that dies mid-run costs no
digest (the main process renders the rest), and none goes twice.

Real parts: real worker processes, a real SQLite store, an SMTP server on loopback."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import runpy
import signal
from datetime import UTC, date, datetime
from typing import Any

import pytest
from support.config import sink_email
from support.servers import smtp_sink

from bot.channels.linking import Linker
from bot.channels.renderpool import RenderPool
from bot.config import Config, parse_config
from bot.core.models import Paper
from bot.pipeline import DeliveryReport, DeliveryRequest, build_channels, deliver
from bot.pipeline.payloads import POOL_FROM
from bot.pipeline.payloads import render_processes as processes
from bot.store import Store

NOW = datetime(2024, 11, 28, 23, 0, tzinfo=UTC)
WORDS = ["learning", "quantum", "graph", "galaxy", "spin", "neural", "model", "field"]
SECRET = "a-real-secret-key-for-the-render-pool-tests-0123456789"


def config_for(database_url: str, port: int, people: int, *, workers: int) -> Config:
    return parse_config(
        {
            "version": 1,
            "database": {"url": database_url},
            "email": sink_email(port),
            "delivery": {"render_processes": workers},
            "web": {"public_url": "https://papers.example.org", "secret_key_env": "KEY"},
            "subscribers": [
                {
                    "name": f"p{n:03d}",
                    "email": f"p{n:03d}@lab.example",
                    "rules": [WORDS[n % len(WORDS)], WORDS[(n * 3 + 1) % len(WORDS)]],
                }
                for n in range(people)
            ],
        },
        environ={"KEY": SECRET},
    )


def run(config: Config, store: Store, **options: Any) -> list[DeliveryReport]:
    request = DeliveryRequest(since=date(2024, 11, 28))
    channels = build_channels(config)
    return asyncio.run(deliver(config, store, channels, request, now=NOW, **options))


def test_a_run_renders_in_workers_only_when_large_enough() -> None:
    config = parse_config({"version": 1, "delivery": {"render_processes": 3}}, environ={})
    assert processes(config, POOL_FROM - 1) == 0
    assert processes(config, POOL_FROM) == 3
    none = parse_config({"version": 1, "delivery": {"render_processes": 0}}, environ={})
    assert processes(none, 100_000) == 0
    auto = parse_config({"version": 1}, environ={})
    assert processes(auto, POOL_FROM) == max((os.cpu_count() or 1) - 1, 0)


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> list[RenderPool]:
    """Each run's pool, kept for the test, started before the run goes on (so that its
    workers render every share: a run renders in the main process while they start)."""
    made: list[RenderPool] = []
    original = RenderPool.__init__

    def started(pool: RenderPool, *args: Any, **kwargs: Any) -> None:
        original(pool, *args, **kwargs)
        assert pool.wait_ready(timeout=60)
        made.append(pool)

    monkeypatch.setattr(RenderPool, "__init__", started)
    return made


def test_workers_send_byte_for_byte_what_the_main_process_renders(
    tmp_path: Any, full_feed_papers: tuple[Paper, ...], pools: list[RenderPool]
) -> None:
    """The same 120 subscribers, once rendered in two workers and once in the main
    process, into two SMTP servers: the same messages, each once."""
    received = {}
    for workers in (2, 0):
        url = f"sqlite:///{tmp_path}/w{workers}.sqlite"
        with Store.open(url) as store, smtp_sink() as (sink, port):
            store.papers.upsert(full_feed_papers, now=NOW)
            config = config_for(url, port, 120, workers=workers)
            reports = run(config, store, pool_from=1)
            sent = [r for r in reports if r.status == "sent"]
            assert len(sent) == len(reports) == 120, {r.status for r in reports}
            # The port differs between the runs: nothing else may.
            received[workers] = sorted(sink.raw)
    assert len(pools) == 1 and pools[0].workers == 2
    assert len(received[2]) == 120
    assert received[2] == received[0]


def test_the_workers_start_before_the_plan_and_are_handed_its_papers_after(
    tmp_path: Any, full_feed_papers: tuple[Paper, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run large enough for workers starts them before it plans (they start while it
    plans), hands them the plan's papers through a file, and removes the file at the end,
    and the folder the workers wrote their rendered shares into (each share's file is
    read and removed as it comes back: a name goes through the pool's pipe, never
    megabytes a killed worker could leave half written)."""
    delivery = importlib.import_module("bot.pipeline.deliver")
    events: list[str] = []
    files: list[str] = []
    pools: list[RenderPool] = []
    started, planned, loaded = RenderPool.__init__, delivery.plan_delivery, RenderPool.load

    def start(pool: RenderPool, *args: Any, **kwargs: Any) -> None:
        started(pool, *args, **kwargs)
        events.append("pool without papers" if pool._file is None else "pool with papers")

    def plan(*args: Any, **kwargs: Any) -> Any:
        events.append("plan")
        return planned(*args, **kwargs)

    def load(pool: RenderPool, papers: Any) -> None:
        loaded(pool, papers)
        assert pool._file is not None and os.path.exists(pool._file)
        files.append(pool._file)
        pools.append(pool)

    monkeypatch.setattr(RenderPool, "__init__", start)
    monkeypatch.setattr(RenderPool, "load", load)
    monkeypatch.setattr(delivery, "plan_delivery", plan)
    url = f"sqlite:///{tmp_path}/early.sqlite"
    with Store.open(url) as store, smtp_sink() as (sink, port):
        store.papers.upsert(full_feed_papers, now=NOW)
        reports = run(store=store, config=config_for(url, port, 40, workers=1), pool_from=30)
    assert [r.status for r in reports] == ["sent"] * 40 and len(sink.messages) == 40
    assert events == ["pool without papers", "plan"]
    assert len(files) == 1 and not os.path.exists(files[0])
    folder = pools[0]._folder
    assert folder is not None and "paperbell-rendered-" in folder and not os.path.exists(folder)


def test_a_pool_renders_nothing_before_it_has_its_papers(
    full_feed_papers: tuple[Paper, ...],
) -> None:
    pool = RenderPool({}, Linker(NOW, None, None), workers=1)
    try:
        assert pool.wait_ready(timeout=60) and not pool.ready
        with pytest.raises(RuntimeError, match="no papers"):
            asyncio.run(pool.render([]))
        pool.load(full_feed_papers[:10])
        assert pool.ready and asyncio.run(pool.render([])) == []
        with pytest.raises(RuntimeError, match="has its papers"):
            pool.load(full_feed_papers)
    finally:
        pool.close()


def test_a_worker_killed_mid_run_loses_no_digest_and_repeats_none(
    tmp_path: Any,
    full_feed_papers: tuple[Paper, ...],
    pools: list[RenderPool],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Both workers killed as the first message goes out: the main process renders the
    rest; every subscriber gets one digest."""
    url = f"sqlite:///{tmp_path}/kill.sqlite"
    killed: list[int] = []

    def kill_once() -> bool:
        if pools and not killed:
            for pid in pools[0].pids():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        return False

    with Store.open(url) as store, smtp_sink() as (sink, port):
        store.papers.upsert(full_feed_papers, now=NOW)
        config = config_for(url, port, 250, workers=2)
        with caplog.at_level(logging.ERROR):
            reports = run(config, store, pool_from=1, should_stop=kill_once)
    assert killed, "the workers were never seen started"
    assert [r.status for r in reports] == ["sent"] * 250
    assert sorted(str(m["To"]) for m in sink.messages) == sorted(
        f"p{n:03d}@lab.example" for n in range(250)
    )
    assert "rendered in the main process" in caplog.text


def test_a_worker_started_from_python_m_bot_cli_does_not_run_the_command_again() -> None:
    """A spawned worker imports the main module again under another name: `python -m
    bot.cli` must then define the command, not run it (it would parse the worker's
    arguments and exit)."""
    namespace = runpy.run_module("bot.cli.__main__", run_name="__mp_main__")
    assert callable(namespace["main"])


def test_a_runs_first_share_is_small_the_others_of_share_size() -> None:
    """The run's first message waits for its first share to be rendered (every block for
    the first time): FIRST_SHARE subscribers, then SHARE at a time; those who want a
    model's texts still come first, together. Everyone once, in order."""
    from bot.core.models import Subscriber
    from bot.pipeline.deliver import FIRST_SHARE, SHARE, shares

    people = [(Subscriber(name=f"p{n:03d}", email=None, rules=("x",)), []) for n in range(120)]
    sizes = [len(share) for share in shares(people)]
    assert sizes == [FIRST_SHARE, SHARE, SHARE, 120 - FIRST_SHARE - 2 * SHARE]
    reader = (Subscriber(name="reader", email=None, rules=("x",), summaries=True), [])
    split = list(shares([people[0], reader, *people[1:3]]))
    assert split == [[reader], [people[0], *people[1:3]]]
    assert [pair for share in shares(people) for pair in share] == people
    assert list(shares([])) == []
    assert [len(share) for share in shares(people[:7], size=3, first=0)] == [3, 3, 1]


def test_compile_templates_leaves_every_email_template_compiled() -> None:
    """What a render worker calls as it starts (`renderpool._start`), while the run is
    planned: every email template compiled into the shared environment's cache, so that
    the first digest finds them there (a fresh environment, as a worker has)."""
    from bot.render import compile_templates, template_env

    template_env.cache_clear()
    try:
        env = template_env()
        names = env.list_templates(filter_func=lambda name: name.startswith("email/"))
        assert {"email/digest.html.j2", "email/digest.txt.j2"} <= set(names)
        assert not env.cache
        assert compile_templates("email") == len(names)
        assert {name for _, name in env.cache} == set(names)
    finally:
        template_env.cache_clear()
