"""Commands loaded when first looked up: the `paperbell` group knows each command by where it
is (module and name) and by the first sentence of its help, so that `paperbell --help`,
`--version` and every command start without importing the others (and the libraries they
use). Click's "lazily loading subcommands" pattern, kept in the group's own `commands`
mapping, so that click's lookups, its "did you mean" suggestions and a caller's
`main.commands[name]` work unchanged.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import NamedTuple

import click


class LazyCommand(NamedTuple):
    """A command not imported yet: its module, its name there, and the first sentence of
    its help (what `paperbell --help` lists; tests/test_cli_startup.py keeps the two equal)."""

    module: str
    attribute: str
    short_help: str


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name; each one given as a `LazyCommand` is imported when it is
    first looked up, then handed to `ready` (which may add options to it) and kept."""

    def __init__(
        self,
        lazy: Mapping[str, LazyCommand],
        *,
        ready: Callable[[click.Command], None] = lambda command: None,
    ) -> None:
        self.lazy = dict(lazy)
        self.loaded: dict[str, click.Command] = {}
        self._ready = ready

    def __getitem__(self, name: str) -> click.Command:
        if name not in self.loaded:
            where = self.lazy[name]  # KeyError: no such command
            command = getattr(importlib.import_module(where.module), where.attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{where.module}.{where.attribute} is not a click command")
            self._ready(command)
            self.loaded[name] = command
        return self.loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self.lazy.pop(name, None)
        self.loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:  # without importing it
        return name in self.lazy or name in self.loaded

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self.lazy, *self.loaded]))

    def __len__(self) -> int:
        return len(self.lazy.keys() | self.loaded.keys())

    def short_help(self, name: str, limit: int) -> str:
        """The command's line in its group's --help, `limit` characters at most: from the
        command when it is imported, else from its `LazyCommand`."""
        if name in self.loaded:
            return self.loaded[name].get_short_help_str(limit)
        # A stand-in with that help cuts it as click cuts the command's own.
        return click.Command(name, help=self.lazy[name].short_help).get_short_help_str(limit)

    def hidden(self, name: str) -> bool:
        """Whether the command is left out of --help (only an imported one can be)."""
        return name in self.loaded and self.loaded[name].hidden
