"""Blast radius of a webhook outage, decided by the kube-apiserver's own admission code.

The rendered ValidatingWebhookConfiguration (caBundle from webhook.serve.certs) is loaded
into `apiserverhook` (see /work/shared/tools/apiserverhook/README.md), which runs the
apiserver's validating-webhook plugin: rules, namespaceSelector and matchConditions
(CEL compiled and evaluated as in kube-apiserver 1.36). The Service resolves to a
closed port, so with failurePolicy Fail every request that reaches the webhook is
refused with "failed calling webhook"; whatever is allowed never reached it.

Every object that a shipped policy could deny must be refused (the outage blocks it,
as it should: nothing unchecked gets in). Everything else must be allowed: the
outage does not touch it. A matchCondition that errors would refuse the request too,
so the odd objects below prove the expressions never fail.
"""

from __future__ import annotations

import base64
import copy
import shutil
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.apiserverhook import APISERVERHOOK, Obj, run_cases, write_webhook_config
from webhook.serve import certs

REFUSED = "failed calling webhook"


pytestmark = [
    pytest.mark.skipif(not APISERVERHOOK.exists(), reason=f"{APISERVERHOOK} not found"),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed"),
]

# --- objects ------------------------------------------------------------------------


def plain_pod_spec() -> Obj:
    return {
        "containers": [
            {
                "name": "web",
                "image": "nginx:1.27",
                "resources": {
                    "requests": {"cpu": "100m", "memory": "64Mi"},
                    "limits": {"cpu": "1", "memory": "128Mi"},
                },
            }
        ]
    }


def first(spec: Obj) -> Obj:
    container: Obj = spec["containers"][0]
    return container


def _gpu_limit(resource: str) -> Callable[[Obj, Obj], None]:
    def apply(spec: Obj, meta: Obj) -> None:
        first(spec)["resources"]["limits"][resource] = "1"

    return apply


def _gpu_request(spec: Obj, meta: Obj) -> None:
    first(spec)["resources"]["requests"]["amd.com/gpu"] = "1"


