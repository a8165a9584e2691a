"""The paper commands: `poll` and `backfill` fill the store, `digest` sends what it holds
(`try`, which shows what a rule would match in it, is bot.cli.trial's).

Each command runs one stage of `bot.pipeline` once and prints its reports. The pipeline
(slack_sdk, aiosmtplib, httpx) is imported inside the commands that run it: the other
commands start without it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bot.cli.secrets import require_secrets, secrets_of
from bot.cli.shell import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    config_option,
    handle_errors,
    load_config,
    open_store,
)
from bot.config import DATABASE_URL, SECRET_KEY
from bot.core.errors import ConfigError, PaperbellError
from bot.core.links import placeholder_url
from bot.core.models import Digest, Paper
from bot.core.plurals import plural
from bot.render.terminal import terminal_safe
from bot.render.text import clip, letters, tidy
from bot.render.view import SIMILAR_TITLE_CHARS, rule_names

if TYPE_CHECKING:
    from bot.pipeline import DeliveryReport, PollReport, TextsRun
    from bot.pipeline.backfill import BackfillReport
    from bot.pipeline.deliver import Mode


@click.command()
@config_option
@click.option("--source", "only", metavar="NAME", help="Poll only this source.")
@handle_errors
def poll(config_path: Path, only: str | None) -> None:
    """Fetch every configured source once and store the new papers."""
    from bot.pipeline import build_fetcher
    from bot.pipeline import poll as run_poll
    from bot.sources.http import make_client
    from bot.store import utcnow

    config = load_config(config_path)
    if only is not None and only not in {s.name for s in config.sources}:
        raise ConfigError([f"no source named {only!r}"], source=str(config_path))
    store = open_store(config)

    async def go() -> list[PollReport]:
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
            merged = f"{r.merged:,} merged with stored papers, " if r.merged else ""
            left_out = (
                f"; {plural(r.problems, 'entry', 'entries')} left out (see the log)"
                if r.problems
                else ""
            )
            click.echo(
                f"{r.source}: {plural(r.items, 'item')} read, {r.new:,} new, {r.updated:,} "
                f"updated, {merged}{r.unchanged:,} already stored (announced {r.announced})"
                f"{left_out}"
            )
    if not reports:
        click.echo("no sources configured")
    sys.exit(EXIT_FAILED if failed else EXIT_OK)


@click.command()
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
@click.option(
    "--no-progress",
    is_flag=True,
    help="No progress bar, one line per day instead (as when not writing to a terminal).",
)
@handle_errors
def backfill(
    config_path: Path, since: datetime, until: datetime | None, only: str | None, no_progress: bool
) -> None:
    """Fill the store with the papers of a past period, so that `paperbell try` can test a
    rule on them: the arXiv sources through the arXiv API (one request every 3 seconds,
    day by day, at most 10,000 results a day, and a page the API repeats ends that day),
    Hugging Face day by day. A progress bar on a terminal, a line per day elsewhere.
    Interrupted (Ctrl-C), it goes on where it stopped when run again; days already done
    are skipped (a day that failed, or stopped half-way, is asked again).

    Example: paperbell backfill -c config.toml --since 2026-10-01
    """
    from tqdm import tqdm

    from bot.pipeline import build_fetcher, build_sources
    from bot.pipeline.backfill import backfill as run_backfill
    from bot.pipeline.backfill import days_done, plan
    from bot.sources.http import make_client
    from bot.store import utcnow

    config = load_config(config_path)
    first = since.date()
    last = until.date() if until else utcnow().date()
    if last < first:  # bad usage: exit 2
        raise click.BadParameter(f"{last} is before --since {first}", param_hint="'--until'")
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
        click.echo(f"resuming: {done_before} of {plural(total, 'day')} already done, skipped")
    # A bar only where a person watches (on the terminal's stderr); a line per day wherever
    # the output is kept (a log, a pipe), and in place of the bar: `backfill > log` on a
    # terminal gets both.
    no_bar = no_progress or not sys.stderr.isatty()
    plain = no_bar or not sys.stdout.isatty()
    bar = tqdm(
        total=total,
        initial=done_before,
        unit="day",
        disable=no_bar,
        file=sys.stderr,
        dynamic_ncols=True,
    )

    def advance(report: BackfillReport, part: str, count: int) -> None:
        bar.set_description(f"{report.source} {part}")
        bar.set_postfix(papers=report.papers, refresh=False)
        bar.update(1)
        if plain:  # a line per day, into a log or a pipe
            failed = report.errors[-1] if report.errors else ""
            if failed.startswith(f"{part}: "):
                first, _, hint = failed.removeprefix(f"{part}: ").partition("\n")
                kept = f" ({plural(count, 'paper')} kept)" if count else ""
                click.echo(f"{report.source} {part}: ERROR {first}{kept}")
                if hint:
                    click.echo(hint)
            else:
                click.echo(f"{report.source} {part}: {plural(count, 'paper')}")

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
            f"interrupted: {done} of {plural(total, 'day')} done; run the same command again "
            "to go on",
            err=True,
        )
        sys.exit(EXIT_INTERRUPTED)
    bar.close()
    for r in reports:
        click.echo(
            f"{r.source}: {plural(r.done, 'day')} fetched, {r.done_before} already done, "
            f"{plural(r.papers, 'paper')} ({r.new} new)"
        )
        for error in r.errors:
            click.echo(f"{r.source}: ERROR {error}")
    failed = any(r.errors for r in reports)
    if failed:
        click.echo("some days failed; run the same command again to retry them", err=True)
    sys.exit(EXIT_FAILED if failed else EXIT_OK)


@click.command()
@config_option
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print who would get which papers and why (the rules that matched; for a digest "
    "ranked by 👍 / 👎, the papers added as close to liked ones and those left out as close "
    "to a 👎); change nothing.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write each digest into DIR instead of sending (an email as .eml, and its HTML "
    "part as .html to open in a browser; a Slack or Apprise digest as the .json of its "
    "messages); record no delivery.",
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
    config_path: Path,
    dry_run: bool,
    out_dir: Path | None,
    only: str | None,
    since: datetime | None,
) -> None:
    """Build and send every subscriber's digest of papers they have not received yet.

    Sending needs the secrets of the channels ([email] password_env, [slack] bot_token_env,
    webhooks) and the key that signs the emails' links ([web] secret_key_env); an Apprise
    destination whose variable (apprise_env) is not set waits for it, the others go.
    --dry-run and --out need none (without the key, the links in the files are
    placeholders).
    """
    from bot.pipeline import DeliveryRequest, deliver, wire
    from bot.pipeline.dispatch import settle
    from bot.store import utcnow

    config = load_config(config_path)
    mode: Mode = "dry-run" if dry_run else "send" if out_dir is None else "files"
    if mode == "send":  # a preview (--dry-run, --out) sends nothing: it needs no secret
        require_secrets(config, DATABASE_URL, *secrets_of(config, "digest"))
    store = open_store(config, create=mode == "send")  # a preview makes no database
    request = DeliveryRequest(mode=mode, only=only, since=since.date() if since else None)
    texts: list[TextsRun] = []
    parts = wire(config, store, out_dir=out_dir)
    # [delivery] workers: more than one send beside this process, which plans; one
    # subscriber's digests (--subscriber) it sends itself, and no one else's.
    senders = None
    if mode == "send" and config.delivery.workers > 1 and only is None:
        from bot.cli.senders import start_senders

        senders = start_senders(
            config_path,
            config.delivery.workers,
            until_idle=True,
            attempts_before=store.outbox.attempts_pending(),
        )
        request = replace(request, sends=False)
    try:
        reports = asyncio.run(
            deliver(parts, request, now=utcnow(), clock=utcnow, on_texts=texts.append)
        )
    except BaseException:
        if senders is not None:
            senders.stop(config.daemon.shutdown_grace_seconds)
        raise
    crashed: list[str] = []  # senders that ended with an error: the digests they held wait
    if senders is not None:
        crashed = senders.finish()
        reports = settle(store, reports)
    code = print_delivery(reports, dry_run=dry_run)
    for problem in crashed:
        click.echo(f"error: {problem}: the digests it held are sent by the next run", err=True)
        code = EXIT_FAILED
    for run in texts:
        if line := run.line():
            click.echo(line)
    unsigned = config.missing(SECRET_KEY) if config.web.public_url else []
    if mode == "files" and unsigned and any(r.status == "written" for r in reports):
        click.echo(
            f"note: {unsigned[0].line()}: the emails' manage and unsubscribe links are "
            f"placeholders ({placeholder_url(config.web.public_url or '', 'manage')})"
        )
    sys.exit(code)


def preview_lines(digest: Digest) -> list[str]:
    """A digest as `digest --dry-run` shows it: each paper and the rules that matched it;
    a paper no rule matched, the liked paper it is close to; the papers left out as close
    to ones marked 👎; why the ranking is not the usual one today."""
    labels = digest.subscriber.labels
    lines = []
    for item in digest.items:
        if item.similar_to is None:
            why = ", ".join(name.text for name in rule_names(item.rules, labels))
        else:
            liked = clip(tidy(letters(item.similar_to)), SIMILAR_TITLE_CHARS)
            why = f"no rule matched; close to a paper they liked: “{liked}”"
        lines.append(_paper_line(item.paper, terminal_safe(why)))
    if dropped := len(digest.disliked):
        lines.append(
            f"  left out: {plural(dropped, 'paper')} their rules matched, close to ones they "
            "marked 👎:"
        )
        lines += [_paper_line(paper, "close to a 👎") for paper in digest.disliked]
    if digest.ranking_note:
        lines.append(f"  note: {terminal_safe(tidy(digest.ranking_note))}")
    return lines


def _paper_line(paper: Paper, why: str) -> str:
    title = tidy(letters(terminal_safe(paper.title)))
    return f"    {paper.id:<18} {title[:70]}  [{why}]"


def print_delivery(reports: Sequence[DeliveryReport], *, dry_run: bool = False) -> int:
    """Print one line per subscriber (and the papers, in a dry run); return the exit code."""
    failed = 0
    for r in reports:
        papers = plural(r.count, "paper")
        more = f" (+{r.omitted} left out)" if r.omitted else ""
        if r.status == "sent":
            click.echo(f"{r.subscriber} {r.target}: sent {papers}{more}")
        elif r.status == "written":
            click.echo(f"{r.subscriber} {r.target}: {papers}{more} -> {r.where}")
        elif r.status == "would-send":
            ranked = " (ranked by their 👍 / 👎)" if r.digest and r.digest.ranked else ""
            click.echo(f"{r.subscriber} {r.target}: would get {papers}{more}{ranked}")
            for line in preview_lines(r.digest) if r.digest else ():
                click.echo(line)
        elif r.status == "nothing":
            click.echo(f"{r.subscriber} {r.target}: no new matching papers")
        elif r.status == "queued":  # not sent yet: a `paperbell run` sends it
            click.echo(f"{r.subscriber} {r.target}: {papers} queued, not sent yet")
        elif r.status == "queued-elsewhere":
            click.echo(f"{r.subscriber} {r.target}: already queued by another run")
        elif r.status == "unrecorded":
            failed += 1
            click.echo(f"{r.subscriber} {r.target}: {papers} {r.error}", err=True)
        elif r.status == "skipped":
            click.echo(f"{r.subscriber}: skipped ({r.error})")
        elif r.status == "waiting":  # the relay's limits: sent by a later run, not a failure
            click.echo(f"{r.subscriber} {r.target}: {papers} queued, {r.error}")
        else:
            failed += 1
            click.echo(f"{r.subscriber} {r.target}: FAILED {r.error}", err=True)
    if not reports:
        click.echo("no subscribers")
    if dry_run:
        click.echo("dry run: nothing was sent or recorded")
    return EXIT_FAILED if failed else EXIT_OK
