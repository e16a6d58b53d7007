"""GPUDirect networking (issue 10): the flavour table, the pool rules, the stack's GPUDirect range, and
the VPCs, subnets, firewall rules, cluster and node-pool settings each flavour gets."""

import ipaddress

import pytest

from gke_gpu import GpuNodePool, InvalidArgsError
from gke_gpu.gpudirect.flavors import (
    FLAVORS,
    MACHINE_FLAVORS,
    SLOTS,
    GpuDirectFlavor,
    pod_interfaces,
    subnet_range,
)
from gke_gpu.gpudirect.networks import GpuDirectNetworks
from gke_gpu.stack.config import parse_settings
from tests.conftest import A4X_POOL as A4X
from tests.conftest import AUTOPILOT_CLUSTER, STANDARD_CLUSTER, config_error, render, settings, stack_config
from tests.conftest import MEGA_POOL as MEGA
from tests.conftest import ULTRA_POOL as ULTRA
from tests.conftest import ZONAL_CLUSTER as ZONAL
from tools.offline import run_program

HIGH = {**MEGA, "name": "high", "accelerator": "nvidia-h100-80gb", "zones": ["us-central1-a"]}


def raw(*pools: dict, network: dict | None = None, cluster: dict | None = None) -> dict:
    """The `gke-gpu:` keys of a stack with these pools."""
    keys: dict = {"cluster": cluster or STANDARD_CLUSTER, "gpuPools": list(pools)}
    if network is not None:
        keys["network"] = network
    return keys


def stack(*pools: dict, network: dict | None = None, cluster: dict | None = None):
    """That stack, rendered."""
    return render(stack_config(**raw(*pools, network=network, cluster=cluster)))


# -- the flavour table ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flavor", "nics"), [("TCPX", 4), ("TCPXO", 8), ("RDMA", 9), ("RDMA-A4X", 5), ("RDMA-A4X-Max", 9)]
)
def test_each_flavour_has_its_machines_nic_count(flavor: str, nics: int) -> None:
    assert len(FLAVORS[GpuDirectFlavor(flavor)].nics) == nics


def test_network_names_and_subnet_slots_never_collide_across_flavours() -> None:
    every = [nic for spec in FLAVORS.values() for nic in spec.nics]
    assert len({nic.network_name for nic in every}) == len(every)
    # A4X Max's RDMA NICs attach to the subnet its RoCE profile provides: no slot of the range.
    nics = [nic for nic in every if not nic.provided_subnet]
    assert all(nic.slot is None for nic in every if nic.provided_subnet)
    assert len({nic.slot for nic in nics}) == len(nics)
    assert all(nic.slot is not None and 0 <= nic.slot < SLOTS for nic in nics)
    ranges = [ipaddress.ip_network(subnet_range("192.168.0.0/16", nic)) for nic in nics]
    assert all(r.prefixlen == 21 for r in ranges)
    assert not any(a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])


def test_rdma_puts_the_gvnic_first_then_eight_rdma_nics_in_one_roce_vpc() -> None:
    spec = FLAVORS[GpuDirectFlavor.RDMA]
    assert [n.device_mode for n in spec.nics] == ["NetDevice"] + ["RDMA"] * 8
    assert spec.vpc_suffixes == ("gvnic-1", "rdma")
    assert [i["interfaceName"] for i in pod_interfaces(GpuDirectFlavor.RDMA)] == [
        f"eth{i}" for i in range(10)
    ]


def test_a4x_puts_the_gvnic_first_then_four_rdma_nics_in_its_own_roce_vpc() -> None:
    spec = FLAVORS[GpuDirectFlavor.RDMA_A4X]
    assert [n.device_mode for n in spec.nics] == ["NetDevice"] + ["RDMA"] * 4
    assert spec.vpc_suffixes == ("a4x-gvnic-1", "a4x-rdma") and spec.arch == "arm64"
    # container-engine-accelerators gpudirect-rdma/nccl-test-imex-a4x.yaml: eth2..eth5 on the RDMA NICs.
    assert pod_interfaces(GpuDirectFlavor.RDMA_A4X)[2:] == [
        {"interfaceName": f"eth{i + 2}", "network": f"a4x-rdma-{i}"} for i in range(4)
    ]


