"""Fixtures for every test folder (the repository root is on sys.path through
`pythonpath` in pyproject.toml; shared helpers are the package tests.support)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.paths import ROOT

# The CLIs the tests run keep validated policy sets (webhook.sources.policy_cache): in a
# directory of this run's own, not the user's ~/.cache.
os.environ["GPU_ADMISSION_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpu-admission-test-cache-")
atexit.register(shutil.rmtree, os.environ["GPU_ADMISSION_CACHE_DIR"], ignore_errors=True)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def example_inventory() -> Path:
    return ROOT / "examples" / "cluster" / "nodes.json"
