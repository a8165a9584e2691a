"""The command line: a thin shell that builds everything from the config and runs one stage.

Exit codes: 0 success; 1 a source, delivery or database failed (the others went on);
2 bad usage or an invalid config (nothing was done). The only module (with `config`) that
reads the environment, and the only one that configures logging (secrets masked in every
log line: `bot.core.redact`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any, TypeVar

import click

from bot import __version__
from bot.config import (
    Config,
    config_secrets,
    example_config_text,
    subscriber_problems,
    too_many_rules,
)
from bot.config import load_config as read_config
from bot.core.checks import redact_url
from bot.core.errors import ConfigError, PaperbellError, RuleError
from bot.core.redact import SecretFilter
from bot.store import Store, utcnow

log = logging.getLogger("bot")
F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C

# Masks secrets in every log line (installed on the handlers in main()): the well-known
# shapes from the start, each loaded config's own secret values as it is loaded.
SECRETS = SecretFilter()


def load_config(path: str | Path) -> Config:
    """Read the config file, and keep its secrets out of the logs from now on."""
    config = read_config(path)
    SECRETS.add(config_secrets(config))
    return config


def handle_errors(func: F) -> F:
    """Turn paperbell errors into a message on stderr and a meaningful exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ConfigError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        except RuleError as exc:
            click.echo(
                f"error: bad rule: {exc}\n  {exc.caret().replace(chr(10), chr(10) + '  ')}",
                err=True,
            )
            sys.exit(EXIT_USAGE)
        except PaperbellError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_FAILED)
        except OSError as exc:  # a folder that cannot be created, a read-only file ...
            where = f" {exc.filename}" if exc.filename else ""
            click.echo(f"error: cannot write{where}: {exc.strerror or exc}", err=True)
            sys.exit(EXIT_FAILED)

    return wrapper  # type: ignore[return-value]


def config_option(func: F) -> F:
    return click.option(
        "-c",
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=lambda: os.environ.get("PAPERBELL_CONFIG", "config.toml"),
        show_default="$PAPERBELL_CONFIG or ./config.toml",
        help="The config file.",
    )(func)


def open_store(config: Config) -> Store:
    """Open the database for this command; click closes it when the command ends."""
    return click.get_current_context().with_resource(Store.open(config.database_url()))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="paperbell")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
def main(verbose: int) -> None:
    """paperbell: tells researchers about the new papers that matter to them.

    Polls arXiv listing feeds, matches new papers against each subscriber's rules and sends
    each subscriber a personalised digest. Start with `paperbell demo` (offline, no account)
    or `paperbell init` to write a config file.
    """
    level = logging.WARNING - 10 * verbose
    logging.basicConfig(
        level=max(level, logging.DEBUG), format="%(levelname)s %(name)s: %(message)s"
    )
    for handler in logging.getLogger().handlers:  # whoever logs: paperbell, slack_sdk, httpx
        if SECRETS not in handler.filters:
            handler.addFilter(SECRETS)


@main.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("paperbell-demo"),
    show_default=True,
    help="Folder for the received messages and the demo database.",
)
@click.option(
    "--serve",
    is_flag=True,
    help="Then serve the pages the emails link to (manage, unsubscribe) until Ctrl-C.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8025,
    show_default=True,
    help="The port of those pages on localhost (the emails' links name it).",
)
@handle_errors
def demo(out_dir: Path, serve: bool, port: int) -> None:
    """Run the whole pipeline offline on a bundled real arXiv feed.

    Reads the real arXiv listing of 28 Nov 2024 shipped with paperbell, matches it against
    example subscribers, sends their digests over real SMTP to a server started on
    loopback, and saves each received message as .eml and .html in the output folder.
    Run it twice: the second run sends nothing, because everything was delivered.
    With --serve, the links in the emails work: manage a subscription, unsubscribe.
    """
    from bot.demo import run_demo

    async def main() -> int:
        stop = None
        if serve:
            import signal

            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for number in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(number, stop.set)
        return await run_demo(out_dir, echo=click.echo, web_port=port, serve=stop)

    sys.exit(asyncio.run(main()))


@main.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path), default="config.toml")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@handle_errors
def init(path: Path, force: bool) -> None:
    """Write a commented config file to PATH (default ./config.toml)."""
    if path.exists() and not force:
        click.echo(f"error: {path} exists; use --force to overwrite it", err=True)
        sys.exit(EXIT_USAGE)
    path.write_text(example_config_text(), encoding="utf-8")
    click.echo(f"wrote {path}; edit it, then run: paperbell check-config -c {path}")


