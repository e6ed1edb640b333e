"""End to end through the kube-apiserver's own validating-webhook plugin.

`apiserverhook` (see /work/shared/tools/apiserverhook/README.md) runs the apiserver's
admission code against a real `gpu-admission serve` process: the rendered
ValidatingWebhookConfiguration from manifests/ with the caBundle printed by
`gpu-admission certs`, TLS verified against ServerName
gpu-admission.gpu-admission-system.svc, the AdmissionReview the apiserver sends, and the
denial text and warnings exactly as kubectl would receive them.
"""

from __future__ import annotations

import copy
import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.apiserverhook import APISERVERHOOK, Obj, run_cases, write_webhook_config
from tests.support.paths import ROOT
from tests.support.ports import free_port
from tests.support.reviews import CLEAN, VIOLATIONS, deployment, pod
from tests.support.servers import serve_command

SERVICE, NAMESPACE = "gpu-admission", "gpu-admission-system"
DENIED = 'admission webhook "{}" denied the request:'
WARN_POLICY = "gpu-device-injection"

pytestmark = [
    pytest.mark.skipif(
        not APISERVERHOOK.exists(),
        reason=f"apiserverhook binary not found at {APISERVERHOOK} (see its README to build it)",
    ),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed"),
]


# --- cases --------------------------------------------------------------------------


def case(id: str, obj: Obj, *, resource: str = "", namespace: str = "ml", **extra: Any) -> Obj:
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = namespace
    return {"id": id, "namespace": namespace, "resource": resource, "object": obj, **extra}


def ephemeral(id: str, debug_container: Obj) -> Obj:
    old = pod(name="debugged")
    old["metadata"]["namespace"] = "ml"
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [
        {"name": "debugger", "image": "busybox", **debug_container}
    ]
    return case(
        id,
        new,
        resource="pods",
        operation="UPDATE",
        subResource="ephemeralcontainers",
        oldObject=old,
    )


VISIBLE_ALL = {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}

# (case, rule, webhook name)
REFUSED: list[tuple[Obj, str, str]] = [
    (case(f"pod/{rule}", obj), rule, "pods.gpu-admission.io") for rule, obj in VIOLATIONS
]
REFUSED += [
    (
        case(
            "deployment/visible-devices-env",
            deployment(pod(container=VISIBLE_ALL)),
            resource="deployments",
        ),
        "gpu-device-injection/visible-devices-env",
        "workloads.gpu-admission.io",
    ),
    (
        ephemeral("kubectl-debug/visible-devices-env", VISIBLE_ALL),
        "gpu-device-injection/visible-devices-env",
        "pods.gpu-admission.io",
    ),
]
ALLOWED: list[Obj] = [case(f"clean/{name}", obj) for name, obj in CLEAN]
ALLOWED += [
    case(
        "deployment/clean",
        deployment(pod(limits={"nvidia.com/mig-3g.40gb": 1})),
        resource="deployments",
    ),
    ephemeral("kubectl-debug/clean", {}),
]
WARNED: list[Obj] = [
    case(f"warn/{rule}", obj) for rule, obj in VIOLATIONS if rule.startswith(WARN_POLICY + "/")
]


# --- running it ---------------------------------------------------------------------


def _certs(out: Path) -> str:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "certs",
            "--service",
            SERVICE,
            "--namespace",
            NAMESPACE,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


class Serve:
    def __init__(self, tmp: Path, tls: Path, *extra: str) -> None:
        self.port, self.tmp = free_port(), tmp
        self.proc = subprocess.Popen(
            serve_command(self.port, cert=tls / "tls.crt", key=tls / "tls.key", extra=extra),
            cwd=ROOT,
            # Files, not pipes: an unread pipe would stall the server on its decision log.
            stdout=(tmp / "decisions.log").open("wb"),
            stderr=(tmp / "serve.err").open("wb"),
        )

    def wait_ready(self, ca_file: Path) -> None:
        # The certificate names the Service, not 127.0.0.1: verify against that name.
        ctx = ssl.create_default_context(cafile=str(ca_file))
        host = f"{SERVICE}.{NAMESPACE}.svc"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with httpx.Client(verify=ctx, timeout=2) as client:
                    r = client.get(
                        f"https://127.0.0.1:{self.port}/readyz", extensions={"sni_hostname": host}
                    )
                if r.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not get ready: {(self.tmp / 'serve.err').read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _hook(vwc: Path, port: int, cases: list[Obj]) -> dict[str, Obj]:
    return run_cases(vwc, target=f"127.0.0.1:{port}", cases=cases, extra=("--namespaces", "ml"))


@pytest.fixture(scope="module")
def results(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dict[str, Obj], dict[str, Obj]]]:
    """(deny results, warn results): each case through apiserverhook into a live server."""
    base = tmp_path_factory.mktemp("e2e")
    tls = base / "tls"
    ca_bundle = _certs(tls)
    vwc = write_webhook_config(ca_bundle, base / "vwc.yaml")

    warn_policies = base / "policies"
    shutil.copytree(ROOT / "policies", warn_policies)
    target = warn_policies / f"{WARN_POLICY}.yaml"
    text = target.read_text()
    assert "enforcementAction: deny" in text
    target.write_text(text.replace("enforcementAction: deny", "enforcementAction: warn"))

    (base / "deny").mkdir()
    (base / "warn").mkdir()
    deny = Serve(base / "deny", tls)
    warn = Serve(base / "warn", tls, "--policies", str(warn_policies))
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda s: s.wait_ready(tls / "ca.crt"), [deny, warn]))
            f_deny = pool.submit(_hook, vwc, deny.port, [c for c, _, _ in REFUSED] + ALLOWED)
            f_warn = pool.submit(_hook, vwc, warn.port, WARNED)
            yield f_deny.result(), f_warn.result()
    finally:
        deny.stop()
        warn.stop()


@pytest.mark.parametrize(("case", "rule", "webhook"), REFUSED, ids=[c["id"] for c, _, _ in REFUSED])
def test_violation_is_refused_with_the_rule(
    results: tuple[dict[str, Obj], dict[str, Obj]], case: Obj, rule: str, webhook: str
) -> None:
    answer = results[0][case["id"]]
    assert answer["allowed"] is False, answer
    assert DENIED.format(webhook) in answer["message"], answer["message"]
    assert f"[{rule}]" in answer["message"], answer["message"]


@pytest.mark.parametrize("case", ALLOWED, ids=[c["id"] for c in ALLOWED])
def test_clean_object_is_allowed(results: tuple[dict[str, Obj], dict[str, Obj]], case: Obj) -> None:
    answer = results[0][case["id"]]
    assert answer["allowed"] is True, answer
    assert not answer.get("warnings"), answer


@pytest.mark.parametrize("case", WARNED, ids=[c["id"] for c in WARNED])
def test_warn_policy_allows_with_warnings_kubectl_shows(
    results: tuple[dict[str, Obj], dict[str, Obj]], case: Obj
) -> None:
    answer = results[1][case["id"]]
    assert answer["allowed"] is True, answer
    rule = case["id"].removeprefix("warn/")
    warnings = answer.get("warnings") or []
    assert any(w.startswith(f"[{rule}]") for w in warnings), warnings
    assert all(len(w) < 120 for w in warnings), warnings