# -- the stack's resources ------------------------------------------------------------------------


def test_a_tcpxo_pool_gets_eight_vpcs_subnets_and_firewall_rules_and_the_cluster_multi_networking() -> None:
    result = stack(MEGA, cluster=ZONAL)
    vpcs = [r.inputs for r in result.of_type("gcp:compute/network:Network") if "tcpxo" in r.name]
    assert sorted(v["name"] for v in vpcs) == [f"gpu-test-tcpxo-{i}" for i in range(1, 9)]
    assert {v["mtu"] for v in vpcs} == {8244}
    assert all("networkProfile" not in v for v in vpcs)
    subnets = {
        r.inputs["name"]: r.inputs["ipCidrRange"]
        for r in result.of_type("gcp:compute/subnetwork:Subnetwork")
        if "tcpxo" in r.name
    }
    assert subnets["gpu-test-tcpxo-1"] == "192.168.32.0/21"
    assert len(set(subnets.values())) == 8
    firewalls = [r.inputs for r in result.of_type("gcp:compute/firewall:Firewall")]
    assert len(firewalls) == 8
    for rule in firewalls:
        suffix = rule["name"].removeprefix("gpu-test-").removesuffix("-internal")
        assert rule["sourceRanges"] == [subnets[f"gpu-test-{suffix}"]]
        assert rule["direction"] == "INGRESS"
    pool = result.one("gcp:container/nodePool:NodePool", "gpu-train-pool").inputs
    nics = pool["networkConfig"]["additionalNodeNetworkConfigs"]
    assert [n["subnetwork"] for n in nics] == [f"gpu-test-tcpxo-{i}" for i in range(1, 9)]
    assert [n["network"] for n in nics] == [f"gpu-test-tcpxo-{i}" for i in range(1, 9)]
    assert pool["nodeConfig"]["gvnic"] == {"enabled": True}
    cluster = result.one("gcp:container/cluster:Cluster").inputs
    assert cluster["enableMultiNetworking"] is True
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"
    summary = result.outputs["gpuPools"][0]["gpudirect"]
    assert summary == {
        "flavor": "TCPXO",
        "networking": "multiNetwork",
        "networks": [f"tcpxo-{i}" for i in range(1, 9)],
    }


def test_an_rdma_pool_gets_a_gvnic_vpc_and_a_zonal_roce_vpc_with_eight_subnets() -> None:
    result = stack(ULTRA)
    vpcs = {r.inputs["name"]: r.inputs for r in result.of_type("gcp:compute/network:Network")}
    roce = vpcs["gpu-test-rdma"]
    assert roce["networkProfile"] == "projects/test-project/global/networkProfiles/us-central1-b-vpc-roce"
    assert roce["mtu"] == 8896 and vpcs["gpu-test-gvnic-1"]["mtu"] == 8896
    pool = result.one("gcp:container/nodePool:NodePool", "gpu-ultra-pool").inputs
    nics = pool["networkConfig"]["additionalNodeNetworkConfigs"]
    assert [n["network"] for n in nics] == ["gpu-test-gvnic-1"] + ["gpu-test-rdma"] * 8
    assert [n["subnetwork"] for n in nics][1:] == [f"gpu-test-rdma-{i}" for i in range(8)]
    # Firewall rules on the gVNIC VPC only.
    assert [r.inputs["name"] for r in result.of_type("gcp:compute/firewall:Firewall")] == [
        "gpu-test-gvnic-1-internal"
    ]


