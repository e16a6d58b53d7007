"""Disks the machines really have (issue 25, item 7): every pool's boot disk type follows what its
machine series takes (Hyperdisk-only series get hyperdisk-balanced), `systemPool.diskType` is checked,
and Kueue's ephemeral-storage quota counts the Local SSDs that back a node's ephemeral storage."""

import pytest

from gke_gpu.cluster.boot_disks import series_boot_disks
from gke_gpu.cluster.gke_cluster import GkeCluster
from gke_gpu.core.catalog import load_machine_types
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.gpu.pool import LOCAL_SSD_GIB
from tests.conftest import L4_POOL, STANDARD_CLUSTER, config_error, render, stack_config
from tests.test_system_pool_machine import CLUSTER_ARGS

NODE_POOL = "gcp:container/nodePool:NodePool"
KEY = "gke-gpu:cluster.systemPool.diskType"


def system_disk(system_pool: dict) -> str:
    result = render(stack_config(cluster={**STANDARD_CLUSTER, "systemPool": system_pool}, gpuPools=[L4_POOL]))
    return result.one(NODE_POOL, "gke-system").inputs["nodeConfig"]["diskType"]


@pytest.mark.parametrize(
    ("machine_type", "disk_type"),
    [
        ("n4-standard-16", "hyperdisk-balanced"),
        ("c4-standard-8", "hyperdisk-balanced"),
        ("c4a-standard-8", "hyperdisk-balanced"),
        ("c4d-standard-8", "hyperdisk-balanced"),
        ("e2-standard-4", "pd-balanced"),
        ("n2-standard-8", "pd-balanced"),
    ],
)
def test_the_system_pool_boot_disk_follows_the_machine_series(machine_type: str, disk_type: str) -> None:
    assert system_disk({"machineType": machine_type}) == disk_type


def test_a_disk_type_the_series_takes_is_used() -> None:
    assert (
        system_disk({"machineType": "c3-standard-8", "diskType": "hyperdisk-balanced"})
        == "hyperdisk-balanced"
    )
    assert system_disk({"diskType": "pd-ssd"}) == "pd-ssd"


def test_a_disk_type_the_series_refuses_is_an_error_naming_the_key() -> None:
    message = config_error(
        {
            "cluster": {
                **STANDARD_CLUSTER,
                "systemPool": {"machineType": "n4-standard-16", "diskType": "pd-balanced"},
            }
        }
    )
    assert (
        f"{KEY}: 'pd-balanced' is not a boot disk type of N4 machines (n4-standard-16); "
        "allowed: hyperdisk-balanced" in message
    )
    message = config_error(
        {"cluster": {**STANDARD_CLUSTER, "systemPool": {"diskType": "hyperdisk-balanced"}}}
    )
    assert f"{KEY}: 'hyperdisk-balanced' is not a boot disk type of E2 machines" in message


def test_the_library_checks_the_system_pool_disk_type_too() -> None:
    with pytest.raises(InvalidArgsError) as info:
        GkeCluster.check_args(
            "gpu", {**CLUSTER_ARGS, "system_pool": {"machine_type": "c4-standard-8", "disk_type": "pd-ssd"}}
        )
    assert any(
        p.startswith("system_pool.disk_type: 'pd-ssd' is not a boot disk type of C4")
        for p in info.value.problems
    )


def test_every_machine_series_of_the_system_pool_has_its_boot_disk_types() -> None:
    assert set(load_machine_types().series) <= set(series_boot_disks())
    for types in series_boot_disks().values():
        assert types and all(t.startswith(("pd-", "hyperdisk-balanced")) for t in types)


def test_a_gpu_pool_boot_disk_the_series_refuses_is_an_error_naming_the_key() -> None:
    b200 = {
        "name": "b200",
        "accelerator": "nvidia-b200",
        "gpusPerNode": 8,
        "maxNodes": 1,
        "diskType": "pd-balanced",
    }
    message = config_error({"cluster": STANDARD_CLUSTER, "gpuPools": [b200]})
    assert "gke-gpu:gpuPools[0].diskType: 'pd-balanced' is not a boot disk type of a4-highgpu-8g" in message


def _queue_storage(pool: dict) -> str:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[pool], batch={"kueue": True}))
    (queue,) = [
        r.inputs
        for r in result.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
        if r.inputs["metadata"]["name"].endswith(pool["name"])
    ]
    (flavor,) = queue["spec"]["resourceGroups"][0]["flavors"]
    return next(r["nominalQuota"] for r in flavor["resources"] if r["name"] == "ephemeral-storage")


def test_the_ephemeral_storage_quota_counts_the_local_ssds_of_the_machine() -> None:
    mega = {"name": "mega", "accelerator": "nvidia-h100-mega-80gb", "gpusPerNode": 8, "maxNodes": 2}
    assert LOCAL_SSD_GIB == 349  # a 375 GB Local SSD
    assert _queue_storage(mega) == f"{2 * 16 * LOCAL_SSD_GIB}Gi"  # a3-megagpu-8g brings 16


def test_without_local_ssds_the_quota_is_the_boot_disks() -> None:
    assert _queue_storage({**L4_POOL, "diskSizeGb": 300}) == "600Gi"