@main.command("check-config")
@config_option
@handle_errors
def check_config(config_path: Path) -> None:
    """Validate the config file and report every problem at once."""
    config = load_config(config_path)
    rules = sum(len(s.rules) for s in config.subscribers)
    click.echo(
        f"{config_path}: OK ({len(config.sources)} sources, {len(config.subscribers)} "
        f"subscribers, {rules} rules; database {redact_url(config.database.url)})"
    )


@main.command()
@config_option
@click.option("--source", "only", metavar="NAME", help="Poll only this source.")
@handle_errors
def poll(config_path: Path, only: str | None) -> None:
    """Fetch every configured source once and store the new papers."""
    from bot.pipeline import build_fetcher
    from bot.pipeline import poll as run_poll
    from bot.sources.http import make_client

    config = load_config(config_path)
    if only is not None and only not in {s.name for s in config.sources}:
        raise ConfigError([f"no source named {only!r}"], source=str(config_path))
    store = open_store(config)

    async def go() -> list[Any]:
        async with make_client() as client:
            fetcher = build_fetcher(config, client)
            return await run_poll(config, store, fetcher, now=utcnow(), only=only)

    reports = asyncio.run(go())
    failed = 0
    for r in reports:
        if r.result == "error":
            failed += 1
            click.echo(f"{r.source}: ERROR {r.error}")
        elif r.result == "not_modified":
            click.echo(f"{r.source}: unchanged (HTTP 304)")
        elif r.result == "empty":
            click.echo(f"{r.source}: 0 items ({r.note or 'empty feed'})")
        else:
            merged = f"{r.merged} merged with stored papers, " if r.merged else ""
            left_out = f"; {r.problems} entries left out (see the log)" if r.problems else ""
            click.echo(
                f"{r.source}: {r.items} items read, {r.new} new, {r.updated} updated, "
                f"{merged}{r.unchanged} already stored (announced {r.announced}){left_out}"
            )
    if not reports:
        click.echo("no sources configured")
    sys.exit(EXIT_FAILED if failed else EXIT_OK)


@main.command()
@config_option
@click.option(
    "--since",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    required=True,
    help="The first day to fetch (YYYY-MM-DD).",
)
@click.option(
    "--until",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="The last day to fetch (YYYY-MM-DD). [default: today, UTC]",
)
@click.option("--source", "only", metavar="NAME", help="Backfill only this source.")
@click.option("--no-progress", is_flag=True, help="No progress bar (one line per day instead).")
@handle_errors
def backfill(
    config_path: Path, since: Any, until: Any, only: str | None, no_progress: bool
) -> None:
    """Fill the store with the papers of a past period, so that `paperbell try` can test a
    rule on them: the arXiv sources through the arXiv API (one request every 3 seconds,
    day by day), Hugging Face day by day. Interrupted (Ctrl-C), it goes on where it stopped
    when run again; days already done are skipped.

    Example: paperbell backfill -c config.toml --since 2026-10-01
    """
    from tqdm import tqdm

    from bot.pipeline import build_fetcher, build_sources
    from bot.pipeline.backfill import BackfillReport, days_done, plan
    from bot.pipeline.backfill import backfill as run_backfill
    from bot.sources.http import make_client

    config = load_config(config_path)
    first = since.date()
    last = until.date() if until else utcnow().date()
    if last < first:
        raise PaperbellError(f"--until {last} is before --since {first}")
    sources = build_sources(config)
    if only is not None:
        sources = [s for s in sources if s.name == only]
        if not sources:
            raise ConfigError([f"no source named {only!r}"], source=str(config_path))
    planned = plan(sources, first, last)
    if not planned:
        raise PaperbellError(
            "none of the sources can look back",
            hint="backfill works for sources of kind arxiv, arxiv_query and huggingface; "
            "a feed only holds its latest entries",
        )
    store = open_store(config)
    total = sum(len(parts) for _, parts in planned)
    done_before = days_done(planned, store)
    if done_before:
        click.echo(f"resuming: {done_before} of {total} days already done, skipped")
    bar = tqdm(
        total=total,
        initial=done_before,
        unit="day",
        disable=no_progress,
        file=sys.stderr,
        dynamic_ncols=True,
    )

    def advance(report: BackfillReport, part: str, count: int) -> None:
        bar.set_description(f"{report.source} {part}")
        bar.set_postfix(papers=report.papers, refresh=False)
        bar.update(1)
        if no_progress:
            click.echo(f"{report.source} {part}: {count} papers")

    async def go() -> list[BackfillReport]:
        async with make_client() as client:
            return await run_backfill(
                planned, store, build_fetcher(config, client), now=utcnow, advance=advance
            )

    try:
        reports = asyncio.run(go())
    except KeyboardInterrupt:
        bar.close()
        done = days_done(planned, store)
        click.echo(
            f"interrupted: {done} of {total} days done; run the same command again to go on",
            err=True,
        )
        sys.exit(EXIT_INTERRUPTED)
    bar.close()
    for r in reports:
        click.echo(
            f"{r.source}: {r.done} days fetched, {r.done_before} already done, "
            f"{r.papers} papers ({r.new} new)"
        )
        for error in r.errors:
            click.echo(f"{r.source}: ERROR {error}")
    failed = any(r.errors for r in reports)
    if failed:
        click.echo("some days failed; run the same command again to retry them", err=True)
    sys.exit(EXIT_FAILED if failed else EXIT_OK)


