"""Modules imported on first use, for heavy imports that most commands never need."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


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
