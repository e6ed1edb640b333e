"""Paths into an object: ("spec", "containers", 0, ...), and how people read them."""

from __future__ import annotations

Path = tuple[str | int, ...]
_LONGEST_STEP = 317  # a qualified name (prefix/name), the longest key Kubernetes takes


def format_path(path: Path) -> str:
    """`spec.containers[0].resources.limits` from ("spec", "containers", 0, ...)."""
    out: list[str] = []
    for step in path:
        if isinstance(step, str) and len(step) > _LONGEST_STEP:
            step = step[: _LONGEST_STEP - 1] + "…"  # a key no object has: cut for readers
        if isinstance(step, int):
            out.append(f"[{step}]")
        elif out and _plain(step):
            out.append(f".{step}")
        elif _plain(step):
            out.append(step)
        else:
            out.append(f'["{step}"]')
    return "".join(out)


def _plain(step: str) -> bool:
    return step.replace("_", "a").replace("-", "a").isalnum()
