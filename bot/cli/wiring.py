"""What `run` and `serve` start, wired from the config: the daemon with the web app beside
(`run_daemon`), or the web app alone (`serve_web`); both with the same ways in (`Front`):
Slack's slash command (POST /slack/commands, Socket Mode) and the pages reached from emails.

Wiring only: what each part does is its own module's business (`bot.pipeline.scheduler`,
`bot.web`, `bot.slack.app`). Imported by those two commands when they run, so that the other
commands start without the web stack, the Slack SDK and the pipeline.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from bot import __version__
from bot.channels.outbox import worker_name
from bot.cli.planner import PlannerProcess
from bot.cli.senders import Senders, start_senders
from bot.cli.shell import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, stop_on_signals
from bot.config import Config
from bot.core.errors import PaperbellError
from bot.core.plurals import plural
from bot.manage import Manager, SiteChoices, notice_sender
from bot.pipeline import Parts, build_fetcher, wire, wire_daemon
from bot.pipeline.scheduler import LAST_LOOK_SECONDS, Daemon
from bot.slack.app import SlackApp, build_slack_app, run_socket_mode, slack_routes
from bot.sources.http import make_client
from bot.store import Leadership, Store, utcnow
from bot.web.app import create_app, make_server, serve_listening
from bot.web.bounces import bounce_routes
from bot.web.pages import page_routes

if TYPE_CHECKING:  # the web stack's own types: only `bot.web` imports it
    import uvicorn
    from starlette.routing import Route

log = logging.getLogger("bot")

# How long a second signal waits for the tasks it cancels to end, before it hands their
# claimed digests back (seconds): a cancelled task ends at its next await.
STOP_NOW_SECONDS = 0.5


class Front:
    """The ways in beside the daemon, over the wired `parts`, as the config sets them up:
    Slack's slash command (its HTTP route, Socket Mode), the pages reached from emails and
    the bounce webhooks; one `Manager` and one mail sender serve both Slack and the pages.
    `stop` ends Socket Mode (`replies` and `close` set it)."""

    def __init__(
        self,
        config: Config,
        parts: Parts,
        *,
        clock: Callable[[], datetime],
        stop: asyncio.Event,
    ) -> None:
        self.web = config.web
        self.grace = config.daemon.shutdown_grace_seconds  # what a stop gives the requests
        self.stop = stop
        choices = SiteChoices.of(config)
        manager = Manager(choices, parts, clock=clock) if parts.signer is not None else None
        mail_queued = notice_sender(parts, clock=clock)
        self.slack: SlackApp | None = build_slack_app(
            config, parts, manager=manager, mail_queued=mail_queued, clock=clock
        )
        self.pages: list[Route] | None = (
            page_routes(manager, mail_queued=mail_queued) if manager is not None else None
        )
        self.bounces: list[Route] = bounce_routes(config.bounces, parts, clock=clock)
        if self.slack is not None or self.pages:
            # The config file's subscribers are answered by their database ids (the pages'
            # links) and names (/papers): in the store before the first request.
            parts.store.subscribers.sync_config(parts.declared(), now=clock())
        self._socket: asyncio.Task[None] | None = None

    def server(self, where: tuple[str, int], daemon: Daemon | None = None) -> uvicorn.Server:
        """The web app on `where` (host, port): the Slack route, the pages, and `daemon`'s
        health and metrics when there is one."""
        app = create_app(
            daemon,
            routes=[*(self.pages or []), *slack_routes(self.slack), *self.bounces],
            public_url=self.web.public_url,
        )
        server = make_server(
            app,
            host=where[0],
            port=where[1],
            trusted_proxies=self.web.trusted_proxies,
            grace=self.grace,
        )
        log.info(
            "web app on http://%s:%d (%s)", where[0], where[1], self.routes(daemon is not None)
        )
        return server

    def routes(self, daemon: bool) -> str:
        """What the web app serves, for the log."""
        routes = ["/healthz", "/metrics"] if daemon else []
        if self.slack is not None and self.slack.http:
            routes.append("POST /slack/commands")
        if self.pages:
            routes.append("/manage, /unsubscribe, /confirm pages")
        routes += [f"POST {route.path}" for route in self.bounces]
        return ", ".join(routes) or "no routes: Socket Mode only"

    def start_socket_mode(self) -> None:
        """Receive slash commands over Socket Mode, if [slack] app_token_env is set."""
        slack = self.slack
        if slack is None or not slack.app_token:
            return
        app_token = slack.app_token

        async def connect() -> None:
            try:
                await run_socket_mode(
                    slack.responder,
                    app_token=app_token,
                    api_url=slack.api_url,
                    stop=self.stop,
                    buttons=slack.buttons,
                )
            except Exception as exc:  # the daemon goes on; the commands are off
                log.error("Socket Mode failed: %s; slash commands are unavailable", exc)

        self._socket = asyncio.create_task(connect())

    async def replies(self) -> None:
        """Stop Socket Mode once the requests it is answering are acknowledged, then wait
        for the slash commands' late replies (a /papers digest being sent) and the buttons'
        answers. Unbounded: the caller bounds it. Cancelled at any point (while Socket Mode
        closes, too), it cancels those replies and answers and returns once they have
        ended: nothing of theirs is sent after the caller hands back the claimed digests."""
        self.stop.set()
        try:
            if self._socket is not None:
                await asyncio.gather(self._socket, return_exceptions=True)
            if self.slack is not None:
                await self.slack.responder.wait()
                if self.slack.buttons is not None:
                    await self.slack.buttons.wait()
        except asyncio.CancelledError:
            if self.slack is not None:
                await self.slack.responder.abandon()
                if self.slack.buttons is not None:
                    await self.slack.buttons.abandon()
            raise

    async def close(self, within: float) -> None:
        """Stop Socket Mode and wait for the slash commands' late replies (`replies`),
        `within` seconds at most: what is left then is abandoned, and logged, so that a
        stop keeps its deadline."""
        try:
            await asyncio.wait_for(self.replies(), max(within, LAST_LOOK_SECONDS))
        except TimeoutError:
            log.warning("abandoned the slash commands' work under way")


async def run_daemon(
    config: Config,
    store: Store,
    *,
    clock: Callable[[], datetime],
    web: tuple[str, int] | None,
    speed: float,
    workers: int = 0,
) -> int:
    """Run the daemon until SIGINT or SIGTERM, the web app on `web` (host, port) beside;
    the exit code. `workers`: sender processes that render and send the queued digests,
    beside a planner process that plans and queues them (none: this process plans and
    sends); one that dies is started again at the next tick (later if it keeps dying at
    start: `Senders.revive`). They read the config's
    file: a config read from none has none."""
    config_path = config.path
    if config_path is None:
        workers = 0
    # Which process polls and plans (PostgreSQL: the one holding an advisory lock; SQLite: a
    # second `run` on the same file is refused here, before anything starts).
    leadership = Leadership(store.database, name=worker_name())
    leading = leadership.take()
    stop, at_once = asyncio.Event(), asyncio.Event()
    _stop_on_signals_twice(stop, at_once)
    parts = wire(config, store)
    if not parts.channels.keys() - {"apprise"}:  # Apprise needs no section
        log.warning("no [email] or [slack] section: digests go to Apprise destinations only")
    # Socket Mode stops with the web app, when the daemon waits for the replies: not at
    # the signal, while the running tick finishes.
    front = Front(config, parts, clock=clock, stop=asyncio.Event())
    # With sender processes, the planning goes to a process of its own too: this one's
    # event loop serves the web app whatever a run costs.
    planner = (
        PlannerProcess(config_path, clock=clock) if workers and config_path is not None else None
    )
    if planner is not None and leading:  # ready by the first tick's planning
        planner.start()
    async with make_client() as client:
        daemon = Daemon(
            parts,
            wire_daemon(config, parts, clock=clock),
            fetcher=build_fetcher(config, client),
            clock=clock,
            leadership=leadership,
            sends=not workers,
            planner=planner.plan if planner is not None else None,
        )
        server = front.server(web, daemon) if web is not None else None
        front.start_socket_mode()
        subscribers = daemon.subscribers()
        log.info(
            "paperbell %s running: %s, %s; tick every %gs",
            __version__,
            plural(len(daemon.sources), "source"),
            plural(len(subscribers), "subscriber"),
            config.daemon.tick_seconds,
        )
        sending = (
            start_senders(config_path, workers, until_idle=False, clock=clock)
            if workers and config_path is not None
            else None
        )
        interval = config.daemon.tick_seconds / speed
        watching = (
            asyncio.create_task(_revive_senders(sending, stop, interval))
            if sending is not None
            else None
        )
        children = [part for part in (planner, sending) if part is not None]
        stopping_children = asyncio.create_task(
            _stop_children(children, stop, daemon, at_once=at_once)
        )
        web_failed = False
        try:
            await daemon.serve(stop, web=server, interval=interval, replies=front.replies)
            # Only a signal has set `stop` now: a daemon that ended without one ended
            # because its web app did.
            web_failed = server is not None and not stop.is_set()
        except asyncio.CancelledError:
            at_once.set()
        finally:
            if watching is not None:
                watching.cancel()
                await _despite_cancel(watching)
            stop.set()  # the children stop too when the web app ended the daemon
            # A second signal may come while the children stop: they are killed then.
            await _despite_cancel(stopping_children)
            if sending is not None:  # every sender has ended: what one held is free
                pids = [process.pid for process in sending.processes if process.pid is not None]
                _hand_back(store, [worker_name(pid) for pid in pids])
            # Cut short (a second signal: at once; a failed start: the grace), the daemon
            # may not have waited for the replies: within its deadline here.
            within = 0 if at_once.is_set() else daemon.grace_left()
            closing = asyncio.create_task(front.close(within))
            if not await _despite_cancel(closing, at_once=at_once if within else None):
                await _despite_cancel(asyncio.create_task(front.close(0)))
            if at_once.is_set():
                await _stop_now(store, leadership, owner=daemon.owner)
    if at_once.is_set():
        return EXIT_INTERRUPTED
    if web_failed:
        log.error("the web app stopped (is port %d free?)", web[1] if web else 0)
        return EXIT_FAILED
    log.info("stopped")
    return EXIT_OK


class Child(Protocol):
    """A child process of the daemon: the planner or the senders."""

    def stop(self, grace: float) -> None: ...

    def kill(self) -> None: ...


async def _stop_children(
    children: Sequence[Child], stop: asyncio.Event, daemon: Daemon, *, at_once: asyncio.Event
) -> None:
    """Once `stop` is set, tell the planner and the senders to stop at once (each after
    the work in hand), and kill those still running at the daemon's stop deadline: they
    share one grace period with the daemon's running tick. Once `at_once` is set (a second
    signal), kill them all without waiting for the deadline."""
    await stop.wait()
    grace = daemon.grace_left()
    stopping = asyncio.gather(*(asyncio.to_thread(child.stop, grace) for child in children))
    if not await _despite_cancel(stopping, at_once=at_once, cancel=False):
        log.warning("killing the planner and the senders")
        for child in children:
            child.kill()
        await stopping  # each `stop` returns once its processes are gone


async def _despite_cancel(
    work: asyncio.Future[Any], *, at_once: asyncio.Event | None = None, cancel: bool = True
) -> bool:
    """Wait for `work` to finish, though this task is cancelled meanwhile (a second signal
    cancels the main task; what it waits on ends at once by itself); with `at_once`, only
    until it is set: then `work` is cancelled (unless `cancel` is false) and False returned."""
    cut = asyncio.ensure_future(at_once.wait()) if at_once is not None else None
    try:
        while not work.done() and not (cut is not None and cut.done()):
            waiting: set[asyncio.Future[Any]] = {work} if cut is None else {work, cut}
            try:
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                continue  # `at_once` is set by the signal that cancelled this task
    finally:
        if cut is not None:
            cut.cancel()
    if work.done():
        if not work.cancelled():
            work.result()  # its error, as if it had been awaited here
        return True
    if cancel:
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
    return False


async def _stop_now(store: Store, leadership: Leadership, *, owner: str) -> None:
    """After a second signal: cancel what this process still runs (a tick's sends, the web
    app's requests and their mail), then hand back the digests claimed under its name
    `owner` and give up the lead, as a stop within the grace does, so that neither the next
    start nor another process waits for the leases to run out. Each digest it claimed and
    did not record is sent again by another worker either way; handing it back only makes
    that now. Tasks still running after `STOP_NOW_SECONDS` may yet send: their claims are
    then left to their leases."""
    here = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not here]
    for task in others:
        task.cancel()
    running: set[asyncio.Task[Any]] = set(others)
    try:
        if others:
            _, running = await asyncio.wait(others, timeout=STOP_NOW_SECONDS)
    except asyncio.CancelledError:  # a third signal: out now, the claims left to their leases
        pass
    if running:
        log.warning("work under way did not end: its claimed digests wait for their leases")
    else:
        _hand_back(store, [owner])
    leadership.resign()  # another process takes the lead at its next tick


def _hand_back(store: Store, owners: Sequence[str]) -> None:
    """Hand back the digests claimed under the names of `owners`, processes or tasks that
    have ended, so that the next worker takes them at once, not when their leases run out
    (a database that cannot be reached leaves them to their leases)."""
    released = 0
    for owner in owners:
        try:
            released += store.outbox.release(owner)
        except PaperbellError as exc:
            log.error("cannot hand the claimed digests back: %s", exc)
            return
    if released:
        log.info("handed back %s", plural(released, "claimed digest"))


async def _revive_senders(senders: Senders, stop: asyncio.Event, interval: float) -> None:
    """At each tick, start another sender in place of each that died (killed by the OOM
    killer, say), as the planner process is at the next run it plans."""
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            try:
                senders.revive(time.monotonic())
            except Exception as exc:  # no process to be had (a limit): the next tick tries
                log.error("cannot start a sender process: %s", exc)


def _stop_on_signals_twice(stop: asyncio.Event, at_once: asyncio.Event) -> None:
    """SIGINT or SIGTERM sets `stop` (the running tick finishes). A second signal a moment
    later (Ctrl-C pressed again) sets `at_once` and cancels the running task at once; one
    that comes with the first (sent to the process and its group) does not."""
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()
    first_signal: list[float] = []

    def on_signal(number: int) -> None:
        if first_signal and loop.time() - first_signal[0] > 1:
            log.warning("second %s: stopping now", signal.Signals(number).name)
            at_once.set()
            if main_task is not None:
                main_task.cancel()
            return
        if not first_signal:
            first_signal.append(loop.time())
            log.info("%s: stopping (again to stop at once)", signal.Signals(number).name)
        stop.set()

    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, on_signal, number)


async def serve_web(config: Config, store: Store, where: tuple[str, int]) -> int:
    """Serve the web app alone on `where` (host, port) until SIGINT or SIGTERM; the exit
    code."""
    stop = stop_on_signals()
    front = Front(config, wire(config, store), clock=utcnow, stop=stop)
    server = front.server(where)
    front.start_socket_mode()
    web = asyncio.create_task(serve_listening(server))
    await asyncio.wait([web, asyncio.create_task(stop.wait())], return_when="FIRST_COMPLETED")
    # As `run`'s stop: one grace for the requests under way (the server's) and the slash
    # commands' late replies.
    stop_by = time.monotonic() + front.grace
    server.should_exit = True
    (listened,) = await asyncio.gather(web, return_exceptions=True)
    await front.close(stop_by - time.monotonic())
    if listened is False:
        raise PaperbellError(
            f"cannot listen on {where[0]}:{where[1]}: is the port free?",
            hint="stop what holds it, or give another with --port",
        )
    return EXIT_OK
