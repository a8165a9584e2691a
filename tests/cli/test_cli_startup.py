"""The command starts at once: `paperbell --help` and `--version` import no command and none
of the heavy libraries, `paperbell COMMAND --help` only that command, and the group's list
of commands (kept in `bot.cli.COMMANDS`, so that listing them imports none) says what each
command's own help says."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import click
import pytest
from support.cli import loaded, modules_after

import bot.cli
from bot.cli import COMMANDS
from bot.cli.shell import Group

# Each is imported only by a command that uses it (pydantic and the rest of the config's
# are allowed to a command's own --help: its module may read the config's names).
HEAVY = (
    "sqlalchemy",
    "alembic",
    "sqlmodel",
    "numpy",
    "scipy",
    "sklearn",
    "apprise",
    "openai",
    "aiohttp",
    "cryptography",
    "slack_sdk",
    "uvicorn",
    "starlette",
    "aiosmtplib",
    "tqdm",
)
# ... and these not even by the group's --help and --version.
LIGHTER = ("pydantic", "httpx", "jinja2", "feedparser", "langcodes")
# A command module that uses another's helpers (`status` words a subscriber's state as `list`).
SHARED = {"bot.cli.reports": {"bot.cli.people"}}
COMMAND_MODULES = sorted({entry.module for entry in COMMANDS.values()})
WHOLE = 10**6  # a short help this long is never cut: the whole first sentence


@pytest.mark.parametrize(
    "code",
    [
        "import bot.cli",
        "from bot.cli import main; main(['--version'])",
        "from bot.cli import main; main(['--help'])",
        # python -m bot.cli --help
        "import runpy; sys.argv[1:] = ['--help']; runpy.run_module('bot.cli', run_name='__main__')",
    ],
)
def test_help_and_version_import_no_command_and_no_heavy_library(code: str, tmp_path: Path) -> None:
    modules = modules_after(code, cwd=tmp_path)
    assert loaded(modules, HEAVY + LIGHTER) == []
    assert [m for m in COMMAND_MODULES if m in modules] == []
    assert {m for m in modules if m.startswith("bot.")} <= {
        "bot.cli",
        "bot.cli.lazy",
        "bot.cli.shell",
        "bot.core",
        "bot.core.checks",
        "bot.core.errors",
        "bot.core.redact",
    }


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_s_help_imports_that_command_only(name: str, tmp_path: Path) -> None:
    code = f"from bot.cli import main; main([{name!r}, '--help'])"
    modules = modules_after(code, cwd=tmp_path)
    assert loaded(modules, HEAVY) == []
    own = COMMANDS[name].module
    others = {m for m in COMMAND_MODULES if m in modules} - {own}
    assert others == SHARED.get(own, set())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_listed_help_is_the_command_s_own(name: str) -> None:
    """The table's line is the first sentence of the command's help: when a docstring
    changes, so does the table."""
    entry = COMMANDS[name]
    command = getattr(importlib.import_module(entry.module), entry.attribute)
    assert command.name == name
    assert entry.short_help == command.get_short_help_str(limit=WHOLE)


def test_every_command_is_in_the_table() -> None:
    """Each command a module of bot.cli makes is in `COMMANDS` (or in a group that is)."""
    made: set[int] = set()
    found: dict[int, str] = {}
    for info in pkgutil.iter_modules(bot.cli.__path__):
        if info.name == "__main__":
            continue
        module = importlib.import_module(f"bot.cli.{info.name}")
        for attribute, value in vars(module).items():
            if isinstance(value, click.Command) and value.name is not None:
                found[id(value)] = f"{module.__name__}.{attribute}"
    for entry in COMMANDS.values():
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        made.add(id(command))
        made.update(id(sub) for sub in getattr(command, "commands", {}).values())
    made.add(id(bot.cli.main))
    assert sorted(where for key, where in found.items() if key not in made) == []


@pytest.mark.parametrize("width", [50, 62, 80, 120])
def test_the_list_of_commands_reads_as_click_writes_it(width: int) -> None:
    """Listed from the table (nothing imported) or from the commands themselves, the
    group's --help says the same, however wide the terminal."""
    lazy = Group("paperbell")
    lazy.add_lazy_commands(COMMANDS)
    eager = click.Group("paperbell")
    for name, entry in COMMANDS.items():
        eager.add_command(getattr(importlib.import_module(entry.module), entry.attribute), name)
    written = []
    for group in (lazy, eager):
        formatter = click.HelpFormatter(width=width)
        group.format_commands(click.Context(group), formatter)
        written.append(formatter.getvalue())
    assert lazy.commands.loaded == {}  # listing imported none
    assert written[0] == written[1]
    assert written[0].count("\n") == len(COMMANDS) + 1


def test_a_lazy_command_is_looked_up_like_any_other() -> None:
    """click's own lookups (and its suggestions for a mistyped name) see every command."""
    group = Group("paperbell")
    group.add_lazy_commands(COMMANDS)
    assert "try" in group.commands and "nosuch" not in group.commands
    assert group.list_commands(click.Context(group)) == sorted(COMMANDS)
    assert group.commands.loaded == {}
    command = group.get_command(click.Context(group), "try")
    assert command is not None and command.name == "try"
    assert any("--verbose" in param.opts for param in command.params)  # given -v
    assert group.get_command(click.Context(group), "nosuch") is None
    with pytest.raises(click.UsageError) as mistyped:
        group.resolve_command(click.Context(group), ["subscrbe"])
    assert "Did you mean one of: 'subscribe', 'unsubscribe'?" in mistyped.value.format_message()
