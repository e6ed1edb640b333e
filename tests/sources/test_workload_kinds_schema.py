"""WorkloadKinds roles and counts: every wrong field, with the one error it gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.errors import PolicyError
from webhook.sources.policy_files import load_policy_dir

HEAD = (
    "apiVersion: gpu-admission.io/v1alpha1\nkind: WorkloadKinds\nmetadata: {name: k}\n"
    "spec:\n  customResources:\n    - group: example.com\n      kind: Thing\n"
)
AT = "document 1 (line 1), line {line}, field spec.customResources.0.{field}: "
FACTOR = "a factor is a whole number, a dotted path to one field, or {path, default, less}"
ONE_FIELD = "give a dotted path to one field (a.b, or $.a.b from the root): no *"

# (what is wrong, the entry's lines after HEAD, line, field, message). Each is one error.
BROKEN = [
    ("role and roleAt", "      templates:\n        - {path: spec.t, role: a, roleAt: name}\n",
     9, "templates.0", "Value error, give role or roleAt, not both "
     "(got {'path': 'spec.t', 'role': 'a', 'roleAt': 'name'})"),
    ("an empty role", "      templates:\n        - {path: spec.t, role: ''}\n",
     9, "templates.0.role", "String should have at least 1 character (got '')"),
    ("roleAt a pattern", "      templates:\n        - {path: spec.*.t, roleAt: a.*.b}\n",
     9, "templates.0.roleAt", f"Value error, {ONE_FIELD} (got 'a.*.b')"),
    ("a negative count", "      templates:\n        - {path: spec.t, replicas: [-1]}\n",
     9, "templates.0.replicas.0", "Value error, a count is a whole number, 0 or more (got -1)"),
    ("a float", "      templates:\n        - {path: spec.t, replicas: [1.5]}\n",
     9, "templates.0.replicas.0", f"Value error, {FACTOR} (got 1.5)"),
    ("a boolean", "      templates:\n        - {path: spec.t, replicas: [true]}\n",
     9, "templates.0.replicas.0", f"Value error, {FACTOR} (got True)"),
    ("a path with *", "      templates:\n        - {path: spec.t, replicas: [a.*.b]}\n",
     9, "templates.0.replicas.0.path", f"Value error, {ONE_FIELD} (got 'a.*.b')"),
    ("an unknown key", "      templates:\n        - path: spec.t\n"
     "          replicas: [{path: spec.n, minus: 1}]\n",
     10, "templates.0.replicas.0.minus", "unknown field (got 1)"),
    ("fields without path", "      templates:\n        - path: spec.t\n"
     "          replicas: [{default: 2}]\n",
     10, "templates.0.replicas.0",
     "Value error, give path (a constant factor is a plain number) (got {'default': 2})"),
    ("a negative default", "      templates:\n        - path: spec.t\n"
     "          replicas: [{path: spec.n, default: -1}]\n",
     10, "templates.0.replicas.0.default", "Input should be greater than or equal to 0 (got -1)"),
    ("a string default", "      templates:\n        - path: spec.t\n"
     "          replicas: [{path: spec.n, default: '2'}]\n",
     10, "templates.0.replicas.0.default", "Input should be a valid integer (got '2')"),
    ("a negative less", "      containers:\n        - path: spec.c\n"
     "          replicas: [{path: spec.n, less: -1}]\n",
     10, "containers.0.replicas.0.less", "Input should be greater than or equal to 0 (got -1)"),
    ("replicas not a list", "      templates:\n        - {path: spec.t, replicas: 2}\n",
     9, "templates.0.replicas", "Input should be a valid list (got 2)"),
    ("more than 8 factors",
     "      templates:\n        - {path: spec.t, replicas: [1, 1, 1, 1, 1, 1, 1, 1, 1]}\n",
     9, "templates.0.replicas", "List should have at most 8 items after validation, not 9 "
     "(got [1, 1, 1, 1, 1, 1, 1, 1, 1])"),
    ("fallback of a pod spec", "      podSpecs:\n        - {path: spec.p, fallback: spec.q}\n",
     9, "podSpecs.0.fallback", "unknown field (got 'spec.q')"),
    ("fallback from $.", "      templates:\n        - {path: spec.t, fallback: $.spec.q}\n",
     9, "templates.0.fallback",
     "Value error, give a dotted path from the object's root (a.b): no *, no $. (got '$.spec.q')"),
    ("a template neither path nor fields", "      templates:\n        - 5\n",
     9, "templates.0", "Input should be a valid dictionary or instance of TemplatePath (got 5)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "line", "field", "message"), [r[1:] for r in BROKEN], ids=[r[0] for r in BROKEN]
)
def test_broken_roles(tmp_path: Path, entry: str, line: int, field: str, message: str) -> None:
    path = tmp_path / "kinds.yaml"
    path.write_text(HEAD + entry)
    with pytest.raises(PolicyError) as info:
        load_policy_dir(tmp_path)
    assert str(info.value).splitlines() == [f"{path}: {AT.format(line=line, field=field)}{message}"]
