"""Sender processes (`[delivery] workers`): each one a plain loop that claims queued jobs,
renders them, sends them and records each (`bot.channels.outbox.drain`), beside the
process that plans. More mail means more of them; the outbox keeps any two from sending
one digest. The daemon's web app so never renders or sends a digest (docs/workers.md).

A sender is started with `spawn` (a fresh interpreter: nothing of the parent's threads,
event loop or database connections), reads the same config file, and ignores Ctrl-C and
SIGTERM: its parent stops it through `stopping`, after the message in flight. One that dies
is started again, after longer and longer waits if it keeps dying as it starts. On Linux it
dies with its parent (a parent killed -9 leaves no sender behind). A daemon's sender runs
at a lower CPU priority than the daemon, whose process serves the web app (`NICENESS`).
Each sender is a whole interpreter, so it loads only what it uses: the parent checked the
database's schema when it opened it, and a sender confirms the revision with one query
(`Store.open_at`) instead of loading the migrations.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import multiprocessing.synchronize
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # a sender imports them once started (the parent needs none)
    from bot.channels.base import Channel
    from bot.channels.outbox import RenderJob, RetryPolicy
    from bot.store import Store

log = logging.getLogger(__name__)

# How long an idle sender waits before it looks at the outbox again; and one whose last
# look failed (the database is down).
IDLE_SECONDS = 0.5
ERROR_SECONDS = 5.0

# How much lower a child's CPU priority is than its parent's (added to its niceness, as
# `nice` does by default): the daemon's process serves the web app, whose requests must
# not queue behind a run's batch work. At 10 a busy child still gets about a tenth of a
# core its parent wants too, so a run goes on; with the CPU free, it gets all of it.
NICENESS = 10

# A sender that dies soon after it starts (a database refusing it) is started again at
# once the first time, then after a wait that doubles from the first to the last; one
# that lived `SENDER_LIVED_SECONDS` is started again at once.
RESTART_FIRST_SECONDS = 60.0
RESTART_LAST_SECONDS = 3600.0
SENDER_LIVED_SECONDS = 600.0


@dataclass(frozen=True)
class Senders:
    """Sender processes running beside this one. `planned` tells them no more jobs are
    coming (a one-off run: each stops once it finds nothing to send); `stopping` stops
    them after the message each has in flight."""

    processes: list[BaseProcess]
    planned: multiprocessing.synchronize.Event
    stopping: multiprocessing.synchronize.Event
    start_one: Callable[[str], BaseProcess]  # starts a sender of this name
    # By sender name, on the clock `revive` is given: when the one running was started,
    # the wait before its next restart, and when a dead one is to be started again.
    started_at: dict[str, float] = field(default_factory=dict)
    restart_wait: dict[str, float] = field(default_factory=dict)
    restart_at: dict[str, float] = field(default_factory=dict)

    def revive(self, now: float) -> None:
        """Start another sender in place of each that ended (the OOM killer): a daemon's
        senders run until stopped, and with none left every digest would wait. `now`: a
        monotonic clock's reading. One that keeps dying as it starts is started again
        after longer and longer waits (`RESTART_FIRST_SECONDS` ...), said once a wait,
        rather than at every tick with a traceback each time."""
        for number, process in enumerate(self.processes):
            if self.stopping.is_set():
                return
            if process.is_alive():
                continue
            name = process.name
            if name not in self.restart_at:  # found dead now
                self.restart_at[name] = now + self._wait_after(name, now, process)
            if now >= self.restart_at[name]:
                del self.restart_at[name]
                self.processes[number] = self.start_one(name)
                self.started_at[name] = now

    def _wait_after(self, name: str, now: float, process: BaseProcess) -> float:
        """How long to wait before starting `name` again, its `process` found dead at
        `now`; said in the log."""
        lived = now - self.started_at.get(name, now - SENDER_LIVED_SECONDS)
        if lived >= SENDER_LIVED_SECONDS:
            wait = 0.0
        else:
            wait = min(
                max(2 * self.restart_wait.get(name, 0.0), RESTART_FIRST_SECONDS),
                RESTART_LAST_SECONDS,
            )
        self.restart_wait[name] = wait
        if wait:
            log.error(
                "%s ended (%s) %.0fs after it started: starting another in %.0fs",
                name,
                ended(process),
                lived,
                wait,
            )
        else:
            log.error("%s ended (%s): starting another", name, ended(process))
        return wait

    def finish(self) -> list[str]:
        """No more jobs are coming: wait for the senders to send what is queued, and end.
        Each sender that ended with an error (or was killed), said in a line: the digests
        it held wait for the next run, so the run failed."""
        self.planned.set()
        failed = []
        for process in self.processes:
            process.join()
            if process.exitcode:
                failed.append(f"{process.name} ended with an error ({ended(process)})")
        return failed

    def stop(self, grace: float) -> None:
        """Stop the senders, all at once, after their messages in flight; those still
        running `grace` seconds from now are killed together (their claimed digests go to
        the next worker when their leases run out, or when the parent hands them back)."""
        self.stopping.set()
        deadline = time.monotonic() + grace
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            if process.is_alive():
                log.warning("%s did not stop within %.1fs: killed", process.name, grace)
                process.kill()
        for process in self.processes:
            process.join()

    def kill(self) -> None:
        """Kill the senders now (a second signal), without waiting for their messages in
        flight: one may arrive twice, as after any crash; `stop` reaps them. Signals only,
        so that it may be called while `stop` waits in another thread."""
        self.stopping.set()
        for process in self.processes:
            process.kill()


def ended(process: BaseProcess) -> str:
    """How a child process ended, for a person: its exit code, or the signal that killed it."""
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:  # a signal with no name (a real-time one)
            return f"killed by signal {-code}"
    return f"exit code {code}"


def start_senders(
    config_path: Path,
    count: int,
    *,
    until_idle: bool,
    clock: Callable[[], datetime] | None = None,
    attempts_before: Mapping[int, int] | None = None,
) -> Senders:
    """Start `count` sender processes over the config at `config_path`. `until_idle`: a
    one-off run's (`paperbell digest`): they send every record now, retries included, and
    stop once `planned` is set and nothing is left; otherwise a daemon's, sending what is
    due until stopped. `clock`: what they read the time on (picklable; default the
    real one). `attempts_before`: a one-off run's, `Outbox.attempts_pending` when it
    began: a record that fails in one sender is not tried at once by the others."""
    spawn = multiprocessing.get_context("spawn")
    planned, stopping = spawn.Event(), spawn.Event()
    args = (
        clock,
        str(config_path),
        schema_revision(),
        planned,
        stopping,
        until_idle,
        logging.getLogger().level,
        attempts_before,
    )

    def start_one(name: str) -> BaseProcess:
        process = spawn.Process(target=_send, args=args, name=name, daemon=True)
        process.start()
        return process

    processes = [start_one(f"paperbell-sender-{number}") for number in range(1, count + 1)]
    return Senders(processes, planned, stopping, start_one)


def _send(
    clock: Callable[[], datetime] | None,
    config_path: str,
    revision: str,
    planned: multiprocessing.synchronize.Event,
    stopping: multiprocessing.synchronize.Event,
    until_idle: bool,
    log_level: int,
    attempts_before: Mapping[int, int] | None = None,
) -> None:
    """A sender's life: claim, render, send, record, until told to stop; over a database
    at `revision` only. It logs at its parent's level, each line naming the sender; a
    daemon's yields the CPU to the web app (`NICENESS`), a one-off run's has none to yield
    to."""
    prepare_child(log_level, niceness=0 if until_idle else NICENESS)
    from bot.cli.secrets import database_url
    from bot.config import load_config
    from bot.pipeline import wire
    from bot.pipeline.jobs import renderer
    from bot.store import Store, utcnow

    config = load_config(Path(config_path))
    with Store.open_at(database_url(config), revision) as store:
        parts = wire(config, store)
        send_until_stopped(
            store,
            parts.channels,
            retry=parts.retry,
            render=renderer(parts),
            clock=clock or utcnow,
            planned=planned,
            stopping=stopping,
            until_idle=until_idle,
            attempts_before=attempts_before,
        )


class Flag(Protocol):
    """What a sender is told through: an event its parent sets (a thread's, in a test)."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


def send_until_stopped(
    store: Store,
    channels: Mapping[str, Channel],
    *,
    retry: RetryPolicy,
    render: RenderJob | None,
    clock: Callable[[], datetime],
    planned: Flag,
    stopping: Flag,
    until_idle: bool,
    pause: float = ERROR_SECONDS,
    attempts_before: Mapping[int, int] | None = None,
) -> None:
    """A sender's loop: drain the outbox again and again until `stopping` is set, or, for
    a one-off run (`until_idle`), until `planned` is set and nothing is left to send. A
    one-off run's sender tries each record once, and, given `attempts_before` (the
    records' failed attempts when the run began), none that failed in another sender.

    A daemon's sender outlives a failed pass (the database restarting, a digest that
    breaks its renderer): it logs it and looks again `pause` seconds later, as the daemon
    goes on after a failed tick (one that dies all the same, killed, is started again
    at the daemon's next tick: `Senders.revive`). A one-off run's ends on it (its parent
    reports it, and fails)."""
    from bot.channels.outbox import drain
    from bot.core.plurals import plural

    tried: set[int] = set()  # a one-off run tries each record once
    while not stopping.is_set():
        done_planning = planned.is_set()
        try:
            attempts = asyncio.run(
                drain(
                    store,
                    channels,
                    clock=clock,
                    retry=retry,
                    due_only=not until_idle,
                    should_stop=stopping.is_set,
                    tried=tried if until_idle else None,
                    render=render,
                    attempts_before=attempts_before,
                )
            )
        except Exception as exc:
            if until_idle:
                raise
            log.exception("sending failed (looked at again in %gs): %s", pause, exc)
            stopping.wait(pause)
            continue
        if attempts:
            sent = sum(1 for attempt in attempts if attempt.status == "sent")
            log.info("sent %s", plural(sent, "digest"))
        elif until_idle and done_planning:
            return
        else:
            stopping.wait(IDLE_SECONDS)


def schema_revision() -> str:
    """The schema revision of this paperbell, which the parent's store was checked at when
    it opened: what each child it starts confirms (`Store.open_at`)."""
    from bot.store.schema import head

    return head()


def prepare_child(log_level: int, *, niceness: int) -> None:
    """What a spawned child of `run` or `digest` does first: ignore Ctrl-C and SIGTERM (its
    parent stops it), die with its parent, lower its CPU priority by `niceness`, and log
    at `log_level`, each line naming it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent()
    if niceness:
        os.nice(niceness)
    logging.basicConfig(
        level=log_level, format="%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s"
    )


def _die_with_parent() -> None:
    """On Linux, ask for SIGKILL when the parent dies: no child outlives its daemon (nor
    starts after it died)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # a libc without prctl: the parent stops it instead
        return
    if os.getppid() != parent:  # the parent died before the call
        os._exit(1)
