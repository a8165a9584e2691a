"""What every command shares: the `paperbell` group, logging with secrets masked, the config
option, the store, and the exit codes paperbell errors turn into.

Exit codes: 0 success; 1 a source, delivery or database failed (the others went on);
2 bad usage or an invalid config (nothing was done); 130 interrupted (Ctrl-C). Output cut
short by its reader (`paperbell list | head`) ends the command quietly (exit 1: not all of
it was read). `-v` works before the command and after it (`paperbell poll -v`): the group
gives every command it is handed the option. The commands are added to the group by
`bot.cli`; this module knows none of them. Only the command line (with `config`) reads the
environment, and only this module configures logging (secrets masked in every log line:
`bot.core.redact`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shlex
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from gettext import gettext as _
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from bot import __version__
from bot.cli.lazy import LazyCommand, LazyCommands
from bot.core.checks import redact_url
from bot.core.errors import (
    ConfigError,
    MissingSecrets,
    OutdatedSchema,
    PaperbellError,
    RuleError,
    StoreError,
)
from bot.core.redact import SecretFilter

if TYPE_CHECKING:  # `--help` and `--version` start without these (and what they import)
    import asyncio

    from bot.config import Config
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
    from bot.config import config_secrets
    from bot.pipeline.wiring import channel_secrets
    from bot.pipeline.wiring import load_config as read_config

    config = read_config(path)
    SECRETS.add(config_secrets(config))
    SECRETS.add(channel_secrets(config))
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
        except BrokenPipeError:  # the reader went away (`| head`): click ends quietly
            raise
        except OSError as exc:  # a folder that cannot be created, a read-only file ...
            where = f" {exc.filename}" if exc.filename else ""
            click.echo(f"error: cannot write{where}: {exc.strerror or exc}", err=True)
            sys.exit(EXIT_FAILED)
        except KeyboardInterrupt:  # Ctrl-C: no traceback, the shells' exit code
            click.echo("\ninterrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)

    return wrapper  # type: ignore[return-value]


class RuleCommand(click.Command):
    """A command that takes rules as arguments: a rule may start with "-" (`-survey robot`,
    as the manual teaches), so a word that starts with "-" and is none of the command's
    options is an argument, wherever it stands (`try '-survey robot' --demo`, `try --demo
    '-survey robot'`). Only the options' exact names count (`-c`, `--limit`, `--since=...`,
    a run of flags such as `-vv`): `-chair` is a rule, not `-c hair`. A `--` is accepted
    and not needed (the options after it still count: `try -- '-survey robot' --demo`);
    an unknown `--word` before it stays an unknown option (no rule starts with two
    dashes), after it an argument."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, arguments_last(args, option_arity(self, ctx)))


def option_arity(command: click.Command, ctx: click.Context) -> dict[str, int]:
    """Each option name of `command` (help included) with the number of values it takes."""
    found = {}
    for param in command.get_params(ctx):
        if isinstance(param, click.Option):
            takes = 0 if param.is_flag or param.count else param.nargs
            for name in (*param.opts, *param.secondary_opts):
                found[name] = takes
    return found


def arguments_last(args: Sequence[str], options: Mapping[str, int]) -> list[str]:
    """`args` with the options (and their values) first and every argument after a `--`,
    in their order: a word that starts with "-" but is none of `options` (each name with
    the number of values it takes) is an argument. A `--` in `args` is taken and not
    needed: after it, an option's exact name is still the option (no rule is one: `try --
    '-survey robot' --demo`), any other word an argument, as is an option's name with too
    few words after it for its values (the rule `-c`, which its parser refuses)."""
    flags = {name[1] for name, takes in options.items() if takes == 0 and len(name) == 2}
    leading: list[str] = []
    arguments: list[str] = []
    ended = False  # after a `--`
    index = 0
    while index < len(args):
        word = args[index]
        index += 1
        if word == "--" and not ended:
            ended = True
            continue
        name, attached = word.partition("=")[0], "=" in word
        takes = 0 if attached else options.get(word, 0)
        if ended and index + takes > len(args):  # a name without its values: a rule (`-c`)
            arguments.append(word)
        elif word in options or (word.startswith("--") and name in options and attached):
            leading.extend(args[index - 1 : index + takes])
            index += takes
        elif ended:
            arguments.append(word)
        elif word.startswith("--") and len(word) > 2:
            leading.append(word)  # an unknown option: click says so, with a suggestion
        elif len(word) > 2 and word[0] == "-" and set(word[1:]) <= flags:
            leading.append(word)  # a run of flags: -vv
        else:
            arguments.append(word)
    return [*leading, "--", *arguments] if arguments else leading


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


