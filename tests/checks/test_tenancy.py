"""gpu-tenancy through the engine: each tenant's products, MIG profiles, sharing modes,
DeviceClasses and limits, with the exact messages (docs/tenancy.md).

The tenants are docs/tenancy.md's worked example (examples/tenancy/policies: research,
inference, students) on its cluster (examples/tenancy/nodes.yaml), and `team-b` below
for what the example does not show.
"""

from __future__ import annotations

import pickle
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import (
    POLICIES,
    ROOT,
    container,
    gpu,
    only,
    pod,
    run,
    template_of,
)
from tests.support.clirun import gpu_admission
from webhook.core.dra.model import DraSupply
from webhook.core.engine.policy import PolicySet
from webhook.core.engine.reads import Reads
from webhook.core.supply.inventory import Inventory
from webhook.errors import PolicyError
from webhook.sources.files import read_inventory
from webhook.sources.policy_files import load_policy_dir, load_policy_files

EXAMPLE = load_policy_dir(ROOT / "examples/tenancy/policies")
CLUSTER = read_inventory(str(ROOT / "examples/tenancy/nodes.yaml"))
UNKNOWN = Inventory.unknown()
L4 = {"nvidia.com/gpu.product": "NVIDIA-L4"}
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
SHARED_WHY = "time-sliced replicas share the GPU's memory and compute with no isolation"

HEAD = """apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: gpu-tenancy}
spec:
  enforcementAction: deny
  check: tenancy
  parameters:
    tenants:
"""
TEAM_B = """      - name: team-b
        namespaces: [team-b]
        draClasses: [gpu.nvidia.com, mig.nvidia.com]
        maxGpusPerJob: 4
        maxGpuMemoryPerPod: 40Gi
        maxGpuMemoryPerJob: 100Gi
"""


def tenancy(tmp_path: Path, tenants: str) -> PolicySet:
    path = tmp_path / "gpu-tenancy.yaml"
    path.write_text(HEAD + tenants)
    return load_policy_files([path, POLICIES / "workload-kinds.yaml"])


@pytest.fixture
def team_b(tmp_path: Path) -> PolicySet:
    return tenancy(tmp_path, TEAM_B)


def findings(
    policies: PolicySet, obj: dict[str, Any], inventory: Inventory, namespace: str
) -> list[tuple[str, str, str]]:
    decision = run(policies, obj, inventory, namespace=namespace)
    return [(f.rule, f.action, f.message) for f in decision.findings]


def job(parallelism: int, pod_obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"parallelism": parallelism, "template": template_of(pod_obj), **spec},
    }


def deployment(replicas: int, pod_obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"replicas": replicas, "template": template_of(pod_obj)},
    }


def pytorchjob(master: dict[str, Any], workers: int, worker: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "train"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template_of(master)},
                "Worker": {"replicas": workers, "template": template_of(worker)},
            }
        },
    }


def daemonset(pod_obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "ds"},
        "spec": {"template": template_of(pod_obj)},
    }


