"""Stack config validation: every bad input stops with one message naming key, value and what is allowed."""

from __future__ import annotations

import pytest

from tests.conftest import AUTOPILOT_CLUSTER, L4_POOL, STANDARD_CLUSTER, config_error, settings
from tools.offline import run_program


def standard(*pools: dict, **extra: object) -> dict:
    return {"cluster": STANDARD_CLUSTER, "gpuPools": list(pools), **extra}


def pool(**fields: object) -> dict:
    return {**L4_POOL, **fields}


# (raw gke-gpu config, expected fragments of the message: key, value, allowed)
BAD_INPUTS = {
    "unknown accelerator": (
        standard(pool(accelerator="nvidia-l5")),
        ["gke-gpu:gpuPools[0].accelerator", "'nvidia-l5'", "allowed:", "nvidia-l4", "nvidia-b200"],
    ),
    "gpu count the machine type does not take": (
        standard(pool(machineType="g2-standard-8", gpusPerNode=2)),
        ["gke-gpu:gpuPools[0].gpusPerNode", "2 is not allowed", "g2-standard-8", "allowed: 1"],
    ),
    "gpu count the accelerator does not offer": (
        standard(pool(gpusPerNode=3)),
        ["gke-gpu:gpuPools[0].gpusPerNode", "3 is not offered for nvidia-l4", "allowed: 1, 2, 4, 8"],
    ),
    "machine type from the wrong family": (
        standard(pool(machineType="n2-standard-8")),
        ["gke-gpu:gpuPools[0].machineType", "'n2-standard-8' cannot carry nvidia-l4", "g2-standard-4"],
    ),
    "N1 shape too large for the attached GPU count": (
        standard(pool(accelerator="nvidia-tesla-t4", machineType="n1-standard-64", gpusPerNode=1)),
        [
            "gke-gpu:gpuPools[0].gpusPerNode",
            "1 is not allowed for nvidia-tesla-t4 on n1-standard-64",
            "allowed: 4",
        ],
    ),
    "zone outside the region": (
        standard(pool(zones=["us-east1-b"])),
        ["gke-gpu:gpuPools[0].zones[0]", "'us-east1-b' is not a zone of region us-central1", "us-central1-a"],
    ),
    "zone without the accelerator": (
        standard(pool(zones=["us-central1-f"])),
        ["gke-gpu:gpuPools[0].zones[0]", "'us-central1-f' does not offer nvidia-l4", "us-central1-c"],
    ),
    "MIG on an accelerator without MIG": (
        standard(pool(migPartitionSize="1g.5gb")),
        ["gke-gpu:gpuPools[0].migPartitionSize", "'1g.5gb'", "nvidia-l4 has no MIG", "nvidia-tesla-a100"],
    ),
    "unknown MIG size": (
        standard(pool(accelerator="nvidia-tesla-a100", migPartitionSize="1g.10gb")),
        ["gke-gpu:gpuPools[0].migPartitionSize", "'1g.10gb'", "allowed: 1g.5gb, 2g.10gb, 3g.20gb, 7g.40gb"],
    ),
    "sharing clients above the range": (
        standard(pool(sharing={"strategy": "TIME_SHARING", "maxClientsPerGpu": 49})),
        ["gke-gpu:gpuPools[0].sharing.maxClientsPerGpu", "49", "<= 48"],
    ),
    "sharing clients below the range": (
        standard(pool(sharing={"strategy": "MPS", "maxClientsPerGpu": 1})),
        ["gke-gpu:gpuPools[0].sharing.maxClientsPerGpu", "1", ">= 2"],
    ),
    "unknown sharing strategy": (
        standard(pool(sharing={"strategy": "MIG", "maxClientsPerGpu": 2})),
        ["gke-gpu:gpuPools[0].sharing.strategy", "'MIG'", "'TIME_SHARING' or 'MPS'"],
    ),
    "minNodes greater than maxNodes": (
        standard(pool(minNodes=3, maxNodes=1)),
        ["gke-gpu:gpuPools[0].minNodes", "3 is greater than maxNodes 1"],
    ),
    "Standard pool without maxNodes": (
        standard({"name": "l4", "accelerator": "nvidia-l4"}),
        ["gke-gpu:gpuPools[0].maxNodes", "required on Standard"],
    ),
    "Spot with a reservation": (
        standard(pool(spot=True, reservation={"type": "SPECIFIC", "name": "my-res"})),
        ["gke-gpu:gpuPools[0].spot", "reservation.type SPECIFIC"],
    ),
    "Spot with queued provisioning": (
        standard(pool(spot=True, queuedProvisioning=True)),
        ["gke-gpu:gpuPools[0].spot", "queuedProvisioning"],
    ),
    "queued provisioning with a minimum": (
        standard(pool(queuedProvisioning=True, minNodes=1)),
        ["gke-gpu:gpuPools[0].minNodes", "1 is not allowed with queuedProvisioning", "allowed: 0"],
    ),
    "specific reservation without a name": (
        standard(pool(reservation={"type": "SPECIFIC"})),
        ["gke-gpu:gpuPools[0].reservation.name", "required with reservation.type SPECIFIC"],
    ),
    "duplicate pool names": (
        standard(pool(), pool(accelerator="nvidia-tesla-t4")),
        ["gke-gpu:gpuPools[1].name", "'l4' is already used by gpuPools[0]"],
    ),
    "Autopilot with a Standard-only field": (
        {
            "cluster": AUTOPILOT_CLUSTER,
            "gpuPools": [{"name": "l4", "accelerator": "nvidia-l4", "machineType": "g2-standard-8"}],
        },
        ["gke-gpu:gpuPools[0].machineType", "not allowed on Autopilot", "Standard-only keys"],
    ),
    "Autopilot with node counts": (
        {
            "cluster": AUTOPILOT_CLUSTER,
            "gpuPools": [{"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 2}],
        },
        ["gke-gpu:gpuPools[0].maxNodes", "not allowed on Autopilot"],
    ),
    "Autopilot with MPS": (
        {
            "cluster": AUTOPILOT_CLUSTER,
            "gpuPools": [
                {
                    "name": "l4",
                    "accelerator": "nvidia-l4",
                    "sharing": {"strategy": "MPS", "maxClientsPerGpu": 2},
                }
            ],
        },
        ["gke-gpu:gpuPools[0].sharing.strategy", "'MPS' is not allowed on Autopilot", "'TIME_SHARING'"],
    ),
    "Autopilot with an accelerator it does not offer": (
        {"cluster": AUTOPILOT_CLUSTER, "gpuPools": [{"name": "v100", "accelerator": "nvidia-tesla-v100"}]},
        ["gke-gpu:gpuPools[0].accelerator", "not offered on Autopilot", "nvidia-l4"],
    ),
    "Autopilot with a zonal location": (
        {"cluster": {**AUTOPILOT_CLUSTER, "location": "us-central1-a"}},
        ["gke-gpu:cluster.location", "'us-central1-a' is a zone", "Autopilot clusters are regional"],
    ),
    "Autopilot with a system pool": (
        {"cluster": {**AUTOPILOT_CLUSTER, "systemPool": {"machineType": "e2-standard-4"}}},
        ["gke-gpu:cluster.systemPool", "not allowed with mode autopilot"],
    ),
    "overlapping CIDRs": (
        {"cluster": STANDARD_CLUSTER, "network": {"subnetCidr": "10.0.0.0/16", "podsCidr": "10.0.0.0/14"}},
        ["gke-gpu:network.podsCidr", "10.0.0.0/14 overlaps gke-gpu:network.subnetCidr 10.0.0.0/16"],
    ),
    "not a CIDR": (
        {"cluster": STANDARD_CLUSTER, "network": {"servicesCidr": "10.20.0.1/20"}},
        ["gke-gpu:network.servicesCidr", "'10.20.0.1/20' is not an IPv4 CIDR block"],
    ),
    "CIDRs with an existing network": (
        {
            "cluster": STANDARD_CLUSTER,
            "network": {
                "subnetCidr": "10.0.0.0/20",
                "existing": {
                    "network": "n",
                    "subnetwork": "s",
                    "podsRangeName": "p",
                    "servicesRangeName": "v",
                },
            },
        },
        ["gke-gpu:network.subnetCidr", "not allowed with network.existing"],
    ),
    "unknown key in a pool": (
        standard(pool(gpusPerNodes=1)),
        ["gke-gpu:gpuPools[0].gpusPerNodes", "unknown key", "allowed keys here:", "gpusPerNode"],
    ),
    "unknown key in the cluster": (
        {"cluster": {**STANDARD_CLUSTER, "privateNode": True}},
        ["gke-gpu:cluster.privateNode", "unknown key", "privateNodes"],
    ),
    "unknown top-level key": (
        {"cluster": STANDARD_CLUSTER, "gpuPool": []},
        ["gke-gpu:gpuPool", "unknown key", "gke-gpu:gpuPools"],
    ),
    "unknown mode": (
        {"cluster": {"mode": "serverless"}},
        ["gke-gpu:cluster.mode", "'serverless'", "'autopilot', 'standard' or 'existing'"],
    ),
    "missing cluster": (
        {"gpuPools": []},
        ["gke-gpu:cluster", "required"],
    ),
    "invalid pool name": (
        standard(pool(name="L4_Pool")),
        ["gke-gpu:gpuPools[0].name", "'L4_Pool' is not a valid node pool name"],
    ),
    "extra taint duplicating the GPU taint": (
        standard(pool(taints=[{"key": "nvidia.com/gpu", "value": "present"}])),
        ["gke-gpu:gpuPools[0].taints[0].key", "declared on every GPU pool already"],
    ),
    "bundled Local SSD count changed": (
        standard(pool(accelerator="nvidia-h100-80gb", gpusPerNode=8, localSsdCount=4)),
        ["gke-gpu:gpuPools[0].localSsdCount", "a3-highgpu-8g comes with 16 Local SSDs", "allowed: 16"],
    ),
    "boot disk type the machine does not take": (
        standard(
            pool(
                accelerator="nvidia-h200-141gb",
                gpusPerNode=8,
                zones=["us-central1-b"],
                diskType="pd-balanced",
            )
        ),
        ["gke-gpu:gpuPools[0].diskType", "'pd-balanced'", "allowed: hyperdisk-balanced"],
    ),
    "compact placement over several zones": (
        standard(pool(compactPlacement=True, zones=["us-central1-a", "us-central1-b"])),
        ["gke-gpu:gpuPools[0].zones", "compactPlacement needs exactly one"],
    ),
    "accelerator not in the region": (
        standard(pool(accelerator="nvidia-h200-141gb", gpusPerNode=8)),
        [],  # checked below with another region
    ),
}


@pytest.mark.parametrize("case", [k for k in BAD_INPUTS if BAD_INPUTS[k][1]])
def test_bad_input_is_one_clear_message(case: str) -> None:
    raw, fragments = BAD_INPUTS[case]
    message = config_error(raw)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from:\n{message}"


def test_missing_project_names_the_key() -> None:
    message = config_error({"cluster": AUTOPILOT_CLUSTER}, project=None)
    assert "gcp:project: required" in message
    assert "pulumi config set gcp:project" in message


def test_missing_region_names_the_key() -> None:
    message = config_error({"cluster": AUTOPILOT_CLUSTER}, region=None)
    assert "gcp:region: required" in message


def test_accelerator_not_offered_in_region() -> None:
    message = config_error(
        standard(pool(accelerator="nvidia-h200-141gb", gpusPerNode=8)), region="asia-northeast1"
    )
    assert "gke-gpu:gpuPools[0].accelerator" in message
    assert "not offered in region asia-northeast1" in message
    assert "us-central1" in message


def test_all_problems_are_reported_together() -> None:
    message = config_error(standard(pool(accelerator="nvidia-l5"), pool(name="t4", minNodes=5, maxNodes=1)))
    assert "2 problem(s)" in message
    assert "gpuPools[0].accelerator" in message
    assert "gpuPools[1].minNodes" in message


def test_invalid_config_declares_no_resource() -> None:
    """The program must stop before declaring anything (not half a cluster)."""
    config = {
        "gcp:project": "test-project",
        "gcp:region": "us-central1",
        "gke-gpu:cluster": STANDARD_CLUSTER,
        "gke-gpu:gpuPools": [pool(accelerator="nvidia-l5")],
    }
    result = run_program(config)
    assert result.error is not None
    assert "nvidia-l5" in str(result.error)
    assert result.resources == []


# --------------------------------------------------------------------------------------------------
# Defaults and derivations.


def test_machine_type_and_zones_are_derived_from_the_catalog() -> None:
    s = settings(standard(pool(gpusPerNode=4)))
    (l4,) = s.gpu_pools
    assert l4.machine_type == "g2-standard-48"
    assert l4.zones == ["us-central1-a", "us-central1-b", "us-central1-c"]
    assert l4.min_nodes == 0, "scale to zero by default"
    assert l4.driver_version == "DEFAULT"
    assert l4.disk_type == "pd-balanced"


def test_gpu_count_is_derived_from_a_fixed_machine_type() -> None:
    (h100,) = settings(standard(pool(accelerator="nvidia-h100-80gb", machineType="a3-highgpu-8g"))).gpu_pools
    assert h100.gpus_per_node == 8
    assert h100.local_ssd_count == 16, "bundled Local SSDs are declared with their fixed count"


def test_hyperdisk_only_machines_default_to_hyperdisk() -> None:
    (b200,) = settings(standard(pool(accelerator="nvidia-b200", gpusPerNode=8))).gpu_pools
    assert b200.machine_type == "a4-highgpu-8g"
    assert b200.disk_type == "hyperdisk-balanced"


def test_zonal_cluster_defaults_pool_zones_to_its_zone() -> None:
    s = settings({"cluster": {**STANDARD_CLUSTER, "location": "us-central1-c"}, "gpuPools": [pool()]})
    assert s.cluster.location == "us-central1-c"
    assert s.gpu_pools[0].zones == ["us-central1-c"]


def test_cluster_name_defaults_to_project_and_stack() -> None:
    s = settings({"cluster": {"mode": "autopilot"}})
    assert s.cluster.name == "test-project-test"
    assert s.cluster.location == "us-central1"


def test_schedulable_gpus_count_mig_partitions_and_sharing() -> None:
    (a100,) = settings(
        standard(
            pool(
                accelerator="nvidia-tesla-a100",
                gpusPerNode=2,
                migPartitionSize="1g.5gb",
                sharing={"strategy": "TIME_SHARING", "maxClientsPerGpu": 3},
            )
        )
    ).gpu_pools
    assert a100.schedulable_gpus_per_node == 2 * 7 * 3


def test_autopilot_spot_profile_falls_back_to_on_demand_by_default() -> None:
    s = settings(
        {"cluster": AUTOPILOT_CLUSTER, "gpuPools": [{"name": "l4", "accelerator": "nvidia-l4", "spot": True}]}
    )
    assert s.gpu_pools[0].on_demand_fallback is True
    shared = settings(
        {
            "cluster": AUTOPILOT_CLUSTER,
            "gpuPools": [
                {
                    "name": "l4",
                    "accelerator": "nvidia-l4",
                    "spot": True,
                    "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 2},
                }
            ],
        }
    )
    assert shared.gpu_pools[0].on_demand_fallback is True, "the ComputeClass carries gpuSharing"


def test_unknown_region_needs_explicit_zones_and_warns() -> None:
    message = config_error(standard(pool()), region="me-central2")
    assert (
        "gke-gpu:gpuPools[0].zones: required: the catalog has no zone data for region me-central2" in message
    )
    from gke_gpu.stack.config import parse_settings

    _, warnings = parse_settings(
        standard(pool(zones=["me-central2-a"])), project="test-project", region="me-central2", stack="t"
    )
    assert any("could not be checked" in w for w in warnings)


# --------------------------------------------------------------------------------------------------
# Capacity and placement rules that GKE would only enforce at creation (or not at all).


def test_min_nodes_spread_over_zones_must_fit_under_max() -> None:
    message = config_error(standard(pool(minNodes=1, maxNodes=2)))
    assert "gke-gpu:gpuPools[0].minNodes: 1 over 3 zones starts 1 node(s) per zone (3 nodes)" in message
    assert "more than maxNodes 2" in message
    assert (
        settings(standard(pool(minNodes=1, maxNodes=2, zones=["us-central1-a"]))).gpu_pools[0].min_nodes == 1
    )


def test_regional_system_pool_needs_a_node_per_zone() -> None:
    message = config_error({"cluster": {**STANDARD_CLUSTER, "systemPool": {"minNodes": 1, "maxNodes": 1}}})
    assert "gke-gpu:cluster.systemPool.maxNodes: 1 is too small" in message
    zonal = settings(
        {"cluster": {**STANDARD_CLUSTER, "location": "us-central1-a", "systemPool": {"maxNodes": 1}}}
    )
    assert zonal.cluster.system_pool.max_nodes == 1


def test_pod_range_must_hold_every_node_the_pools_can_grow_to() -> None:
    message = config_error(
        {"cluster": STANDARD_CLUSTER, "network": {"podsCidr": "10.16.0.0/22"}, "gpuPools": [pool(maxNodes=8)]}
    )
    assert "gke-gpu:network.podsCidr: 10.16.0.0/22 holds Pod addresses for 4 node(s)" in message
    assert "the pools can grow to 12" in message
    assert "use a /20 or larger" in message


def test_specific_reservation_over_several_zones_needs_one_per_zone() -> None:
    """GKE and cluster-toolkit accept several zones when each holds a reservation of that name."""
    from gke_gpu.stack.config import parse_settings

    raw = standard(pool(reservation={"type": "SPECIFIC", "name": "r1"}))
    value, warnings = parse_settings(raw, project="test-project", region="us-central1", stack="t")
    assert value.gpu_pools[0].zones == ["us-central1-a", "us-central1-b", "us-central1-c"]
    assert (
        "gke-gpu:gpuPools[0].reservation.name: r1 is consumed in 3 zones (us-central1-a, us-central1-b, "
        "us-central1-c); each of them must hold a reservation of that name"
    ) in warnings


def test_reservation_blocks_are_accepted() -> None:
    block = pool(zones=["us-central1-a"], reservation={"type": "SPECIFIC", "name": "r1/reservationBlocks/b1"})
    assert settings(standard(block)).gpu_pools[0].reservation.name == "r1/reservationBlocks/b1"
    shared = "projects/other-project/reservations/r1/reservationBlocks/b1"
    assert settings(standard({**block, "reservation": {"type": "SPECIFIC", "name": shared}}))
    message = config_error(standard({**block, "reservation": {"type": "SPECIFIC", "name": "r1/blocks/b1"}}))
    assert "gke-gpu:gpuPools[0].reservation.name: 'r1/blocks/b1' is not a reservation" in message


def test_blackwell_pytorch_smoke_needs_the_latest_driver() -> None:
    b200 = pool(name="b200", accelerator="nvidia-b200", gpusPerNode=8, maxNodes=1)
    message = config_error(standard(b200, workloads=[{"name": "pytorch-smoke", "pool": "b200"}]))
    assert (
        "gke-gpu:workloads[0].pool: 'b200' (nvidia-b200) runs pytorch-smoke on the CUDA 13 build" in message
    )
    assert "driverVersion: LATEST" in message
    assert settings(
        standard({**b200, "driverVersion": "LATEST"}, workloads=[{"name": "pytorch-smoke", "pool": "b200"}])
    )


def test_warnings_for_nat_and_unusual_ranges() -> None:
    from gke_gpu.stack.config import parse_settings

    existing = {"network": "vpc", "subnetwork": "s", "podsRangeName": "p", "servicesRangeName": "v"}
    _, warnings = parse_settings(
        {"cluster": STANDARD_CLUSTER, "network": {"existing": existing}},
        project="test-project",
        region="us-central1",
        stack="t",
    )
    assert not any("masterAuthorizedNetworks" in w for w in warnings), "the IP endpoint is private"
    assert any("the subnet needs Cloud NAT" in w for w in warnings)
    _, warnings = parse_settings(
        {
            "cluster": {**STANDARD_CLUSTER, "masterAuthorizedNetworks": [{"cidrBlock": "203.0.113.0/24"}]},
            "network": {"podsCidr": "100.64.0.0/14", "servicesCidr": "198.18.0.0/20"},
        },
        project="test-project",
        region="us-central1",
        stack="t",
    )
    assert warnings == [
        "gke-gpu:network.servicesCidr: 198.18.0.0/20 is outside RFC 1918 and 100.64.0.0/10; GKE accepts "
        "privately used public ranges, but make sure nothing else routes them"
    ], "100.64.0.0/10 (RFC 6598) is fine for Pods"