def _init_gpu(spec: Obj, meta: Obj) -> None:
    spec["initContainers"] = [
        {"name": "warmup", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    ]


def _sidecar_env(spec: Obj, meta: Obj) -> None:
    spec["initContainers"] = [
        {
            "name": "agent",
            "image": "x",
            "restartPolicy": "Always",
            "env": [{"name": "NVIDIA_IMEX_CHANNELS", "value": "0"}],
        }
    ]


def _host_path(path: str) -> Callable[[Obj, Obj], None]:
    def apply(spec: Obj, meta: Obj) -> None:
        spec["volumes"] = [{"name": "dev", "hostPath": {"path": path}}]
        first(spec)["volumeMounts"] = [{"name": "dev", "mountPath": "/dev/nvidia0"}]

    return apply


def _env(name: str, **value: Any) -> Callable[[Obj, Obj], None]:
    def apply(spec: Obj, meta: Obj) -> None:
        first(spec)["env"] = [{"name": "LANG", "value": "C"}, {"name": name, **value}]

    return apply


def _privileged(spec: Obj, meta: Obj) -> None:
    first(spec)["securityContext"] = {"privileged": True}


def _annotation(key: str) -> Callable[[Obj, Obj], None]:
    def apply(spec: Obj, meta: Obj) -> None:
        meta["annotations"] = {"team": "ml", key: "nvidia.com/gpu=all"}

    return apply


def _env_from(spec: Obj, meta: Obj) -> None:
    first(spec)["envFrom"] = [{"configMapRef": {"name": "settings"}}]


def _device_list_mount(path: str) -> Callable[[Obj, Obj], None]:
    def apply(spec: Obj, meta: Obj) -> None:
        spec["volumes"] = [{"name": "list", "emptyDir": {}}]
        first(spec)["volumeMounts"] = [{"name": "list", "mountPath": path}]

    return apply


VIOLATIONS: dict[str, Callable[[Obj, Obj], None]] = {
    "nvidia-gpu-limit": _gpu_limit("nvidia.com/gpu"),
    "mig-limit": _gpu_limit("nvidia.com/mig-1g.10gb"),
    "intel-gpu-limit": _gpu_limit("gpu.intel.com/i915"),
    "amd-gpu-request": _gpu_request,
    "init-container-gpu": _init_gpu,
    "sidecar-imex-env": _sidecar_env,
    "hostpath-dev-nvidia0": _host_path("/dev/nvidia0"),
    "hostpath-dev": _host_path("/dev"),
    "visible-devices-all": _env("NVIDIA_VISIBLE_DEVICES", value="all"),
    "visible-devices-value-from": _env(
        "NVIDIA_VISIBLE_DEVICES", valueFrom={"configMapKeyRef": {"name": "c", "key": "k"}}
    ),
    "mig-config-devices": _env("NVIDIA_MIG_CONFIG_DEVICES", value="all"),
    "privileged": _privileged,
    "cdi-annotation": _annotation("cdi.k8s.io/gpu"),
    "nvidia-cdi-annotation": _annotation("nvidia.cdi.k8s.io/gpu"),
    "nri-cdi-annotation": _annotation("cdi-devices.noderesource.dev/container.main"),
    "nri-device-annotation": _annotation("devices.noderesource.dev/pod"),
    "nri-mount-annotation": _annotation("mounts.nri.io"),
    "gke-device-annotation": _annotation("devices.gke.io/container.main"),
    "env-from": _env_from,
    "device-list-mount": _device_list_mount("/var/run/nvidia-container-devices"),
    "device-list-mount-below": _device_list_mount("/var/run/nvidia-container-devices/all"),
    "device-list-mount-unnormalised": _device_list_mount("//var/run/./nvidia-container-devices/"),
}


def pod(spec: Obj, meta: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta}, "spec": spec}


def templated(api_version: str, kind: str, **fields: Any) -> Callable[[Obj, Obj], Obj]:
    def build(spec: Obj, meta: Obj) -> Obj:
        template = {"metadata": {"labels": {"app": "a"}, **meta}, "spec": spec}
        body = {"selector": {"matchLabels": {"app": "a"}}, **fields, "template": template}
        return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}, "spec": body}

    return build


def job(spec: Obj, meta: Obj) -> Obj:
    spec = {**spec, "restartPolicy": "Never"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"metadata": meta, "spec": spec}},
    }


def cronjob(spec: Obj, meta: Obj) -> Obj:
    inner = job(spec, meta)["spec"]
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "c"},
        "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": inner}},
    }


def podtemplate(spec: Obj, meta: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "t"},
        "template": {"metadata": meta, "spec": spec},
    }


def replication_controller(spec: Obj, meta: Obj) -> Obj:
    obj = templated("v1", "ReplicationController")(spec, meta)
    obj["spec"]["selector"] = {"app": "a"}
    return obj


def pytorchjob(spec: Obj, meta: Obj) -> Obj:
    replica = {"replicas": 1, "template": {"metadata": meta, "spec": spec}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "t"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": replica}},
    }


# kind -> (builder, resource, the webhook entry that must be the one refusing)
KINDS: dict[str, tuple[Callable[[Obj, Obj], Obj], str, str]] = {
    "Pod": (pod, "pods", "pods.gpu-admission.io"),
    "Deployment": (templated("apps/v1", "Deployment", replicas=2), "deployments", "workloads"),
    "ReplicaSet": (templated("apps/v1", "ReplicaSet"), "replicasets", "workloads"),
    "StatefulSet": (
        templated("apps/v1", "StatefulSet", serviceName="s"),
        "statefulsets",
        "workloads",
    ),
    "DaemonSet": (templated("apps/v1", "DaemonSet"), "daemonsets", "workloads"),
    "ReplicationController": (replication_controller, "replicationcontrollers", "workloads"),
    "Job": (job, "jobs", "workloads"),
    "CronJob": (cronjob, "cronjobs", "cronjobs"),
    "PodTemplate": (podtemplate, "podtemplates", "podtemplates"),
    "PyTorchJob": (pytorchjob, "pytorchjobs", "custom-resources"),
}