WITH_INVENTORY = [
    (
        "research: 3 Pods x 8 H100s",
        "research-vision",
        job(3, pod(gpu(count=8, name="train"), nodeSelector=H100)),
        [
            (
                "too-many-gpus-per-job",
                "deny",
                "tenant research may use at most 16 GPUs per job; the Job runs 3 Pods x 8 GPUs "
                "= 24 GPUs. Run at most 2 Pods at once, or ask for fewer GPUs per Pod.",
            )
        ],
    ),
    (
        "research: 2 Pods x 2 A100 slices",
        "research",
        job(2, pod(gpu("nvidia.com/mig-3g.40gb", 2))),
        [],
    ),
    (
        "research on an L4",
        "research",
        pod(gpu(), nodeSelector=L4),
        [
            (
                "product-not-allowed",
                "deny",
                "tenant research may use only NVIDIA-A100-SXM4-80GB or NVIDIA-H100-80GB-HBM3 "
                'GPUs, but container "main" asks 1 nvidia.com/gpu, which is NVIDIA-L4 on node '
                "l4-dedicated-0, where it can land. Pin the pod with nodeSelector "
                "nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3.",
            )
        ],
    ),
    (
        "inference unpinned",
        "inference-prod",
        deployment(2, pod(gpu(name="server"))),
        [
            (
                "product-not-allowed",
                "deny",
                'tenant inference may use only NVIDIA-L4 GPUs, but container "server" asks 1 '
                "nvidia.com/gpu, which is NVIDIA-H100-80GB-HBM3 on node h100-0, h100-1, where it "
                "can land. Pin the pod with nodeSelector nvidia.com/gpu.product: NVIDIA-L4.",
            ),
            (
                "untrusted-on-shared-gpu",
                "deny",
                "tenant inference is untrusted, so its Pods may not run on a GPU shared with "
                'others, but container "server" asks 1 nvidia.com/gpu, which is time-slicing (4 '
                "replicas per device) on node l4-shared-0, l4-shared-1, where it can land: "
                f"{SHARED_WHY}. Pin the pod with nodeSelector nvidia.com/gpu.product: NVIDIA-L4.",
            ),
            (
                "too-much-gpu-memory-per-pod",
                "deny",
                "tenant inference may use at most 24Gi of GPU memory per Pod; container "
                '"server" asks 1 nvidia.com/gpu (1 x 79.648Gi = 79.648Gi, label '
                "nvidia.com/gpu.memory on node h100-0, h100-1). Pin the pod with nodeSelector "
                "nvidia.com/gpu.product: NVIDIA-L4, where it stays within the limit.",
            ),
        ],
    ),
    (
        "inference on the dedicated L4s",
        "inference-canary",
        deployment(2, pod(gpu(), nodeSelector=L4)),
        [],
    ),
    (
        "inference on two L4s",
        "inference-prod",
        pod(gpu(name="server", count=2), nodeSelector=L4),
        [
            (
                "too-many-gpus-per-pod",
                "deny",
                'tenant inference may use at most 1 GPU per Pod; container "server" asks 2 '
                "nvidia.com/gpu (2 GPUs). Ask for at most 1, or spread the work over more Pods.",
            ),
            (
                "too-much-gpu-memory-per-pod",
                "deny",
                "tenant inference may use at most 24Gi of GPU memory per Pod; container "
                '"server" asks 2 nvidia.com/gpu (2 x 22.495Gi = 44.99Gi, label '
                "nvidia.com/gpu.memory on node l4-dedicated-0). Ask for at most 1 "
                "nvidia.com/gpu, or spread the work over more Pods.",
            ),
        ],
    ),
    (
        "inference on an A100 slice",
        "inference-prod",
        pod(gpu("nvidia.com/mig-1g.10gb", name="server")),
        [
            (
                "product-not-allowed",
                "deny",
                'tenant inference may use only NVIDIA-L4 GPUs, but container "server" asks 1 '
                "nvidia.com/mig-1g.10gb, which is NVIDIA-A100-SXM4-80GB on node a100-mig-0, "
                "a100-mig-1, where it can land. No node of the inventory offers "
                "nvidia.com/mig-1g.10gb on one of them.",
            )
        ],
    ),
    (
        "inference on a HAMi share",
        "inference-prod",
        pod(
            container("server", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 8000}),
            nodeSelector=L4,
        ),
        [
            (
                "untrusted-on-shared-gpu",
                "deny",
                "tenant inference is untrusted, so its Pods may not run on a GPU shared with "
                'others, but container "server" asks for part of a GPU (nvidia.com/gpumem: '
                "8000, HAMi), vgpu wherever it lands: vGPU shares split one GPU with only "
                "software limits between tenants.",
            )
        ],
    ),
    ("students: 2 slices", "student-alice", pod(gpu("nvidia.com/mig-1g.10gb", 2)), []),
    (
        "students: 3 slices",
        "student-alice",
        pod(gpu("nvidia.com/mig-1g.10gb", 3, name="jupyter")),
        [
            (
                "too-many-gpus-per-pod",
                "deny",
                'tenant students may use at most 2 GPUs per Pod; container "jupyter" asks 3 '
                "nvidia.com/mig-1g.10gb (3 GPUs). Ask for at most 2, or spread the work over "
                "more Pods.",
            )
        ],
    ),
    (
        "students: a 3g.40gb slice",
        "student-bob",
        pod(gpu("nvidia.com/mig-3g.40gb", name="jupyter")),
        [
            (
                "mig-profile-not-allowed",
                "deny",
                'tenant students may use only MIG profiles 1g.10gb, but container "jupyter" asks '
                "1 nvidia.com/mig-3g.40gb, a 3g.40gb slice. Request nvidia.com/mig-1g.10gb "
                "instead.",
            )
        ],
    ),
    (
        "students: a whole L4",
        "student-bob",
        pod(gpu(name="jupyter"), nodeSelector=L4),
        [
            (
                "sharing-not-allowed",
                "deny",
                'tenant students may use only mig GPUs, but container "jupyter" asks 1 '
                "nvidia.com/gpu, which is exclusive on node l4-dedicated-0, where it can land. "
                "Request nvidia.com/mig-1g.10gb instead.",
            )
        ],
    ),
    (
        "students: 3 Pods x 2 slices",
        "student-bob",
        job(3, pod(gpu("nvidia.com/mig-1g.10gb", 2)), completions=12),
        [
            (
                "too-much-gpu-memory-per-job",
                "deny",
                "tenant students may use at most 40Gi of GPU memory per job; the Job runs 3 "
                "Pods x 19.25Gi = 57.75Gi. Run fewer Pods, or ask for less GPU memory per Pod.",
            )
        ],
    ),
    # A namespace of no tenant, by name or (labels known) by selector: not judged.
    ("no tenant", "platform-tools", pod(gpu(count=8)), []),
    # The labels of `sandbox` are not known: inference's selector cannot be matched.
    (
        "an unknown namespace",
        "sandbox",
        pod(gpu()),
        [
            (
                "unknown-tenant",
                "warn",
                "namespace sandbox is named by no tenant, and its labels are not known (no "
                "Namespace object in the inventory), so whether the namespaceSelector of tenant "
                "inference takes it cannot be told and its GPU use is not judged. Give the "
                "Namespace with the checked files or the inventory (kubectl get namespaces -o "
                "yaml), or name it in the tenant's namespaces.",
            )
        ],
    ),
    ("no GPU", "student-bob", pod(container("web")), []),
]