@main.command()
@config_option
@click.option("--dry-run", is_flag=True, help="Print who would get which papers; change nothing.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write each digest as an .eml file into DIR instead of sending; record nothing.",
)
@click.option("--subscriber", "only", metavar="NAME", help="Only this subscriber.")
@click.option(
    "--since",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Take papers announced on or after this date (YYYY-MM-DD) instead of the "
    "default window ([digest] window_days).",
)
@handle_errors
def digest(
    config_path: Path, dry_run: bool, out_dir: Path | None, only: str | None, since: Any
) -> None:
    """Build and send every subscriber's digest of papers they have not received yet."""
    from bot.pipeline import DeliveryRequest, build_channels, deliver

    config = load_config(config_path)
    store = open_store(config)
    request = DeliveryRequest(
        mode="dry-run" if dry_run else "send" if out_dir is None else "files",
        only=only,
        since=since.date() if since else None,
    )
    reports = asyncio.run(
        deliver(
            config,
            store,
            build_channels(config, out_dir=out_dir),
            request,
            now=utcnow(),
            clock=utcnow,
        )
    )
    sys.exit(print_delivery(reports, dry_run=dry_run))


def print_delivery(reports: Sequence[Any], *, dry_run: bool = False) -> int:
    """Print one line per subscriber (and the papers, in a dry run); return the exit code."""
    failed = 0
    for r in reports:
        n = r.count
        papers = f"{n} paper{'s' if n != 1 else ''}"
        more = f" (+{r.omitted} over max_papers)" if r.omitted else ""
        if r.status == "sent":
            click.echo(f"{r.subscriber} {r.target}: sent {papers}{more}")
        elif r.status == "written":
            click.echo(f"{r.subscriber} {r.target}: {papers}{more} -> {r.where}")
        elif r.status == "would-send":
            click.echo(f"{r.subscriber} {r.target}: would get {papers}{more}")
            for item in r.digest.items if r.digest else ():
                rules = ", ".join(item.rules)
                click.echo(f"    {item.paper.id:<18} {item.paper.title[:70]}  [{rules}]")
        elif r.status == "nothing":
            click.echo(f"{r.subscriber} {r.target}: no new matching papers")
        elif r.status == "queued-elsewhere":
            click.echo(f"{r.subscriber} {r.target}: already queued by another run")
        elif r.status == "unrecorded":
            failed += 1
            click.echo(f"{r.subscriber} {r.target}: {papers} {r.error}", err=True)
        elif r.status == "skipped":
            click.echo(f"{r.subscriber}: skipped ({r.error})")
        else:
            failed += 1
            click.echo(f"{r.subscriber} {r.target}: FAILED {r.error}", err=True)
    if not reports:
        click.echo("no subscribers")
    if dry_run:
        click.echo("dry run: nothing was sent or recorded")
    return EXIT_FAILED if failed else EXIT_OK


