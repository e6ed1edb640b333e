"""Glob lists (namespaces, hostPaths, resource names): fnmatch's meaning, whatever mix of
plain names and wildcards a list holds (plain names are a set lookup, not a regex)."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest

from webhook.core.kit.text import glob_matcher

NAMES = [
    "",
    "kube-system",
    "kube-systemx",
    "xkube-system",
    "Kube-System",
    "gpu-operator",
    "team-a",
    "team-",
    "team-a/b",
    "/dev/nvidia0",
    "/dev/nvidia10",
    "/dev/nvidiactl",
    "/dev/nvidia",
    "a.b",
    "a+b",
    "a\nb",
    "nvidia.com/gpu",
    "nvidia.com/mig-1g.10gb",
]


@pytest.mark.parametrize(
    "patterns",
    [
        (),
        ("kube-system",),
        ("kube-system", "gpu-operator"),
        ("team-*",),
        ("kube-system", "team-?", "a.b"),
        ("/dev/nvidia[0-9]*", "/dev/nvidiactl"),
        ("a+b", "a?b", "[!a]*"),
        ("nvidia.com/mig-*", "nvidia.com/gpu"),
        ("*",),
    ],
)
def test_a_glob_list_matches_what_fnmatch_matches(patterns: tuple[str, ...]) -> None:
    matches = glob_matcher(patterns)
    expected = [n for n in NAMES if any(fnmatchcase(n, p) for p in patterns)]
    assert [n for n in NAMES if matches(n)] == expected
