"""Messages for manifests not ready to check, through the real CLI: unrendered template
placeholders, generateName-only objects, labels on a controller instead of its pods."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.clirun import gpu_admission

PLACEHOLDER = (
    "an unrendered template placeholder: render the manifest (helm template, envsubst) "
    "before checking"
)
MANIFESTS = """\
apiVersion: v1
kind: Pod
metadata: {generateName: train-, namespace: ml}
spec:
  containers:
  - name: c
    image: x
    resources: {limits: {nvidia.com/gpu: "${GPUS}"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: ml
  labels:
    gpu-admission.io/peak-memory: "{{ .Values.peak }}"
    gpu-admission.io/slo-class: "$SLO"
spec:
  containers:
  - name: c
    image: x
    resources:
      limits:
        nvidia.com/gpu: 1
        "nvidia.com/mig-${PROFILE}": 1
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: serve
  namespace: ml
  labels: {gpu-admission.io/peak-memory: 10Gi, gpu-admission.io/slo-class: best-effort}
spec:
  selector: {matchLabels: {app: s}}
  template:
    metadata: {labels: {app: s}}
    spec:
      containers:
      - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
"""
MOVE = (
    "The label is on the object's own metadata.labels, which its pods do not inherit: "
    "move them to spec.template.metadata.labels."
)
EXPECTED = [
    # (line, kind, name, rule, message)
    (8, "Pod", "train-*", "non-integer-count",
     'container "c" (spec.containers[0].resources.limits["nvidia.com/gpu"]) asks for '
     f'"${{GPUS}}" nvidia.com/gpu: {PLACEHOLDER}.'),
    (16, "Pod", "p", "invalid-peak-memory",
     f'label gpu-admission.io/peak-memory="{{{{ .Values.peak }}}}" is {PLACEHOLDER}.'),
    (17, "Pod", "p", "unknown-slo-class",
     f'label gpu-admission.io/slo-class="$SLO" is {PLACEHOLDER}.'),
    (25, "Pod", "p", "unknown-resource",
     'container "c" requests "nvidia.com/mig-${PROFILE}" '
     '(spec.containers[0].resources.limits["nvidia.com/mig-${PROFILE}"]): the resource name '
     f"is {PLACEHOLDER}."),
    (39, "Deployment", "serve", "missing-peak-memory",
     'container "c" requests nvidia.com/gpu but the pod has no gpu-admission.io/peak-memory '
     "label: without the peak GPU memory per device nothing can tell whether the model fits "
     f"the device. {MOVE}"),
    (39, "Deployment", "serve", "missing-slo-class",
     'container "c" requests nvidia.com/gpu but the pod has no gpu-admission.io/slo-class '
     f"label: it decides which GPU sharing modes the pod may use. {MOVE}"),
]  # fmt: skip


def test_messages_for_manifests_not_ready_to_check(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(MANIFESTS)
    proc = gpu_admission("check", "-o", "json", str(tmp_path / "m.yaml"))
    assert proc.returncode == 1, proc.stderr
    found = [
        (r["line"], r["kind"], r["name"], r["rule"], r["message"])
        for r in json.loads(proc.stdout)["results"]
        # the placeholders' messages; a job's /dev/shm is gpu-distributed's (its own tests)
        if r["policy"] != "gpu-distributed"
        and (r["rule"] not in ("missing-peak-memory", "missing-slo-class") or r["kind"] != "Pod")
    ]
    assert found == EXPECTED
