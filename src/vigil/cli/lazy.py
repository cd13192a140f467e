"""Commands loaded on first use, so ``vigil --help`` and each command import only what they need.

A group's ``commands`` becomes a :class:`LazyCommands` mapping: its names are known up front
(with their short help, for the group's ``--help``), and a command's module is imported only
when the command is looked up to run, or its own help is shown.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Callable

import click


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives and what its group's ``--help`` says about it.

    ``summary`` is the first paragraph of the command's help text (the test of the command
    table checks it against the real command). ``subcommands`` are further lazy commands
    attached to this one, which must then be a group.
    """

    module: str
    attribute: str
    summary: str
    subcommands: Mapping[str, LazyCommand] = field(default_factory=dict)

    def load(self) -> click.Command:
        command = getattr(importlib.import_module(self.module), self.attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.module}.{self.attribute} is not a click command")
        return command


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name; a lazy one is imported (and ``prepare``-d) on first access.

    Iterating yields names without importing anything; ``values()`` and ``items()`` import
    every command, as a walk over the whole tree must.
    """

    def __init__(
        self,
        lazy: Mapping[str, LazyCommand],
        prepare: Callable[[click.Command, LazyCommand], None],
        loaded: Mapping[str, click.Command] | None = None,
    ) -> None:
        self._lazy = dict(lazy)
        self._prepare = prepare
        self._loaded: dict[str, click.Command] = dict(loaded or {})

    def summary(self, name: str) -> str | None:
        """The short-help source of a command not imported yet, else ``None``."""
        if name in self._loaded or name not in self._lazy:
            return None
        return self._lazy[name].summary

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            spec = self._lazy[name]  # KeyError for an unknown name, as a dict would
            command = spec.load()
            self._prepare(command, spec)
            self._loaded[name] = command
        return self._loaded[name]

    def get(self, name: str, default: click.Command | None = None) -> click.Command | None:  # type: ignore[override]
        # Not Mapping.get: a KeyError raised while importing a command must not read as
        # "no such command".
        return self[name] if name in self else default

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._lazy.pop(name, None)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self._loaded and name not in self._lazy:
            raise KeyError(name)
        self._loaded.pop(name, None)
        self._lazy.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._loaded
        yield from (name for name in self._lazy if name not in self._loaded)

    def __len__(self) -> int:
        return len(self._loaded.keys() | self._lazy.keys())

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._lazy


class LazyGroup(click.Group):
    """A group whose ``--help`` lists lazy commands from their summaries, without importing them."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        commands = self.commands
        if not isinstance(commands, LazyCommands):
            super().format_commands(ctx, formatter)
            return
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            summary = commands.summary(name)
            command = click.Command(name, help=summary) if summary is not None else self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command))
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in rows])
