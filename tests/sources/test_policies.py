"""Policy files: the shipped set, and every kind of broken file with the error it gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.builders import POLICIES
from webhook.checks import registry
from webhook.errors import PolicyError
from webhook.sources.policy_files import load_policy_dir, load_policy_files

EXEMPT = [
    "kube-system",
    "gpu-operator",
    "nvidia-gpu-operator",
    "nvidia-device-plugin",
    "node-feature-discovery",
    "openshift-nfd",
    "gpu-admission-system",
]


def test_shipped_policies_load() -> None:
    policy_set = load_policy_dir(POLICIES)
    found = [(p.name, p.check.name, p.action, p.message_prefix) for p in policy_set.policies]
    assert found == [
        ("gpu-device-injection", "device-injection", "deny", ""),
        ("gpu-distributed", "distributed", "warn", ""),  # new: shipped in warn first
        ("gpu-dra-claims", "dra-claims", "deny", ""),
        ("gpu-dra-guardrails", "dra-guardrails", "deny", ""),
        ("gpu-memory-fit", "memory-fit", "deny", ""),
        ("gpu-queues", "queues", "deny", ""),
        ("gpu-resource-names", "resource-names", "deny", ""),
        ("gpu-slo-class", "slo-class", "deny", ""),
        ("gpu-tenancy", "tenancy", "deny", ""),  # no tenants until configured
    ]
    for policy in policy_set.policies:
        assert policy.match.kinds == []
        assert policy.match.excludedNamespaces == EXEMPT
        assert policy.description
        # The shipped files spell out every default, so a reader sees the whole policy.
        assert policy.params == policy.check.params(), policy.name
    kinds = [(k.group, k.kind) for k in policy_set.custom_kinds]
    assert kinds == [
        ("kubeflow.org", "PyTorchJob"),
        ("kubeflow.org", "TFJob"),
        ("kubeflow.org", "XGBoostJob"),
        ("kubeflow.org", "PaddleJob"),
        ("kubeflow.org", "JAXJob"),
        ("kubeflow.org", "MPIJob"),
        ("ray.io", "RayCluster"),
        ("ray.io", "RayJob"),
        ("ray.io", "RayService"),
        ("jobset.x-k8s.io", "JobSet"),
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
        ("batch.volcano.sh", "Job"),
        ("kubeflow.org", "Notebook"),
        ("serving.kserve.io", "InferenceService"),
        ("apps.nvidia.com", "NIMService"),
        ("sparkoperator.k8s.io", "SparkApplication"),
        ("trainer.kubeflow.org", "TrainJob"),
        ("trainer.kubeflow.org", "TrainingRuntime"),
        ("trainer.kubeflow.org", "ClusterTrainingRuntime"),
        ("nvidia.com", "DynamoGraphDeployment"),
        ("production-stack.vllm.ai", "VLLMRuntime"),
    ]
    assert policy_set.unconfigured_gpu_action == "warn"
    assert re.fullmatch(r"[0-9a-f]{16}", policy_set.digest)
    # the shipped policies match every kind
    assert all(not p.match.kinds or "*" in p.match.kinds for p in policy_set.policies)


def test_every_check_has_rules_and_is_shipped() -> None:
    checks = registry()
    assert sorted(checks) == [
        "device-injection",
        "distributed",
        "dra-claims",
        "dra-guardrails",
        "memory-fit",
        "queues",
        "resource-names",
        "slo-class",
        "tenancy",
    ]
    shipped = {p.check.name for p in load_policy_dir(POLICIES).policies}
    assert shipped == set(checks)
    for check in checks.values():
        assert check.rules and all(rule.help.endswith(".") for rule in check.rules.values())


HEAD = "apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\nmetadata:\n  name: p\nspec:\n"
GOOD_SPEC = "  enforcementAction: deny\n  check: memory-fit\n"

# Each row: one broken document (line numbers count from the file's first line) and the
# whole error: file, document, line and field.
BROKEN = [
    (
        "unknown check",
        HEAD + "  enforcementAction: deny\n  check: gpu-memory\n",
        [
            'document 1 (GPUPolicy "p"), line 7, field spec.check: unknown check '
            "'gpu-memory'; built-in checks: device-injection, distributed, dra-claims, "
            "dra-guardrails, memory-fit, queues, resource-names, slo-class, tenancy"
        ],
    ),
    (
        "wrong parameter value",
        HEAD + GOOD_SPEC + "  parameters:\n    require: most\n",
        [
            'document 1 (GPUPolicy "p"), line 9, field spec.parameters.require: '
            "Input should be 'all' or 'any' (got 'most')"
        ],
    ),
    (
        "wrong parameter type",
        HEAD + GOOD_SPEC + "  parameters:\n    label: 12\n",
        [
            'document 1 (GPUPolicy "p"), line 9, field spec.parameters.label: '
            "Input should be a valid string (got 12)"
        ],
    ),
    (
        "a list parameter given a string",
        HEAD + "  enforcementAction: deny\n  check: device-injection\n"
        "  parameters:\n    devicePaths: /dev/nvidia0\n",
        [
            'document 1 (GPUPolicy "p"), line 9, field spec.parameters.devicePaths: '
            "Input should be a valid tuple (got '/dev/nvidia0')"
        ],
    ),
    (
        "a boolean parameter given a word",
        HEAD + "  enforcementAction: deny\n  check: device-injection\n"
        "  parameters:\n    denyPrivileged: sometimes\n",
        [
            'document 1 (GPUPolicy "p"), line 9, field spec.parameters.denyPrivileged: '
            "Input should be a valid boolean, unable to interpret input (got 'sometimes')"
        ],
    ),
    (
        "an SLO class with an unknown sharing mode",
        HEAD + "  enforcementAction: deny\n  check: slo-class\n  parameters:\n    classes:\n"
        "      latency-sensitive: [exclusive, dedicated]\n",
        [
            'document 1 (GPUPolicy "p"), line 10, field '
            "spec.parameters.classes.latency-sensitive.1: Input should be 'exclusive', "
            "'mig', 'time-slicing', 'mps' or 'vgpu' (got 'dedicated')"
        ],
    ),
    (
        "unknown parameter",
        HEAD + GOOD_SPEC + "  parameters:\n    label: x\n    requires: any\n",
        [
            'document 1 (GPUPolicy "p"), line 10, field spec.parameters.requires: '
            "unknown field (got 'any')"
        ],
    ),
    (
        "unknown field in spec",
        HEAD + GOOD_SPEC + "  enforcement: warn\n",
        ["document 1 (line 1), line 8, field spec.enforcement: unknown field (got 'warn')"],
    ),
    (
        "unknown field in match",
        HEAD + GOOD_SPEC + "  match:\n    kind: [Pod]\n",
        ["document 1 (line 1), line 9, field spec.match.kind: unknown field (got ['Pod'])"],
    ),
    (
        "bad label selector operator",
        HEAD + GOOD_SPEC + "  match:\n    labelSelector:\n      matchExpressions:\n"
        "        - {key: team, operator: Has}\n",
        [
            "document 1 (line 1), line 11, field spec.match.labelSelector.matchExpressions.0."
            "operator: Input should be 'In', 'NotIn', 'Exists' or 'DoesNotExist' (got 'Has')"
        ],
    ),
    (
        "wrong apiVersion",
        HEAD.replace("v1alpha1", "v1") + GOOD_SPEC,
        [
            "document 1 (line 1), line 1, field apiVersion: Input should be "
            "'gpu-admission.io/v1alpha1' (got 'gpu-admission.io/v1')"
        ],
    ),
    (
        "missing enforcementAction",
        HEAD + "  check: memory-fit\n",
        ["document 1 (line 1), line 5, field spec.enforcementAction: Field required"],
    ),
    (
        "unknown enforcementAction",
        HEAD + "  enforcementAction: block\n  check: memory-fit\n",
        [
            "document 1 (line 1), line 6, field spec.enforcementAction: Input should be "
            "'deny', 'warn' or 'dryrun' (got 'block')"
        ],
    ),
    (
        "bad name",
        HEAD.replace("name: p", "name: GPU_Policy") + GOOD_SPEC,
        [
            "document 1 (line 1), line 4, field metadata.name: String should match pattern "
            "'^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' (got 'GPU_Policy')"
        ],
    ),
    (
        "missing spec",
        "apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: p}\n",
        ["document 1 (line 1), line 1, field spec: Field required"],
    ),
    (
        "another kind",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
        [
            "document 1 (line 1): kind must be GPUPolicy, WorkloadKinds or ClusterProfile, "
            "got 'ConfigMap'"
        ],
    ),
    (
        "not a mapping",
        "- just\n- a list\n",
        ["document 1 (line 1): kind must be GPUPolicy, WorkloadKinds or ClusterProfile, got None"],
    ),
    (
        "workload kind without templates",
        "apiVersion: gpu-admission.io/v1alpha1\nkind: WorkloadKinds\nmetadata: {name: k}\n"
        "spec:\n  customResources:\n    - {group: example.com, kind: Thing, templates: []}\n",
        [
            "document 1 (line 1), line 6, field spec.customResources.0: Value error, give at "
            "least one of templates, podSpecs, containers (got {'group': 'example.com', "
            "'kind': 'Thing', 'templates': []})"
        ],
    ),
    (
        "second document broken, errors in both",
        HEAD + "  enforcementAction: deny\n  check: nope\n---\n" + HEAD + "  check: slo-class\n",
        [
            'document 1 (GPUPolicy "p"), line 7, field spec.check: unknown check '
            "'nope'; built-in checks: device-injection, distributed, dra-claims, dra-guardrails, "
            "memory-fit, queues, "
            "resource-names, slo-class, tenancy",
            "document 2 (line 9), line 13, field spec.enforcementAction: Field required",
        ],
    ),
]


EMPTY = (
    "holds no GPUPolicy or WorkloadKinds document (empty, or only whitespace, comments "
    "and ---): a half-written file? To drop its policies, delete the file"
)
# A file that loads to nothing is an error, at load and at reload: a file caught between
# truncation and write would otherwise drop its policies without a word.
BROKEN += [
    ("empty file", "", [EMPTY]),
    ("whitespace only", "  \n\n   \n", [EMPTY]),
    ("comments and separators only", "# gpu-device-injection\n---\n# later\n---\n", [EMPTY]),
    ("null documents only", "---\nnull\n---\n~\n", [EMPTY]),
]


@pytest.mark.parametrize(("text", "errors"), [r[1:] for r in BROKEN], ids=[r[0] for r in BROKEN])
def test_broken_policy_file(tmp_path: Path, text: str, errors: list[str]) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError) as info:
        load_policy_dir(tmp_path)
    assert str(info.value).splitlines() == [f"{path}: {e}" for e in errors]


def test_invalid_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(HEAD + "  enforcementAction: deny\n  check: [memory-fit\n")
    with pytest.raises(PolicyError, match=rf"^{re.escape(str(path))}:8: invalid YAML: "):
        load_policy_dir(tmp_path)


def test_errors_of_all_files_come_together(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(HEAD + "  check: memory-fit\n")
    (tmp_path / "b.yaml").write_text("a: [\n")
    (tmp_path / "c.yaml").write_text(HEAD.replace("name: p", "name: q") + GOOD_SPEC)
    with pytest.raises(PolicyError) as info:
        load_policy_dir(tmp_path)
    lines = str(info.value).splitlines()
    assert [line.split(":")[0] for line in lines] == [
        str(tmp_path / "a.yaml"),
        str(tmp_path / "b.yaml"),
    ]


def test_duplicate_names(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(HEAD + GOOD_SPEC)
    (tmp_path / "b.yaml").write_text(HEAD + GOOD_SPEC)
    with pytest.raises(PolicyError, match=r"^policy name 'p' is defined more than once: in "):
        load_policy_dir(tmp_path)


def test_duplicate_names_name_both_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(HEAD + GOOD_SPEC)
    (tmp_path / "b.yaml").write_text(HEAD + GOOD_SPEC)
    with pytest.raises(PolicyError) as info:
        load_policy_dir(tmp_path)
    assert "a.yaml" in str(info.value) and "b.yaml" in str(info.value)


def test_directory_problems(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"nowhere: policy directory not found$"):
        load_policy_dir(tmp_path / "nowhere")
    (tmp_path / "kinds.yaml").write_text((POLICIES / "workload-kinds.yaml").read_text())
    (tmp_path / "notes.txt").write_text("not a policy")
    with pytest.raises(
        PolicyError, match=rf"^{re.escape(str(tmp_path))}: no GPUPolicy documents found$"
    ):
        load_policy_dir(tmp_path)


def test_json_policies_and_subdirectories(tmp_path: Path) -> None:
    (tmp_path / "team-a").mkdir()
    doc = {
        "apiVersion": "gpu-admission.io/v1alpha1",
        "kind": "GPUPolicy",
        "metadata": {"name": "team-a-memory"},
        "spec": {
            "enforcementAction": "warn",
            "check": "memory-fit",
            "match": {"namespaces": ["team-a-*"]},
            "parameters": {"require": "any"},
            "messagePrefix": "[team-a] ",
        },
    }
    (tmp_path / "team-a" / "memory.json").write_text(json.dumps(doc))
    (policy,) = load_policy_dir(tmp_path).policies
    assert (policy.name, policy.action, policy.params.require, policy.message_prefix) == (
        "team-a-memory",
        "warn",
        "any",
        "[team-a] ",
    )
    assert policy.source == str(tmp_path / "team-a" / "memory.json")


def test_digest_follows_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(HEAD + GOOD_SPEC)
    first = load_policy_files([path], root=tmp_path).digest
    assert load_policy_files([path], root=tmp_path).digest == first
    path.write_text(HEAD + GOOD_SPEC + "  description: now documented\n")
    assert load_policy_files([path], root=tmp_path).digest != first


def test_an_unreadable_policy_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.yaml").write_text(HEAD + GOOD_SPEC)
    (tmp_path / "b.yaml").write_text(HEAD.replace("name: p", "name: q") + GOOD_SPEC)
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "b.yaml":  # root reads any file, so the failure is simulated
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    with pytest.raises(PolicyError, match=r"b\.yaml: cannot read: Permission denied$"):
        load_policy_dir(tmp_path)
