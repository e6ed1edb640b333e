"""MIG profiles per GPU model and the memory each really exposes, in MiB.

The `Ngb` in a profile name is nominal: `1g.10gb` exposes 9856 MiB on an A100 80GB.
Measured values (NVML MemorySizeMB, as GFD labels copy it) come from NVIDIA's go-nvml
mocks and nvidia-smi output; for newer GPUs only the nominal size is published, so we
take N decimal GB expressed in MiB and say "nominal". Labels on real nodes win: these
are only used where a node carries no `nvidia.com/mig-<profile>.memory` label.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CatalogMemory:
    mib: int
    gpu: str
    nominal: bool
    # Set when the node's GPU model is not known: the least any model offers was taken.
    # "" means no model was named at all; otherwise the product label we did not know.
    unknown_model: str | None = None

    def describe(self) -> str:
        kind = "nominal catalog value" if self.nominal else "catalog value"
        if self.unknown_model is None:
            return f"{kind} for {self.gpu}"
        why = (
            f"; GPU model {self.unknown_model} is not in the catalog" if self.unknown_model else ""
        )
        return f"smallest {kind} of this profile, {self.gpu}{why}"


def _nominal(profiles: str) -> dict[str, int]:
    return {
        p: int(p.split(".")[1].split("+")[0].removesuffix("gb")) * 10**9 // 2**20
        for p in profiles.split()
    }


_MEASURED: dict[str, dict[str, int]] = {
    "A30 24GB": {
        "1g.6gb": 5836,
        "1g.6gb+me": 5836,
        "2g.12gb": 11672,
        "2g.12gb+me": 11672,
        "4g.24gb": 23344,
    },
    "A100 40GB": {
        "1g.5gb": 4864,
        "1g.5gb+me": 4864,
        "1g.10gb": 9856,
        "2g.10gb": 9856,
        "3g.20gb": 19968,
        "4g.20gb": 19968,
        "7g.40gb": 40192,
    },
    "A100 80GB": {
        "1g.10gb": 9856,
        "1g.10gb+me": 9856,
        "1g.20gb": 19968,
        "2g.20gb": 19968,
        "3g.40gb": 40192,
        "4g.40gb": 40192,
        "7g.80gb": 80384,
    },
    "H100 80GB": {
        "1g.10gb": 9984,
        "1g.10gb+me": 9984,
        "1g.20gb": 20096,
        "2g.20gb": 20096,
        "3g.40gb": 40448,
        "4g.40gb": 40448,
        "7g.80gb": 81152,
    },
}
_NOMINAL: dict[str, dict[str, int]] = {
    "H100 NVL 94GB": _nominal("1g.12gb 1g.12gb+me 1g.24gb 2g.24gb 3g.47gb 4g.47gb 7g.94gb"),
    "H100 96GB": _nominal("1g.12gb 1g.24gb 2g.24gb 3g.48gb 4g.48gb 7g.96gb"),
    "H200 141GB": _nominal("1g.18gb 1g.18gb+me 1g.35gb 2g.35gb 3g.71gb 4g.71gb 7g.141gb"),
    "B200 180GB": _nominal("1g.23gb 1g.23gb+me 1g.45gb 2g.45gb 3g.90gb 4g.90gb 7g.180gb"),
    "GB200 186GB": _nominal("1g.23gb 1g.47gb 2g.47gb 3g.93gb 4g.93gb 7g.186gb"),
}

# GFD's `nvidia.com/gpu.product` (e.g. NVIDIA-A100-SXM4-80GB) to a catalog row; order
# matters: GH200 contains H200, GB200 contains B200.
_PRODUCT_RULES: tuple[tuple[str, str], ...] = (
    (r"GB200", "GB200 186GB"),
    (r"GH200", "H100 96GB"),
    (r"B200", "B200 180GB"),
    (r"H200", "H200 141GB"),
    (r"H100.*NVL", "H100 NVL 94GB"),
    (r"H100.*96GB", "H100 96GB"),
    (r"H100", "H100 80GB"),
    (r"A100.*40GB", "A100 40GB"),
    (r"A100", "A100 80GB"),
    (r"A30", "A30 24GB"),
)

PROFILE_RE = re.compile(r"^(\d+)g\.(\d+)gb(\+me)?$")


def gpu_for_product(product: str) -> str | None:
    upper = product.upper()
    for pattern, gpu in _PRODUCT_RULES:
        if re.search(pattern, upper):
            return gpu
    return None


def profile_memory(profile: str, *, product: str | None = None) -> CatalogMemory | None:
    """Memory of a profile on the node's GPU; without a known GPU, the smallest."""
    gpu = gpu_for_product(product) if product else None
    rows = [gpu] if gpu else [*_MEASURED, *_NOMINAL]
    found: list[CatalogMemory] = []
    for row in rows:
        if profile in _MEASURED.get(row, {}):
            found.append(CatalogMemory(_MEASURED[row][profile], row, nominal=False))
        elif profile in _NOMINAL.get(row, {}):
            found.append(CatalogMemory(_NOMINAL[row][profile], row, nominal=True))
    if not found:
        return None
    smallest = min(found, key=lambda m: m.mib)
    if gpu is None:
        smallest = CatalogMemory(smallest.mib, smallest.gpu, smallest.nominal, product or "")
    return smallest


def all_profiles() -> set[str]:
    return {p for table in (_MEASURED, _NOMINAL) for row in table.values() for p in row}


def resource_for_profile(profile: str) -> str:
    """`1g.10gb+me` is advertised as `nvidia.com/mig-1g.10gb.me` (`+` is not allowed)."""
    return "nvidia.com/mig-" + profile.replace("+me", ".me")


def profile_for_resource(resource: str) -> str | None:
    """`nvidia.com/mig-1g.10gb.me.shared` -> `1g.10gb+me`; None for non-MIG names."""
    if not resource.startswith("nvidia.com/mig-"):
        return None
    rest = resource.removeprefix("nvidia.com/mig-").removesuffix(".shared")
    if rest.endswith(".me"):
        rest = rest.removesuffix(".me") + "+me"
    return rest if PROFILE_RE.match(rest) else None


def catalog_resource_names() -> set[str]:
    """Every name the NVIDIA device plugin can advertise, for clusters we cannot see."""
    names = {"nvidia.com/gpu", "nvidia.com/gpu.shared"}
    for profile in all_profiles():
        base = resource_for_profile(profile)
        names |= {base, base + ".shared"}
    return names