@pytest.mark.parametrize(
    ("namespace", "obj", "expected"),
    [r[1:] for r in WITH_INVENTORY],
    ids=[r[0] for r in WITH_INVENTORY],
)
def test_the_example_tenants(namespace: str, obj: dict[str, Any], expected: list[Any]) -> None:
    assert findings(EXAMPLE, obj, CLUSTER, namespace) == expected


WITHOUT_INVENTORY = [
    # MIG names say enough: the profile, and the catalog's memory of it.
    (
        "student-bob",
        pod(gpu("nvidia.com/mig-3g.40gb", name="jupyter")),
        [
            (
                "mig-profile-not-allowed",
                "deny",
                'tenant students may use only MIG profiles 1g.10gb, but container "jupyter" asks '
                "1 nvidia.com/mig-3g.40gb, a 3g.40gb slice. Request nvidia.com/mig-1g.10gb "
                "instead.",
            ),
        ],
    ),
    # A pinned product, and a sharing strategy pinned by nodeSelector.
    (
        "research",
        pod(gpu(), nodeSelector={**L4, "nvidia.com/gpu.sharing-strategy": "time-slicing"}),
        [
            (
                "product-not-allowed",
                "deny",
                "tenant research may use only NVIDIA-A100-SXM4-80GB or NVIDIA-H100-80GB-HBM3 "
                "GPUs, but the pod is pinned to NVIDIA-L4 "
                '(spec.nodeSelector["nvidia.com/gpu.product"]). Pin it to NVIDIA-A100-SXM4-80GB '
                "or NVIDIA-H100-80GB-HBM3.",
            ),
            (
                "sharing-not-allowed",
                "deny",
                'tenant research may use only exclusive or mig GPUs, but container "main" asks 1 '
                "nvidia.com/gpu, time-slicing by the pod's nodeSelector "
                "nvidia.com/gpu.sharing-strategy.",
            ),
        ],
    ),
    # What the request does not say is a warning, never an allow.
    (
        "research",
        pod(gpu()),
        [
            (
                "product-not-allowed",
                "warn",
                "tenant research may use only NVIDIA-A100-SXM4-80GB or NVIDIA-H100-80GB-HBM3 "
                'GPUs; container "main" asks 1 nvidia.com/gpu, and without an inventory nothing '
                "says which GPU product it lands on (the pod pins none). Pin it with "
                "nodeSelector nvidia.com/gpu.product, or pass --inventory to judge the real "
                "nodes.",
            ),
            (
                "sharing-not-allowed",
                "warn",
                'tenant research may use only exclusive or mig GPUs; container "main" asks 1 '
                "nvidia.com/gpu, which may be time-slicing, mps or vgpu: without an inventory "
                "its sharing mode is not known. Pin it with nodeSelector "
                "nvidia.com/gpu.sharing-strategy, or pass --inventory to judge the real nodes.",
            ),
        ],
    ),
    (
        "research",
        pod(gpu(), nodeSelector={**H100, "nvidia.com/gpu.sharing-strategy": "none"}),
        [],
    ),
    (
        "student-bob",
        pod(gpu("nvidia.com/gpu.shared", name="jupyter")),
        [
            (
                "sharing-not-allowed",
                "deny",
                'tenant students may use only mig GPUs, but container "jupyter" asks 1 '
                "nvidia.com/gpu.shared, time-slicing or mps by its name.",
            ),
            (
                "too-much-gpu-memory-per-job",
                "warn",
                "tenant students may use at most 40Gi of GPU memory per job; container "
                '"jupyter" asks 1 nvidia.com/gpu.shared, and the memory of one device is not '
                "known (no inventory given, and the Pod pins no GPU product), so what the Pod "
                "takes cannot be judged. Pin a GPU product with nodeSelector "
                "nvidia.com/gpu.product, or pass --inventory to judge the real nodes.",
            ),
        ],
    ),
    # The Namespace's labels come with the inventory: without one, only names match.
    (
        "inference-prod",
        pod(gpu()),
        [
            (
                "unknown-tenant",
                "warn",
                "namespace inference-prod is named by no tenant, and its labels are not known "
                "(no Namespace object in the inventory), so whether the namespaceSelector of "
                "tenant inference takes it cannot be told and its GPU use is not judged. Give "
                "the Namespace with the checked files or the inventory (kubectl get namespaces "
                "-o yaml), or name it in the tenant's namespaces.",
            )
        ],
    ),
]


