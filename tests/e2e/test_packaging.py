"""The wheel carries the shipped policies, and an installed (non-editable) copy finds them."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

from tests.support.paths import ROOT


def test_installed_wheel_checks_with_the_shipped_policies(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("gpu_admission-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(p.name for p in (ROOT / "policies").glob("*.yaml"))
    data = "gpu_admission-0.1.0.data/data/share/gpu-admission/policies/"
    assert sorted(n.removeprefix(data) for n in names if n.startswith(data)) == shipped
    # Only the package: tests/ is a package too (tests.support), and must not ship.
    assert {n.split("/")[0] for n in names if not n.startswith(data)} == {
        "webhook",
        "gpu_admission-0.1.0.dist-info",
    }

    # A venv of its own for the package; its dependencies come from ours on PYTHONPATH
    # (an editable install is a .pth finder, which PYTHONPATH does not load).
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)  # its own pip: ours would uninstall our copy
    subprocess.run(
        [
            str(env_dir / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - name: c\n    image: x\n    securityContext: {privileged: true}\n"
    )
    deps = sysconfig.get_paths()["purelib"]
    run = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "webhook", "check", "-o", "json", str(manifest)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": deps, "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stderr
    assert '"rule": "privileged"' in run.stdout
    where = subprocess.run(
        [
            str(env_dir / "bin" / "python"),
            "-c",
            "from webhook.cli import default_policies; print(default_policies())",
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": deps},
        cwd=tmp_path,
        check=True,
    ).stdout.strip()
    assert where == str(env_dir / "share" / "gpu-admission" / "policies")
