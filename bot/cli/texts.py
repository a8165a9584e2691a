"""`paperbell summarize`: what a paper's summary and translation look like with the [llm]
model (or another, to compare), to tune the choice before subscribers see them.

It asks for the texts exactly as a digest run does (`bot.pipeline.texts.write_texts`: the
stored ones read, the others written, checked and stored, within the day's budget), so
what it shows is what the next digest shows, and costs nothing more there.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from bot.cli.secrets import require_secrets, secrets_of
from bot.cli.shell import (
    EXIT_FAILED,
    EXIT_OK,
    config_option,
    handle_errors,
    load_config,
    open_store,
)
from bot.config import DATABASE_URL
from bot.core.errors import ConfigError
from bot.core.languages import LanguageError, is_english, language_name, standard_tag
from bot.core.models import Digest, DigestGroup, DigestItem, Paper, Subscriber, split_arxiv_id
from bot.render.terminal import terminal_safe
from bot.render.text import letters, wrap

MAX_PAPERS = 20  # at once: this is a look, not a run


@click.command()
@config_option
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@click.option(
    "--language",
    metavar="TAG",
    help="Also translate the title and the summary into this language (a BCP 47 tag: zh, "
    "ja, de, es, ...).",
)
@click.option(
    "--model", metavar="NAME", help="Ask this model of the [llm] endpoint instead of its own."
)
@handle_errors
def summarize(
    config_path: Path, ids: tuple[str, ...], language: str | None, model: str | None
) -> None:
    """Show the summary (and, with --language, the translations) of stored papers by ID,
    as digests show them: written by the [llm] model, or read from the store when it
    already wrote them.

    \b
    paperbell summarize 2411.17700
    paperbell summarize 2411.17700 2411.18179 --language zh
    paperbell summarize 2411.17700 --model llama3.1:8b   # compare another model
    """
    if len(ids) > MAX_PAPERS:  # bad usage (exit 2), said before anything is read
        raise click.UsageError(f"at most {MAX_PAPERS} papers at once, not {len(ids)}")
    tag = None
    if language is not None:
        try:
            tag = standard_tag(language)
        except LanguageError as exc:
            raise click.BadParameter(f"{exc} (e.g. zh)", param_hint="'--language'") from None
        if is_english(tag):
            tag = None
    config = load_config(config_path)
    if config.llm is None:
        raise ConfigError(
            ["summarize needs an [llm] section: an OpenAI-compatible endpoint and its model"],
            source=str(config_path),
        )
    require_secrets(config, DATABASE_URL, *secrets_of(config, "summarize"))
    if model is not None:
        config = config.model_copy(update={"llm": config.llm.model_copy(update={"model": model})})
    store = open_store(config, create=False)  # no database: no paper to summarise
    wanted = []
    for text in ids:
        try:
            wanted.append(split_arxiv_id(text)[0])
        except ValueError:
            wanted.append(text.strip())  # a doi: or url: key, as stored
    found = store.papers.by_id(wanted)
    missing = [key for key in wanted if key not in found]
    papers = [found[key] for key in dict.fromkeys(wanted) if key in found]
    for key in missing:
        click.echo(f"{key}: not in the store (poll, backfill or `try` first)", err=True)
    if not papers:
        sys.exit(EXIT_FAILED)
    from bot.pipeline.texts import write_texts
    from bot.pipeline.wiring import text_model
    from bot.store import utcnow

    now = utcnow()
    reader = Subscriber(name="summarize", email=None, rules=(), summaries=True, language=tag)
    digest = Digest(
        subscriber=reader,
        digest_id="summarize",
        created=now,
        groups=(DigestGroup("", tuple(DigestItem(p, (), ()) for p in papers)),),
    )
    (written,), run = asyncio.run(write_texts(text_model(config), store, [digest], now=now))
    for paper in papers:
        _show(paper, written, tag)
    if line := run.line():
        click.echo(line)
    sys.exit(EXIT_FAILED if run.missing or missing else EXIT_OK)


def _show(paper: Paper, digest: Digest, language: str | None) -> None:
    """One paper's texts, each made safe for a terminal (a feed's or a model's text)."""
    texts = digest.texts.get(paper.id)

    def shown(text: str) -> str:
        return letters(terminal_safe(text))  # TeX as letters, as a digest shows it

    click.echo(terminal_safe(f"{paper.label}  {paper.primary_category or ''}"))
    click.echo(wrap(shown(" ".join(paper.title.split())), 78))
    if language is not None:
        click.echo(wrap(shown(texts.title if texts and texts.title else "(none)"), 78))
    click.echo("")
    if texts is not None and texts.summary:
        click.echo(f"summary ({terminal_safe(texts.summary_by or '')}):")
        click.echo(wrap(shown(texts.summary), 76, "  "))
    else:
        click.echo("summary: none (a digest shows the abstract)")
    if language is not None:
        name = language_name(language)
        if texts is not None and texts.text:
            click.echo(f"in {name}:")
            click.echo(wrap(shown(texts.text), 76, "  "))
        else:
            click.echo(f"in {name}: none (a digest shows the English only)")
    click.echo("")
