"""manifests/: every kustomization renders, validates offline against the Kubernetes
API schemas (kubernetes-validate), and keeps the invariants the design relies on."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from tests.support.paths import ROOT
from webhook.cli.certs import certs as certs_command
from webhook.core.workloads.targets import POD_TARGETS
from webhook.kube.match_conditions import entry_conditions
from webhook.sources.policy_files import load_policy_dir

KUSTOMIZATIONS = [
    "manifests/base",
    "manifests/overlays/cert-manager",
    "manifests/overlays/self-signed",
]
# The oldest Kubernetes the manifests target (matchConditions are GA in 1.30), and the newest
# schemas kubernetes-validate ships.
SCHEMA_VERSIONS = ["1.30", kubernetes_validate.utils.latest_version()]
CRD_GROUPS = {"cert-manager.io"}
EXCLUDED_NAMESPACES = [
    "kube-system",
    "gpu-admission-system",
    "gpu-operator",
    "nvidia-gpu-operator",
    "nvidia-device-plugin",
    "node-feature-discovery",
    "openshift-nfd",
]
POD_LABELS = {"app.kubernetes.io/name": "gpu-admission", "app.kubernetes.io/component": "webhook"}

Obj = dict[str, Any]

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


@functools.cache
def render(kustomization: str) -> tuple[Obj, ...]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / kustomization)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return tuple(d for d in yaml.safe_load_all(out) if d)


def one(objs: tuple[Obj, ...], kind: str, name: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def group(obj: Obj) -> str:
    api_version: str = obj["apiVersion"]
    return api_version.rpartition("/")[0]


# --- schemas ------------------------------------------------------------------------


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_every_object_validates(kustomization: str, version: str) -> None:
    skipped = set()
    for obj in render(kustomization):
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            skipped.add((group(obj), obj["kind"]))
        except kubernetes_validate.ValidationError as e:
            where = ".".join(str(p) for p in e.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {where}: {e.message}")
    # Only custom resources (no schema offline) may go unchecked.
    assert {g for g, _ in skipped} <= CRD_GROUPS, skipped


def test_overlays_add_only_certificate_machinery() -> None:
    base = {(o["kind"], o["metadata"]["name"]) for o in render("manifests/base")}
    cert_manager = {(o["kind"], o["metadata"]["name"]) for o in render(KUSTOMIZATIONS[1])}
    self_signed = {(o["kind"], o["metadata"]["name"]) for o in render(KUSTOMIZATIONS[2])}
    assert cert_manager - base == {
        ("Issuer", "gpu-admission-selfsigned"),
        ("Certificate", "gpu-admission-ca"),
        ("Issuer", "gpu-admission-ca"),
        ("Certificate", "gpu-admission"),
    }
    assert self_signed - base == {
        ("ServiceAccount", "gpu-admission-certs"),
        ("Role", "gpu-admission-certs"),
        ("RoleBinding", "gpu-admission-certs"),
        ("ClusterRole", "gpu-admission-certs"),
        ("ClusterRoleBinding", "gpu-admission-certs"),
        ("Job", "gpu-admission-certs"),
        ("CronJob", "gpu-admission-certs"),
    }
    assert base <= cert_manager and base <= self_signed


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_everything_namespaced_lives_in_gpu_admission_system(kustomization: str) -> None:
    cluster_scoped = {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
    }
    for obj in render(kustomization):
        if obj["kind"] not in cluster_scoped:
            assert obj["metadata"]["namespace"] == "gpu-admission-system", obj["kind"]


# --- the server ---------------------------------------------------------------------


def test_server_rbac_is_read_only_nodes() -> None:
    objs = render("manifests/base")
    assert [o["metadata"]["name"] for o in objs if o["kind"] in ("ClusterRole", "Role")] == [
        "gpu-admission"
    ]
    role = one(objs, "ClusterRole", "gpu-admission")
    dra = ["deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"]
    kueue = ["resourceflavors", "clusterqueues", "cohorts", "localqueues"]
    read = ["get", "list", "watch"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": read},
        {"apiGroups": ["resource.k8s.io"], "resources": dra, "verbs": read},
        {"apiGroups": [""], "resources": ["namespaces", "resourcequotas"], "verbs": read},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": kueue, "verbs": read},
    ]
    binding = one(objs, "ClusterRoleBinding", "gpu-admission")
    assert binding["roleRef"]["name"] == "gpu-admission"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpu-admission", "namespace": "gpu-admission-system"}
    ]


@pytest.fixture(scope="module")
def deployment() -> Obj:
    return one(render("manifests/base"), "Deployment", "gpu-admission")


def container(deployment: Obj) -> Obj:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: Obj = containers[0]
    return result


def test_deployment_replicas_and_spread(deployment: Obj) -> None:
    spec = deployment["spec"]
    assert spec["replicas"] == 3
    assert spec["selector"]["matchLabels"] == POD_LABELS
    assert spec["template"]["metadata"]["labels"] == POD_LABELS
    spread = spec["template"]["spec"]["topologySpreadConstraints"]
    by_host = [c for c in spread if c["topologyKey"] == "kubernetes.io/hostname"]
    assert by_host[0]["whenUnsatisfiable"] == "DoNotSchedule"
    assert by_host[0]["maxSkew"] == 1
    assert by_host[0]["labelSelector"]["matchLabels"] == POD_LABELS


def test_deployment_security_context(deployment: Obj) -> None:
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container(deployment)["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_deployment_container(deployment: Obj) -> None:
    c = container(deployment)
    assert c["args"] == [
        "serve",
        "--tls-cert-file",
        "/certs/tls.crt",
        "--tls-key-file",
        "/certs/tls.key",
        "--policies",
        "/policies",
    ]
    assert c["ports"] == [{"name": "https", "containerPort": 8443, "protocol": "TCP"}]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert c[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    assert set(c["resources"]["requests"]) == {"cpu", "memory"}
    assert set(c["resources"]["limits"]) == {"cpu", "memory"}


def test_deployment_mounts_whole_secret_and_configmap(deployment: Obj) -> None:
    objs = render("manifests/base")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: m for m in container(deployment)["volumeMounts"]}
    assert not any("subPath" in m or "subPathExpr" in m for m in mounts.values())
    assert volumes[mounts["/certs"]["name"]]["secret"]["secretName"] == "gpu-admission-tls"
    configmap = volumes[mounts["/policies"]["name"]]["configMap"]["name"]
    assert re.fullmatch(r"gpu-admission-policies-[a-z0-9]{10}", configmap)  # hashed: rolls pods
    one(objs, "ConfigMap", configmap)


def test_serve_command_knows_the_deployment_flags(deployment: Obj) -> None:
    from webhook.cli import main

    serve = main.commands["serve"]
    known = {opt for param in serve.params for opt in getattr(param, "opts", [])}
    flags = [a for a in container(deployment)["args"] if a.startswith("--")]
    assert set(flags) <= known


def test_service_routes_443_to_the_https_port() -> None:
    service = one(render("manifests/base"), "Service", "gpu-admission")
    assert service["spec"]["selector"] == POD_LABELS
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]


def test_pod_disruption_budget() -> None:
    pdb = one(render("manifests/base"), "PodDisruptionBudget", "gpu-admission")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == POD_LABELS


def test_policies_configmap_matches_the_repository_policies() -> None:
    """manifests/base/policies/ holds copies; scripts/sync-manifest-policies refreshes them."""
    shipped = {p.name: p.read_text() for p in sorted((ROOT / "policies").glob("*.yaml"))}
    assert shipped
    configmaps = [o for o in render("manifests/base") if o["kind"] == "ConfigMap"]
    assert len(configmaps) == 1
    assert configmaps[0]["data"] == shipped, "run scripts/sync-manifest-policies"


# --- the webhook configuration --------------------------------------------------------


@pytest.fixture(scope="module")
def webhooks() -> list[Obj]:
    vwc = one(render("manifests/base"), "ValidatingWebhookConfiguration", "gpu-admission")
    result: list[Obj] = vwc["webhooks"]
    return result


def test_webhook_common_fields(webhooks: list[Obj]) -> None:
    for webhook in webhooks:
        assert webhook["sideEffects"] == "None"
        assert webhook["admissionReviewVersions"] == ["v1"]
        assert webhook["timeoutSeconds"] == 3
        # Pods sent only for what their image may set, and queue objects, whose rules only
        # warn: an outage must not stop them.
        ignore = webhook["name"] in (
            "pods-on-gpu-nodes.gpu-admission.io",
            "queues.gpu-admission.io",
        )
        assert webhook["failurePolicy"] == ("Ignore" if ignore else "Fail")
        assert webhook["clientConfig"] == {
            "service": {
                "namespace": "gpu-admission-system",
                "name": "gpu-admission",
                "path": "/validate",
                "port": 443,
            }
        }
        assert webhook["namespaceSelector"] == {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": EXCLUDED_NAMESPACES,
                }
            ]
        }


def test_webhook_rules(webhooks: list[Obj]) -> None:
    covered = {
        (webhook["name"], g, r, op)
        for webhook in webhooks
        for rule in webhook["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for op in rule["operations"]
    }
    cu = ("CREATE", "UPDATE")
    expected = {("pods.gpu-admission.io", "", "pods", op) for op in cu}
    expected |= {("pods-on-gpu-nodes.gpu-admission.io", "", "pods", "CREATE")}
    expected |= {("pods.gpu-admission.io", "", "pods/ephemeralcontainers", "UPDATE")}
    workloads = [("apps", r) for r in ("deployments", "replicasets", "statefulsets", "daemonsets")]
    workloads += [("", "replicationcontrollers"), ("batch", "jobs")]
    expected |= {("workloads.gpu-admission.io", g, r, op) for g, r in workloads for op in cu}
    expected |= {("podtemplates.gpu-admission.io", "", "podtemplates", op) for op in cu}
    expected |= {("cronjobs.gpu-admission.io", "batch", "cronjobs", op) for op in cu}
    claims = ("resourceclaims", "resourceclaimtemplates")
    expected |= {
        ("resourceclaims.gpu-admission.io", "resource.k8s.io", r, op) for r in claims for op in cu
    }
    expected |= {("namespaces.gpu-admission.io", "", "namespaces", op) for op in cu}
    custom = [
        ("kubeflow.org", "pytorchjobs"),
        ("kubeflow.org", "mpijobs"),
        ("ray.io", "rayclusters"),
        ("ray.io", "rayjobs"),
        ("jobset.x-k8s.io", "jobsets"),
        ("leaderworkerset.x-k8s.io", "leaderworkersets"),
        *[
            ("kubeflow.org", r)
            for r in ("tfjobs", "xgboostjobs", "paddlejobs", "jaxjobs", "notebooks")
        ],
        ("ray.io", "rayservices"),
        ("batch.volcano.sh", "jobs"),
        ("serving.kserve.io", "inferenceservices"),
        ("apps.nvidia.com", "nimservices"),
        ("sparkoperator.k8s.io", "sparkapplications"),
        *[
            ("trainer.kubeflow.org", r)
            for r in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
        ],
    ]
    expected |= {("custom-resources.gpu-admission.io", g, r, op) for g, r in custom for op in cu}
    queues = [("kueue.x-k8s.io", r) for r in ("resourceflavors", "clusterqueues", "cohorts")]
    queues += [("kueue.x-k8s.io", "localqueues"), ("", "resourcequotas")]
    expected |= {("queues.gpu-admission.io", g, r, op) for g, r in queues for op in cu}
    assert covered == expected


def test_match_conditions_are_the_ones_the_shipped_checks_declare(webhooks: list[Obj]) -> None:
    """Generated, not written: each entry carries what `gpu-admission match-conditions`
    derives from the shipped policies (scripts/sync-manifest-policies writes them), and
    the entries without conditions are those that send everything."""
    policy_set = load_policy_dir(ROOT / "policies")
    expected = entry_conditions(
        policy_set.reads_of(POD_TARGETS), policy_set.reads.get("namespace"), policy_set.profile
    )
    for webhook in webhooks:
        conditions = webhook.get("matchConditions", [])
        assert conditions == expected.get(webhook["name"], []), webhook["name"]
    names = {w["name"] for w in webhooks}
    assert set(expected) <= names


def test_the_chart_helper_is_the_generated_one() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "webhook", "match-conditions", "--policies", "policies",
         "--format", "chart"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert (ROOT / "charts/gpu-admission/templates/_matchconditions.tpl").read_text() == run.stdout


def test_dra_claims_are_sent_in_every_version_they_are_served(webhooks: list[Obj]) -> None:
    [entry] = [w for w in webhooks if w["name"] == "resourceclaims.gpu-admission.io"]
    assert [rule["apiVersions"] for rule in entry["rules"]] == [["v1", "v1beta2", "v1beta1"]]
    assert entry["matchPolicy"] == "Equivalent"


# --- overlays -----------------------------------------------------------------------


def test_cert_manager_overlay() -> None:
    objs = render("manifests/overlays/cert-manager")
    vwc = one(objs, "ValidatingWebhookConfiguration", "gpu-admission")
    assert vwc["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": "gpu-admission-system/gpu-admission"
    }
    serving = one(objs, "Certificate", "gpu-admission")["spec"]
    assert serving["secretName"] == "gpu-admission-tls"
    assert "gpu-admission.gpu-admission-system.svc" in serving["dnsNames"]
    assert serving["issuerRef"]["name"] == "gpu-admission-ca"
    ca = one(objs, "Certificate", "gpu-admission-ca")["spec"]
    assert ca["isCA"] is True
    assert ca["issuerRef"]["name"] == "gpu-admission-selfsigned"
    assert one(objs, "Issuer", "gpu-admission-ca")["spec"] == {
        "ca": {"secretName": ca["secretName"]}
    }
    assert one(objs, "Issuer", "gpu-admission-selfsigned")["spec"] == {"selfSigned": {}}
    base_vwc = one(render("manifests/base"), "ValidatingWebhookConfiguration", "gpu-admission")
    assert vwc["webhooks"] == base_vwc["webhooks"]


def test_self_signed_overlay_rbac_is_minimal() -> None:
    objs = render("manifests/overlays/self-signed")
    assert one(objs, "Role", "gpu-admission-certs")["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["gpu-admission-tls"],
            "verbs": ["get", "patch"],
        },
    ]
    assert one(objs, "ClusterRole", "gpu-admission-certs")["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            # the mutating one only if a platform adds the optional /mutate entry
            "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
            "resourceNames": ["gpu-admission"],
            "verbs": ["get", "patch"],
        },
    ]


@pytest.mark.parametrize("kind", ["Job", "CronJob"])
def test_self_signed_jobs_run_the_certs_command(kind: str) -> None:
    obj = one(render("manifests/overlays/self-signed"), kind, "gpu-admission-certs")
    pod = (
        obj["spec"]["template"] if kind == "Job" else obj["spec"]["jobTemplate"]["spec"]["template"]
    )
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "gpu-admission-certs"
    assert spec["securityContext"]["runAsNonRoot"] is True
    [c] = spec["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    args = [a.replace("$(POD_NAMESPACE)", "gpu-admission-system") for a in c["args"]]
    assert args[0] == "certs"
    # The arguments parse with the real command (without running it).
    context = certs_command.make_context("certs", args[1:])
    assert context.params["apply_secret"] == "gpu-admission-tls"
    assert context.params["patch_webhook"] == "gpu-admission"
    assert context.params["namespace"] == "gpu-admission-system"
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert str(context.params["out"]) in mounts  # writable despite the read-only root


# --- who may connect ------------------------------------------------------------------


def overlay_from_the_docs(tmp_path: Path) -> Path:
    """The overlay docs/deploy.md shows for the NetworkPolicy, as a user would write it
    two directories below a checkout of this repository."""
    text = (ROOT / "docs/deploy.md").read_text()
    [block] = re.findall(r"```yaml\n(# your overlay: .*?)```", text, flags=re.S)
    overlay = tmp_path / "deploy" / "prod"
    overlay.mkdir(parents=True)
    (tmp_path / "manifests").symlink_to(ROOT / "manifests")
    (overlay / "kustomization.yaml").write_text(block)
    return overlay


def test_network_policy_admits_only_the_apiserver_path(tmp_path: Path) -> None:
    objs = render(str(overlay_from_the_docs(tmp_path)))
    policy = one(objs, "NetworkPolicy", "gpu-admission")
    for version in SCHEMA_VERSIONS:
        kubernetes_validate.validate(policy, version, strict=True)
    assert policy["metadata"]["namespace"] == "gpu-admission-system"
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": POD_LABELS}
    assert spec["policyTypes"] == ["Ingress"]  # egress (the Node watch) stays open
    [rule] = spec["ingress"]
    deployment = one(objs, "Deployment", "gpu-admission")
    port = container(deployment)["ports"][0]["containerPort"]
    assert rule["ports"] == [{"port": port, "protocol": "TCP"}]
    kube_system = {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}
    assert rule["from"] == [
        {"ipBlock": {"cidr": "10.0.0.0/24"}},  # the docs' patch: the control plane
        {
            "namespaceSelector": kube_system,
            "podSelector": {"matchLabels": {"k8s-app": "konnectivity-agent"}},
        },
        {
            "namespaceSelector": kube_system,
            "podSelector": {"matchLabels": {"app": "konnectivity-agent"}},
        },
    ]
    # The component adds the policy and nothing else.
    cert_manager = render("manifests/overlays/cert-manager")
    assert [o for o in objs if o["kind"] != "NetworkPolicy"] == list(cert_manager)


def test_the_network_policy_placeholder_is_a_documentation_range() -> None:
    """Unpatched, the policy admits nobody real (192.0.2.0/24, RFC 5737): a forgotten
    patch fails closed, and loudly, rather than admitting a guessed range."""
    text = (ROOT / "manifests/components/network-policy/networkpolicy.yaml").read_text()
    policy = yaml.safe_load(text)
    assert policy["spec"]["ingress"][0]["from"][0] == {"ipBlock": {"cidr": "192.0.2.0/24"}}
