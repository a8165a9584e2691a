"""The web app: `GET /healthz`, `GET /metrics` (Prometheus text format), and the routes it is
handed (the pages of `bot.web.pages`; `POST /slack/commands`, which `bot.slack.app` builds).

Wiring only: the figures come from the daemon's counters and the store, read when asked;
every response carries the security headers (`SecurityHeaders`: a script policy with no
inline script, nosniff, no referrer, HSTS on an https site), set here and nowhere else.
Must not import `bot.slack`: the entry points hand their routes over. Endpoints that read
the database are plain functions, which Starlette runs in a thread, so a slow query never
holds up the daemon's loop.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.core.errors import PaperbellError

if TYPE_CHECKING:
    from bot.pipeline.health import SourceHealth
    from bot.pipeline.scheduler import Daemon
    from bot.store import LeftOut, ModelDay


def _timestamp(moment: datetime | None) -> float:
    return moment.timestamp() if moment is not None else 0.0


# The figures of each source: (family, help), by name; `source_figures` gives the values.
SOURCE_METRICS: dict[str, tuple[type[GaugeMetricFamily | CounterMetricFamily], str]] = {
    "paperbell_source_last_poll_timestamp_seconds": (GaugeMetricFamily, "Last poll"),
    "paperbell_source_last_new_timestamp_seconds": (
        GaugeMetricFamily,
        "Last poll that brought papers not stored before",
    ),
    "paperbell_source_last_success_timestamp_seconds": (
        GaugeMetricFamily,
        "Last poll that did not fail",
    ),
    "paperbell_source_late": (
        GaugeMetricFamily,
        "1 when the day's listing has not come by the deadline",
    ),
    "paperbell_source_failing": (GaugeMetricFamily, "1 when the last poll failed"),
    "paperbell_source_stale": (
        GaugeMetricFamily,
        "1 when a feed day passed its deadline without its listing",
    ),
    "paperbell_source_short": (
        GaugeMetricFamily,
        "1 when the newest listing is under a quarter of the usual and not repaired",
    ),
    "paperbell_source_listing_papers": (GaugeMetricFamily, "Papers in the newest listing"),
    "paperbell_source_usual_papers": (
        GaugeMetricFamily,
        "Usual papers in a listing of the newest listing's weekday",
    ),
    "paperbell_source_repaired_papers": (
        GaugeMetricFamily,
        "Papers the arXiv API filled in for the newest listing",
    ),
    "paperbell_source_left_out": (
        GaugeMetricFamily,
        "Items the last poll could not read and left out",
    ),
    "paperbell_source_left_out_items": (
        CounterMetricFamily,
        "Items polls left out since the daemon started",
    ),
}


def source_figures(
    each: SourceHealth, *, late: bool, left_out: LeftOut | None, left_out_since_start: int
) -> dict[str, float | None]:
    """One source's figures, by metric name (None: nothing to say, e.g. no listing yet)."""
    row, listing, usual = each.state, each.listing, each.usual
    return {
        "paperbell_source_last_poll_timestamp_seconds": _timestamp(row.last_poll if row else None),
        "paperbell_source_last_new_timestamp_seconds": _timestamp(row.last_new if row else None),
        "paperbell_source_last_success_timestamp_seconds": _timestamp(
            row.last_success if row else None
        ),
        "paperbell_source_late": int(late),
        "paperbell_source_failing": int(each.failing),
        "paperbell_source_stale": int(each.stale),
        "paperbell_source_short": int(each.short),
        "paperbell_source_listing_papers": listing.items if listing else None,
        "paperbell_source_usual_papers": usual.size if usual else None,
        "paperbell_source_repaired_papers": listing.repaired_new if listing else None,
        "paperbell_source_left_out": left_out.count if left_out is not None else 0,
        "paperbell_source_left_out_items": left_out_since_start,
    }


