from __future__ import annotations

import atexit
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