@pytest.mark.parametrize(("namespace", "obj", "expected"), WITHOUT_INVENTORY)
def test_without_inventory_the_request_speaks(
    namespace: str, obj: dict[str, Any], expected: list[Any]
) -> None:
    assert findings(EXAMPLE, obj, UNKNOWN, namespace) == expected


def test_without_inventory_a_mig_slice_has_the_catalogs_memory(team_b: PolicySet) -> None:
    assert findings(
        team_b, pod(gpu("nvidia.com/mig-3g.40gb", 2, name="train")), UNKNOWN, "team-b"
    ) == [
        (
            "too-much-gpu-memory-per-pod",
            "deny",
            'tenant team-b may use at most 40Gi of GPU memory per Pod; container "train" asks 2 '
            "nvidia.com/mig-3g.40gb (2 x 39.25Gi = 78.5Gi, smallest catalog value of this "
            "profile, A100 80GB; no inventory given). Ask for at most 1 "
            "nvidia.com/mig-3g.40gb, or spread the work over more Pods.",
        )
    ]


def test_a_pod_over_the_memory_per_pod(team_b: PolicySet) -> None:
    assert findings(
        team_b, pod(gpu("nvidia.com/mig-3g.40gb", 2, name="train")), CLUSTER, "team-b"
    ) == [
        (
            "too-much-gpu-memory-per-pod",
            "deny",
            'tenant team-b may use at most 40Gi of GPU memory per Pod; container "train" asks 2 '
            "nvidia.com/mig-3g.40gb (2 x 39.25Gi = 78.5Gi, label nvidia.com/mig-3g.40gb.memory "
            "on node a100-mig-0, a100-mig-1). Ask for at most 1 nvidia.com/mig-3g.40gb, or "
            "spread the work over more Pods.",
        )
    ]


def test_a_share_is_judged_by_the_memory_it_asks(team_b: PolicySet) -> None:
    hami = pod(container("main", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 50000}))
    assert findings(team_b, hami, CLUSTER, "team-b") == [
        (
            "too-much-gpu-memory-per-pod",
            "deny",
            'tenant team-b may use at most 40Gi of GPU memory per Pod; container "main" asks '
            "for part of a GPU (nvidia.com/gpumem: 50000, HAMi) (1 x 48.829Gi = 48.829Gi, "
            "nvidia.com/gpumem: 50000). Ask for at most 40Gi (nvidia.com/gpumem: 40960).",
        )
    ]
    # Half of the largest GPU it can land on (an H100's 81559 MiB) is within 40Gi.
    kai = pod(container("main"), annotations={"gpu-fraction": "0.5"})
    assert findings(team_b, kai, CLUSTER, "team-b") == []


