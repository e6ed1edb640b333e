"""Where things are, for tests and the helpers they share: one place instead of each
module counting `parents[...]` from its own folder.

ROOT is the repository; TESTS holds the data folders (data, fixtures, realworld,
realworld_nodes); SHARED is ../shared beside the repository (the corpus and the tools:
kubecluster, helm, apiserverhook), absent on most machines.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
SHARED = ROOT.parent / "shared"
TOOLS = SHARED / "tools"
