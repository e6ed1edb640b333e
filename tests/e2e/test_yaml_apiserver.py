"""The real apiserver and kubectl read a YAML Pod as `check` does (docs/yaml.md).

One document with the forms where PyYAML and go-yaml v2 differ is sent twice, as YAML:
to the apiserver (POST, Content-Type application/yaml, dry run: its serializer's
YAMLToJSON) and through `kubectl create --dry-run=server` (kubectl's own YAMLToJSON);
the object each stores is read back as JSON and compared with our reading.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.kubeclusters import NEWEST, Clusters, kubeclusters, on  # noqa: F401
from webhook.sources.yamlsource import iter_documents

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: yaml11
  namespace: default
  labels:
    1: x                       # an int key: the label "1"
  annotations:
    sexagesimal: 1:20          # a string to go-yaml v2 (PyYAML: 80)
    date: 2015-01-01           # a timestamp stays its text (PyYAML: a date)
spec:
  terminationGracePeriodSeconds: 0o36   # 30 (PyYAML: a string)
  activeDeadlineSeconds: 1e3            # 1000 (PyYAML: a string)
  containers:
    - name: main
      image: busybox
      securityContext:
        privileged: n
        <<: {privileged: y}    # a merge sets its keys where it stands: true
        runAsNonRoot: off
        runAsUser: 09          # 9 (PyYAML: a string)
"""

FIELDS = [
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec", "terminationGracePeriodSeconds"),
    ("spec", "activeDeadlineSeconds"),
    ("spec", "containers", 0, "securityContext"),
]


def pick(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


@on(NEWEST)
def test_apiserver_and_kubectl_store_what_check_reads(kubeclusters: Clusters) -> None:  # noqa: F811
    cluster = kubeclusters.get(NEWEST)
    (ours,) = iter_documents(POD.encode(), source="pod.yaml")

    posted = cluster.http.post(
        "/api/v1/namespaces/default/pods",
        params={"dryRun": "All"},
        content=POD.encode(),
        headers={"Content-Type": "application/yaml", "Accept": "application/json"},
    )
    assert posted.status_code == 201, posted.text
    created = cluster.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", stdin=POD
    ).stdout

    for stored in (posted.json(), json.loads(created)):
        for path in FIELDS:
            want, got = pick(ours.data, path), pick(stored, path)
            if isinstance(want, dict):  # the apiserver adds defaults beside what we wrote
                got = {k: got.get(k) for k in want}
            assert got == want, path
    assert ours.data["spec"]["containers"][0]["securityContext"] == {
        "privileged": True, "runAsNonRoot": False, "runAsUser": 9,
    }  # fmt: skip