def test_a_job_adds_up_its_roles(team_b: PolicySet) -> None:
    big = pytorchjob(pod(gpu("nvidia.com/mig-3g.40gb")), 3, pod(gpu("nvidia.com/mig-3g.40gb")))
    assert findings(team_b, big, CLUSTER, "team-b") == [
        (
            "too-much-gpu-memory-per-job",
            "deny",
            'tenant team-b may use at most 100Gi of GPU memory per job; role "Master" 1 Pod x '
            '39.25Gi + role "Worker" 3 Pods x 39.25Gi = 157Gi. Run fewer Pods, or ask for less '
            "GPU memory per Pod.",
        )
    ]
    many = pytorchjob(pod(gpu("nvidia.com/mig-1g.10gb")), 4, pod(gpu("nvidia.com/mig-1g.10gb")))
    decision = run(team_b, many, CLUSTER, namespace="team-b")
    ((rule, message, path),) = [(f.rule, f.message, f.path) for f in decision.findings]
    assert (rule, message) == (
        "too-many-gpus-per-job",
        'tenant team-b may use at most 4 GPUs per job; role "Master" 1 Pod x 1 GPU + role '
        '"Worker" 4 Pods x 1 GPU = 5 GPUs. Run fewer Pods, or ask for fewer GPUs per Pod.',
    )
    assert path[:3] == ("spec", "pytorchReplicaSpecs", "Master")


def test_a_daemonset_counts_at_least_one_pod(team_b: PolicySet) -> None:
    one = daemonset(pod(gpu("nvidia.com/mig-1g.10gb")))
    assert findings(team_b, one, CLUSTER, "team-b") == [
        (
            "too-many-gpus-per-job",
            "warn",
            "tenant team-b may use at most 4 GPUs per job, but the DaemonSet runs a number of "
            "Pods the object does not fix, each with 1 GPU, so the job's GPUs cannot be counted.",
        ),
        (
            "too-much-gpu-memory-per-job",
            "warn",
            "tenant team-b may use at most 100Gi of GPU memory per job, but the DaemonSet runs "
            "a number of Pods the object does not fix, each with 9.625Gi, so the job's GPU "
            "memory cannot be added up.",
        ),
    ]
    five = daemonset(pod(gpu("nvidia.com/mig-1g.10gb", 5)))
    rules = [(r, a) for r, a, _ in findings(team_b, five, CLUSTER, "team-b")]
    assert rules == [
        ("too-much-gpu-memory-per-pod", "deny"),
        ("too-many-gpus-per-job", "deny"),
        ("too-much-gpu-memory-per-job", "warn"),
    ]
    assert findings(team_b, five, CLUSTER, "team-b")[1][2].startswith(
        "tenant team-b may use at most 4 GPUs per job; the DaemonSet runs at least 1 Pod x 5 "
        "GPUs = at least 5 GPUs."
    )


CLAIMS = DraSupply().with_object(
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "any-gpu", "namespace": "team-b"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "firstAvailable": [
                                {"name": "mig", "deviceClassName": "mig.nvidia.com"},
                                {"name": "vfio", "deviceClassName": "vfio.gpu.nvidia.com"},
                            ],
                        }
                    ]
                }
            }
        },
    }
)
CLASSES = "tenant team-b may use only DeviceClass gpu.nvidia.com or mig.nvidia.com, but "


def test_dra_classes_of_a_pods_claims(team_b: PolicySet) -> None:
    # Every alternative of firstAvailable may be the one allocated.
    obj = pod(
        container("main", resources={"claims": [{"name": "gpu"}]}),
        resourceClaims=[
            {"name": "gpu", "resourceClaimTemplateName": "any-gpu"},
            {"name": "x", "resourceClaimName": "shared-gpu"},
        ],
    )
    assert findings(team_b, obj, CLUSTER.with_dra(CLAIMS), "team-b") == [
        (
            "dra-class-not-allowed",
            "deny",
            CLASSES + 'pod claim "gpu" (spec.resourceClaims[0]): ResourceClaimTemplate "any-gpu" '
            'request "gpu/vfio" names DeviceClass vfio.gpu.nvidia.com. Ask for one of those '
            "classes.",
        ),
        (
            "dra-class-not-allowed",
            "warn",
            CLASSES + 'pod claim "x" (spec.resourceClaims[1]): ResourceClaim "shared-gpu" is not '
            "in the inventory, so the classes it asks for cannot be judged. Give it with the "
            "checked files, or in the inventory.",
        ),
    ]