def test_an_a4x_pool_gets_a_gvnic_vpc_a_roce_vpc_with_four_subnets_and_the_arm64_gib_installer() -> None:
    result = stack(A4X)
    vpcs = {r.inputs["name"]: r.inputs for r in result.of_type("gcp:compute/network:Network")}
    roce = vpcs["gpu-test-a4x-rdma"]
    assert roce["networkProfile"] == "projects/test-project/global/networkProfiles/us-central1-a-vpc-roce"
    assert roce["mtu"] == 8896 and vpcs["gpu-test-a4x-gvnic-1"]["mtu"] == 8896
    pool = result.one("gcp:container/nodePool:NodePool", "gpu-gb-pool").inputs
    nics = pool["networkConfig"]["additionalNodeNetworkConfigs"]
    assert [n["network"] for n in nics] == ["gpu-test-a4x-gvnic-1"] + ["gpu-test-a4x-rdma"] * 4
    assert [n["subnetwork"] for n in nics][1:] == [f"gpu-test-a4x-rdma-{i}" for i in range(4)]
    assert result.one("gcp:container/cluster:Cluster").inputs["enableMultiNetworking"] is True
    networks = sorted(
        r.inputs["metadata"]["name"] for r in result.of_type("kubernetes:networking.gke.io/v1:Network")
    )
    assert networks == ["a4x-gvnic-1", *(f"a4x-rdma-{i}" for i in range(4))]
    (installer,) = result.of_type("kubernetes:apps/v1:DaemonSet")
    pod = installer.inputs["spec"]["template"]["spec"]
    assert installer.inputs["metadata"]["name"] == "nccl-rdma-a4x-installer"
    assert pod["initContainers"][0]["image"].endswith("/gpudirect-gib/nccl-plugin-gib-arm64:v1.1.0")
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]} in term["matchExpressions"]
    assert result.outputs["gpuPools"][0]["gpudirect"]["flavor"] == "RDMA-A4X"


def test_a4x_and_a4_pools_keep_their_own_roce_vpcs_in_their_own_zones() -> None:
    a4 = {**ULTRA, "name": "b200", "accelerator": "nvidia-b200", "zones": ["us-central1-b"]}
    result = stack(A4X, a4)
    vpcs = {r.inputs["name"]: r.inputs for r in result.of_type("gcp:compute/network:Network")}
    assert vpcs["gpu-test-rdma"]["networkProfile"].endswith("/us-central1-b-vpc-roce")
    assert vpcs["gpu-test-a4x-rdma"]["networkProfile"].endswith("/us-central1-a-vpc-roce")
    installers = {r.inputs["metadata"]["name"] for r in result.of_type("kubernetes:apps/v1:DaemonSet")}
    assert installers == {"nccl-rdma-installer", "nccl-rdma-a4x-installer"}


def test_pools_of_one_flavour_share_its_networks_and_two_flavours_get_their_own() -> None:
    second = {**MEGA, "name": "train2"}
    result = stack(MEGA, second, HIGH, cluster=ZONAL)
    names = sorted(r.inputs["name"] for r in result.of_type("gcp:compute/network:Network"))
    assert names.count("gpu-test-tcpxo-1") == 1
    assert "gpu-test-tcpx-4" in names
    assert len(result.of_type("gke-gpu:index:GpuDirectNetworks")) == 2


def test_without_gpudirect_nothing_changes() -> None:
    pool = {**MEGA, "gpudirect": False}
    result = stack(pool)
    assert "enableMultiNetworking" not in result.one("gcp:container/cluster:Cluster").inputs
    assert "networkConfig" not in result.one("gcp:container/nodePool:NodePool", "gpu-train-pool").inputs
    assert not result.of_type("gke-gpu:index:GpuDirectNetworks")
    assert "gpudirect" not in result.outputs["gpuPools"][0]


def warnings_of(*pools: dict) -> list[str]:
    """The notes and warnings the render prints for these pools (the stack rules' own)."""
    _, warnings = parse_settings(raw(*pools), project="test-project", region="us-central1", stack="test")
    return warnings


def test_the_render_warns_when_a_gpudirect_pool_is_not_compact_placed() -> None:
    warned = warnings_of(MEGA)
    assert any(
        "gpuPools[0].compactPlacement: a GPUDirect pool without compact placement" in w for w in warned
    )
    assert not any("without compact placement" in w for w in warnings_of({**MEGA, "compactPlacement": True}))
    # Where compact placement is not allowed (flex-start off A3 Ultra/A4), a note says why instead.
    assert any(
        "flex-start on this machine cannot take it" in w for w in warnings_of({**MEGA, "flexStart": True})
    )
    # The same warning reaches the render's output.
    assert any("without compact placement" in w for w in stack(MEGA).warnings)