@main.command()
@config_option
@click.argument("name")
@click.argument("rules", nargs=-1)
@click.option("--email", help="The subscriber's email address.")
@click.option(
    "--slack-channel", metavar="CHANNEL", help="Post to this Slack channel (#name or id)."
)
@click.option("--slack-user", metavar="ID", help="Send as a Slack direct message (member id).")
@click.option("--category", "categories", multiple=True, help="Only papers in this category.")
@click.option("--max-papers", type=click.IntRange(1, 1000), help="At most this many per digest.")
@click.option(
    "--include",
    type=click.Choice(["new", "cross", "replace"]),
    multiple=True,
    help="Announcement types to take (default new and cross; replace = updated versions).",
)
@click.option(
    "--schedule", type=click.Choice(["daily", "weekly"]), help="How often. [default: [digest]]"
)
@click.option("--day", help="Weekly digests: the day (monday ... sunday).")
@click.option("--time", "at", metavar="HH:MM", help="When, on the subscriber's clock.")
@click.option("--timezone", metavar="ZONE", help="An IANA time zone, e.g. Europe/Berlin.")
@click.option(
    "--notify-empty/--no-notify-empty",
    default=None,
    help="On a digest day with nothing to send, send a short note that says why.",
)
@handle_errors
def subscribe(
    config_path: Path,
    name: str,
    rules: tuple[str, ...],
    email: str | None,
    slack_channel: str | None,
    slack_user: str | None,
    categories: tuple[str, ...],
    max_papers: int | None,
    include: tuple[str, ...],
    schedule: str | None,
    day: str | None,
    at: str | None,
    timezone: str | None,
    notify_empty: bool | None,
) -> None:
    """Subscribe NAME with one or more RULES (stored in the database).

    Adds the rules to NAME if it exists; the options change its settings. Examples:

    \b
    paperbell subscribe ada --email ada@example.org '"diffusion policy"' 'multi-agent cat:cs.RO'
    paperbell subscribe robot-lab --slack-channel '#robot-learning' 'manipulation cat:cs.RO'
    paperbell subscribe ada --schedule weekly --day friday --time 16:00 --timezone Europe/Paris
    """
    config = load_config(config_path)
    settings = {"schedule": schedule, "day": day, "time": at, "timezone": timezone}
    settings_given = {k: v for k, v in settings.items() if v is not None}
    slack = {"slack_channel": slack_channel, "slack_user": slack_user}
    slack_given = {k: v for k, v in slack.items() if v is not None}
    problems = subscriber_problems(
        name=name,
        email=email,
        rules=rules or ["placeholder"],
        categories=categories,
        settings={**settings_given, **slack_given},
    )
    if slack_given and (config.slack is None or not config.slack.bot_token):
        problems.append("posting to Slack needs [slack] bot_token_env in the config")
    if name in {s.name for s in config.subscribers}:
        problems.append(f"{name!r} is declared in the config file: change it there")
    store = open_store(config)
    row = store.subscriber_row(name)
    if row is None and not (email or slack_given):
        problems.append("say where its digests go: --email, --slack-channel or --slack-user")
    if row is None and not rules:
        problems.append("give at least one RULE for a new subscriber")
    have = store.rule_texts(name)
    count = len(set(have) | set(rules))
    if count > len(have) and (too_many := too_many_rules(count, config.digest.max_rules)):
        problems.append(f"rules: {name} would have {too_many}")
    if problems:
        raise ConfigError(problems, source="subscribe")
    sub, created = store.add_subscriber(
        name,
        email=email,
        rules=rules,
        now=utcnow(),
        categories=categories,
        max_papers=max_papers,
        include=include or None,
        slack_channel=slack_channel,
        slack_user=slack_user,
        max_rules=config.digest.max_rules,
    )
    if settings_given or notify_empty is not None:
        extra = {} if notify_empty is None else {"notify_empty": notify_empty}
        store.set_schedule(name, **settings_given, **extra)
    sub = next(
        s
        for s in store.subscribers(include_inactive=True, defaults=config.digest.defaults())
        if s.name == name
    )
    # The slot already handled stays as it is: marking the new schedule's latest slot
    # handled would move the next digest's window past papers not sent yet. A new time or
    # day whose latest slot has passed sends at the next tick (only papers not sent yet).
    verb = "subscribed" if created else "updated"
    notes = ", with a note on empty days" if sub.notify_empty else ""
    click.echo(f"{verb} {sub.name} {_where(sub)}: {sub.schedule.describe()}{notes}")
    click.echo(f"{len(sub.rules)} rule(s):")
    for number, text in enumerate(sub.rules, 1):
        click.echo(f"  {number}. {text}")


@main.command()
@config_option
@click.argument("name")
@click.option("--rule", "rule_number", type=int, metavar="N", help="Remove only rule N.")
@click.option("--delete", is_flag=True, help="Delete the subscriber and its history.")
@handle_errors
def unsubscribe(config_path: Path, name: str, rule_number: int | None, delete: bool) -> None:
    """Stop sending digests to NAME (or remove one of its rules with --rule N).

    Works for subscribers from the config file too: they stay unsubscribed until
    `paperbell subscribe`-d again (database) or renamed in the file."""
    config = load_config(config_path)
    store = open_store(config)
    if rule_number is not None:
        text = store.remove_rule(name, rule_number)
        click.echo(f"removed rule {rule_number} of {name}: {text}")
    elif delete:
        store.delete_subscriber(name)
        click.echo(f"deleted {name} and its delivery history")
    else:
        if name in {s.name for s in config.subscribers}:
            store.sync_config_subscribers(config.declared_subscribers(), now=utcnow())
        if not store.set_active(name, False, now=utcnow()):
            raise PaperbellError(f"no subscriber named {name!r}", hint="see `paperbell list`")
        click.echo(f"unsubscribed {name}: no more digests")


