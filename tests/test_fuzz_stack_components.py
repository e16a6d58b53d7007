"""The stack's rules and the components' own checks agree: a stack configuration the stack rules accept
is never refused by a component's check of its args (check_components), so a valid stack file never
stops half-way through its declarations. Generated from plausible values: most combinations are
valid, many are not (those are refused by the stack rules, which is fine here).

Each check runs the components' full rules (`component_rules=True`). A render does not: the
components whose section rules the stack layer ran (the rule functions they share with it) get their
args' model checked, not their rules again, as a GPU pool's (stack/declare.py). It may skip them
because this property holds: what the stack rules accept, the components' rules accept too. These
tests are what guards it, so they must keep running every rule."""

from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from gke_gpu.stack.config import ConfigError, parse_settings
from gke_gpu.stack.program import check_components
from tests.test_existing_cluster import KUBECONFIG
from tests.test_fuzz import fuzz

ACCELERATOR = st.sampled_from(
    [
        "nvidia-l4",
        "nvidia-tesla-t4",
        "nvidia-tesla-a100",
        "nvidia-h100-80gb",
        "nvidia-a100-80gb",
        "nvidia-h100-mega-80gb",
    ]
)
SHARING = st.fixed_dictionaries(
    {"strategy": st.sampled_from(["TIME_SHARING", "MPS"]), "maxClientsPerGpu": st.integers(2, 8)}
)
MIG = st.sampled_from(["1g.10gb", "3g.40gb", "1g.12gb"])
IMAGE_CACHE = st.builds(
    lambda name: {"diskImage": f"projects/p-123456/global/images/{name}"}, st.sampled_from(["vllm", "tgi"])
)
STANDARD_POOL_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "gpusPerNode": st.sampled_from([1, 2, 4, 8]),
        "minNodes": st.integers(0, 3),
        "zones": st.lists(
            st.sampled_from(["us-central1-a", "us-central1-b", "us-central1-c"]),
            min_size=1,
            max_size=2,
            unique=True,
        ),
        "driverVersion": st.sampled_from(["DEFAULT", "LATEST", "INSTALLATION_DISABLED"]),
        "labels": st.just({"team": "ml"}),
        "taints": st.just([{"key": "team", "value": "ml", "effect": "NO_EXECUTE"}]),
        "diskSizeGb": st.sampled_from([50, 200]),
        "imageCache": IMAGE_CACHE,
    },
)
# One way to get capacity (they mostly exclude each other), and sharing or MIG or neither.
CAPACITY = st.sampled_from(
    [
        {},
        {"spot": True},
        {"reservation": {"type": "ANY"}},
        {"reservation": {"type": "SPECIFIC", "name": "r1"}},
        {"queuedProvisioning": True},
        {"flexStart": True},
        {"flexStart": True, "maxRunDuration": "24h"},
        {"compactPlacement": True, "zones": ["us-central1-a"]},
        {"gpudirect": True, "zones": ["us-central1-a"]},
        {"gpudirect": True, "compactPlacement": True, "zones": ["us-central1-b"]},
        {"gpudirect": True, "flexStart": True, "zones": ["us-central1-a"]},
        {"capacityLadder": ["onDemand", "spot"]},
    ]
)
ALERTS = st.just({"enabled": True, "notificationChannels": ["projects/p-123456/notificationChannels/1"]})
PARTITIONING = st.one_of(
    st.just({}),
    st.builds(lambda sharing: {"sharing": sharing}, SHARING),
    st.builds(lambda mig: {"migPartitionSize": mig}, MIG),
)


@st.composite
def standard_pool(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "accelerator": draw(ACCELERATOR),
        "maxNodes": draw(st.integers(1, 6)),
        **draw(STANDARD_POOL_OPTIONS),
        **draw(CAPACITY),
        **draw(PARTITIONING),
    }


AUTOPILOT_POOL = st.fixed_dictionaries(
    {"accelerator": ACCELERATOR},
    optional={
        "gpusPerNode": st.sampled_from([1, 2, 4, 8]),
        "spot": st.booleans(),
        "onDemandFallback": st.booleans(),
        "driverVersion": st.sampled_from(["DEFAULT", "LATEST"]),
        "sharing": SHARING,
        "migPartitionSize": MIG,
        "imageCache": IMAGE_CACHE,
    },
)


