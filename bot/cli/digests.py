"""The paper commands: `poll` and `backfill` fill the store, `digest` sends what it holds,
`try` shows what a rule would match in it.

Each command runs one stage of `bot.pipeline` once and prints its reports. The pipeline
(slack_sdk, aiosmtplib, httpx) is imported inside the commands that run it: the other
commands start without it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click
from tqdm import tqdm

from bot.cli.secrets import require_secrets, secrets_of
from bot.cli.shell import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    RuleCommand,
    config_option,
    handle_errors,
    load_config,
    open_store,
)
from bot.config import DATABASE_URL, SECRET_KEY, Config
from bot.core.errors import ConfigError, PaperbellError
from bot.core.links import placeholder_url
from bot.core.models import Paper
from bot.core.plurals import plural
from bot.match.digest import absent_facts, try_rule
from bot.render.terminal import render_trial, stars, terminal_safe
from bot.render.text import letters, tidy
from bot.render.view import rule_names
from bot.rules import Rule, parse_rule
from bot.store import Store, utcnow

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
    from bot.pipeline import build_fetcher, build_sources
    from bot.pipeline.backfill import backfill as run_backfill
    from bot.pipeline.backfill import days_done, plan
    from bot.sources.http import make_client

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
@click.option("--dry-run", is_flag=True, help="Print who would get which papers; change nothing.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write each digest into DIR instead of sending (an email as .eml, and its HTML "
    "part as .html to open in a browser; Slack as .json); record no delivery.",
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
    from bot.pipeline import DeliveryRequest, build_channels, deliver

    config = load_config(config_path)
    mode: Mode = "dry-run" if dry_run else "send" if out_dir is None else "files"
    if mode == "send":  # a preview (--dry-run, --out) sends nothing: it needs no secret
        require_secrets(config, DATABASE_URL, *secrets_of(config, "digest"))
    store = open_store(config, create=mode == "send")  # a preview makes no database
    request = DeliveryRequest(mode=mode, only=only, since=since.date() if since else None)
    texts: list[TextsRun] = []
    reports = asyncio.run(
        deliver(
            config,
            store,
            build_channels(config, out_dir=out_dir, store=store),
            request,
            now=utcnow(),
            clock=utcnow,
            on_texts=texts.append,
        )
    )
    code = print_delivery(reports, dry_run=dry_run)
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


def print_delivery(reports: Sequence[DeliveryReport], *, dry_run: bool = False) -> int:
    """Print one line per subscriber (and the papers, in a dry run); return the exit code."""
    failed = 0
    for r in reports:
        papers = plural(r.count, "paper")
        more = f" (+{r.omitted} over max_papers)" if r.omitted else ""
        if r.status == "sent":
            click.echo(f"{r.subscriber} {r.target}: sent {papers}{more}")
        elif r.status == "written":
            click.echo(f"{r.subscriber} {r.target}: {papers}{more} -> {r.where}")
        elif r.status == "would-send":
            click.echo(f"{r.subscriber} {r.target}: would get {papers}{more}")
            labels = r.digest.subscriber.labels if r.digest else {}
            for item in r.digest.items if r.digest else ():
                rules = ", ".join(name.text for name in rule_names(item.rules, labels))
                title = tidy(letters(terminal_safe(item.paper.title)))
                click.echo(f"    {item.paper.id:<18} {title[:70]}  [{rules}]")
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


TRY_DAYS = 30  # `try` without --since: this many announcement days up to the newest stored


@click.command("try", cls=RuleCommand)
@click.argument("rule_text", metavar="[RULE]", required=False)
@click.option(
    "--like",
    "liked",
    multiple=True,
    metavar="ID",
    help="Rank the papers (a RULE's matches, if one is given) by how close they are to "
    "this paper (an arXiv id among the papers tried; repeat for more), best first, with "
    "the score and the liked paper each is closest to.",
)
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
    help="Try the rule on the real papers bundled with paperbell, as the demo stores them "
    "(the arXiv listing of 28 Nov 2024, all of arXiv, and the Hugging Face Daily Papers of "
    "21 Aug 2026) instead of the stored papers; needs no config file.",
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
@click.option(
    "--summaries",
    "show_summaries",
    is_flag=True,
    help="Show each paper's summary instead of its abstract where one is stored (written "
    "by the [llm] model for a digest) or Hugging Face gives one; asks no model.",
)
@handle_errors
def try_(
    rule_text: str | None,
    liked: tuple[str, ...],
    config_path: Path,
    since: datetime | None,
    use_demo: bool,
    limit: int,
    color: bool | None,
    show_summaries: bool,
) -> None:
    """Show which papers RULE matches, best first, with the hits highlighted, and how many
    per announcement day: tune a rule before subscribing with it.

    Examples: paperbell try '"diffusion policy" cat:cs.RO' --demo;
    paperbell try 'au:"Yann LeCun" OR ti:jepa' -c config.toml --since 2026-10-01;
    paperbell try '-survey robot*' --demo (a RULE may start with "-", before or after
    the options); paperbell try --like 2411.18179 --like 2411.17700 --demo
    """
    if rule_text is None and not liked:
        raise click.UsageError("give a RULE, or --like ID (or both)")
    rule = parse_rule(rule_text) if rule_text is not None else None  # bad: caret, exit 2
    model = None
    store = None
    config = None
    if use_demo:
        from bot.demo import DEMO_DAY, DEMO_HF_DAY, demo_papers  # only `try --demo` needs it

        papers = demo_papers()
        if since is not None:
            papers = [p for p in papers if p.announced and p.announced >= since.date()]
        where = f"the bundled arXiv listing of {DEMO_DAY} and Hugging Face day of {DEMO_HF_DAY}"
    else:
        config = load_config(config_path)
        store = open_store(config, create=False, instead="; or try the rule with --demo")
        model = config.llm.model if config.llm else None
        latest = store.papers.latest_announcement()
        if latest is None:
            raise PaperbellError(
                "no papers are stored yet",
                hint="run `paperbell poll` first, or try the rule on the bundled papers "
                "with --demo",
            )
        first = since.date() if since else latest - timedelta(days=TRY_DAYS - 1)
        papers = store.papers.announced_since(first)
        where = f"stored papers announced {first} to {latest}"
    if color is None:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    mark = (lambda text: click.style(text, fg="yellow", bold=True)) if color else stars
    if liked:
        _try_like(liked, rule, papers, where, limit, config=config, store=store)
        return
    assert rule is not None
    trial = try_rule(rule, papers)
    click.echo(f"rule: {rule.text}\ntried on {where}", color=color)
    for line in absent_facts(rule, papers):  # a part that cannot match: say so, not a bare 0
        click.echo(f"note: {line}")
    click.echo("")
    width = shutil.get_terminal_size((100, 24)).columns
    shown = trial.items if limit == 0 else trial.items[:limit]
    summaries = stored_summaries([i.paper for i in shown], store, model) if show_summaries else {}
    lines = render_trial(trial, mark=mark, limit=limit, width=min(width, 120), summaries=summaries)
    for line in lines:
        click.echo(line, color=color)


def _try_like(
    liked: Sequence[str],
    rule: Rule | None,
    papers: Sequence[Paper],
    where: str,
    limit: int,
    *,
    config: Config | None = None,
    store: Store | None = None,
) -> None:
    """`try --like`: the papers (a rule's matches) by closeness to the liked ones, in the
    space a digest would use (the config's [embeddings], else the default)."""
    from bot.pipeline.similar import liked_ranking

    by_id = {p.id: p for p in papers}
    wanted = [key.strip() for key in liked]
    unknown = [key for key in wanted if key not in by_id]
    if unknown:
        raise PaperbellError(
            f"not among the {len(by_id):,} papers tried: {', '.join(unknown)}",
            hint="--like takes an arXiv id (2411.18179, no version) of a paper stored "
            "(or bundled, with --demo); `paperbell backfill` stores past days",
        )
    wanted = list(dict.fromkeys(wanted))
    unique = list(by_id.values())
    seeds = [by_id[key] for key in wanted]
    ranked_by = asyncio.run(liked_ranking(config, store, unique, seeds, now=utcnow()))
    day, scored = ranked_by.day, ranked_by.scores
    if ranked_by.note:
        click.echo(f"note: {ranked_by.note}")
    row = {key: n for n, key in enumerate(day.ids)}
    candidates = unique
    if rule is not None:
        candidates = [item.paper for item in try_rule(rule, unique).items]
    ranked = sorted(
        (p for p in candidates if p.id not in wanted), key=lambda p: -scored.score[row[p.id]]
    )
    heading = f"rule: {rule.text}, " if rule is not None else ""
    click.echo(f"{heading}ranked by closeness to {', '.join(wanted)}\ntried on {where}\n")
    shown = ranked if limit == 0 else ranked[:limit]
    for n, paper in enumerate(shown, 1):
        r = row[paper.id]
        closest = wanted[int(scored.closest[r])]
        day_ = paper.announced.isoformat() if paper.announced else "-"
        click.echo(f"{n:>3}. {paper.id}  {day_}  {' '.join(paper.categories)}")
        click.echo(f"     {_shown_title(paper)}")
        near = _shown_title(by_id[closest])
        click.echo(f"     score {scored.score[r]:.2f}, closest to {closest}: {near}")
    if len(ranked) > len(shown):
        click.echo(f"... and {len(ranked) - len(shown)} more (--limit 0 shows them all)")


def _shown_title(paper: Paper) -> str:
    """A title as the terminal shows it: TeX as letters, one line, no control character."""
    return terminal_safe(tidy(letters(paper.title)))


def stored_summaries(
    papers: Sequence[Paper], store: Store | None, model: str | None
) -> dict[str, tuple[str, str]]:
    """Each paper's summary as a digest shows it, and who wrote it: the [llm] model's, if
    it wrote one already, else Hugging Face's. Asks no model (`try` is a preview)."""
    from bot.pipeline.texts import known_summaries
    from bot.texts.answers import shown_summary
    from bot.texts.prompts import summary_request

    requests = [r for p in papers if (r := summary_request(p)) is not None]
    written: dict[tuple[str, int, str, str], str] = {}
    if store is not None and model is not None:
        written = store.texts.get(((r.key, r.source_hash) for r in requests), model)
    return {
        paper_id: (shown_summary(text), by)
        for (paper_id, _), (text, by) in known_summaries(papers, written, model).items()
    }
