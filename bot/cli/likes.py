"""The commands for the papers a subscriber likes and dislikes: `like`, `dislike`, `unlike`
(remove a verdict) and `likes` (list them, with where each came from).

A config file's subscriber says what it likes in the file (`like`, `dislike`, `like_file`);
these commands change a database subscriber's verdicts, and list anyone's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bot.cli.shell import config_option, handle_errors, load_config, open_store
from bot.config import Config
from bot.core.errors import PaperbellError
from bot.core.models import Verdict
from bot.core.plurals import plural

if TYPE_CHECKING:
    from bot.store import Store, SubscriberRecord


def _declared(name: str) -> PaperbellError:
    return PaperbellError(
        f"subscriber {name!r} is declared in the config file: add the papers to its "
        "`like` or `dislike` list there (or to its like_file)",
        hint="change it in the config file",
    )


def _changeable(config: Config, name: str) -> None:
    """Refuse a config file's subscriber (before any database is opened): its verdicts
    are changed in the file."""
    if name in {s.name for s in config.subscribers}:
        raise _declared(name)


def _subscriber(store: Store, name: str, *, changing: bool) -> SubscriberRecord:
    """The stored subscriber; `changing` its verdicts: one of the database (the callers
    refused the config file's first, `_changeable`)."""
    record = store.subscribers.get(name)
    if changing and record is not None and record.origin == "config":
        raise _declared(name)
    if record is None:
        raise PaperbellError(f"no subscriber named {name!r}", hint="see `paperbell list`")
    return record


def _give(config_path: Path, name: str, ids: tuple[str, ...], verdict: Verdict) -> None:
    from bot.pipeline import build_fetcher, build_sources
    from bot.pipeline.likes import Given, give_verdicts, paper_keys
    from bot.sources.http import make_client
    from bot.store import utcnow

    keys, problems = paper_keys(ids)
    if problems:
        raise click.UsageError("\n".join(problems))
    config = load_config(config_path)
    _changeable(config, name)
    store = open_store(config, create=False)  # no database: no subscriber of it either
    record = _subscriber(store, name, changing=True)

    async def go() -> Given:
        async with make_client() as client:
            return await give_verdicts(
                store,
                record.id,
                keys,
                verdict,
                "command",
                now=utcnow(),
                fetcher=build_fetcher(config, client),
                sources=build_sources(config),
            )

    given = asyncio.run(go())
    other = "dislike" if verdict == "like" else "like"
    for item in given.found:
        title = f": {item.title}" if item.title else " (title not known yet)"
        if item.key in given.repeated:
            click.echo(f"{item.key} was already {verdict}d{title}")
        elif item.key in given.replaced:
            click.echo(f"{verdict}d {item.key} in place of the earlier {other}{title}")
        else:
            click.echo(f"{verdict}d {item.key}{title}")
    if given.without_text:
        _say_without_text(name, given.without_text, given.failure)
    click.echo(f"{name} now has {plural(len(store.feedback.of(record.id)), 'verdict')}")


def _say_without_text(name: str, keys: list[str], failure: str | None) -> None:
    """Why some papers have no title yet, and when they get one."""
    papers = ", ".join(keys)
    if failure is not None:
        click.echo(
            f"note: the title and abstract of {papers} could not be fetched from the arXiv "
            f"API ({failure}); the verdict is kept, and they are filled in later: when "
            f"paperbell stores the paper, or when this command is run again",
            err=True,
        )
    else:
        click.echo(
            f"note: the arXiv API has no paper {papers}: check the id; the verdict is kept "
            f"(`paperbell unlike {name} {keys[0]}` removes it)",
            err=True,
        )


@click.command()
@config_option
@click.argument("name")
@click.argument("ids", nargs=-1, required=True)
@handle_errors
def like(config_path: Path, name: str, ids: tuple[str, ...]) -> None:
    """Tell paperbell that NAME likes these papers: digests then add papers like them.

    IDS: arXiv ids (2411.18179, 2411.18179v2), arXiv links, or DOIs (doi:10.1101/…)."""
    _give(config_path, name, ids, "like")


@click.command()
@config_option
@click.argument("name")
@click.argument("ids", nargs=-1, required=True)
@handle_errors
def dislike(config_path: Path, name: str, ids: tuple[str, ...]) -> None:
    """Tell paperbell that NAME dislikes these papers: papers like them rank lower.

    IDS: arXiv ids (2411.18179, 2411.18179v2), arXiv links, or DOIs (doi:10.1101/…)."""
    _give(config_path, name, ids, "dislike")


@click.command()
@config_option
@click.argument("name")
@click.argument("ids", nargs=-1, required=True)
@handle_errors
def unlike(config_path: Path, name: str, ids: tuple[str, ...]) -> None:
    """Remove NAME's verdict (like or dislike) on these papers.

    IDS: arXiv ids (2411.18179, 2411.18179v2), arXiv links, or DOIs (doi:10.1101/…)."""
    from bot.pipeline.likes import paper_keys

    keys, problems = paper_keys(ids)
    if problems:
        raise click.UsageError("\n".join(problems))
    config = load_config(config_path)
    _changeable(config, name)
    store = open_store(config, create=False)  # no database: no verdict to remove
    record = _subscriber(store, name, changing=True)
    missing = []
    for key in keys:
        if store.feedback.remove(record.id, key):
            click.echo(f"removed {name}'s verdict on {key}")
        else:
            missing.append(key)
    if missing:
        raise PaperbellError(
            f"{name} has no verdict on {', '.join(missing)}", hint=f"see `paperbell likes {name}`"
        )


@click.command()
@config_option
@click.argument("name")
@handle_errors
def likes(config_path: Path, name: str) -> None:
    """List the papers NAME likes and dislikes, and where each verdict came from."""
    from bot.pipeline.likes import sync_declared_likes, verdict_lines
    from bot.store import utcnow

    config = load_config(config_path)
    store = open_store(config, create=False)  # reads: makes no database
    declared = name in {s.name for s in config.subscribers}
    if declared:
        store.subscribers.sync_config(config.declared_subscribers(), now=utcnow())
        report = sync_declared_likes(config, store, now=utcnow())
        for problem in report.problems:
            click.echo(f"warning: {problem}", err=True)
    record = _subscriber(store, name, changing=False)
    feedback = store.feedback.of(record.id)
    if not feedback:
        where = (
            f"add papers to its `like` or `dislike` list (or a `like_file`) in {config_path}"
            if declared or record.origin == "config"
            else f"`paperbell like {name} ID` adds one"
        )
        click.echo(f"{name} has liked and disliked nothing yet: {where}")
        return
    liked = sum(1 for f in feedback if f.liked)
    click.echo(f"{name}: {liked:,} liked, {len(feedback) - liked:,} disliked")
    for line in verdict_lines(feedback):
        click.echo(f"  {line}")