@st.composite
def stacks(draw: st.DrawFn) -> dict[str, Any]:
    mode = draw(st.sampled_from(["autopilot", "standard"]))
    cluster: dict[str, Any] = {"mode": mode, "name": "gpu-fuzz"}
    if mode == "standard":
        cluster["location"] = draw(st.sampled_from(["us-central1", "us-central1-a", "us-central1-c"]))
        if draw(st.booleans()):
            cluster["systemPool"] = {"minNodes": draw(st.integers(0, 2)), "maxNodes": draw(st.integers(1, 4))}
    cluster.update(
        draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "privateNodes": st.booleans(),
                    "publicEndpoint": st.booleans(),
                    "releaseChannel": st.sampled_from(["RAPID", "STABLE"]),
                    "deletionProtection": st.booleans(),
                    "intranodeVisibility": st.booleans(),
                    "masterAuthorizedNetworks": st.just([{"cidrBlock": "203.0.113.0/24"}]),
                },
            )
        )
    )
    pools = draw(st.lists(standard_pool() if mode == "standard" else AUTOPILOT_POOL, min_size=1, max_size=3))
    raw: dict[str, Any] = {
        "cluster": cluster,
        "gpuPools": [{"name": f"p{i}", **pool} for i, pool in enumerate(pools)],
        "monitoring": draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "dcgm": st.sampled_from(["managed", "exporter", "none"]),
                    "dashboard": st.booleans(),
                    "alerts": ALERTS,
                },
            )
        ),
        "workloads": draw(
            st.lists(
                st.sampled_from(["nvidia-smi", "cuda-vector-add", "sharing-demo"]), max_size=2, unique=True
            )
        ),
    }
    if draw(st.booleans()):
        raw["network"] = {"subnetCidr": "10.10.0.0/20"}
    if draw(st.booleans()):
        raw["batch"] = {"kueue": True}
    services = draw(st.lists(service(len(pools)), max_size=2))
    if services:
        raw["serving"] = [{"name": f"s{i}", **entry} for i, entry in enumerate(services)]
        for pool in raw["gpuPools"]:  # vLLM's image needs the R580+ driver; most draws keep it
            pool.setdefault("driverVersion", "LATEST")
        if draw(st.booleans()):
            raw["workloads"] = [*raw["workloads"], {"name": "serving-load", "service": "s0"}]
    return raw


@st.composite
def service(draw: st.DrawFn, pools: int) -> dict[str, Any]:
    """A gke-gpu:serving entry on one of the drawn pools, with the serving keys drawn (valid or not
    for that pool: the stack rules judge)."""
    entry: dict[str, Any] = {
        "pool": f"p{draw(st.integers(0, pools - 1))}",
        "model": draw(st.sampled_from(["gs://models-bucket/qwen", "Qwen/Qwen2.5-1.5B"])),
    }
    if entry["model"].startswith("Qwen/"):
        entry["hfTokenSecret"] = "hf"
    low = draw(st.integers(1, 2))
    entry.update(
        draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "gpusPerReplica": st.sampled_from([1, 2, 8, 16]),
                    "replicas": st.just({"min": low, "max": low + draw(st.integers(0, 2))}),
                    "scaleOn": st.sampled_from(["queue", "gpu"]),
                    "gateway": st.booleans(),
                    "maxModelLen": st.sampled_from([4096, 8192]),
                    "weights": st.sampled_from(
                        [{"via": "cloudStorageFuse"}, {"via": "hyperdiskMl", "sizeGib": 200}]
                    ),
                },
            )
        )
    )
    return entry


@given(stacks())
@fuzz(examples=200, deadline_ms=5000)
def test_what_the_stack_rules_accept_the_components_accept(raw: dict[str, Any]) -> None:
    try:
        settings, _ = parse_settings(raw, project="p-123456", region="us-central1", stack="fuzz")
    except ConfigError:
        event("refused by the stack rules")
        return
    event("accepted, with services" if settings.serving else "accepted")
    check_components(settings, component_rules=True)  # a ConfigError if a component refuses it