TRY_DAYS = 30  # `try` without --since: this many announcement days up to the newest stored


@main.command("try")
@click.argument("rule_text", metavar="RULE")
@config_option
@click.option(
    "--since",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help=f"Papers announced on or after this date (YYYY-MM-DD); default: the {TRY_DAYS} days "
    "up to the newest stored paper.",
)
@click.option(
    "--demo",
    "use_demo",
    is_flag=True,
    help="Try the rule on the real listing bundled with paperbell (28 Nov 2024, all of "
    "arXiv) instead of the stored papers; needs no config file.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Show at most this many papers (0: all); the counts cover every match.",
)
@click.option(
    "--color/--no-color",
    default=None,
    help="Highlight hits with terminal colours (default: when writing to a terminal and "
    "NO_COLOR is not set); without colour, hits are shown as *word*.",
)
@handle_errors
def try_(
    rule_text: str,
    config_path: Path,
    since: Any,
    use_demo: bool,
    limit: int,
    color: bool | None,
) -> None:
    """Show which papers RULE matches, best first, with the hits highlighted, and how many
    per announcement day: tune a rule before subscribing with it.

    Examples: paperbell try '"diffusion policy" cat:cs.RO' --demo;
    paperbell try 'au:"Yann LeCun" OR ti:jepa' -c config.toml --since 2026-10-01
    """
    from bot.match.digest import try_rule
    from bot.render.terminal import render_trial, stars
    from bot.rules import parse_rule

    rule = parse_rule(rule_text)  # a bad rule: the error with a caret, exit 2
    if use_demo:
        from bot.demo import bundled_papers

        papers = bundled_papers()
        if since is not None:
            papers = [p for p in papers if p.announced and p.announced >= since.date()]
        where = "the bundled listing of 2024-11-28"
    else:
        config = load_config(config_path)
        store = open_store(config)
        latest = store.latest_announcement()
        if latest is None:
            raise PaperbellError(
                "no papers are stored yet",
                hint="run `paperbell poll` first, or try the rule on the bundled listing "
                "with --demo",
            )
        first = since.date() if since else latest - timedelta(days=TRY_DAYS - 1)
        papers = store.papers_announced_since(first)
        where = f"stored papers announced {first} to {latest}"
    if color is None:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    mark = (lambda text: click.style(text, fg="yellow", bold=True)) if color else stars
    trial = try_rule(rule, papers)
    click.echo(f"rule: {rule.text}\ntried on {where}\n", color=color)
    width = shutil.get_terminal_size((100, 24)).columns
    for line in render_trial(trial, mark=mark, limit=limit, width=min(width, 120)):
        click.echo(line, color=color)