# Today's (UTC) use of each model that writes summaries and translations, from the store:
# every process's runs (the daemon's, `paperbell digest`'s), as gauges reset each day.
TEXT_METRICS: dict[str, tuple[str, str]] = {
    "paperbell_llm_requests_today": ("requests", "Requests made today (the daily budget)"),
    "paperbell_llm_texts_written_today": ("written", "Texts the model wrote today"),
    "paperbell_llm_texts_cached_today": ("cached", "Texts needed today and already stored"),
    "paperbell_llm_texts_over_budget_today": (
        "over_budget",
        "Texts not asked for today: the budget had run out",
    ),
    "paperbell_llm_prompt_tokens_today": ("prompt_tokens", "Prompt tokens used today"),
    "paperbell_llm_completion_tokens_today": ("completion_tokens", "Answer tokens used today"),
}


def text_metrics(days: Sequence[ModelDay]) -> Iterator[Metric]:
    """The models' figures for today, and their failures by reason."""
    for name, (field_name, text) in TEXT_METRICS.items():
        family = GaugeMetricFamily(name, text, labels=["model"])
        for day in days:
            family.add_metric([day.model], getattr(day, field_name))
        yield family
    failed = GaugeMetricFamily(
        "paperbell_llm_texts_failed_today",
        "Texts that could not be written today, by reason",
        labels=["model", "reason"],
    )
    for day in days:
        for reason, count in sorted(day.failures.items()):
            failed.add_metric([day.model, reason], count)
    yield failed


class DaemonCollector:
    """The daemon's figures for Prometheus, computed at each scrape."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    def collect(self) -> Iterator[Metric]:
        daemon, counters = self.daemon, self.daemon.counters
        now = daemon.clock()
        outbox = GaugeMetricFamily(
            "paperbell_outbox_digests", "Digests in the outbox, by state", labels=["state"]
        )
        for state, count in daemon.store.outbox.totals(now=now).items():
            outbox.add_metric([state.replace(" ", "_")], count)
        yield outbox

        subscribers = GaugeMetricFamily(
            "paperbell_subscribers", "Subscribers, by state", labels=["state"]
        )
        declared = (s.name for s in daemon.parts.declared())
        active, paused = daemon.store.subscribers.tally(declared)  # counted, not read
        subscribers.add_metric(["active"], active)
        subscribers.add_metric(["paused"], paused)
        yield subscribers
        yield GaugeMetricFamily(
            "paperbell_papers", "Papers in the store", value=daemon.store.papers.count()
        )

        plans = daemon.plans(now)
        skipped = daemon.store.sources.left_out()
        families = {
            name: kind(name, text, labels=["source"])
            for name, (kind, text) in SOURCE_METRICS.items()
        }
        for each in daemon.health(now, plans=plans):
            figures = source_figures(
                each,
                late=plans[each.name].late,
                left_out=skipped.get(each.name),
                left_out_since_start=counters.left_out.get(each.name, 0),
            )
            for name, value in figures.items():
                if value is not None:
                    families[name].add_metric([each.name], value)
        yield from families.values()

        yield from text_metrics(daemon.store.texts.day(now.date()))

        yield GaugeMetricFamily(
            "paperbell_leader",
            "1 while this process leads (polls the sources and plans the digests), else 0",
            value=int(daemon.leading),
        )
        yield CounterMetricFamily("paperbell_ticks", "Daemon ticks", value=counters.ticks)
        yield CounterMetricFamily(
            "paperbell_tick_errors", "Daemon ticks that failed", value=counters.tick_errors
        )
        yield CounterMetricFamily(
            "paperbell_prune_errors", "Daily prunes that failed", value=counters.prune_errors
        )
        yield GaugeMetricFamily(
            "paperbell_last_tick_timestamp_seconds",
            "End of the last tick",
            value=_timestamp(counters.last_tick),
        )
        counted = [
            ("paperbell_polls", "Source polls, by result", counters.polls),
            ("paperbell_digests", "Digests built, by outcome", counters.digests),
            ("paperbell_sends", "Send attempts, by outcome", counters.sends),
        ]
        if (mailbox := daemon.mailbox) is not None:  # [bounces] read by the daemon
            counted += [
                ("paperbell_bounce_mailbox_reads", "Bounce mailbox reads", mailbox.counters.reads),
                ("paperbell_bounce_mailbox_messages", "Its messages", mailbox.counters.messages),
            ]
        for name, help_text, values in counted:
            family = CounterMetricFamily(name, help_text, labels=["outcome"])
            for key, count in sorted(values.items()):
                family.add_metric([key], count)
            yield family


def health(daemon: Daemon, *, strict: bool = False) -> tuple[int, dict[str, Any]]:
    """The daemon's health: 200 when it ticks and reaches its database, else 503; each
    source's health beside (`sources`), and `sources_status` "degraded" when one fails, is
    stale or short. A source's trouble is arXiv's, not the process's: it answers 503 only
    when `strict` (`/healthz?strict=1`, for an alert), never for a container's check."""
    counters, now = daemon.counters, daemon.clock()
    body: dict[str, Any] = {
        "status": "ok",
        "started": counters.started.isoformat() if counters.started else None,
        "last_tick": counters.last_tick.isoformat() if counters.last_tick else None,
        "ticks": counters.ticks,
        "tick_errors": counters.tick_errors,
        # Whether this process polls and plans (several `paperbell run` on one PostgreSQL:
        # one leads, every one sends).
        "leader": daemon.leading,
        "leader_since": counters.leader_since.isoformat() if counters.leader_since else None,
    }
    if counters.last_tick_error:
        body["last_tick_error"] = counters.last_tick_error
    try:
        body["outbox"] = daemon.store.outbox.totals(now=now)
        plans = daemon.plans(now)
        body["late_sources"] = sorted(name for name, p in plans.items() if p.late)
        sources = daemon.health(now, plans=plans)
    except PaperbellError as exc:
        body.update(status="database unreachable", error=str(exc))
        return 503, body
    body["sources"] = {each.name: each.as_json() for each in sources}
    unhealthy = sorted(each.name for each in sources if not each.healthy)
    body["sources_status"] = "degraded" if unhealthy else "ok"
    body["unhealthy_sources"] = unhealthy
    status, body = _daemon_health(daemon, body, now)
    if strict and unhealthy and status == 200:
        return 503, body
    return status, body


