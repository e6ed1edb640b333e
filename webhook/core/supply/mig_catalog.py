"""MIG profiles per GPU model and the memory each really exposes, in MiB.

The `Ngb` in a profile name is nominal: `1g.10gb` exposes 9856 MiB on an A100 80GB.
Measured values (NVML MemorySizeMB, as GFD labels copy it) come from NVIDIA's go-nvml
mocks and `nvidia-smi mig -lgip` output in NVIDIA's threads, cited per row. Where no
measurement is published, a profile gets its nominal size scaled by the measured ratio of
a sibling profile, and messages call it a "conservative estimate" (`nominal` is then set).
Labels on real nodes win: these are only used where a node carries no
`nvidia.com/mig-<profile>.memory` label.
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
        kind = "conservative estimate" if self.nominal else "catalog value"
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


# nvidia-smi prints GiB with two decimals: a figure x becomes floor(x * 1024) MiB, never
# more than the slice has.
def _gib(value: float) -> int:
    return int(value * 1024)


# Measured with `nvidia-smi mig -lgip`, as pasted in NVIDIA's own threads (cited per row).
_MEASURED.update(
    {
        "H100 NVL 94GB": {  # NVIDIA/gpu-operator#900; 3g.47gb: NVIDIA/mig-parted#101
            "1g.12gb": _gib(10.75),
            "1g.12gb+me": _gib(10.75),
            "1g.24gb": _gib(21.62),
            "2g.24gb": _gib(21.62),
            "3g.47gb": _gib(46.38),
        },
        "H200 141GB": {  # NVIDIA/mig-parted#120
            "1g.18gb": _gib(16.00),
            "1g.18gb+me": _gib(16.00),
            "1g.35gb": _gib(32.25),
            "2g.35gb": _gib(32.25),
            "3g.71gb": _gib(69.50),
            "4g.71gb": _gib(69.50),
        },
        "GH200 144GB": {  # GH200 144G HBM3e: NVIDIA/mig-parted#139
            "1g.18gb": _gib(17.50),
            "1g.18gb+me": _gib(17.50),
            "1g.36gb": _gib(35.25),
            "2g.36gb": _gib(35.25),
        },
        # The smallest of what drivers show: 1g.23gb 22.00 GiB (NVIDIA/mig-parted#166),
        # 20.50 GiB (NVIDIA/gpu-operator#1351; 20992 MiB in NVIDIA/gpu-operator#2155).
        "B200 180GB": {
            "1g.23gb": _gib(20.50),
            "1g.23gb+me": _gib(20.50),
            "1g.45gb": _gib(44.25),
            "2g.45gb": _gib(44.25),
        },
        # 1g.23gb/1g.47gb: NVIDIA/mig-parted#227; HGX GB200 lists 1g.24gb at 20.00 GiB
        # (NVIDIA/gpu-operator#1303): both names, the smaller figure where they meet.
        "GB200 186GB": {
            "1g.23gb": _gib(22.00),
            "1g.24gb": _gib(20.00),
            "1g.24gb+me": _gib(20.00),
            "1g.47gb": _gib(45.50),
            "2g.47gb": _gib(45.50),
        },
        "RTX PRO 6000 96GB": {  # RTX PRO 6000 Blackwell Server: bigstack-oss/cubecos#312
            "1g.24gb": _gib(23.12),
            "1g.24gb+me": _gib(23.12),
        },
    }
)


def _scaled(profiles: str, *, measured: int, of: str) -> dict[str, int]:
    """Profiles no one has published a measurement of: the nominal size scaled by the
    measured-to-nominal ratio of a sibling profile `of` (measured MiB). A conservative
    estimate, and reported as one: slices of one GPU lose about the same share."""
    ratio = min(measured / _nominal(of)[of], 1.0)  # never more than the name says
    return {p: int(mib * ratio) for p, mib in _nominal(profiles).items()}


_NOMINAL: dict[str, dict[str, int]] = {
    "H100 NVL 94GB": {
        # Equal `Ngb` names show equal memory in every -lgip table: 3g.47gb's figure.
        "4g.47gb": _gib(46.38),
        **_scaled("7g.94gb", measured=_gib(10.75), of="1g.12gb"),
    },
    # No H100 96GB / GH200 96GB output found: the ratio of the same die's H100 NVL.
    "H100 96GB": _scaled(
        "1g.12gb 1g.24gb 2g.24gb 3g.48gb 4g.48gb 7g.96gb", measured=_gib(10.75), of="1g.12gb"
    ),
    # The H20 is the same GH100 die with 96 GB (NVIDIA MIG user guide, "Supported GPUs");
    # NVIDIA's mig-parted default config (deployments/systemd/config-default.yaml,
    # all-balanced) gives it the H100 96GB profiles (device 0x232910DE beside
    # 0x233D10DE). No -lgip output found: the H100 NVL ratio, as for the H100 96GB.
    "H20 96GB": _scaled(
        "1g.12gb 1g.24gb 2g.24gb 3g.48gb 4g.48gb 7g.96gb", measured=_gib(10.75), of="1g.12gb"
    ),
    "H200 141GB": _scaled("7g.141gb", measured=_gib(16.00), of="1g.18gb"),
    "GH200 144GB": _scaled("3g.72gb 4g.72gb 7g.144gb", measured=_gib(17.50), of="1g.18gb"),
    "B200 180GB": _scaled("3g.90gb 4g.90gb 7g.180gb", measured=_gib(20.50), of="1g.23gb"),
    "GB200 186GB": _scaled("3g.93gb 4g.93gb 7g.186gb", measured=_gib(20.00), of="1g.24gb"),
    "RTX PRO 6000 96GB": _scaled("2g.48gb 4g.96gb", measured=_gib(23.12), of="1g.24gb"),
}

# GFD's `nvidia.com/gpu.product` (e.g. NVIDIA-A100-SXM4-80GB) to a catalog row; order
# matters: GH200 contains H200, GB200 contains B200.
_PRODUCT_RULES: tuple[tuple[str, str], ...] = (
    (r"GB200", "GB200 186GB"),
    (r"GH200.*14[14]", "GH200 144GB"),
    (r"GH200", "H100 96GB"),
    (r"RTX.PRO.6000", "RTX PRO 6000 96GB"),
    (r"B200", "B200 180GB"),
    (r"H200", "H200 141GB"),
    (r"H20(?!\d)", "H20 96GB"),  # after H200: NVIDIA-H20 as GFD names it
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