@main.command()
@config_option
@click.option("--host", help="Address the web app listens on. [default: [web] host]")
@click.option("--port", type=click.IntRange(0, 65535), help="Its port. [default: [web] port]")
@click.option("--no-web", is_flag=True, help="Run without the web app.")
@click.option("--clock-start", type=click.DateTime(["%Y-%m-%dT%H:%M"]), hidden=True)
@click.option("--clock-speed", type=click.FloatRange(min=1), default=1.0, hidden=True)
@handle_errors
def run(
    config_path: Path,
    host: str | None,
    port: int | None,
    no_web: bool,
    clock_start: Any,
    clock_speed: float,
) -> None:
    """Run the daemon: poll the sources, send each digest at its subscriber's time.

    arXiv listings are polled from 00:05 US Eastern on arXiv's feed days until the new
    listing is in ([polling]); each subscriber's digest is built at their `time` in their
    `timezone`, daily or weekly, and sent through the outbox (retries, leases). The web app
    serves GET /healthz and GET /metrics ([web]). Ctrl-C or SIGTERM stops it cleanly: the
    digest being sent is finished, nothing is lost. `paperbell digest` from cron can share
    its database without sending anything twice.
    """
    # Testing aid (hidden): run on a clock that starts at --clock-start (UTC) and runs
    # --clock-speed times faster than real time.
    config = load_config(config_path)
    if not logging.getLogger().isEnabledFor(logging.INFO):
        logging.getLogger().setLevel(logging.INFO)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for noisy in ("apscheduler", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    clock = utcnow if clock_start is None else _fast_clock(clock_start, clock_speed)
    store = open_store(config)
    web = (
        None
        if no_web or not config.web.enabled
        else (
            host or config.web.host,
            config.web.port if port is None else port,
        )
    )
    code = asyncio.run(_run_daemon(config, store, clock=clock, web=web, speed=clock_speed))
    sys.exit(code)


def _fast_clock(start: Any, speed: float) -> Callable[[], Any]:
    import time

    origin, first = time.monotonic(), start.replace(tzinfo=UTC)
    return lambda: first + timedelta(seconds=(time.monotonic() - origin) * speed)


async def _run_daemon(
    config: Config,
    store: Store,
    *,
    clock: Callable[[], Any],
    web: tuple[str, int] | None,
    speed: float,
) -> int:
    import signal

    from bot.pipeline import build_channels, build_fetcher
    from bot.pipeline.scheduler import Daemon
    from bot.slack.app import build_slack_app
    from bot.sources.http import make_client
    from bot.web.app import create_app, make_server
    from bot.web.pages import build_pages

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()
    first_signal: list[float] = []

    def on_signal(number: int) -> None:
        # A second signal a moment later (Ctrl-C pressed again) stops at once; one that
        # comes with the first (sent to the process and its group) does not.
        if first_signal and loop.time() - first_signal[0] > 1:
            log.warning("second %s: stopping now", signal.Signals(number).name)
            if main_task is not None:
                main_task.cancel()
            return
        if not first_signal:
            first_signal.append(loop.time())
            log.info("%s: stopping (again to stop at once)", signal.Signals(number).name)
        stop.set()

    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, on_signal, number)
    channels = build_channels(config)
    if not channels:
        log.warning("no [email] or [slack] section: polling only, no digests are sent")
    slack = build_slack_app(config, store, channels, clock=clock)
    pages = build_pages(config, store, channels, clock=clock)
    async with make_client() as client:
        daemon = Daemon(
            config,
            store,
            fetcher=build_fetcher(config, client),
            channels=channels,
            clock=clock,
        )
        server = None
        if web is not None:
            app = create_app(
                daemon,
                slack=slack.http if slack else None,
                pages=pages,
                public_url=config.web.public_url,
            )
            server = make_server(app, host=web[0], port=web[1])
            log.info("web app on http://%s:%d (%s)", web[0], web[1], _routes(slack, pages))
        socket = _socket_mode(slack, stop)
        subscribers = daemon.subscribers()
        log.info(
            "paperbell %s running: %d sources, %d subscribers; tick every %gs",
            __version__,
            len(daemon.sources),
            len(subscribers),
            config.daemon.tick_seconds,
        )
        try:
            await daemon.serve(stop, web=server, interval=config.daemon.tick_seconds / speed)
        except asyncio.CancelledError:
            return 130
        finally:
            await _stop_slack(slack, socket, stop)
    if server is not None and not stop.is_set():
        log.error("the web app stopped (is port %d free?)", web[1] if web else 0)
        return EXIT_FAILED
    log.info("stopped")
    return EXIT_OK


def _where(sub: Any) -> str:
    """Where a subscriber's digests go: `<ada@lab.example>`, `slack #robots`, both; an
    address that waits for its owner's confirmation is shown, marked."""
    from bot.core.models import target_label

    places = [target_label(kind, recipient) for kind, recipient in sub.targets()]
    if sub.email and not sub.email_confirmed:
        places.insert(0, f"{target_label('email', sub.email)} (unconfirmed)")
    return " + ".join(places) or "(nowhere)"


def _routes(slack: Any, pages: Any, *, daemon: bool = True) -> str:
    routes = ["/healthz", "/metrics"] if daemon else []
    if slack is not None and slack.http:
        routes.append("POST /slack/commands")
    if pages:
        routes.append("/manage, /unsubscribe, /confirm pages")
    return ", ".join(routes) or "no routes: Socket Mode only"


def _socket_mode(slack: Any, stop: asyncio.Event) -> asyncio.Task[None] | None:
    """Receive slash commands over Socket Mode, if [slack] app_token_env is set."""
    if slack is None or not slack.app_token:
        return None
    from bot.slack.app import run_socket_mode

    async def connect() -> None:
        try:
            await run_socket_mode(
                slack.responder, app_token=slack.app_token, api_url=slack.api_url, stop=stop
            )
        except Exception as exc:  # the daemon goes on; the commands are off
            log.error("Socket Mode failed: %s; slash commands are unavailable", exc)

    return asyncio.create_task(connect())