def _daemon_health(
    daemon: Daemon, body: dict[str, Any], now: datetime
) -> tuple[int, dict[str, Any]]:
    """Whether the daemon ticks: "stuck", "stalled", "not ticking" answer 503."""
    counters = daemon.counters
    stale_after = timedelta(seconds=max(3 * daemon.timings.tick_seconds, 120))
    started, last = counters.tick_started, counters.last_tick
    if started is not None and (last is None or started > last):  # a tick is running
        body["tick_running_since"] = started.isoformat()
        # Every request a poll makes ends within its deadline, so a tick running past
        # [daemon] tick_deadline_seconds hangs (or sends far more than it should).
        deadline = timedelta(seconds=daemon.timings.tick_deadline_seconds)
        body["tick_deadline"] = (started + deadline).isoformat()
        if now - started > deadline:
            body["status"] = "stuck"
            return 503, body
        if last is None:
            body["status"] = "starting"
        return 200, body
    if last is None:
        body["status"] = "starting"
        if counters.started is None or now - counters.started > 2 * stale_after:
            body["status"] = "not ticking"
            return 503, body
    elif now - last > stale_after:  # ticks fail (the database?) or stopped
        body["status"] = "stalled"
        return 503, body
    return 200, body


# Every response's security headers. Pages' URLs carry signed tokens: no Referer leaks them.
# Scripts only from this site (no inline script runs, whatever a page contains); inline
# style attributes are allowed (they cannot run code).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; "
    "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
HSTS = "max-age=31536000"  # a year; only when the site is served over https


