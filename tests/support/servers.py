"""A real `gpu-admission serve` process for tests, with its certificate in a directory laid
out like a mounted Secret (so it can be rotated the way the kubelet does)."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.support.paths import ROOT
from tests.support.ports import free_port
from webhook.serve import certs


class SecretDir:
    """A directory laid out like a mounted Kubernetes Secret: files behind a ..data link."""

    def __init__(self, base: Path, ca: Any) -> None:
        self.base, self.ca, self.version = base, ca, 0
        base.mkdir()
        for name in ("tls.crt", "tls.key"):
            (base / name).symlink_to(Path("..data") / name)
        self.rotate()

    def rotate(self) -> int:
        leaf = certs.make_serving_cert(
            ca=self.ca, dns_names=["localhost"], ip_addresses=["127.0.0.1"], days=1
        )
        self.version += 1
        target = self.base / f"..v{self.version}"
        target.mkdir()
        (target / "tls.crt").write_bytes(leaf.cert_pem)
        (target / "tls.key").write_bytes(leaf.key_pem)
        tmp = self.base / "..data_tmp"
        tmp.symlink_to(target.name)
        os.replace(tmp, self.base / "..data")  # the kubelet's atomic swap
        return int(leaf.cert.serial_number)


class Server:
    def __init__(self, tmp: Path, *extra: str) -> None:
        self.ca = certs.make_ca(common_name="test CA", days=1)
        (tmp / "ca.crt").write_bytes(self.ca.cert_pem)
        self.ca_file = tmp / "ca.crt"
        self.secret = SecretDir(tmp / "secret", self.ca)
        self.policies = tmp / "policies"
        shutil.copytree(ROOT / "policies", self.policies)
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            serve_command(
                self.port,
                cert=self.secret.base / "tls.crt",
                key=self.secret.base / "tls.key",
                extra=("--policies", str(self.policies), "--reload-interval", "0.2", *extra),
            ),
            # Files, not pipes: nobody reads a pipe here, and a full one would stall the
            # server on its decision log.
            stdout=(tmp / "decisions.log").open("wb"),
            stderr=(tmp / "serve.err").open("wb"),
        )
        self.stderr_file = tmp / "serve.err"
        self.client = httpx.Client(
            verify=ssl.create_default_context(cafile=self.ca_file), timeout=10
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if self.client.get(self.url + "/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not get ready: {self.stderr_file.read_text()}")

    def validate(self, body: Any, client: httpx.Client | None = None) -> httpx.Response:
        return (client or self.client).post(
            self.url + "/validate",
            content=orjson.dumps(body),
            headers={"content-type": "application/json"},
        )

    def stop(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def serve_command(port: int, *, cert: Path, key: Path, extra: tuple[str, ...] = ()) -> list[str]:
    """`gpu-admission serve` on 127.0.0.1:port with the example inventory and this pair."""
    return [
        sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--inventory", str(ROOT / "examples/cluster/nodes.json"),
        "--tls-cert-file", str(cert), "--tls-key-file", str(key), *extra,
    ]  # fmt: skip
