"""What `gpu-admission check` of a pull request imports: start-up is most of its time.

The real CLI runs with `python -X importtime`, which names every module the process
imports (on stderr); the output must be the same as without it. Timing is for
bench/startup.py; this guards what made it shorter (webhook/cli/process.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.builders import EXAMPLES, ROOT

MANIFESTS = EXAMPLES / "manifests"
NODES = EXAMPLES / "cluster" / "nodes.json"
CHECK = ["check", "-o", "json", "--inventory", str(NODES), str(MANIFESTS)]

# Modules no check of files needs. importlib.metadata is what pydantic's plugin loader
# imports to scan entry points (with email, zipfile, csv, tempfile); multiprocessing
# only a pool for thousands of files needs, the dump reader only a JSON file (these are
# YAML); the rest belong to other commands.
NOT_IMPORTED = (
    "importlib.metadata",
    "email",
    "tempfile",
    "multiprocessing",
    "webhook.commands.checkdump",
    "webhook.sources.dumpsplit",
    "webhook.serve",
    "webhook.kube",
    "webhook.core.diagnosis",
    "starlette",
    "uvicorn",
    "kubernetes",
    "cryptography",
)


def run(*args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    proc = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )
    modules = set(re.findall(r"^import time:.*\| +(\S+)$", proc.stderr, re.MULTILINE))
    return proc, modules


def environment(cache: str = "", **extra: str) -> dict[str, str]:
    """The user's environment without our settings or pydantic's; the policy cache off
    unless `cache` names its directory (a cold start: policies validated)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_ADMISSION", "PYDANTIC"))}
    return {**env, "PYTHONPATH": str(ROOT), "GPU_ADMISSION_CACHE_DIR": cache, **extra}


def test_check_imports_only_what_checking_files_needs() -> None:
    plain, _ = run("-m", "webhook", *CHECK, env=environment())
    timed, modules = run("-X", "importtime", "-m", "webhook", *CHECK, env=environment())
    assert "webhook.core.engine.evaluation" in modules and "pydantic" in modules  # the run was seen
    assert (timed.returncode, timed.stdout) == (plain.returncode, plain.stdout)
    assert plain.returncode == 1 and plain.stderr == ""
    imported = sorted(m for m in modules if m.startswith(tuple(f"{n}." for n in NOT_IMPORTED)))
    assert sorted(modules & set(NOT_IMPORTED)) + imported == []


def test_a_warm_check_imports_no_pydantic(tmp_path: Path) -> None:
    """The second run reads the policy set the first validated (policy_cache): the same
    output, without pydantic or the policy schema, and without YAML-parsing the policies."""
    env = environment(str(tmp_path))
    cold, cold_modules = run("-X", "importtime", "-m", "webhook", *CHECK, env=env)
    warm, modules = run("-X", "importtime", "-m", "webhook", *CHECK, env=env)
    assert "pydantic" in cold_modules and len(list(tmp_path.glob("*.pickle"))) == 1
    assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout) and warm.returncode == 1
    assert "webhook.core.engine.evaluation" in modules  # the run was seen
    heavy = {"pydantic", "pydantic_core", "webhook.sources.policy_schema", *NOT_IMPORTED}
    prefixes = tuple(f"{h}." for h in heavy)
    assert sorted(m for m in modules if m in heavy or m.startswith(prefixes)) == []


@pytest.mark.parametrize(
    ("setting", "loader_imported"),
    [
        ("", False),  # unset: the CLI turns plugins off without the loader's imports
        ("__all__", False),
        ("true", False),
        ("some-plugin", True),  # the user's own list: pydantic's loader, as without us
    ],
)
def test_pydantic_plugins_follow_the_users_setting(setting: str, loader_imported: bool) -> None:
    env = environment(PYDANTIC_DISABLE_PLUGINS=setting) if setting else environment()
    code = (
        "import os, sys; from webhook.cli import process; process.without_pydantic_plugins();"
        "import webhook.sources.policy_schema;"
        "print(os.environ['PYDANTIC_DISABLE_PLUGINS'], 'importlib.metadata' in sys.modules)"
    )
    proc, _ = run("-c", code, env=env)
    assert proc.stdout.split() == [setting or "__all__", str(loader_imported)], proc.stderr


def test_an_exit_handler_gets_the_usual_exit() -> None:
    """Something registered at exit (a pool, logging) runs: no quick exit then."""
    code = (
        "import atexit, sys; atexit.register(lambda: print('at exit', flush=True));"
        f"sys.argv = ['gpu-admission', *{CHECK!r}];"
        "from webhook.cli import run; run()"
    )
    proc, _ = run("-c", code, env=environment())
    assert proc.returncode == 1 and proc.stdout.rstrip().endswith("at exit"), proc.stderr


def test_the_plugin_stand_in_gives_any_other_name_from_pydantics_own_loader() -> None:
    """pydantic 2.x takes only get_plugins from its loader; a name a later one may take
    comes from the real module, not an ImportError (fails with a stand-in that has
    get_plugins alone)."""
    code = (
        "import sys; from webhook.cli import process; process.without_pydantic_plugins();"
        "import pydantic; type('M', (pydantic.BaseModel,), {'__annotations__': {'x': int}});"
        "stand_in = sys.modules['pydantic.plugin._loader']; print(stand_in.get_plugins());"
        "from pydantic.plugin._loader import _plugins; print(_plugins);"
        "print(hasattr(stand_in, 'no_such_name'))"
    )
    proc, _ = run("-c", code, env=environment())
    assert proc.stdout.split() == ["()", "None", "False"], proc.stderr