async def _stop_slack(slack: Any, socket: asyncio.Task[None] | None, stop: asyncio.Event) -> None:
    stop.set()
    if socket is not None:
        await asyncio.gather(socket, return_exceptions=True)
    if slack is not None:
        await slack.responder.wait()


@main.command()
@config_option
@click.option("--host", help="Address the web app listens on. [default: [web] host]")
@click.option("--port", type=click.IntRange(0, 65535), help="Its port. [default: [web] port]")
@handle_errors
def serve(config_path: Path, host: str | None, port: int | None) -> None:
    """Serve the web app alone: the Slack slash command and the pages reached from emails
    (no polling, no scheduled digests).

    POST /slack/commands (when [slack] signing_secret_env is set), Socket Mode (when [slack]
    app_token_env is set), and the manage, one-click unsubscribe and confirmation pages
    (when [web] public_url and secret_key_env are set). `paperbell run` serves the same
    beside the daemon.
    """
    config = load_config(config_path)
    slack = config.slack
    has_slack = slack is not None and bool(slack.bot_token)
    has_pages = config.web.link_signer() is not None
    if slack is not None and slack.bot_token and not (slack.signing_secret or slack.app_token):
        raise ConfigError(
            [
                "slack: `serve` needs a way in for the slash command: signing_secret_env "
                "(POST /slack/commands) or app_token_env (Socket Mode)"
            ]
        )
    if not (has_slack or has_pages):
        raise ConfigError(
            [
                "`serve` has nothing to serve: set [slack] bot_token_env for the slash "
                "command, or [web] public_url and secret_key_env for the pages"
            ]
        )
    if not logging.getLogger().isEnabledFor(logging.INFO):
        logging.getLogger().setLevel(logging.INFO)
    store = open_store(config)
    where = (host or config.web.host, config.web.port if port is None else port)
    sys.exit(asyncio.run(_serve(config, store, where)))


async def _serve(config: Config, store: Store, where: tuple[str, int]) -> int:
    import signal

    from bot.pipeline import build_channels
    from bot.slack.app import build_slack_app
    from bot.web.app import create_app, make_server
    from bot.web.pages import build_pages

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop.set)
    channels = build_channels(config)
    slack = build_slack_app(config, store, channels, clock=utcnow)
    pages = build_pages(config, store, channels, clock=utcnow)
    app = create_app(
        slack=slack.http if slack else None, pages=pages, public_url=config.web.public_url
    )
    server = make_server(app, host=where[0], port=where[1])
    log.info(
        "web app on http://%s:%d (%s)", where[0], where[1], _routes(slack, pages, daemon=False)
    )
    socket = _socket_mode(slack, stop)
    web = asyncio.create_task(server.serve())
    await asyncio.wait([web, asyncio.create_task(stop.wait())], return_when="FIRST_COMPLETED")
    server.should_exit = True
    await asyncio.gather(web, return_exceptions=True)
    await _stop_slack(slack, socket, stop)
    return EXIT_OK


