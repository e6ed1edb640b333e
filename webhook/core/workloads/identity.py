"""An object's identity as every shell shows it: its namespace and its name.

One rule, so a finding names the same object in a PR, an audit, a decision log and an
admission response.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def namespace_of(obj: Mapping[str, Any]) -> str:
    """The object's own metadata.namespace, "" if it has none (or not a string)."""
    meta = obj.get("metadata")
    if type(meta) is not dict and not isinstance(meta, Mapping):  # a dict: no ABC check
        return ""
    own = meta.get("namespace")
    return own if isinstance(own, str) else ""


def shown_name(meta: Mapping[str, Any]) -> str:
    """The object's name, else its generateName marked as a prefix (`train-*`): the
    apiserver appends the rest, so `train-` alone would read as a whole name."""
    name = meta.get("name")
    if name:
        return str(name)
    prefix = meta.get("generateName")
    return f"{prefix}*" if prefix else ""