def case(
    *, id: str, obj: Obj | None, namespace: str = "ml", resource: str = "", **extra: Any
) -> Obj:
    if obj is not None:
        obj = copy.deepcopy(obj)
        obj["metadata"]["namespace"] = namespace
    return {"id": id, "namespace": namespace, "resource": resource, "object": obj, **extra}


def build(kind: str, violation: str | None, *, namespace: str = "ml") -> Obj:
    builder, resource, _ = KINDS[kind]
    spec, meta = plain_pod_spec(), Obj()
    if violation:
        VIOLATIONS[violation](spec, meta)
    return case(
        id=f"{kind}/{violation or 'plain'}/{namespace}",
        obj=builder(spec, meta),
        namespace=namespace,
        resource=resource,
    )


def ephemeral(id: str, debug_container: Obj) -> Obj:
    old = pod(plain_pod_spec(), {})
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [
        {"name": "debugger", "image": "busybox", **debug_container}
    ]
    old["metadata"]["namespace"] = "ml"
    return case(
        id=id,
        obj=new,
        resource="pods",
        operation="UPDATE",
        subResource="ephemeralcontainers",
        oldObject=old,
    )


REFUSED_CASES: list[tuple[Obj, str]] = [
    (build(kind, violation), KINDS[kind][2]) for kind in KINDS for violation in VIOLATIONS
]
REFUSED_CASES += [
    (ephemeral("kubectl-debug/privileged", {"securityContext": {"privileged": True}}), "pods"),
    (
        ephemeral(
            "kubectl-debug/visible-devices",
            {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]},
        ),
        "pods",
    ),
    # Custom resources always reach the webhook (no CEL walks their templates).
    (build("PyTorchJob", None), "custom-resources"),
    *[
        (
            case(
                id=f"{kind}/plain",
                obj={"apiVersion": api, "kind": kind, "metadata": {"name": "x"}, "spec": {}},
                resource=resource,
            ),
            "custom-resources",
        )
        for api, kind, resource in [
            ("kubeflow.org/v2beta1", "MPIJob", "mpijobs"),
            ("ray.io/v1", "RayCluster", "rayclusters"),
            ("ray.io/v1", "RayJob", "rayjobs"),
            ("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets"),
            ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets"),
        ]
    ],
    # Documented superset: any hostPath is sent, whatever its path.
    (build("Pod", "hostpath-dev-nvidia0") | {"id": "Pod/hostpath-var-log"}, "pods"),
]
REFUSED_CASES[-1][0]["object"]["spec"]["volumes"][0]["hostPath"]["path"] = "/var/log"

SYSTEM_NAMESPACES = [
    "kube-system",
    "gpu-admission-system",
    "gpu-operator",
    "nvidia-gpu-operator",
    "nvidia-device-plugin",
]