@st.composite
def serving_stacks(draw: st.DrawFn) -> dict[str, Any]:
    """A Standard cluster whose pools can serve (R580+ driver, room for replicas), and drawn services."""
    pools = [
        {
            "name": "p0",
            "accelerator": "nvidia-l4",
            "gpusPerNode": draw(st.sampled_from([1, 2, 4])),
            "maxNodes": 8,
        },
        {"name": "p1", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 8, "maxNodes": 4},
    ]
    for pool in pools:
        pool["driverVersion"] = "LATEST"
    raw: dict[str, Any] = {
        "cluster": {"mode": "standard", "name": "gpu-fuzz", "location": "us-central1"},
        "gpuPools": pools,
        "serving": [
            {"name": f"s{i}", **entry}
            for i, entry in enumerate(draw(st.lists(service(2), min_size=1, max_size=3)))
        ],
    }
    if draw(st.booleans()):
        raw["workloads"] = [{"name": "serving-load", "service": "s0"}]
    if draw(st.booleans()):
        raw["monitoring"] = {
            "alerts": {"enabled": True, "notificationChannels": ["projects/p-123456/notificationChannels/1"]}
        }
    return raw


@given(serving_stacks())
@fuzz(examples=60, deadline_ms=5000)
def test_what_the_serving_rules_accept_the_serving_components_accept(raw: dict[str, Any]) -> None:
    try:
        settings, _ = parse_settings(raw, project="p-123456", region="us-central1", stack="fuzz")
    except ConfigError:
        event("refused by the stack rules")
        return
    event("accepted")
    check_components(settings, component_rules=True)  # a ConfigError if a component refuses it


@st.composite
def existing_cluster_stacks(draw: st.DrawFn) -> dict[str, Any]:
    """The GPU layer on a cluster the program does not manage: its sections drawn, valid or not."""
    flavor = draw(st.sampled_from(["generic", "gke"]))
    cluster: dict[str, Any] = {"mode": "existing", "flavor": flavor, "kubeconfig": KUBECONFIG}
    if flavor == "gke":
        cluster["name"] = draw(st.sampled_from(["team-cluster", "gpu"]))
    if draw(st.booleans()):
        cluster["context"] = "gpu-lab"
    raw: dict[str, Any] = {
        "cluster": cluster,
        "monitoring": draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "dcgm": st.sampled_from(["managed", "exporter", "none"]),
                    "scrape": st.sampled_from(["serviceMonitor", "annotations", "podMonitoring"]),
                    "dashboard": st.booleans(),
                    "alerts": ALERTS,
                },
            )
        ),
        "workloads": draw(
            st.lists(
                st.sampled_from(["nvidia-smi", "cuda-vector-add", "pytorch-smoke", "sharing-demo"]),
                max_size=3,
                unique=True,
            )
        ),
    }
    if draw(st.booleans()):
        raw["gpuNodes"] = draw(
            st.lists(st.sampled_from(["gpu-node-1", "gpu-node-2"]), max_size=2, unique=True)
        )
    if flavor == "generic" and draw(st.booleans()):
        raw["devicePlugin"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "gpuNodeLabel": st.sampled_from(["nvidia.com/gpu.present=true", "gpus=true"]),
                    "taintGpuNodes": st.booleans(),
                    "sharing": st.builds(lambda n: {"timeSlicing": {"replicas": n}}, st.integers(2, 8)),
                },
            )
        )
    return raw


@given(existing_cluster_stacks())
@fuzz(examples=60, deadline_ms=5000)
def test_what_the_rules_accept_for_an_existing_cluster_the_components_accept(raw: dict[str, Any]) -> None:
    try:
        settings, _ = parse_settings(
            raw,
            project="p-123456",
            region="us-central1",
            stack="fuzz",
            secret_keys=frozenset({"gke-gpu:cluster"}),
        )
    except ConfigError:
        event("refused by the stack rules")
        return
    event("accepted")
    check_components(settings, component_rules=True)  # a ConfigError if a component refuses it