def test_dra_classes_as_extended_resources_and_claim_objects(team_b: PolicySet) -> None:
    implicit = pod(gpu("deviceclass.resource.kubernetes.io/vfio.gpu.nvidia.com"))
    assert findings(team_b, implicit, CLUSTER, "team-b") == [
        (
            "dra-class-not-allowed",
            "deny",
            CLASSES + 'container "main" asks deviceclass.resource.kubernetes.io/vfio.gpu.nvidia.com'
            ", a device of DeviceClass vfio.gpu.nvidia.com. Ask for one of those classes.",
        )
    ]
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "vfio.gpu.nvidia.com"}}]
            }
        },
    }
    decision = run(team_b, claim, CLUSTER, namespace="team-b")
    assert [(f.rule, f.message, f.path) for f in decision.findings] == [
        (
            "dra-class-not-allowed",
            CLASSES + 'ResourceClaim "c" request "gpu" names DeviceClass vfio.gpu.nvidia.com. Ask '
            "for one of those classes.",
            ("spec", "devices", "requests", 0, "exactly"),
        )
    ]
    assert findings(team_b, claim, CLUSTER, "elsewhere") == []


BAD_PARAMS = [
    (
        "      - {name: a, namespaces: [x], sharing: [timeslicing]}\n",
        "line 9, field spec.parameters.tenants.0.sharing: Value error, unknown sharing mode "
        "'timeslicing'; use some of: exclusive, mig, time-slicing, mps, vgpu (got ['timeslicing'])",
    ),
    (
        "      - {name: a}\n",
        "line 9, field spec.parameters.tenants.0.namespaces: Value error, tenant 'a' has neither "
        "namespaces nor a namespaceSelector: it would match no namespace (got None)",
    ),
    (
        "      - {name: a, namespaces: [x], maxGpuMemoryPerPod: 40GB}\n",
        "line 9, field spec.parameters.tenants.0.maxGpuMemoryPerPod: Value error, '40GB' is not "
        "a Kubernetes quantity: write e.g. 40Gi or 80G (got '40GB')",
    ),
    (
        "      - {name: a, namespaces: [x], maxGpuMemoryPerJob: '40'}\n",
        "line 9, field spec.parameters.tenants.0.maxGpuMemoryPerJob: Value error, '40' has no "
        "unit, so it means 40 bytes: write e.g. 40Gi (got '40')",
    ),
    (
        "      - {name: a, namespaces: [x], migProfiles: [nvidia.com/mig-1g.10gb]}\n",
        "line 9, field spec.parameters.tenants.0.migProfiles: Value error, "
        "'nvidia.com/mig-1g.10gb' is not a MIG profile: write it as nvidia-smi does, e.g. "
        "1g.10gb or 3g.40gb (not the resource name nvidia.com/mig-1g.10gb) (got "
        "['nvidia.com/mig-1g.10gb'])",
    ),
    (
        "      - {name: a, namespaceSelector: {matchExpressions: [{key: team, operator: In}]}}\n",
        "line 9, field spec.parameters.tenants.0.namespaceSelector: Value error, "
        "matchExpressions key 'team': operator In needs values (metav1.LabelSelector) (got "
        "{'matchExpressions': [{'key': 'team', 'operator': 'In'}]})",
    ),
    (
        "      - {name: a, namespaceSelector: {matchExpressions: [{key: t, operator: Has}]}}\n",
        "line 9, field spec.parameters.tenants.0.namespaceSelector.matchExpressions.0.operator: "
        "Input should be 'In', 'NotIn', 'Exists' or 'DoesNotExist' (got 'Has')",
    ),
    (
        "      - {name: a, namespaces: [x]}\n      - {name: a, namespaces: [z]}\n",
        "line 8, field spec.parameters.tenants: Value error, tenant 'a' is given twice (got "
        "[{'name': 'a', 'namespaces': ['x']}, {'name': 'a', 'namespac)",
    ),
    (
        "      - {name: a, namespaces: [x], trust: maybe}\n",
        "line 9, field spec.parameters.tenants.0.trust: Input should be 'trusted' or "
        "'untrusted' (got 'maybe')",
    ),
    (
        "      - {name: a, namespaces: [x], maxGpusPerPod: -1}\n",
        "line 9, field spec.parameters.tenants.0.maxGpusPerPod: Value error, -1 is below zero: "
        "write a count of GPUs (got -1)",
    ),
    (
        "      - {name: a, namespaces: [x], gpus: 1}\n",
        "line 9, field spec.parameters.tenants.0.gpus: unknown field (got 1)",
    ),
]


