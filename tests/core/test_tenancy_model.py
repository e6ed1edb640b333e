"""The tenancy model (webhook.core.tenancy): who a namespace belongs to, what a Pod is
given of GPUs, and what the nodes it can land on offer."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from tests.support.builders import container, gpu, mig_node, node, pod, time_sliced_node
from webhook.core.access.gpuresources import DEVICE_PLUGIN_GPUS, gpu_resources
from webhook.core.access.shares import gpu_shares
from webhook.core.supply.inventory import Inventory
from webhook.core.supply.scheduling import candidates
from webhook.core.tenancy.landing import product_name, products_split, single_profile
from webhook.core.tenancy.placement import name_modes, share_mode
from webhook.core.tenancy.tenants import Limit, Tenant, tenant_of
from webhook.core.tenancy.use import Use, device_memory, devices, gib, pod_use, up
from webhook.core.workloads.kinds import pod_view

GPUS = gpu_resources(include=DEVICE_PLUGIN_GPUS)

RESEARCH = Tenant("research", ("research", "research-*"), None)
BY_LABEL = Tenant("inference", (), {"matchLabels": {"team": "inference"}})
BY_EXPRESSION = Tenant(
    "batch",
    (),
    {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["batch", "spot"]}]},
)
EVERYONE = Tenant("everyone", (), {})
TENANTS = (RESEARCH, BY_LABEL, BY_EXPRESSION)


@pytest.mark.parametrize(
    ("namespace", "labels", "tenants", "tenant", "undecided"),
    [
        ("research", None, TENANTS, "research", []),
        ("research-vision", None, TENANTS, "research", []),
        ("researchers", None, TENANTS, None, ["inference", "batch"]),
        # Names win over selectors: the labels say inference, the name says research.
        ("research", {"team": "inference"}, TENANTS, "research", []),
        ("prod", {"team": "inference"}, TENANTS, "inference", []),
        ("spot-1", {"tier": "spot"}, TENANTS, "batch", []),
        ("web", {"team": "web"}, TENANTS, None, []),
        # Labels unknown: the selectors cannot be matched, and say so.
        ("prod", None, TENANTS, None, ["inference", "batch"]),
        ("prod", None, (RESEARCH,), None, []),
        # An empty selector selects every namespace, labels known or not.
        ("prod", None, (RESEARCH, EVERYONE), "everyone", []),
        ("prod", None, (BY_LABEL, EVERYONE), None, ["inference", "everyone"]),
        # kubernetes.io/metadata.name is on every Namespace (the apiserver sets it).
        (
            "ml",
            {},
            (Tenant("ml", (), {"matchLabels": {"kubernetes.io/metadata.name": "ml"}}),),
            "ml",
            [],
        ),
    ],
)
def test_tenant_of(
    namespace: str,
    labels: dict[str, str] | None,
    tenants: tuple[Tenant, ...],
    tenant: str | None,
    undecided: list[str],
) -> None:
    found = tenant_of(namespace, tenants=tenants, labels=labels)
    assert (found.tenant.name if found.tenant else None) == tenant
    assert [t.name for t in found.undecided] == undecided


def uses(obj: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [(u.what, u.resource, u.devices) for u in pod_use(pod_view(obj), gpus=GPUS)]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (pod(container("web")), []),
        (
            pod(gpu("nvidia.com/mig-3g.40gb", 2, name="train")),
            [('container "train" asks 2 nvidia.com/mig-3g.40gb', "nvidia.com/mig-3g.40gb", 2)],
        ),
        (
            pod(gpu(name="a"), gpu(count=2, name="b")),
            [('container "a" asks 1 and container "b" asks 2 nvidia.com/gpu', "nvidia.com/gpu", 3)],
        ),
        # An init step larger than the running set: Kubernetes' effective request.
        (
            pod(gpu(), initContainers=[gpu(count=4, name="warm")]),
            [
                (
                    'init container "warm" asks 4 and container "main" asks 1 nvidia.com/gpu, 4 '
                    "as Kubernetes counts the Pod (init containers run first)",
                    "nvidia.com/gpu",
                    4,
                )
            ],
        ),
        # Ephemeral containers are given no device; a zero count asks for nothing.
        (pod(gpu(count=0), ephemeralContainers=[gpu(name="debug")]), []),
        # HAMi: the nvidia.com/gpu count beside gpumem is the devices the share spans.
        (
            pod(container(limits={"nvidia.com/gpu": 2, "nvidia.com/gpumem": 4000})),
            [
                (
                    'container "main" asks for part of a GPU (nvidia.com/gpumem: 4000, HAMi) on '
                    "2 devices",
                    "nvidia.com/gpu",
                    2,
                )
            ],
        ),
        # KAI asks by annotation only, on gpu-fraction-num-devices devices.
        (
            pod(
                container(),
                annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "3"},
            ),
            [
                (
                    'container "main" asks for part of a GPU (annotation gpu-fraction="0.5", KAI '
                    "scheduler) on 3 devices",
                    "nvidia.com/gpu",
                    3,
                )
            ],
        ),
        # Volcano's vGPU count is no device-plugin GPU name: the share counts it.
        (
            pod(container(limits={"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-memory": 8000})),
            [
                (
                    'container "main" asks for part of a GPU (volcano.sh/vgpu-memory: 8000, '
                    "Volcano vGPU) on 2 devices",
                    "volcano.sh/vgpu-number",
                    2,
                )
            ],
        ),
    ],
)
def test_pod_use(obj: dict[str, Any], expected: list[tuple[str, str, int]]) -> None:
    assert uses(obj) == expected
    assert devices(pod_use(pod_view(obj), gpus=GPUS)) == sum(n for *_, n in expected)


MPS = node(
    "mps",
    labels={
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.sharing-strategy": "mps",
        "nvidia.com/gpu.replicas": "4",
    },
    allocatable={"nvidia.com/gpu": "32"},
)
CLUSTER = Inventory.from_nodes([mig_node(), time_sliced_node(), MPS])


def memory(obj: dict[str, Any], inventory: Inventory, pinned: frozenset[str] | None = None) -> Any:
    view = pod_view(obj)
    (use,) = pod_use(view, gpus=GPUS)
    found = device_memory(view, use, inventory, pinned=pinned)
    return None if found is None else (found.mib, found.source)


@pytest.mark.parametrize(
    ("obj", "inventory", "pinned", "expected"),
    [
        # The node's MIG memory label; the catalog for a profile without one.
        (
            pod(gpu("nvidia.com/mig-1g.10gb")),
            CLUSTER,
            None,
            (9856, "label nvidia.com/mig-1g.10gb.memory on node a100-mig"),
        ),
        (
            pod(gpu("nvidia.com/mig-2g.20gb")),
            CLUSTER,
            None,
            (19968, "catalog value for A100 80GB on node a100-mig"),
        ),
        # Without an inventory, the catalog's smallest value of the profile...
        (
            pod(gpu("nvidia.com/mig-1g.10gb")),
            Inventory.unknown(),
            None,
            (9856, "smallest catalog value of this profile, A100 40GB; no inventory given"),
        ),
        # ... or the pinned product's.
        (
            pod(gpu("nvidia.com/mig-1g.10gb")),
            Inventory.unknown(),
            frozenset({"NVIDIA-H100-80GB-HBM3"}),
            (9984, "catalog value for H100 80GB; no inventory given"),
        ),
        # A whole GPU without an inventory: what a pinned product is known to have.
        (
            pod(gpu()),
            Inventory.unknown(),
            frozenset({"NVIDIA-L4", "nvidia-tesla-t4"}),
            (23034, "GFD on an NVIDIA-L4 Google-Compute-Engine node; no inventory given"),
        ),
        (
            pod(gpu()),
            Inventory.unknown(),
            None,
            (None, "no inventory given, and the Pod pins no GPU product"),
        ),
        (
            pod(gpu()),
            Inventory.unknown(),
            frozenset({"NVIDIA-X1"}),
            (None, "no inventory given, and no GPU table has the memory of NVIDIA-X1"),
        ),
        # Time-slicing caps no replica's memory: the whole device counts; MPS its share.
        (
            pod(gpu(), nodeSelector={"kubernetes.io/hostname": "a10g-ts"}),
            CLUSTER,
            None,
            (
                23028,
                "label nvidia.com/gpu.memory on node a10g-ts, time-sliced: nothing caps a "
                "replica's memory",
            ),
        ),
        (
            pod(gpu(), nodeSelector={"kubernetes.io/hostname": "mps"}),
            CLUSTER,
            None,
            (20480, "label nvidia.com/gpu.memory on node mps, an MPS replica's 1/4"),
        ),
        # The largest where it can land.
        (
            pod(gpu()),
            CLUSTER,
            None,
            (
                23028,
                "label nvidia.com/gpu.memory on node a10g-ts, "
                "time-sliced: nothing caps a replica's memory",
            ),
        ),
        # Shares: the MiB they ask, or their fraction of the device.
        (
            pod(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000})),
            CLUSTER,
            None,
            (4000, "nvidia.com/gpumem: 4000"),
        ),
        (
            pod(container(), annotations={"gpu-fraction": "0.25"}),
            CLUSTER,
            None,
            (20480, "1/4 of 81920 MiB, label nvidia.com/gpu.memory on node mps"),
        ),
        (
            pod(container(), annotations={"gpu-fraction": "0.25"}),
            Inventory.unknown(),
            None,
            (None, "a fraction of a device whose memory is not known without an inventory"),
        ),
        # No node can take it: nothing to say (resource-names does).
        (pod(gpu("nvidia.com/mig-7g.80gb")), CLUSTER, None, None),
    ],
)
def test_device_memory(
    obj: dict[str, Any], inventory: Inventory, pinned: frozenset[str] | None, expected: Any
) -> None:
    found = memory(obj, inventory, pinned)
    if expected is not None and expected[0] is not None:
        expected = (Fraction(expected[0]), expected[1])
    assert found == expected


@pytest.mark.parametrize(
    ("mib", "text"),
    [(40448, "39.5Gi"), (9856, "9.625Gi"), (23034, "22.495Gi"), (81920, "80Gi"), (1, "0.001Gi")],
)
def test_gib_never_shows_less_than_there_is(mib: int, text: str) -> None:
    assert gib(mib) == text
    assert mib <= up(mib) < mib + Fraction(1024, 1000)
    assert gib(up(mib)) == text


def test_sums_of_shown_figures_agree_with_what_is_shown() -> None:
    # 2 x 22.495Gi is 44.99Gi as shown, where the exact sum would show 44.989.
    assert gib(2 * up(23034)) == "44.99Gi"


@pytest.mark.parametrize(
    ("value", "product"),
    [
        ("NVIDIA-L4-SHARED", "NVIDIA-L4"),
        ("NVIDIA-A100-SXM4-40GB-MIG-3g.20gb", "NVIDIA-A100-SXM4-40GB"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED", "NVIDIA-A100-SXM4-40GB"),
        ("nvidia-l4", "nvidia-l4"),
    ],
)
def test_product_name(value: str, product: str) -> None:
    assert product_name(value) == product


PRODUCTS = Inventory.from_nodes(
    [
        node("h100", labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
             allocatable={"nvidia.com/gpu": "8"}),
        node("l4-ts", labels={"nvidia.com/gpu.product": "NVIDIA-L4-SHARED"},
             allocatable={"nvidia.com/gpu": "16"}),
        node("gke-l4", labels={"cloud.google.com/gke-accelerator": "nvidia-l4"},
             allocatable={"nvidia.com/gpu": "1"}),
        node("bare", allocatable={"nvidia.com/gpu": "1"}),
    ]
)  # fmt: skip


@pytest.mark.parametrize(
    ("allowed", "bad", "unknown", "text"),
    [
        (
            ("NVIDIA-L4",),
            ["h100", "gke-l4"],
            ["bare"],
            "NVIDIA-H100-80GB-HBM3 on node h100 and nvidia-l4 on node gke-l4",
        ),
        (("NVIDIA-L4", "nvidia-l4"), ["h100"], ["bare"], "NVIDIA-H100-80GB-HBM3 on node h100"),
        (("*",), [], ["bare"], ""),
    ],
)
def test_products_split(
    allowed: tuple[str, ...], bad: list[str], unknown: list[str], text: str
) -> None:
    tenant = Tenant("t", ("x",), None, products=allowed)
    offers = candidates(pod_view(pod(gpu())), "nvidia.com/gpu", PRODUCTS)
    split = products_split(offers.bits, "nvidia.com/gpu", PRODUCTS, allowed=tenant.allows_product)
    index = PRODUCTS.index
    assert sorted(n.name for n in index.nodes_in(split.bad)) == sorted(bad)
    assert [n.name for n in index.nodes_in(split.unknown)] == unknown
    assert split.text(PRODUCTS) == text


def test_single_strategy_slices_have_their_profile() -> None:
    inventory = Inventory.from_nodes(
        [
            node(
                "single",
                labels={
                    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb",
                    "nvidia.com/mig.strategy": "single",
                },
                allocatable={"nvidia.com/gpu": "2"},
            )
        ]
    )
    (offer,) = inventory.offers["nvidia.com/gpu"]
    assert (offer.sharing, single_profile(offer)) == ("mig", "3g.20gb")
    (plain,) = PRODUCTS.offers["nvidia.com/gpu"][:1]
    assert single_profile(plain) is None


@pytest.mark.parametrize(
    ("resource", "selector", "modes"),
    [
        ("nvidia.com/mig-1g.10gb", {}, {"mig"}),
        ("nvidia.com/mig-1g.10gb.shared", {}, {"time-slicing"}),
        ("nvidia.com/gpu.shared", {}, {"time-slicing", "mps"}),
        ("nvidia.com/gpu", {}, None),
        ("nvidia.com/gpu", {"nvidia.com/gpu.sharing-strategy": "none"}, {"exclusive", "mig"}),
        ("nvidia.com/gpu", {"nvidia.com/gpu.sharing-strategy": "mps"}, {"mps"}),
        ("amd.com/gpu", {}, None),
    ],
)
def test_name_modes(resource: str, selector: dict[str, str], modes: set[str] | None) -> None:
    view = pod_view(pod(gpu(resource), nodeSelector=selector))
    assert name_modes(view, resource) == (frozenset(modes) if modes is not None else None)


@pytest.mark.parametrize(
    ("obj", "mode"),
    [
        (pod(container(), annotations={"gpu-fraction": "0.5"}), "time-slicing"),
        (pod(container(), annotations={"gpu-fraction": "0.5", "mps": "true"}), "mps"),
        (pod(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000})), "vgpu"),
        (
            pod(
                container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000}),
                annotations={"nvidia.com/vgpu-mode": "mig"},
            ),
            "mig",
        ),
        (pod(container(limits={"volcano.sh/gpu-memory": 4000})), "time-slicing"),
    ],
)
def test_share_mode(obj: dict[str, Any], mode: str) -> None:
    (share,) = gpu_shares(pod_view(obj))
    assert share_mode(share) == mode


def test_tenant_allows_and_accepts() -> None:
    t = Tenant(
        "t",
        ("x",),
        None,
        products=("NVIDIA-A100*",),
        mig_profiles=("1g.*",),
        sharing=("exclusive", "mig", "time-slicing"),
        dra_classes=("gpu.nvidia.com",),
        max_memory_per_pod=Limit(Fraction(40960), "40Gi"),
        trusted=False,
    )
    assert t.allows_product("NVIDIA-A100-SXM4-80GB") and not t.allows_product("NVIDIA-L4")
    assert t.allows_profile("1g.10gb") and not t.allows_profile("3g.40gb")
    assert t.allows_class("gpu.nvidia.com") and not t.allows_class("vfio.gpu.nvidia.com")
    # time-slicing is listed, but an untrusted tenant never shares a GPU.
    assert t.allows_mode("time-slicing") and not t.accepts_mode("time-slicing")
    assert t.accepts_mode("mig") and not t.accepts_mode("mps")
    anything = Tenant("any", ("x",), None)
    assert anything.allows_product("x") and anything.accepts_mode("vgpu")
    assert not anything.judges_placement and t.judges_placement


def test_a_use_is_a_plain_tuple() -> None:
    # What a message reads of a use, nothing more: the model is data.
    use = Use("what", "nvidia.com/gpu", 1, ("spec",))
    assert use.share is None and use._fields == ("what", "resource", "devices", "path", "share")
