"""The GPU node pool component alone, from a stack file's resolved pool (tests/test_gpu_node_pool_args.py:
from a program's args)."""

from __future__ import annotations

from gke_gpu.gpu.node_pool import GpuNodePool, node_pool_args
from tests.conftest import L4_POOL, STANDARD_CLUSTER, settings
from tools.offline import run_program


def node_pool(preview: bool = True, **fields: object) -> dict:
    (pool,) = settings({"cluster": STANDARD_CLUSTER, "gpuPools": [{**L4_POOL, **fields}]}).gpu_pools

    def program():
        GpuNodePool(
            f"gpu-{pool.name}",
            node_pool_args(
                pool,
                project="test-project",
                location="us-central1",
                cluster_name="gpu-test",
                node_service_account_email="nodes@test-project.iam.gserviceaccount.com",
            ),
        )

    result = run_program({}, program=program, preview=preview)
    assert result.error is None, result.error
    component = result.one("gke-gpu:index:GpuNodePool")
    (child,) = result.children_of(component)
    assert child.type == "gcp:container/nodePool:NodePool"
    return child.inputs


def accelerator(inputs: dict) -> dict:
    (acc,) = inputs["nodeConfig"]["guestAccelerators"]
    return acc


def test_gpu_pool_defaults() -> None:
    pool = node_pool()
    config = pool["nodeConfig"]
    assert pool["name"] == "l4"
    assert pool["cluster"] == "gpu-test"
    assert pool["nodeLocations"] == ["us-central1-a", "us-central1-b", "us-central1-c"]
    assert pool["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"}
    assert pool["initialNodeCount"] == 0
    assert pool["management"] == {"autoRepair": True, "autoUpgrade": True}
    assert config["machineType"] == "g2-standard-8"
    assert config["imageType"] == "COS_CONTAINERD"
    assert config["gvnic"] == {"enabled": True}
    assert config["gcfsConfig"] == {"enabled": True}
    assert config["spot"] is False
    assert config["serviceAccount"] == "nodes@test-project.iam.gserviceaccount.com"
    assert config["oauthScopes"] == ["https://www.googleapis.com/auth/cloud-platform"]
    assert config["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert config["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
    assert config["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert accelerator(pool) == {
        "type": "nvidia-l4",
        "count": 1,
        "gpuDriverInstallationConfig": {"gpuDriverVersion": "DEFAULT"},
    }


def test_gpu_taint_is_always_declared_first_then_extra_taints() -> None:
    taints = node_pool(taints=[{"key": "team", "value": "ml", "effect": "NO_EXECUTE"}])["nodeConfig"][
        "taints"
    ]
    assert taints == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"},
        {"key": "team", "value": "ml", "effect": "NO_EXECUTE"},
    ]


def test_driver_sharing_and_mig_go_into_the_guest_accelerator() -> None:
    acc = accelerator(
        node_pool(
            accelerator="nvidia-tesla-a100",
            migPartitionSize="3g.20gb",
            sharing={"strategy": "TIME_SHARING", "maxClientsPerGpu": 4},
            driverVersion="LATEST",
        )
    )
    assert acc["type"] == "nvidia-tesla-a100"
    assert acc["gpuPartitionSize"] == "3g.20gb"
    assert acc["gpuSharingConfig"] == {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": 4}
    assert acc["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}


def test_mps_sharing() -> None:
    acc = accelerator(node_pool(sharing={"strategy": "MPS", "maxClientsPerGpu": 8}))
    assert acc["gpuSharingConfig"] == {"gpuSharingStrategy": "MPS", "maxSharedClientsPerGpu": 8}


def test_spot_and_minimum_nodes() -> None:
    pool = node_pool(spot=True, minNodes=3, maxNodes=6)
    assert pool["nodeConfig"]["spot"] is True
    assert pool["autoscaling"]["totalMinNodeCount"] == 3
    assert pool["initialNodeCount"] == 1, "3 nodes over 3 zones: one per zone to start"


def test_specific_reservation() -> None:
    pool = node_pool(reservation={"type": "SPECIFIC", "name": "l4-reservation"}, zones=["us-central1-b"])
    assert pool["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["l4-reservation"],
    }


def test_queued_provisioning() -> None:
    pool = node_pool(queuedProvisioning=True)
    assert pool["queuedProvisioning"] == {"enabled": True}
    assert pool["management"] == {"autoRepair": False, "autoUpgrade": True}, (
        "release channels enforce upgrades"
    )
    assert pool["nodeConfig"]["labels"]["cloud.google.com/gke-queued"] == "true"
    assert pool["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}


def test_compact_placement_and_local_ssd() -> None:
    pool = node_pool(compactPlacement=True, zones=["us-central1-a"], localSsdCount=1)
    assert pool["placementPolicy"] == {"type": "COMPACT"}
    assert pool["nodeLocations"] == ["us-central1-a"]
    assert pool["nodeConfig"]["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 1}


def test_bundled_local_ssds_become_ephemeral_storage() -> None:
    pool = node_pool(accelerator="nvidia-h100-80gb", gpusPerNode=8)
    assert pool["nodeConfig"]["machineType"] == "a3-highgpu-8g"
    assert pool["nodeConfig"]["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 16}
    assert accelerator(pool)["count"] == 8


def test_labels_and_disk() -> None:
    pool = node_pool(labels={"team": "ml"}, diskSizeGb=500, diskType="pd-ssd")
    assert pool["nodeConfig"]["labels"] == {"team": "ml"}
    assert pool["nodeConfig"]["diskSizeGb"] == 500
    assert pool["nodeConfig"]["diskType"] == "pd-ssd"


def test_no_optional_blocks_by_default() -> None:
    pool = node_pool()
    for key in ("queuedProvisioning", "placementPolicy"):
        assert key not in pool
    for key in ("ephemeralStorageLocalSsdConfig",):
        assert key not in pool["nodeConfig"]
    assert "gpuSharingConfig" not in accelerator(pool)
    assert "gpuPartitionSize" not in accelerator(pool)
