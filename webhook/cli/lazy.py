"""Modules imported on first use, for heavy imports that most commands never need."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import click


class _LazyModule(ModuleType):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self.__name__)
        return getattr(self._module, attr)


def lazy_module(name: str) -> ModuleType:
    """A stand-in for `import name` that imports it when an attribute is first read."""
    return _LazyModule(name)


class LazyGroup(click.Group):
    """A click group whose subcommands live in modules imported when first used.

    `check` is what a pull request runs; it must not pay for importing the server, the
    certificate code (cryptography) or the cluster client. `lazy` maps a command name to
    "module:attribute"; `--help` still lists every command (and imports them)."""

    def __init__(self, *args: Any, lazy: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = _LazyCommands(self.commands, lazy)
        self.commands = self._lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self._lazy, *self._lazy.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command: click.Command | None = self._lazy.get(cmd_name)
        return command


class _LazyCommands(dict[str, click.Command]):
    def __init__(self, eager: Mapping[str, click.Command], lazy: Mapping[str, str]) -> None:
        super().__init__(eager)
        self.lazy = dict(lazy)

    def __missing__(self, name: str) -> click.Command:
        module, _, attr = self.lazy[name].partition(":")  # KeyError: no such command
        command: click.Command = getattr(importlib.import_module(module), attr)
        self[name] = command
        return command

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self or name in self.lazy else default
