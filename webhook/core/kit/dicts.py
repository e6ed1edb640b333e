"""Reading JSON-shaped values without trusting them: a mapping, a list, labels as strings.

Every field of an object may hold anything a YAML file or a hostile request can say;
these read it as the shape it should have, or as empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.kit.text import brief


def api_group(api_version: object) -> str:
    if not isinstance(api_version, str) or "/" not in api_version:
        return ""
    return api_version.split("/", 1)[0]


def as_dict(value: object) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the cost of an ABC check
        return value
    return value if isinstance(value, Mapping) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def str_map(value: object) -> Mapping[str, str]:
    """Labels or annotations as strings. The apiserver takes only strings; a number or a
    boolean (YAML's `version: 1`) reads as its text, and a list or a mapping as a short
    `brief` of it, so a check reports it without ever walking or copying all of it."""
    if type(value) is dict:
        for v in value.values():  # a loop: a set of the types costs twice as much
            if type(v) is not str:
                break
        else:
            return value  # labels as the apiserver sends them: no copy needed
    if not isinstance(value, Mapping):
        return {}
    return {
        k if type(k) is str else brief(k): "" if v is None else v if type(v) is str else brief(v)
        for k, v in value.items()
    }
