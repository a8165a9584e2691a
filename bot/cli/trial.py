"""`paperbell try`: which stored (or bundled) papers a rule matches, best first, with the
hits highlighted, and how many per announcement day; with `--like`, the papers ranked by
closeness to liked ones, as a digest would rank them. A preview: it changes nothing and asks
no model.

The store, the ranking (bot.pipeline.similar) and the demo's papers are imported where they
are used: `try --demo` starts without the store and the config, `try --help` without all.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bot.cli.shell import RuleCommand, config_option, handle_errors, load_config, open_store
from bot.core.errors import PaperbellError
from bot.core.models import Paper
from bot.core.plurals import plural
from bot.match.digest import absent_facts, try_rule
from bot.render.terminal import render_trial, stars, terminal_safe
from bot.render.text import letters, tidy
from bot.rules import Rule, parse_rule

if TYPE_CHECKING:
    from bot.config import Config
    from bot.store import Store

TRY_DAYS = 30  # `try` without --since: this many announcement days up to the newest stored


@click.command("try", cls=RuleCommand)
@click.argument("rule_text", metavar="[RULE]", required=False)
@click.option(
    "--like",
    "liked",
    multiple=True,
    metavar="ID",
    help="Rank the papers (a RULE's matches, if one is given) by how close they are to "
    "this paper (an arXiv id, arXiv link or DOI of a paper tried or stored; repeat for "
    "more), best first, with the score and the liked paper each is closest to.",
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
    liked_keys = _liked_keys(liked)  # bad: exit 2, before any work
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
    if liked_keys:
        _try_like(liked_keys, rule, papers, where, limit, config=config, store=store)
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


def _liked_keys(liked: Sequence[str]) -> list[str]:
    """The papers `--like` names, as keys (an arXiv id, link or DOI, as `paperbell like`
    takes them); a value that names none is bad usage, shown as every command shows it."""
    if not liked:
        return []
    from bot.pipeline.likes import paper_keys

    keys, problems = paper_keys(liked)
    if problems:
        raise click.BadParameter("; ".join(problems), param_hint="'--like'")
    return keys


def _try_like(
    wanted: Sequence[str],
    rule: Rule | None,
    papers: Sequence[Paper],
    where: str,
    limit: int,
    *,
    config: Config | None = None,
    store: Store | None = None,
) -> None:
    """`try --like`: the papers (a rule's matches) by closeness to the liked ones (among
    the papers tried, else the stored ones), in the space a digest would use (the
    config's [embeddings], else the default)."""
    import asyncio

    from bot.pipeline.likes import papers_named
    from bot.pipeline.similar import liked_ranking
    from bot.store import utcnow

    seeds = papers_named(wanted, papers, store)
    if missing := [key for key in wanted if key not in seeds]:
        found = _not_found(missing, where, demo=store is None)
        raise click.BadParameter(found, param_hint="'--like'")
    unique = list({p.id: p for p in papers}.values())
    heading = f"rule: {rule.text}, " if rule is not None else ""
    shown_keys = ", ".join(wanted)
    candidates = unique
    if rule is not None:
        candidates = [item.paper for item in try_rule(rule, unique).items]
    liked_ids = {paper.id for paper in seeds.values()}
    to_rank = [p for p in candidates if p.id not in liked_ids]
    if not to_rank:
        click.echo(f"{heading}ranked by closeness to {shown_keys}\ntried on {where}\n")
        if rule is not None:
            for line in absent_facts(rule, unique):
                click.echo(f"note: {line}")
        click.echo(_nothing_to_rank(rule, matched=len(candidates), tried=len(unique)))
        return
    liked = list({paper.id: paper for paper in seeds.values()}.values())
    ranked_by = asyncio.run(liked_ranking(config, store, unique, liked, now=utcnow()))
    day, scored = ranked_by.day, ranked_by.scores
    if ranked_by.note:
        click.echo(f"note: {ranked_by.note}")
    row = {key: n for n, key in enumerate(day.ids)}
    ranked = sorted(to_rank, key=lambda p: -scored.score[row[p.id]])
    click.echo(f"{heading}ranked by closeness to {shown_keys}\ntried on {where}\n")
    shown = ranked if limit == 0 else ranked[:limit]
    for n, paper in enumerate(shown, 1):
        r = row[paper.id]
        closest = liked[int(scored.closest[r])]
        day_ = paper.announced.isoformat() if paper.announced else "-"
        click.echo(f"{n:>3}. {paper.id}  {day_}  {' '.join(paper.categories)}")
        click.echo(f"     {_shown_title(paper)}")
        near = _shown_title(closest)
        click.echo(f"     score {scored.score[r]:.2f}, closest to {closest.id}: {near}")
    if len(ranked) > len(shown):
        click.echo(f"... and {len(ranked) - len(shown)} more (--limit 0 shows them all)")
    if rule is not None:
        click.echo(f"{len(candidates):,} of {plural(len(unique), 'paper')} matched the rule")


def _not_found(keys: Sequence[str], where: str, *, demo: bool) -> str:
    """Why `--like` cannot rank by these papers: neither tried nor stored."""
    names = ", ".join(keys)
    if demo:
        return f"{names}: not among {where} (with --demo, --like names one of them)"
    return (
        f"{names}: not in the store (not among the {where}, nor stored from another "
        "day): `paperbell backfill --since YYYY-MM-DD` stores past days, or name a "
        "stored paper"
    )


def _nothing_to_rank(rule: Rule | None, *, matched: int, tried: int) -> str:
    """What `try --like` says when no paper is left to rank."""
    if rule is not None and not matched:
        return f"no paper matched the rule: 0 of {plural(tried, 'paper')}; nothing to rank"
    if rule is not None:
        return (
            f"the rule matched only the liked papers ({matched:,} of "
            f"{plural(tried, 'paper')}): nothing else to rank"
        )
    return "no paper besides the liked ones: nothing to rank"


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