# -- bad stack files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        (
            {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2, "gpudirect": True},
            "gke-gpu:gpuPools[0].gpudirect: true is not allowed on g2-standard-8 (1 x nvidia-l4): it has no "
            "GPU-to-GPU NICs",
        ),
        (
            {**HIGH, "gpusPerNode": 4},
            "gke-gpu:gpuPools[0].gpudirect: true is not allowed on a3-highgpu-4g",
        ),
        (
            {**MEGA, "accelerator": "nvidia-tesla-a100", "gpusPerNode": 8},
            "gke-gpu:gpuPools[0].gpudirect: true is not allowed on a2-highgpu-8g",
        ),
        (
            {**MEGA, "zones": ["us-central1-a", "us-central1-b"]},
            "gke-gpu:gpuPools[0].zones: ['us-central1-a', 'us-central1-b'] has 2 zones; gpudirect needs "
            "exactly one zone",
        ),
        (
            {**MEGA, "zones": None},
            "gke-gpu:gpuPools[0].zones: unset (the nvidia-h100-mega-80gb zones of the region:",
        ),
    ],
)
def test_gpudirect_is_refused_where_it_cannot_work(pool: dict, expected: str) -> None:
    pool = {k: v for k, v in pool.items() if v is not None}
    message = config_error(raw(pool))
    assert expected in message, message


def test_gpudirect_is_refused_on_autopilot_by_name() -> None:
    pool = {"name": "mega", "accelerator": "nvidia-h100-mega-80gb", "gpusPerNode": 8, "gpudirect": True}
    message = config_error(raw(pool, cluster=AUTOPILOT_CLUSTER))
    assert "gke-gpu:gpuPools[0].gpudirect: not allowed on Autopilot" in message


@pytest.mark.parametrize(
    ("network", "expected"),
    [
        (
            {"podsCidr": "192.168.0.0/14"},
            "gke-gpu:network.gpudirectCidr (default 192.168.0.0/16): 192.168.0.0/16 overlaps "
            "gke-gpu:network.podsCidr 192.168.0.0/14",
        ),
        ({"gpudirectCidr": "10.10.0.0/16"}, "10.10.0.0/16 overlaps gke-gpu:network.subnetCidr 10.10.0.0/20"),
        ({"gpudirectCidr": "172.16.0.0/20"}, "gke-gpu:network.gpudirectCidr: 172.16.0.0/20 is too small"),
        ({"gpudirectCidr": "8.8.0.0/16"}, "gke-gpu:network.gpudirectCidr: 8.8.0.0/16 is not a private range"),
    ],
)
def test_the_gpudirect_range_must_be_large_private_and_clear_of_the_cluster(
    network: dict, expected: str
) -> None:
    message = config_error(raw(MEGA, network=network))
    assert expected in message, message


def test_a_gpudirect_range_without_a_gpudirect_pool_is_not_ignored_silently() -> None:
    pool = {**MEGA, "gpudirect": False}
    message = config_error(raw(pool, network={"gpudirectCidr": "172.16.0.0/16"}))
    assert "gke-gpu:network.gpudirectCidr: '172.16.0.0/16' would be ignored" in message


def test_a_broken_pool_gives_no_follow_on_error_about_the_range() -> None:
    message = config_error(
        raw({**MEGA, "gpudirect": "yes please"}, network={"gpudirectCidr": "172.16.0.0/16"})
    )
    assert "gke-gpu:gpuPools[0].gpudirect: 'yes please' is not allowed" in message
    assert "gpudirectCidr" not in message, message


def test_rdma_pools_must_share_one_zone() -> None:
    # europe-west4 has H200s in zone a and B200s in zone b: two RDMA pools, two zones.
    h200 = {**ULTRA, "zones": ["europe-west4-a"]}
    b200 = {**ULTRA, "name": "b200", "accelerator": "nvidia-b200", "zones": ["europe-west4-b"]}
    value = settings(raw(h200), region="europe-west4")  # one RDMA pool alone is fine
    assert value.network and value.network.gpudirect_cidr == "192.168.0.0/16"
    message = config_error(raw(h200, b200), region="europe-west4")
    expected = "gke-gpu:gpuPools[1].zones: ['europe-west4-b'] differs from gpuPools[0]'s zone europe-west4-a"
    assert expected in message, message


