"""NVL72 racks (A4X GB200, A4X Max GB300): the workload policy a pool of them is placed by, whole-rack
sizing, the capacity they are sold as, and the refusals (issue 28, item 1). G4's NUMA-aligned kubelet
and fractional G4 (item 5)."""

from typing import Any

import pytest

from gke_gpu.gpu.node_pool import GpuNodePool, workload_policy_name
from tests.conftest import STANDARD_CLUSTER, config_error, render, settings, stack_config

RESERVATION = {"type": "SPECIFIC", "name": "a4x-rack"}
RACK = {
    "name": "rack",
    "accelerator": "nvidia-gb200",
    "maxNodes": 18,
    "zones": ["us-central1-a"],
    "reservation": RESERVATION,
    "workloadPolicy": True,
}
RACK_MAX = {**RACK, "accelerator": "nvidia-gb300", "zones": ["us-central1-b"]}


def standard(*pools: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return {"cluster": {**STANDARD_CLUSTER, **cluster}, "gpuPools": list(pools)}


def _resources(pool: dict[str, Any]) -> list[Any]:
    return render(stack_config(**standard(pool))).resources


def _one(resources: list[Any], type_: str, name: str | None = None) -> Any:
    (found,) = [r for r in resources if r.type == type_ and name in (None, r.inputs.get("name"))]
    return found


@pytest.mark.parametrize(
    ("pool", "machine"), [(RACK, "a4x-highgpu-4g"), (RACK_MAX, "a4x-maxgpu-4g-metal")], ids=["a4x", "a4x-max"]
)
def test_a_rack_pool_declares_its_workload_policy_and_is_placed_by_it(pool: dict, machine: str) -> None:
    resources = _resources(pool)
    policy = _one(resources, "gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy.inputs["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "1x72"}
    assert policy.inputs["region"] == "us-central1"
    assert policy.inputs["name"] == workload_policy_name("gpu-test", "rack")
    node_pool = _one(resources, "gcp:container/nodePool:NodePool", "rack")
    assert node_pool.inputs["placementPolicy"] == {"type": "COMPACT", "policyName": policy.inputs["name"]}
    assert node_pool.inputs["nodeConfig"]["machineType"] == machine
    assert node_pool.inputs["nodeConfig"]["reservationAffinity"]["consumeReservationType"] == (
        "SPECIFIC_RESERVATION"
    )
    assert node_pool.inputs["autoscaling"]["totalMaxNodeCount"] == 18
    assert policy.parent == _one(resources, "gke-gpu:index:GpuNodePool").urn


def test_the_policy_name_tells_clusters_apart_and_fits_compute_engine() -> None:
    one, other = workload_policy_name("a", "p" * 40), workload_policy_name("b", "p" * 40)
    assert one != other and len(one) <= 63


def test_a_pool_without_a_rack_declares_no_resource_policy() -> None:
    resources = _resources({"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 1})
    assert not [r for r in resources if r.type == "gcp:compute/resourcePolicy:ResourcePolicy"]


def test_a_rack_pool_without_the_workload_policy_is_refused_naming_the_key() -> None:
    message = config_error(standard({**RACK, "workloadPolicy": False}))
    assert "gke-gpu:gpuPools[0].workloadPolicy: required on a4x-highgpu-4g with maxNodes 18" in message
    assert "set workloadPolicy: true" in message


def test_a_single_test_node_needs_no_workload_policy() -> None:
    pool = settings(standard({**RACK, "workloadPolicy": False, "maxNodes": 1})).gpu_pools[0]
    assert pool.machine_type == "a4x-highgpu-4g" and not pool.workload_policy


@pytest.mark.parametrize("rack", [RACK, RACK_MAX], ids=["a4x", "a4x-max"])
def test_a_rack_pool_larger_than_one_nvlink_domain_is_refused(rack: dict) -> None:
    message = config_error(standard({**rack, "maxNodes": 19}))
    assert "gke-gpu:gpuPools[0].maxNodes: 19 does not fit one NVLink domain" in message
    assert "allowed: 1..18" in message


def test_a_rack_pool_spans_exactly_one_zone() -> None:
    message = config_error(standard({**RACK, "zones": ["us-central1-a", "us-central1-b"]}))
    assert (
        "gke-gpu:gpuPools[0].zones: us-central1-a, us-central1-b: a workload policy places the VMs" in message
    )
    # Left out, the zones come from the catalog (one zone of us-central1 offers GB200).
    assert settings(standard({**RACK, "zones": None})).gpu_pools[0].zones == ["us-central1-a"]


def test_a_workload_policy_on_a_machine_outside_a_rack_is_refused() -> None:
    message = config_error(
        standard({"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 1, "workloadPolicy": True})
    )
    assert "gke-gpu:gpuPools[0].workloadPolicy: true is not allowed on g2-standard-8" in message
    assert "a4x-highgpu-4g" in message and "a4x-maxgpu-4g-metal" in message


def test_a_rack_pool_takes_no_compact_placement_beside_its_workload_policy() -> None:
    message = config_error(standard({**RACK, "compactPlacement": True}))
    assert "gke-gpu:gpuPools[0].compactPlacement: true is not allowed with workloadPolicy" in message


@pytest.mark.parametrize("reservation", ["NONE", "ANY"])
@pytest.mark.parametrize("rack", [RACK, RACK_MAX], ids=["a4x", "a4x-max"])
def test_racks_are_sold_only_as_reserved_capacity(rack: dict, reservation: str) -> None:
    message = config_error(standard({**rack, "reservation": {"type": reservation}}))
    # Keyed by the reservation's type, the value to change (not gpusPerNode, which the pool never set).
    assert (
        "gke-gpu:gpuPools[0].reservation.type: a4x-"
        in message.split("is not sold on demand, only as reserved capacity: set a SPECIFIC reservation")[0]
    )
    assert "gpusPerNode" not in message
    assert "spot: true" not in message and "flexStart: true" not in message


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("spot", True, "spot: true is not allowed: nvidia-gb300 machine types are not sold as Spot VMs"),
        ("flexStart", True, "flexStart: true is not allowed: nvidia-gb300 machine types are not offered as"),
        ("queuedProvisioning", True, "a4x-maxgpu-4g-metal is not offered through queued provisioning"),
        ("migPartitionSize", "1g.23gb", "'1g.23gb' is not allowed: nvidia-gb300 has no MIG"),
    ],
)
def test_a4x_max_refuses_what_its_capacity_does_not_offer(key: str, value: object, expected: str) -> None:
    assert expected in config_error(standard({**RACK_MAX, key: value}))


def test_a4x_max_is_not_offered_on_autopilot() -> None:
    message = config_error(
        {
            "cluster": {"mode": "autopilot", "name": "ap"},
            "gpuPools": [{"name": "gb", "accelerator": "nvidia-gb300"}],
        }
    )
    assert "'nvidia-gb300' is not offered on Autopilot" in message


def test_a_workload_policy_on_autopilot_is_refused() -> None:
    message = config_error(
        {
            "cluster": {"mode": "autopilot", "name": "ap"},
            "gpuPools": [
                {"name": "l4", "accelerator": "nvidia-l4", "workloadPolicy": True, "numaAligned": True}
            ],
        }
    )
    assert "gke-gpu:gpuPools[0].workloadPolicy: not allowed on Autopilot" in message
    assert "gke-gpu:gpuPools[0].numaAligned: not allowed on Autopilot" in message


def test_gb300_resolves_to_the_bare_metal_arm_machine() -> None:
    pool = settings(standard(RACK_MAX)).gpu_pools[0]
    assert (pool.machine_type, pool.gpus_per_node, pool.disk_type, pool.local_ssd_count) == (
        "a4x-maxgpu-4g-metal",
        4,
        "hyperdisk-balanced",
        4,
    )


def test_the_component_refuses_a_rack_without_its_policy_before_declaring_anything() -> None:
    from gke_gpu.core.validation import InvalidArgsError

    with pytest.raises(InvalidArgsError) as info:
        GpuNodePool(
            "rack",
            project="my-project",
            location="us-central1-a",
            cluster_name="c",
            accelerator="nvidia-gb200",
            gpus_per_node=4,
            max_nodes=4,
            reservation={"type": "SPECIFIC", "name": "r"},
        )
    assert "workload_policy: required on a4x-highgpu-4g with max_nodes 4" in str(info.value)


# G4 (item 5): NUMA-aligned kubelet by default, fractional machines refused.
G4 = {"name": "g4", "accelerator": "nvidia-rtx-pro-6000", "gpusPerNode": 8, "maxNodes": 1}


def _kubelet(pool: dict[str, Any]) -> dict[str, Any]:
    return _one(_resources(pool), "gcp:container/nodePool:NodePool", pool["name"]).inputs["nodeConfig"][
        "kubeletConfig"
    ]


def test_g4_pools_get_the_numa_aligned_kubelet_by_default() -> None:
    assert _kubelet(G4) == {
        "insecureKubeletReadonlyPortEnabled": "FALSE",
        "cpuManagerPolicy": "static",
        "topologyManager": {"policy": "restricted"},
        "memoryManager": {"policy": "Static"},
    }


def test_numa_alignment_can_be_turned_off_on_g4_and_on_elsewhere() -> None:
    assert _kubelet({**G4, "numaAligned": False}) == {"insecureKubeletReadonlyPortEnabled": "FALSE"}
    l4 = {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 1}
    assert _kubelet(l4) == {"insecureKubeletReadonlyPortEnabled": "FALSE"}
    assert _kubelet({**l4, "numaAligned": True})["memoryManager"] == {"policy": "Static"}


def test_numa_alignment_is_refused_below_the_memory_managers_kubernetes_version() -> None:
    message = config_error(standard(G4, minimumVersion="1.31"))
    expected = "numaAligned (the kubelet's memory manager, policy Static) needs GKE 1.32"
    assert f"gke-gpu:gpuPools[0].numaAligned: {expected}" in message


def test_fractional_g4_is_refused_naming_the_fraction() -> None:
    message = config_error(standard({**G4, "gpusPerNode": None, "machineType": "g4-standard-6"}))
    assert (
        "gke-gpu:gpuPools[0].machineType: 'g4-standard-6' carries 1/8 of one nvidia-rtx-pro-6000" in message
    )
    assert "UNVERIFIED" in message


def test_the_nvl72_example_stack_declares_one_rack_and_its_pods_tolerate_arm_nodes() -> None:
    from tests.conftest import stack_render

    resources = stack_render("nvl72").resources
    policy = _one(resources, "gcp:compute/resourcePolicy:ResourcePolicy")
    node_pool = _one(resources, "gcp:container/nodePool:NodePool", "rack")
    assert node_pool.inputs["placementPolicy"]["policyName"] == policy.inputs["name"]
    assert node_pool.inputs["autoscaling"]["totalMinNodeCount"] == 0
    job = _one(resources, "kubernetes:batch/v1:Job")
    tolerations = job.inputs["spec"]["template"]["spec"]["tolerations"]
    assert {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"} in (
        tolerations
    )


def test_pods_on_amd64_pools_get_no_arm_toleration() -> None:
    from gke_gpu.gpu.scheduling import tolerations

    l4 = settings(standard({"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 1})).gpu_pools[0]
    assert all(t["key"] != "kubernetes.io/arch" for t in tolerations(l4, autopilot=False))


def test_a_capacity_ladder_cannot_carry_a_workload_policy() -> None:
    message = config_error(standard({**RACK, "capacityLadder": ["reservation"]}))
    assert "gke-gpu:gpuPools[0].workloadPolicy: true is not allowed with capacityLadder" in message


def test_a4x_max_needs_the_gke_version_with_its_driver() -> None:
    message = config_error(standard(RACK_MAX, minimumVersion="1.34.1"))
    assert (
        "gke-gpu:gpuPools[0].accelerator: a nvidia-gb300 node pool needs GKE 1.34.3-gke.1318000 or later"
        in message
    )
    assert settings(standard(RACK_MAX, minimumVersion="1.35"))