ALLOWED_CASES: list[Obj] = [build(kind, None) for kind in KINDS if kind != "PyTorchJob"]
ALLOWED_CASES += [
    build(kind, violation, namespace=ns)
    for ns in SYSTEM_NAMESPACES
    for kind in ("Pod", "Deployment", "DaemonSet")
    for violation in ("nvidia-gpu-limit", "hostpath-dev-nvidia0", "privileged")
]
ALLOWED_CASES += [
    build("PyTorchJob", "nvidia-gpu-limit", namespace="kube-system"),
    case(
        id="ConfigMap",
        obj={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c"},
            "data": {"limits": "nvidia.com/gpu: 8", "NVIDIA_VISIBLE_DEVICES": "all"},
        },
    ),
    case(
        id="Service",
        obj={
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 80}]},
        },
    ),
    ephemeral("kubectl-debug/plain", {}),
    # Pods are judged at CREATE; their GPU fields are immutable afterwards.
    case(
        id="Pod/gpu-label-update",
        obj=build("Pod", "nvidia-gpu-limit")["object"],
        resource="pods",
        operation="UPDATE",
        oldObject=build("Pod", "nvidia-gpu-limit")["object"],
    ),
    case(
        id="Pod/gpu-delete",
        obj=None,
        resource="pods",
        operation="DELETE",
        oldObject=build("Pod", "nvidia-gpu-limit")["object"],
    ),
    # Names and prefixes the policies do not look at.
    build("Pod", None) | {"id": "Pod/other-nvidia-env"},
    build("Pod", None) | {"id": "Pod/other-annotations"},
    build("Pod", None) | {"id": "Pod/other-mounts"},
    # Odd objects: the expressions must not fail (an error would refuse them).
    case(id="Pod/no-spec", obj={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
    case(id="Pod/no-containers", obj=pod({}, {})),
    case(
        id="Pod/empty-lists", obj=pod({"containers": [], "initContainers": [], "volumes": []}, {})
    ),
    case(id="Pod/bare-container", obj=pod({"containers": [{"name": "c", "image": "x"}]}, {})),
    case(
        id="Pod/empty-env-and-resources",
        obj=pod(
            {
                "containers": [
                    {
                        "name": "c",
                        "image": "x",
                        "env": [],
                        "resources": {},
                        "volumeMounts": [],
                        "securityContext": {},
                    }
                ]
            },
            {"annotations": {}},
        ),
    ),
    case(
        id="Deployment/no-spec",
        resource="deployments",
        obj={"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
    ),
    case(
        id="CronJob/no-job-template",
        resource="cronjobs",
        obj={
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "c"},
            "spec": {"schedule": "* * * * *"},
        },
    ),
    case(
        id="PodTemplate/no-template",
        resource="podtemplates",
        obj={"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}},
    ),
]
_other = {c["id"]: c["object"] for c in ALLOWED_CASES}
first(_other["Pod/other-nvidia-env"]["spec"])["env"] = [
    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}
]
_other["Pod/other-annotations"]["metadata"]["annotations"] = {"example.com/cdi.k8s.io": "x"}
first(_other["Pod/other-mounts"]["spec"])["volumeMounts"] = [
    {"name": "v", "mountPath": "/var/run/x"}
]
_other["Pod/other-mounts"]["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}]
_label_update = _other["Pod/gpu-label-update"]
_label_update["metadata"]["labels"] = {"new": "label"}


# --- running it ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Obj]:
    """Every case through apiserverhook in one run, keyed by id."""
    ca = certs.make_ca(common_name="outage test CA", days=1)
    vwc_file = write_webhook_config(
        base64.b64encode(ca.cert_pem).decode(), tmp_path_factory.mktemp("outage") / "vwc.yaml"
    )
    cases = [c for c, _ in REFUSED_CASES] + ALLOWED_CASES
    return run_cases(vwc_file, target="127.0.0.1:1", cases=cases)


@pytest.mark.parametrize(
    ("case", "webhook"), REFUSED_CASES, ids=[c["id"] for c, _ in REFUSED_CASES]
)
def test_what_a_policy_could_deny_reaches_the_webhook(
    results: dict[str, Obj], case: Obj, webhook: str
) -> None:
    answer = results[case["id"]]
    assert not answer["allowed"]
    name = webhook if "." in webhook else f"{webhook}.gpu-admission.io"
    assert f'{REFUSED} "{name}"' in answer["message"]


@pytest.mark.parametrize("case", ALLOWED_CASES, ids=[c["id"] for c in ALLOWED_CASES])
def test_everything_else_survives_an_outage(results: dict[str, Obj], case: Obj) -> None:
    answer = results[case["id"]]
    assert answer["allowed"], answer.get("message")
