"""The `gpu-admission` process around the click group: a cheap start and a quick exit.

A pull request's `check` of a few files is mostly the process's own cost (issue 13,
docs/performance.md): imports, and two things no command needs.

- pydantic looks for plugins (the `pydantic` entry-point group) when it builds its first
  model: `pydantic/plugin/_loader.py` imports `importlib.metadata` (email, zipfile,
  csv, tempfile...) and reads every installed distribution's metadata, ~15 ms, to
  find none. The CLI validates its own policy files; no plugin is meant to observe that.
- The interpreter's teardown frees every module, class and object one by one (~14 ms
  for `check`) just before the kernel frees the whole process. mypy skips it the same
  way (mypy.util.hard_exit).
"""

from __future__ import annotations

import atexit
import os
import sys
import types
from collections.abc import Callable

# The values of PYDANTIC_DISABLE_PLUGINS that turn every plugin off (pydantic's
# get_plugins in pydantic/plugin/_loader.py returns () for them, before any scan).
_ALL_OFF = ("__all__", "1", "true")
_LOADER = "pydantic.plugin._loader"


def without_pydantic_plugins() -> None:
    """PYDANTIC_DISABLE_PLUGINS=__all__ unless the user set it, and then, pydantic's
    plugin loader as what it is with that setting: a `get_plugins` returning no plugins,
    without the import of importlib.metadata that pydantic's module makes to find any.
    Must run before pydantic builds a model; a loader already imported is kept."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if os.environ["PYDANTIC_DISABLE_PLUGINS"] in _ALL_OFF:
        loader = types.ModuleType(_LOADER, "pydantic plugins, all disabled (webhook.cli)")
        loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
        # pydantic 2.x takes only get_plugins from it; should a later one take another
        # name, it gets the real module's (PEP 562), not an ImportError at start-up.
        loader.__getattr__ = _from_real_loader  # type: ignore[method-assign]
        sys.modules.setdefault(_LOADER, loader)


def _no_plugins() -> tuple[()]:
    return ()


def _from_real_loader(name: str) -> object:
    """`name` from pydantic's own plugin loader, loaded beside the stand-in."""
    if name.startswith("__"):  # import machinery probing (__path__, __file__...)
        raise AttributeError(name)
    import importlib.machinery
    import importlib.util

    package = sys.modules["pydantic.plugin"]
    spec = importlib.machinery.PathFinder.find_spec("_loader", list(package.__path__))
    if spec is None or spec.loader is None:
        raise AttributeError(name)
    real = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(real)
    return getattr(real, name)


def run(main: Callable[[], object]) -> None:
    """`main` (a click group run standalone, so it ends in SystemExit), then the exit
    without the interpreter's teardown, once the output is flushed, when nothing is
    registered to run at exit and no other thread runs; otherwise the usual exit."""
    without_pydantic_plugins()
    try:
        main()
    except SystemExit as exc:
        code = exc.code
        if (code is None or isinstance(code, int)) and _nothing_left() and _flushed():
            os._exit(code or 0)
        raise


def _nothing_left() -> bool:
    """No atexit handler (a multiprocessing pool, logging) and no thread left to join."""
    callbacks = getattr(atexit, "_ncallbacks", None)  # CPython's count of handlers
    if callbacks is None or callbacks() != 0:
        return False
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


def _flushed() -> bool:
    """stdout and stderr written out; if that fails (a closed pipe), the usual exit
    reports it as it always has."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return False
    return True