def open_store(config: Config, *, create: bool = True, instead: str = "") -> Store:
    """Open the database for this command; click closes it when the command ends. A
    database at an older schema is refused with the command that upgrades it (or upgraded,
    with `[database] auto_upgrade = true`). A command that only reads (`create` false)
    makes no database: where there is none yet, it says so and how to start (or, `instead`,
    what else to do)."""
    from bot.cli.secrets import database_url
    from bot.store import Store, schema_state

    url = database_url(config)
    if not create and not schema_state(url).exists:
        where = f" -c {shlex.quote(str(config.path))}" if config.path is not None else ""
        raise StoreError(
            f"there is no database yet ({redact_url(url)})",
            hint=f"start with `paperbell poll{where}`, which makes it and fetches the papers "
            f"(`paperbell subscribe{where} ...` makes it too){instead}",
        )
    try:
        store = Store.open(url, upgrade=config.database.auto_upgrade)
    except OutdatedSchema as exc:
        raise StoreError(f"{exc.message}: run `{upgrade_command(config)}`") from None
    return click.get_current_context().with_resource(store)


def upgrade_command(config: Config) -> str:
    """The command line that upgrades this config's database."""
    where = f" -c {shlex.quote(str(config.path))}" if config.path is not None else ""
    return f"paperbell db upgrade{where}"


VERBOSE_HELP = "More log output (-vv for debug), before or after the command."


def _more_verbose(ctx: click.Context, param: click.Parameter, value: int | None) -> None:
    """`-v` after the command: each one logs one level more than the group set."""
    if value:
        root = logging.getLogger()
        root.setLevel(max(root.getEffectiveLevel() - 10 * value, logging.DEBUG))


def verbose_option() -> click.Option:
    """The `-v` every command takes (besides the group's own)."""
    return click.Option(
        ["-v", "--verbose"],
        count=True,
        expose_value=False,
        callback=_more_verbose,
        help=VERBOSE_HELP,
    )


class Group(click.Group):
    """A group whose every command takes `-v` after its name too, named `paperbell` however
    it was started (`python -m bot.cli` included), so the usage lines and shell completion
    (`_PAPERBELL_COMPLETE`) say `paperbell`; it also ends quietly when its reader goes
    away (a closed pipe). Its commands may be lazy (`add_lazy_commands`): each is imported
    when it runs or its help is asked for, and the group's --help imports none."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        given = self.commands
        self.commands: LazyCommands = LazyCommands({}, ready=_give_verbose)
        for name, command in given.items():
            self.add_command(command, name)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        _give_verbose(cmd)
        super().add_command(cmd, name)

    def add_lazy_commands(self, commands: Mapping[str, LazyCommand]) -> None:
        """Add commands by where they are, each imported when first looked up."""
        self.commands.lazy.update(commands)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list of commands in --help, as click writes it, the commands not imported."""
        names = [name for name in self.list_commands(ctx) if not self.commands.hidden(name)]
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)  # click's own
        with formatter.section(_("Commands")):
            formatter.write_dl([(name, self.commands.short_help(name, limit)) for name in names])

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("prog_name", "paperbell")
        try:
            return super().main(*args, **kwargs)
        finally:
            _flush_quietly()


def _give_verbose(cmd: click.Command) -> None:
    """Add `-v` to a command, and to each command of a group, once."""
    if not any("--verbose" in param.opts for param in cmd.params):
        cmd.params.append(verbose_option())
    for sub in getattr(cmd, "commands", {}).values():
        _give_verbose(sub)


def _flush_quietly() -> None:
    """Flush stdout; a reader that went away (`paperbell list | head`) is no error: what is
    left goes nowhere, so Python's own flush at exit does not complain either."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # ValueError: closed already
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="paperbell")
@click.option("-v", "--verbose", count=True, help=VERBOSE_HELP)
def main(verbose: int) -> None:
    """paperbell: tells researchers about the new papers that matter to them.

    Reads its sources (each a kind of [[sources]]: arXiv's daily listings, `arxiv`; arXiv
    API searches, `arxiv_query`; Hugging Face Daily Papers, `huggingface`; any RSS or Atom
    feed, `feed`), matches the new papers against each subscriber's rules and sends each
    subscriber a personalised digest: by email, in Slack, or to chat services and push servers
    through Apprise (ntfy, Discord, Telegram, Matrix ...). Start with `paperbell demo`
    (offline, no account) or `paperbell init` to write a config file.
    """
    level = max(logging.WARNING - 10 * verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)  # each run its own (basicConfig sets it once)
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
    for noisy in ("httpx",):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def stop_on_signals() -> asyncio.Event:
    """An event that SIGINT (Ctrl-C) and SIGTERM set, for a command that serves until
    stopped; call it in the running loop."""
    import asyncio

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop.set)
    return stop