def test_a_custom_gpudirect_range_moves_every_subnet() -> None:
    result = stack(MEGA, network={"gpudirectCidr": "172.20.0.0/16"})
    ranges = [
        r.inputs["ipCidrRange"]
        for r in result.of_type("gcp:compute/subnetwork:Subnetwork")
        if "tcpxo" in r.name
    ]
    assert all(ipaddress.ip_network(r).subnet_of(ipaddress.ip_network("172.20.0.0/16")) for r in ranges)


# -- the components' own boundaries ---------------------------------------------------------------

POOL_ARGS = {
    "project": "test-project",
    "location": "us-central1-a",
    "cluster_name": "gpu-test",
    "accelerator": "nvidia-h100-mega-80gb",
    "gpus_per_node": 8,
    "max_nodes": 2,
    "gpudirect": True,
}
NICS = [{"network": f"v{i}", "subnetwork": f"s{i}"} for i in range(8)]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            POOL_ARGS,
            "additional_node_networks: required with gpudirect: true: the 8 extra NICs of a3-megagpu-8g",
        ),
        (
            {**POOL_ARGS, "additional_node_networks": NICS[:4]},
            "additional_node_networks: 4 given; a3-megagpu-8g (TCPXO) has 8 extra NICs",
        ),
        (
            {**POOL_ARGS, "gpudirect": False, "additional_node_networks": NICS},
            "additional_node_networks: only allowed with gpudirect: true",
        ),
        (
            {**POOL_ARGS, "additional_node_networks": [{"network": "Bad Name", "subnetwork": "s"}] * 8},
            "additional_node_networks[0].network:",
        ),
    ],
)
def test_gpu_node_pool_checks_its_gpudirect_nics(args: dict, expected: str) -> None:
    with pytest.raises(InvalidArgsError) as info:
        GpuNodePool.check_args("train", args)  # type: ignore[arg-type]
    assert any(p.startswith(expected) for p in info.value.problems), info.value.problems


def test_gpu_node_pool_accepts_its_flavours_nics() -> None:
    pool = GpuNodePool.check_args("train", {**POOL_ARGS, "additional_node_networks": NICS})  # type: ignore[arg-type]
    assert pool.gpudirect and pool.zones == ["us-central1-a"]


NETWORK_ARGS = {"project": "p-123456", "region": "us-central1", "name_prefix": "gpu", "flavor": "TCPXO"}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"flavor": "RDMA"}, "zone: required with flavor RDMA"),
        ({"flavor": "RDMA", "zone": "europe-west4-a"}, "zone: europe-west4-a is not in region us-central1"),
        ({"zone": "us-central1-a"}, "zone: only allowed with flavor RDMA"),
        (
            {"cidr": "10.0.0.0/16", "cluster_ranges": ["10.0.0.0/20"]},
            "cidr: 10.0.0.0/16 overlaps cluster_ranges[0]",
        ),
        ({"flavor": "IB"}, "flavor:"),
        ({"vpcs": 3}, "vpcs: unknown key"),
    ],
)
def test_gpudirect_networks_refuses_bad_args_by_name_before_declaring_anything(
    extra: dict, expected: str
) -> None:
    with pytest.raises(InvalidArgsError) as info:
        GpuDirectNetworks.check_args("gd", {**NETWORK_ARGS, **extra})  # type: ignore[arg-type]
    assert any(p.startswith(expected) for p in info.value.problems), info.value.problems


def test_every_machine_with_a_flavour_is_in_the_catalog() -> None:
    from gke_gpu.core.catalog import load_catalog

    machines = {m for a in load_catalog().accelerators.values() for m in a.machine_types}
    assert set(MACHINE_FLAVORS) <= machines


def test_the_stack_program_declares_nothing_when_a_gpudirect_pool_is_bad() -> None:
    result = run_program(
        stack_config(cluster=STANDARD_CLUSTER, gpuPools=[{**MEGA, "zones": None}]), stack="test"
    )
    assert result.error is not None and not result.resources
