"""The DRA rules (gke_gpu_policies/dra.py): a DRA-GPU pool's workloads claim GPUs instead of asking
for nvidia.com/gpu; a multi-node job on a GB200/GB300 rack claims a ComputeDomain's channel. Each
validator called directly with real pulumi-policy argument objects, then the program's own render."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policy.gke_gpu_policies import dra, rules
from policy.gke_gpu_policies.constants import NODE_POOL
from policy.tests.factories import (
    JOB,
    JOBSET,
    UNKNOWN_KINDS,
    gpu_pod_spec,
    gpu_pool,
    jobset,
    stack_args,
    unknown,
    violations,
    workload,
)

COMPUTE_DOMAIN = "kubernetes:resource.nvidia.com/v1beta1:ComputeDomain"
DRA_LABELS = {"gke-no-default-nvidia-gpu-device-plugin": "true", "nvidia.com/gpu.present": "true"}


def dra_pool() -> dict[str, Any]:
    return gpu_pool(**{"name": "l4", "nodeConfig.labels": dict(DRA_LABELS)})


def rack_pool() -> dict[str, Any]:
    return gpu_pool(
        **{
            "name": "a4x",
            "nodeConfig.guestAccelerators": [{"type": "nvidia-gb200", "count": 4}],
            "nodeConfig.machineType": "a4x-highgpu-4g",
        }
    )


def on_pool(pool: str, **changes: Any) -> dict[str, Any]:
    return gpu_pod_spec(**{"nodeSelector": {"cloud.google.com/gke-nodepool": pool}, **changes})


def claiming(pool: str) -> dict[str, Any]:
    spec = on_pool(pool)
    container = spec["containers"][0]
    container["resources"] = {
        "limits": {"cpu": "100m"},
        "requests": {"cpu": "100m"},
        "claims": [{"name": "gpus"}],
    }
    spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "gpu"}]
    return spec


def test_the_pack_serves_the_dra_policies() -> None:
    names = {p.name for p in rules.POLICIES}
    assert {dra.DRA_POOL_CLAIMS, dra.RACK_COMPUTE_DOMAIN} <= names


def test_a_gpu_limit_on_a_dra_pool_is_a_violation_and_a_claim_is_not() -> None:
    asking = stack_args([(NODE_POOL, "gpu-l4", dra_pool()), (JOB, "smi", workload(JOB, on_pool("l4")))])
    (message,) = violations(dra.validate_dra_pool_claims, asking)
    assert "container(s) cuda ask for nvidia.com/gpu on node pool l4" in message
    assert message.endswith(f"[{dra.DRA_POOL_CLAIMS}]")
    claimed = stack_args([(NODE_POOL, "gpu-l4", dra_pool()), (JOB, "smi", workload(JOB, claiming("l4")))])
    assert violations(dra.validate_dra_pool_claims, claimed) == []


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_a_list_not_known_yet_is_not_checked_and_no_crash(kind: str) -> None:
    """Containers, replicated jobs or a pool's accelerators not known yet (preview): nothing to
    report, and no TypeError from UNKNOWN's truth value (mypy found `items(...) or []` here)."""
    containers = on_pool("l4", containers=unknown(kind))
    args = stack_args([(NODE_POOL, "gpu-l4", dra_pool()), (JOB, "smi", workload(JOB, containers))])
    assert violations(dra.validate_dra_pool_claims, args) == []
    jobs = jobset(on_pool("a4x"))
    jobs["spec"]["replicatedJobs"] = unknown(kind)
    args = stack_args([(NODE_POOL, "gpu-a4x", rack_pool()), (JOBSET, "nccl", jobs)])
    assert violations(dra.validate_rack_compute_domain, args) == []
    pool = gpu_pool(**{"name": "a4x", "nodeConfig.guestAccelerators": unknown(kind)})
    args = stack_args([(NODE_POOL, "gpu-a4x", pool), (JOBSET, "nccl", jobset(on_pool("a4x")))])
    assert violations(dra.validate_rack_compute_domain, args) == []


def test_a_gpu_limit_on_a_pool_with_the_device_plugin_is_fine() -> None:
    plain = gpu_pool(name="l4")
    args = stack_args([(NODE_POOL, "gpu-l4", plain), (JOB, "smi", workload(JOB, on_pool("l4")))])
    assert violations(dra.validate_dra_pool_claims, args) == []


def test_a_multi_node_jobset_on_a_rack_needs_its_compute_domain_channel() -> None:
    spec = on_pool("a4x")
    bare = stack_args([(NODE_POOL, "gpu-a4x", rack_pool()), (JOBSET, "nccl", jobset(spec))])
    (message,) = violations(dra.validate_rack_compute_domain, bare)
    assert "2 Pods on rack node pool a4x claim no ComputeDomain channel" in message
    claimed = copy.deepcopy(spec)
    claimed["resourceClaims"] = [{"name": "channel", "resourceClaimTemplateName": "nccl-channel"}]
    domain: dict[str, Any] = {
        "metadata": {"name": "nccl", "namespace": "gpu-samples"},
        "spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": "nccl-channel"}}},
    }
    ok = [
        (NODE_POOL, "gpu-a4x", rack_pool()),
        (JOBSET, "nccl", jobset(claimed)),
        (COMPUTE_DOMAIN, "cd", domain),
    ]
    assert violations(dra.validate_rack_compute_domain, stack_args(ok)) == []
    # A channel of a ComputeDomain in another namespace does not count.
    elsewhere = copy.deepcopy(domain)
    elsewhere["metadata"]["namespace"] = "other"
    moved = [*ok[:2], (COMPUTE_DOMAIN, "cd", elsewhere)]
    assert len(violations(dra.validate_rack_compute_domain, stack_args(moved))) == 1


def test_a_single_pod_on_a_rack_needs_no_compute_domain() -> None:
    args = stack_args([(NODE_POOL, "gpu-a4x", rack_pool()), (JOB, "smi", workload(JOB, on_pool("a4x")))])
    assert violations(dra.validate_rack_compute_domain, args) == []
