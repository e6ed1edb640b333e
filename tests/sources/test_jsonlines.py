"""jsonlines.line_in places a field where the YAML node tree of the same text does.

`check` streams big JSON dumps and finds a finding's line in the item's text; a whole
parse finds it with yamlsource.line_of. For any JSON value, indentation and path (steps
that exist, and steps that do not), the two must agree.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.core.kit.paths import Path
from webhook.sources.jsonlines import line_in
from webhook.sources.yamlsource import iter_documents

KEYS = st.sampled_from(["a", "b", "spec", "containers", "x/y", 'q"uote', "ü"])
# Printable text: YAML refuses control characters that JSON takes (a JSON dump holding
# one is streamed where a whole parse would call it invalid YAML).
TEXT = st.text(
    st.characters(
        min_codepoint=32,
        max_codepoint=0x2FF,
        exclude_characters=[chr(c) for c in range(0x7F, 0xA0)],
    )
)
SCALARS = st.none() | st.booleans() | st.integers(-10, 10) | TEXT.filter(lambda t: len(t) <= 5)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=30,
)
STEPS = st.lists(KEYS | st.integers(0, 4), max_size=6)


def yaml_line(text: str, path: Path) -> int:
    (doc,) = iter_documents(text, source="t.json")
    return doc.line_of(path)


def real_path(value: Any, steps: list[Any]) -> Path:
    """The steps that exist in `value`, then one that may not."""
    path: list[Any] = []
    for step in steps:
        if isinstance(value, dict) and value:
            step = list(value)[hash(str(step)) % len(value)]
            value = value[step]
        elif isinstance(value, list) and value:
            step = step if isinstance(step, int) else 0
            if step >= len(value):
                path.append(step)
                break
            value = value[step]
        else:
            path.append(step)
            break
        path.append(step)
    return tuple(path)


@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(KEYS, VALUES, min_size=1), steps=STEPS, indent=st.sampled_from([2, 4]))
def test_the_line_of_a_field_is_the_node_trees(value: Any, steps: list[Any], indent: int) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    for path in (real_path(value, steps), tuple(steps)):
        assert 1 + line_in(text.encode(), path) == yaml_line(text, path), (text, path)


def test_the_last_of_two_equal_keys_and_escaped_keys() -> None:
    text = '{\n  "a": 1,\n  "a": {\n    "b": 2\n  },\n  "x\\/y": [\n    3\n  ]\n}'
    for path in [("a",), ("a", "b"), ("x/y", 0), ("missing",), ()]:
        assert 1 + line_in(text.encode(), path) == yaml_line(text, path), path