class SecurityHeaders:
    """ASGI middleware: the security headers on every response, set in one place (a
    response may carry a stricter Content-Security-Policy of its own beside the site's)."""

    def __init__(self, app: ASGIApp, *, https: bool = False) -> None:
        self.app = app
        self.headers = dict(SECURITY_HEADERS)
        if https:
            self.headers["Strict-Transport-Security"] = HSTS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in self.headers.items():
                    if name == "Content-Security-Policy" and name in headers:
                        # A route's own, stricter policy (an archived email: `sandbox`) is
                        # kept beside the site's: a browser enforces every policy it gets,
                        # so a route can add limits, never lift one.
                        headers.append(name, value)
                    else:
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(
    daemon: Daemon | None = None,
    *,
    routes: Sequence[BaseRoute] = (),
    public_url: str | None = None,
) -> Starlette:
    """The ASGI app: the `routes` it is handed (the pages reached from emails, Slack's slash
    command: each entry point builds its own), and health and metrics of `daemon`. Every
    response carries the security headers; Strict-Transport-Security too when `public_url`
    (the address people reach the site at) is https."""
    mounted: list[BaseRoute] = list(routes)
    if daemon is not None:
        mounted += daemon_routes(daemon)
    https = public_url is not None and public_url.lower().startswith("https://")
    app = Starlette(routes=mounted, middleware=[Middleware(SecurityHeaders, https=https)])
    # A path that matches no route is not found, never redirected: a stranger's token with a
    # slash in it ("/archive/0%2F") gets a 404, not a 307 to another path.
    app.router.redirect_slashes = False
    return app


def daemon_routes(daemon: Daemon) -> list[BaseRoute]:
    """`GET /healthz` (JSON, 503 when unhealthy; `?strict=1`: also when a source is) and
    `GET /metrics` (Prometheus)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DaemonCollector(daemon))  # type: ignore[arg-type]

    def healthz(request: Request) -> Response:
        strict = request.query_params.get("strict", "") not in ("", "0", "false", "no")
        status, body = health(daemon, strict=strict)
        return JSONResponse(body, status_code=status)

    def metrics(request: Request) -> Response:
        try:
            return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
        except PaperbellError as exc:
            return Response(f"# error: {exc}\n", status_code=503, media_type="text/plain")

    return [Route("/healthz", healthz), Route("/metrics", metrics)]


class _Server(uvicorn.Server):
    """uvicorn, minus its own signal handling: the daemon owns SIGINT/SIGTERM and stops the
    web app itself (`should_exit`) after the running tick is done."""

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        pass

    def capture_signals(self) -> Any:  # uvicorn >= 0.29
        from contextlib import nullcontext

        return nullcontext()


def make_server(
    app: Starlette,
    *,
    host: str,
    port: int,
    trusted_proxies: Sequence[str] = (),
    grace: float | None = None,
) -> uvicorn.Server:
    """A uvicorn server for `app`, to run in the daemon's loop (`await server.serve()`).
    X-Forwarded-For and X-Forwarded-Proto are believed from `trusted_proxies` alone
    ([web] trusted_proxies): uvicorn's default believes them from 127.0.0.1, where any
    process on the machine, or a proxy that passes a client's own header on, may forge
    them. With none, a request's client is the address it came from. The app has no
    start-up or shutdown handlers: without the lifespan protocol, a web app closed at a
    stop's deadline leaves no lifespan task behind to be cancelled with a traceback (its
    requests still running are the daemon's to cancel). Told to exit, it waits `grace`
    seconds at most (rounded up) for the requests under way (None: without limit), so that
    a client that holds its connection open cannot hold the stop."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="off",
        log_config=None,
        access_log=False,
        proxy_headers=bool(trusted_proxies),
        forwarded_allow_ips=list(trusted_proxies),
        timeout_graceful_shutdown=None if grace is None else math.ceil(grace),  # whole seconds
    )
    return _Server(config)


async def serve_listening(server: uvicorn.Server) -> bool:
    """Run `server` until it is told to exit; False if it never listened. uvicorn ends the
    process (SystemExit) when it cannot bind its address, a port taken: raised in a task,
    that escapes the event loop as a traceback, and the command's own message is lost."""
    try:
        await server.serve()
    except SystemExit:
        return False
    return True
