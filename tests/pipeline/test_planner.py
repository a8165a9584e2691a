"""The planner process (`paperbell run` with sender processes): the digests due are planned
and queued in a process of its own, not in the daemon's, whose event loop serves the web
app; the daemon reads back the run's reports and counts them.

Real parts: the spawned planner process, a SQLite file holding the real listing of
2024-11-28, the daemon of `bot.pipeline.scheduler` (nothing is sent: the senders send).
"""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.config import sink_email, toml_table

from bot.cli.planner import PlannerProcess
from bot.config import Config, load_config
from bot.demo.data import bundled_papers
from bot.pipeline import wire, wire_daemon
from bot.pipeline.scheduler import Daemon
from bot.store import Store

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)  # after the 09:00 UTC slot of that day
NAMES = ("ada", "bo", "cy")


def config_text(database: Path) -> str:
    head = f'version = 1\n[database]\nurl = "sqlite:///{database}"\n'
    head += '[web]\npublic_url = "https://papers.lab.example"\nsecret_key_env = "TEST_KEY"\n'
    head += toml_table("email", sink_email(9))  # nothing is sent: no server behind it
    return head + "".join(
        f'[[subscribers]]\nname = "{name}"\nemail = "{name}@lab.example"\n'
        'rules = ["learning"]\ntime = "09:00"\ntimezone = "UTC"\n'
        for name in NAMES
    )


def planning_daemon(config: Config, store: Store, planner: PlannerProcess | None = None) -> Daemon:
    """A daemon that plans and never sends (its senders do), over `store` holding the
    listing of 2024-11-28 and the config's subscribers; planning in `planner`, if given."""
    store.papers.upsert(tuple(bundled_papers(source="arxiv")), now=NOW)
    store.subscribers.sync_config(config.declared_subscribers(), now=NOW - timedelta(days=1))
    parts = wire(config, store)
    return Daemon(
        parts,
        wire_daemon(config, parts, clock=lambda: NOW),
        fetcher=None,
        clock=lambda: NOW,
        sends=False,
        planner=planner.plan if planner is not None else None,
    )


def test_a_run_is_planned_in_the_planner_process_and_counted_by_the_daemon(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TEST_KEY", "a-test-secret-key-that-is-long-enough-0123456789")
    caplog.set_level(logging.INFO)  # the planner logs at its parent's level
    path = tmp_path / "config.toml"
    path.write_text(config_text(tmp_path / "paperbell.sqlite"))
    config = load_config(path)
    planner = PlannerProcess(path)
    with Store.open(config.database.url) as store:
        daemon = planning_daemon(config, store, planner=planner)
        try:
            reports = asyncio.run(daemon.digests_due(NOW))
            again = asyncio.run(daemon.digests_due(NOW + timedelta(minutes=1)))
            assert planner.process is not None
            first = planner.process
            first.kill()  # a planner that died is started again at the next run
            first.join()
            after_death = asyncio.run(daemon.digests_due(NOW + timedelta(minutes=2)))
        finally:
            planner.stop(5)
        pending = store.outbox.totals(now=NOW)
    assert sorted(r.subscriber for r in reports) == sorted(NAMES)
    assert {r.status for r in reports} == {"queued"}
    assert daemon.counters.digests == {"queued": len(NAMES)}  # the daemon counts what it read
    assert pending.get("pending") == len(NAMES)  # one job per digest, in the outbox
    assert again == [] and after_death == []  # the slots were marked handled
    assert planner.process is not first
    # Planned there, not here: this process logged no digest; the planner did, by its name.
    assert not [r for r in caplog.records if r.getMessage().startswith("digest for")]
    err = capfd.readouterr().err
    for name in NAMES:
        assert f"paperbell-planner bot.pipeline.planning: digest for {name}: queued" in err
    assert planner.process is not None and planner.process.pid != os.getpid()
    assert not planner.process.is_alive()  # stopped with the daemon


def test_a_run_told_to_stop_queues_no_more_shares_and_leaves_the_rest_to_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon stopping mid-run (SIGTERM while 10,000 digests are planned) stops after
    the share under way, so that it stops within its grace; the subscribers it did not
    reach are planned by the next run, none twice."""
    monkeypatch.setenv("TEST_KEY", "a-test-secret-key-that-is-long-enough-0123456789")
    more = [f"reader{number}" for number in range(5)]  # 8 in all: a first share of 5, then 3
    path = tmp_path / "config.toml"
    path.write_text(
        config_text(tmp_path / "paperbell.sqlite")
        + "".join(
            f'[[subscribers]]\nname = "{name}"\nemail = "{name}@lab.example"\n'
            'rules = ["learning"]\ntime = "09:00"\ntimezone = "UTC"\n'
            for name in more
        )
    )
    config = load_config(path)
    shares_begun: list[bool] = []

    def stop_after_the_first_share() -> bool:
        shares_begun.append(True)
        return len(shares_begun) > 1

    with Store.open(config.database.url) as store:
        daemon = planning_daemon(config, store)
        stopped = asyncio.run(daemon.plan_due(NOW, should_stop=stop_after_the_first_share))
        later = asyncio.run(daemon.plan_due(NOW + timedelta(minutes=1)))
        again = asyncio.run(daemon.plan_due(NOW + timedelta(minutes=2)))
        pending = store.outbox.totals(now=NOW)
    first = {r.subscriber for r in stopped}
    rest = {r.subscriber for r in later}
    assert len(first) == 5 and {r.status for r in stopped} == {"queued"}
    assert first | rest == {*NAMES, *more} and not first & rest
    assert again == []  # every slot handled once
    assert pending.get("pending") == 8  # one job per digest, none twice


def test_a_stop_before_the_planner_read_the_run_is_quiet_and_plans_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A daemon stopped just after it started (its first run asked for, the planner still
    starting): the planner ends without reading the run, and the daemon's tick ends with
    no report and no error (no traceback in the log); every slot waits for the next run."""
    monkeypatch.setenv("TEST_KEY", "a-test-secret-key-that-is-long-enough-0123456789")
    path = tmp_path / "config.toml"
    path.write_text(config_text(tmp_path / "paperbell.sqlite"))
    config = load_config(path)
    planner = PlannerProcess(path)
    with Store.open(config.database.url) as store:
        daemon = planning_daemon(config, store, planner=planner)
        try:
            # Stopping from the first look on: the planner sees it as soon as it started.
            reports = asyncio.run(planner.plan(NOW, lambda: True))
        finally:
            planner.stop(5)
        later = asyncio.run(daemon.plan_due(NOW))
    assert reports == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert sorted(r.subscriber for r in later) == sorted(NAMES)  # none was handled