@main.command()
@config_option
@handle_errors
def status(config_path: Path) -> None:
    """Show the sources' polls, each subscriber's next digest and deliveries, the outbox."""
    from bot.pipeline import build_sources
    from bot.pipeline.scheduler import digest_plans, source_plans

    config = load_config(config_path)
    store = open_store(config)
    now = utcnow()
    calendar, policy = config.polling.calendar(), config.polling.policy()
    sources = build_sources(config)
    plans = source_plans(sources, store, calendar, policy, now=now)
    states = {s.name: s for s in store.source_states()}
    left_out = store.left_out()
    rows = [
        [
            "source",
            "last poll (UTC)",
            "result",
            "items",
            "new",
            "announced",
            "next poll (UTC)",
            "left out",
            "problem",
        ]
    ]
    for source in sources:
        st, plan = states.get(source.name), plans[source.name]
        problem = ""
        if plan.late:
            problem = f"late: no new listing for {plan.feed_day} by {config.polling.deadline} ET"
        if st is not None and st.last_error:
            problem = f"{problem}; {st.last_error}" if problem else st.last_error
        skipped = left_out.get(source.name)
        if skipped is not None and skipped.first and not problem:
            problem = f"left out {skipped.first}"
        when = "now" if plan.at <= now else f"{plan.at.astimezone(UTC):%Y-%m-%d %H:%M}"
        if st is None or st.last_poll is None:
            rows.append([source.name, "never", "", "", "", "", when, "", problem[:70]])
            continue
        rows.append(
            [
                source.name,
                f"{st.last_poll.astimezone(UTC):%Y-%m-%d %H:%M}",
                st.last_result,
                str(st.items),
                str(st.new),
                str(st.announced or ""),
                when,
                str(skipped.count if skipped is not None else 0),
                problem[:70],
            ]
        )
    _table(rows)

    click.echo("")
    outbox = store.outbox_status()
    counts = store.delivery_counts()
    everyone = store.subscribers(
        config.declared_subscribers(), include_inactive=True, defaults=config.digest.defaults()
    )
    upcoming = {
        p.subscriber.name: p for p in digest_plans(everyone, plans, calendar, policy, now=now)
    }
    rows = [
        [
            "subscriber",
            "state",
            "schedule",
            "next digest (`run`)",
            "papers sent",
            "last sent (UTC)",
            "pending",
            "failed",
            "problem",
        ]
    ]
    for sub in everyone:
        box = outbox.get(sub.id or -1)
        state = "active"
        if not sub.active:
            row = store.subscriber_row(sub.name)
            state = f"paused: {row.paused_reason}" if row and row.paused_reason else "unsubscribed"
        got, _ = counts.get(sub.id or -1, (0, None))
        problem = ""
        if box and box.pending and box.last_error and box.next_attempt:
            problem = f"retry {box.next_attempt:%m-%d %H:%M}: {box.last_error}"
        elif box and box.last_error:
            problem = box.last_error
        due = upcoming[sub.name]
        if not sub.active:
            next_digest = ""
        elif due.due is not None and due.waiting_for:
            next_digest = "due, waiting for " + ", ".join(due.waiting_for)
        elif due.due is not None:
            next_digest = "due now"
        else:
            next_digest = f"{due.next.local:%a %d %b %H:%M %Z}"
        rows.append(
            [
                sub.name,
                state[:50],
                sub.schedule.describe(),
                next_digest,
                str(got),
                f"{box.last_sent.astimezone(UTC):%Y-%m-%d %H:%M}"
                if box and box.last_sent
                else "never",
                str(box.pending if box else 0),
                str(box.failed if box else 0),
                problem[:70],
            ]
        )
    _table(rows)

    totals = store.outbox_totals(now=now)
    click.echo(
        "\noutbox: " + ", ".join(f"{n} {status}" for status, n in totals.items()) + " (digests)"
    )


def _table(rows: list[list[str]]) -> None:
    """Print rows as aligned columns, the first row as the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


@main.command()
@config_option
@click.argument("name")
@handle_errors
def resume(config_path: Path, name: str) -> None:
    """Send digests to NAME again, after `unsubscribe` or a pause for a bouncing address."""
    config = load_config(config_path)
    store = open_store(config)
    if name in {s.name for s in config.subscribers}:
        store.sync_config_subscribers(config.declared_subscribers(), now=utcnow())
    if not store.set_active(name, True, now=utcnow()):
        raise PaperbellError(f"no subscriber named {name!r}", hint="see `paperbell list`")
    click.echo(f"resumed {name}: digests will be sent again")


@main.command("list")
@config_option
@handle_errors
def list_(config_path: Path) -> None:
    """List subscribers (config file and database) with their numbered rules."""
    config = load_config(config_path)
    store = open_store(config)
    subscribers = store.subscribers(
        config.declared_subscribers(), include_inactive=True, defaults=config.digest.defaults()
    )
    counts = store.delivery_counts()
    if not subscribers:
        click.echo("no subscribers")
    for sub in subscribers:
        got, last = counts.get(sub.id or -1, (0, None))
        row = None if sub.active else store.subscriber_row(sub.name)
        if sub.active:
            status = "active"
        elif row is not None and row.paused_reason:
            status = f"paused: {row.paused_reason}"
        else:
            status = "unsubscribed"
        when = f", last {last:%Y-%m-%d %H:%M} UTC" if last else ""
        click.echo(f"{sub.name} {_where(sub)} [{sub.origin}, {status}] {got} papers sent{when}")
        extra = []
        if sub.categories:
            extra.append("categories " + ", ".join(sub.categories))
        extra.append("include " + ", ".join(sorted(sub.include)))
        extra.append(f"max {sub.max_papers}")
        extra.append(
            sub.schedule.describe() + (", notes on empty days" if sub.notify_empty else "")
        )
        click.echo("    " + "; ".join(extra))
        for number, text in enumerate(sub.rules, 1):
            click.echo(f"    {number}. {text}")


if __name__ == "__main__":  # pragma: no cover
    main()