@pytest.mark.parametrize(("tenants", "error"), BAD_PARAMS)
def test_bad_parameters_name_their_field(tmp_path: Path, tenants: str, error: str) -> None:
    path = tmp_path / "gpu-tenancy.yaml"
    path.write_text(HEAD + tenants)
    with pytest.raises(PolicyError) as info:
        load_policy_files([path])
    assert str(info.value) == f'{path}: document 1 (GPUPolicy "gpu-tenancy"), {error}'


def test_the_shipped_policy_judges_nothing_until_tenants_are_configured() -> None:
    shipped = only("gpu-tenancy")
    (policy,) = [p for p in shipped.policies if p.name == "gpu-tenancy"]
    assert policy.action == "deny" and policy.reads == {}
    decision = run(shipped, pod(gpu("nvidia.com/mig-1g.10gb", 8)), CLUSTER, namespace="research")
    assert decision.findings == ()


def test_what_it_reads_follows_the_tenants(tmp_path: Path) -> None:
    (example,) = EXAMPLE.policies
    assert example.reads == {
        "workload": Reads(
            extended_resources=True,
            claims=True,
            annotations=frozenset({"gpu-fraction", "gpu-memory"}),
            dra_supply=True,
        ),
        "claim": Reads(dra_supply=True),
    }
    by_name = tenancy(tmp_path, "      - {name: a, namespaces: [a], maxGpusPerPod: 1}\n")
    (policy,) = [p for p in by_name.policies if p.name == "gpu-tenancy"]
    assert policy.reads == {
        "workload": Reads(
            extended_resources=True, annotations=frozenset({"gpu-fraction", "gpu-memory"})
        )
    }


def test_a_configured_policy_set_pickles() -> None:
    # The policy cache pickles policy sets: the tenants' derived models are left out.
    again = pickle.loads(pickle.dumps(EXAMPLE))
    obj = pod(gpu("nvidia.com/mig-1g.10gb", 3))
    assert findings(again, obj, CLUSTER, "student-alice") == findings(
        EXAMPLE, obj, CLUSTER, "student-alice"
    )


def doc_commands() -> list[tuple[str, str]]:
    """Each `$ gpu-admission ...` line of docs/tenancy.md with the output shown under it."""
    found: list[tuple[str, str]] = []
    text = (ROOT / "docs/tenancy.md").read_text()
    for block in text.split("```")[1::2]:
        lines = block.strip("\n").split("\n")
        if lines[0].startswith("$ gpu-admission "):
            found.append((lines[0][2:], "\n".join(lines[1:]) + "\n"))
    return found


@pytest.mark.parametrize(("command", "output"), doc_commands(), ids=lambda v: v[:60])
def test_the_docs_show_what_the_commands_print(command: str, output: str) -> None:
    done = gpu_admission(*shlex.split(command)[1:])
    assert done.stdout == output
    assert done.returncode == (0 if " test " in f" {command} " else 1), done.stderr


def test_a_roles_pod_is_named_by_its_role(tmp_path: Path) -> None:
    policies = tenancy(tmp_path, "      - {name: t, namespaces: [t], maxGpusPerPod: 2}\n")
    obj = pytorchjob(pod(gpu("nvidia.com/mig-1g.10gb")), 2, pod(gpu("nvidia.com/mig-1g.10gb", 3)))
    decision = run(policies, obj, CLUSTER, namespace="t")
    assert [(f.rule, f.message, f.path[:3]) for f in decision.findings] == [
        (
            "too-many-gpus-per-pod",
            'tenant t may use at most 2 GPUs per Pod; in role "Worker", container "main" asks 3 '
            "nvidia.com/mig-1g.10gb (3 GPUs). Ask for at most 2, or spread the work over more "
            "Pods.",
            ("spec", "pytorchReplicaSpecs", "Worker"),
        )
    ]
