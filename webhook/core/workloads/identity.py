"""An object's identity as every shell shows it: its namespace and its name.

One rule, so a finding names the same object in a PR, an audit, a decision log and an
admission response.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.kit.text import shown

MAX_NAME = 253  # a DNS subdomain: the longest object name the apiserver takes


def namespace_of(obj: Mapping[str, Any]) -> str:
    """The object's own metadata.namespace, "" if it has none (or not a string)."""
    meta = obj.get("metadata")
    if type(meta) is not dict and not isinstance(meta, Mapping):  # a dict: no ABC check
        return ""
    own = meta.get("namespace")
    return own if isinstance(own, str) else ""


def shown_name(meta: Mapping[str, Any]) -> str:
    """The object's name, else its generateName marked as a prefix (`train-*`): the
    apiserver appends the rest, so `train-` alone would read as a whole name. Bounded
    and printable whatever a file or a hostile request holds there."""
    name = meta.get("name")
    if name:
        return name if type(name) is str and len(name) <= MAX_NAME else shown(name, MAX_NAME)
    prefix = meta.get("generateName")
    if not prefix:
        return ""
    if type(prefix) is not str or len(prefix) >= MAX_NAME:
        prefix = shown(prefix, MAX_NAME - 1)
    return f"{prefix}*"
