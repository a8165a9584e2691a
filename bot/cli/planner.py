"""The planner process of `paperbell run`: who is due, their rules matched, their digests
built and one job per digest written to the outbox (`Daemon.plan_due`), in a process of its
own, so that a large run never holds the web app's event loop (docs/workers.md).

The daemon asks it at each tick it leads and waits for the run's reports (for its log
counts, /metrics and /healthz); the web app answers meanwhile. Leadership and the outbox
are as before: the daemon asks only while it leads, and the outbox is unique per slot.

Started like a sender (`bot.cli.senders`): spawned at the daemon's start when it leads then
(`start`), else at the first run it plans; it reads the same config file,
confirms the schema revision the daemon checked, ignores Ctrl-C and SIGTERM (its parent
stops it through `stopping`, after the run under way), dies with its parent on Linux, runs
at a lower CPU priority than the daemon (whose process serves the web app), and logs its
lines under its own name.
One that died is started again at the next run. A run cut short (killed) loses nothing:
its slots are not marked handled, so the next run plans them again, and the outbox, unique
per slot, keeps what was queued from being queued twice.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import multiprocessing.synchronize
from collections.abc import Callable
from datetime import datetime
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from bot.cli.senders import NICENESS, ended, prepare_child, schema_revision
from bot.pipeline.dispatch import DeliveryReport

log = logging.getLogger(__name__)

# How often the daemon, waiting for a run's reports, looks whether it is stopping; and how
# often an idle planner looks whether it is told to stop.
WAKE_SECONDS = 0.2


class PlannerFailed(RuntimeError):
    """A run the planner process could not plan: its error, or its death."""


class PlannerProcess:
    """The planner process beside the daemon; `plan(now, should_stop)` is the daemon's
    `planner` (`bot.pipeline.scheduler.Planner`)."""

    def __init__(self, config_path: Path, *, clock: Callable[[], datetime] | None = None) -> None:
        self.config_path = config_path
        self.clock = clock  # what it reads the time on (picklable; default the real one)
        self._spawn = multiprocessing.get_context("spawn")
        self.stopping = self._spawn.Event()
        self.process: BaseProcess | None = None
        self._pipe: Connection | None = None

    async def plan(self, now: datetime, should_stop: Callable[[], bool]) -> list[DeliveryReport]:
        """The reports of the digests due at `now`, planned and queued by the planner process
        (started first if it is not running). `should_stop()` turning true tells the
        planner to stop once the run is done."""
        pipe = self.start()
        pipe.send(now)
        kind, value = await asyncio.to_thread(self._reply, pipe, should_stop)
        if kind == "error":
            raise PlannerFailed(f"the planner process: {value}")
        reports: list[DeliveryReport] = value
        return reports

    def start(self) -> Connection:
        """The pipe to the planner process, started now unless it is running (its imports
        take a second or two: a daemon that leads starts it early)."""
        process, pipe = self.process, self._pipe
        if process is not None and pipe is not None and process.is_alive():
            return pipe
        if process is not None:
            log.error("the planner process ended (%s): starting another", ended(process))
        if pipe is not None:
            pipe.close()
        ours, theirs = self._spawn.Pipe()
        level = logging.getLogger().level  # the daemon's: it logs as its parent does
        process = self._spawn.Process(
            target=_plan,
            args=(
                self.clock,
                str(self.config_path),
                schema_revision(),
                theirs,
                self.stopping,
                level,
            ),
            name="paperbell-planner",
            daemon=True,
        )
        process.start()
        theirs.close()  # the child's end: ours reads EOF when the child dies
        self.process, self._pipe = process, ours
        return ours

    def _reply(self, pipe: Connection, should_stop: Callable[[], bool]) -> tuple[str, Any]:
        """The planner's answer to the request just sent (in a thread: the event loop goes
        on); the planner is told to stop as soon as `should_stop()` says so. One told to
        stop may end before it read the request: no reports, and nothing was planned."""
        while not pipe.poll(WAKE_SECONDS):
            if should_stop():
                self.stopping.set()
        try:
            answer: tuple[str, Any] = pipe.recv()
        except (EOFError, ConnectionResetError):  # reset: it ended with the request unread
            if self.stopping.is_set():
                return "reports", []
            how = ended(self.process) if self.process is not None else "exit code None"
            raise PlannerFailed(f"the planner process died ({how})") from None
        return answer

    def stop(self, grace: float) -> None:
        """Stop the planner after the run under way; killed if still running after `grace`
        seconds (the digests it had not queued yet are queued at the next run)."""
        self.stopping.set()
        process = self.process
        if process is None:
            return
        process.join(grace)
        if process.is_alive():
            log.warning("the planner process did not stop within %gs: killed", grace)
            process.kill()
            process.join()
        if self._pipe is not None:
            self._pipe.close()

    def kill(self) -> None:
        """Kill the planner now (a second signal), mid-run: the slots it had not marked
        handled are planned at the next run, and the outbox, unique per slot, queues none
        twice. Signals only, so that it may be called while `stop` waits in another thread."""
        self.stopping.set()
        if self.process is not None:
            self.process.kill()


def _plan(
    clock: Callable[[], datetime] | None,
    config_path: str,
    revision: str,
    pipe: Connection,
    stopping: multiprocessing.synchronize.Event,
    log_level: int,
) -> None:
    """The planner's life: for each moment the daemon sends, plan and queue the digests due
    then, and send back their reports (or the error), until told to stop; over a database
    at `revision` only (the daemon checked its schema)."""
    prepare_child(log_level, niceness=NICENESS)
    from bot.cli.secrets import database_url
    from bot.config import load_config
    from bot.pipeline import wire, wire_daemon
    from bot.pipeline.scheduler import Daemon
    from bot.store import Store, utcnow

    config = load_config(Path(config_path))
    with Store.open_at(database_url(config), revision) as store:
        # The daemon's planning half: its parts say where digests go; it never sends.
        parts = wire(config, store)
        own = wire_daemon(config, parts, clock=clock or utcnow)
        daemon = Daemon(parts, own, fetcher=None, clock=clock or utcnow, sends=False)
        while not stopping.is_set():
            if not pipe.poll(WAKE_SECONDS):
                continue
            try:
                now = pipe.recv()
            except EOFError:  # the daemon is gone
                return
            try:
                reports = asyncio.run(daemon.plan_due(now, should_stop=stopping.is_set))
            except Exception as exc:  # the daemon counts the failed tick; the next tries again
                log.exception("planning the digests failed: %s", exc)
                pipe.send(("error", f"{type(exc).__name__}: {exc}"))
            else:
                pipe.send(("reports", reports))
