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

PS = "      podSpecs:\n        - path: spec.p\n          containers: [.]\n          podFields:\n"
PF = "podSpecs.0.podFields.0"
# podFields: what joins the pod spec, and how (webhook.core.workloads.podfields)
BROKEN += [
    ("envMap into volumes", PS + "            - {from: e, to: volumes, as: envMap}\n",
     12, PF, "Value error, as: envMap makes container.env: give to: container.env "
     "(got {'from': 'e', 'to': 'volumes', 'as': 'envMap'})"),
    ("hostPathVolume into env",
     PS + "            - {from: h, to: container.env, as: hostPathVolume, name: v}\n",
     12, PF, "Value error, as: hostPathVolume makes volumes: give to: volumes "
     "(got {'from': 'h', 'to': 'container.env', 'as': 'hostPathVolume',)"),  # cut at 60
    ("hostPathVolume nameless", PS + "            - {from: h, to: volumes, as: hostPathVolume}\n",
     12, PF, "Value error, as: hostPathVolume needs name (the volume made from a host path "
     "string) or keyPrefix/keySuffix (a map of host paths, each named by what lies between) "
     "(got {'from': 'h', 'to': 'volumes', 'as': 'hostPathVolume'})"),
    ("onlyMounted on env", PS + "            - {from: e, to: container.env, onlyMounted: true}\n",
     12, PF, "Value error, onlyMounted is for items that join volumes "
     "(got {'from': 'e', 'to': 'container.env', 'onlyMounted': True})"),
    ("a key filter on items", PS + "            - {from: v, to: volumes, keyPrefix: x.}\n",
     12, PF, "Value error, keyPrefix and keySuffix filter a map's keys (envMap, hostPathVolume) "
     "(got {'from': 'v', 'to': 'volumes', 'keyPrefix': 'x.'})"),
    ("a name on items", PS + "            - {from: v, to: volumes, name: x}\n",
     12, PF, "Value error, name and mountPath are for as: hostPathVolume "
     "(got {'from': 'v', 'to': 'volumes', 'name': 'x'})"),
    ("from a pattern", PS + "            - {from: a.*.b, to: volumes}\n",
     12, f"{PF}.from", f"Value error, {ONE_FIELD} (got 'a.*.b')"),
    ("an unknown target", PS + "            - {from: a, to: env}\n",
     12, f"{PF}.to", "Input should be 'volumes', 'container.env', 'container.envFrom' or "
     "'container.volumeMounts' (got 'env')"),
    ("an unknown way", PS + "            - {from: a, to: volumes, as: list}\n",
     12, f"{PF}.as", "Input should be 'items', 'envMap' or 'hostPathVolume' (got 'list')"),
    ("a relative mountPath",
     PS + "            - {from: h, to: volumes, as: hostPathVolume, name: v, mountPath: m}\n",
     12, f"{PF}.mountPath", "String should match pattern '^/' (got 'm')"),
    ("no from", PS + "            - {to: volumes}\n",
     12, f"{PF}.from", "Field required"),
    ("into a container without one", "      podSpecs:\n        - path: spec.p\n"
     "          podFields: [{from: e, to: container.env, as: envMap}]\n",
     9, "podSpecs.0", "Value error, podFields into container.* fill the main container: give "
     "containers (the first is the main one) (got {'path': 'spec.p', 'podFields': [{'from': "
     "'e', 'to': 'contai)"),
    ("podFields on a template", "      templates:\n        - path: spec.t\n"
     "          podFields: [{from: v, to: volumes}]\n",
     10, "templates.0.podFields", "unknown field (got [{'from': 'v', 'to': 'volumes'}])"),
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
