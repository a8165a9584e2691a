"""What every command shares: the `paperbell` group, logging with secrets masked, the config
option, the store, and the exit codes paperbell errors turn into.

Exit codes: 0 success; 1 a source, delivery or database failed (the others went on);
2 bad usage or an invalid config (nothing was done). The commands are added to the group by
`bot.cli`; this module knows none of them. Only the command line (with `config`) reads the
environment, and only this module configures logging (secrets masked in every log line:
`bot.core.redact`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shlex
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from bot import __version__
from bot.cli.secrets import database_url
from bot.config import Config, config_secrets
from bot.config import load_config as read_config
from bot.core.errors import (
    ConfigError,
    MissingSecrets,
    OutdatedSchema,
    PaperbellError,
    RuleError,
    StoreError,
)
from bot.core.redact import SecretFilter
from bot.store import Store

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C

# Masks secrets in every log line (installed on the handlers in main()): the well-known
# shapes from the start, each loaded config's own secret values as it is loaded.
SECRETS = SecretFilter()


def load_config(path: str | Path) -> Config:
    """Read the config file, and keep its secrets out of the logs from now on (a secret
    whose variable is not set is recorded; the command that uses it asks for it)."""
    config = read_config(path)
    SECRETS.add(config_secrets(config))
    return config


def handle_errors(func: F) -> F:
    """Turn paperbell errors into a message on stderr and a meaningful exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except MissingSecrets as exc:  # one line per variable to set
            for line in exc.problems:
                click.echo(f"error: {line}", err=True)
            sys.exit(EXIT_USAGE)
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
    """Open the database for this command; click closes it when the command ends. A
    database at an older schema is refused with the command that upgrades it (or upgraded,
    with `[database] auto_upgrade = true`)."""
    try:
        store = Store.open(database_url(config), upgrade=config.database.auto_upgrade)
    except OutdatedSchema as exc:
        raise StoreError(f"{exc.message}: run `{upgrade_command(config)}`") from None
    return click.get_current_context().with_resource(store)


def upgrade_command(config: Config) -> str:
    """The command line that upgrades this config's database."""
    where = f" -c {shlex.quote(str(config.path))}" if config.path is not None else ""
    return f"paperbell db upgrade{where}"


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


def log_progress(*, daemon: bool = False) -> None:
    """Log at INFO at least, for a command that runs until stopped (`run`, `serve`): what it
    serves, when it stops. The daemon's lines carry their time, and the libraries it polls
    and schedules with log their warnings only."""
    if not logging.getLogger().isEnabledFor(logging.INFO):
        logging.getLogger().setLevel(logging.INFO)
    if not daemon:
        return
    for handler in logging.getLogger().handlers:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for noisy in ("apscheduler", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def stop_on_signals() -> asyncio.Event:
    """An event that SIGINT (Ctrl-C) and SIGTERM set, for a command that serves until
    stopped; call it in the running loop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop.set)
    return stop
