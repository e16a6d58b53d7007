"""How a Pod lands on a GPU pool or profile: node selectors, tolerations and the GPU request.

One source of truth shared by the sample workloads, the stack exports (so users can copy the
selectors into their own manifests) and the policy checks. Label keys are GKE's documented node
labels; on Autopilot the same selectors make GKE create a matching node.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.catalog import load_catalog
from ..core.common import GPU_TAINT_KEY, NODEPOOL_LABEL
from ..core.nodes import (
    ACCELERATOR_LABEL,
    COMPUTE_CLASS_LABEL,
    DRIVER_LABEL,
    MAX_CLIENTS_LABEL,
    PARTITION_LABEL,
    SHARING_STRATEGY_LABEL,
    SPOT_LABEL,
)
from .pool import GpuPool

# Tolerates the GPU taint whatever its value (GKE's ExtendedResourceToleration adds the same one).
GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
# GKE taints (and labels) queued-provisioning nodes cloud.google.com/gke-queued=true:NoSchedule.
QUEUED_TAINT_KEY = "cloud.google.com/gke-queued"
QUEUED_TOLERATION = {"key": QUEUED_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
# GKE taints Arm nodes kubernetes.io/arch=arm64:NoSchedule (GKE "Prepare an Arm workload for
# deployment"); cluster-toolkit's A4X job templates tolerate it. Whether GKE adds it to A4X / A4X Max
# GPU nodes too is UNVERIFIED: tolerating it on an Arm pool is harmless either way.
ARM64_TOLERATION = {
    "key": "kubernetes.io/arch",
    "operator": "Equal",
    "value": "arm64",
    "effect": "NoSchedule",
}
# A ladder's Spot step: node pools GKE creates for Spot may carry its Spot taint (tolerating it is harmless).
CAPACITY_SPOT = "spot"


def union_tolerations(groups: Iterable[Iterable[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The tolerations of several pools, each once, in the order first seen."""
    seen: list[dict[str, Any]] = []
    for group in groups:
        for item in group:
            if item not in seen:
                seen.append(item)
    return seen


def compute_class_name(pool: GpuPool) -> str:
    """Name of the ComputeClass of an Autopilot profile with an on-demand fallback, or of a Standard
    pool's capacity ladder."""
    return f"gpu-{pool.name}"


def uses_compute_class(pool: GpuPool, *, autopilot: bool) -> bool:
    """True where the pool's nodes come from its ComputeClass: an Autopilot profile with an on-demand
    fallback, or a Standard pool with a capacity ladder."""
    return (autopilot and bool(pool.on_demand_fallback)) or (
        not autopilot and pool.capacity_ladder is not None
    )


def node_selector(pool: GpuPool, *, autopilot: bool) -> dict[str, str]:
    """Node selectors that put a Pod on this pool (Standard) or make Autopilot create its node."""
    if uses_compute_class(pool, autopilot=autopilot):
        # The ComputeClass carries the accelerator, count and Spot preference.
        return {COMPUTE_CLASS_LABEL: compute_class_name(pool)}
    selector = {ACCELERATOR_LABEL: pool.accelerator}
    if not autopilot:
        selector[NODEPOOL_LABEL] = pool.name
    if pool.spot:
        selector[SPOT_LABEL] = "true"
    if pool.sharing:
        selector[SHARING_STRATEGY_LABEL] = pool.sharing.label_value
        selector[MAX_CLIENTS_LABEL] = str(pool.sharing.max_clients_per_gpu)
    if pool.mig_partition_size:
        selector[PARTITION_LABEL] = pool.mig_partition_size
    if autopilot and pool.driver_version == "LATEST":
        selector[DRIVER_LABEL] = "latest"
    return selector


def tolerations(pool: GpuPool, *, autopilot: bool) -> list[dict[str, Any]]:
    """Tolerations for the GPU taint, Spot and the pool's own taints (Kubernetes field names)."""
    result: list[dict[str, Any]] = [dict(GPU_TOLERATION)]
    accelerator = load_catalog().accelerator(pool.accelerator)
    if accelerator is not None and accelerator.arch == "arm64":
        result.append(dict(ARM64_TOLERATION))
    if pool.spot or CAPACITY_SPOT in (pool.capacity_ladder or ()):
        result.append({"key": SPOT_LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"})
    if uses_compute_class(pool, autopilot=autopilot):
        result.append(
            {
                "key": COMPUTE_CLASS_LABEL,
                "operator": "Equal",
                "value": compute_class_name(pool),
                "effect": "NoSchedule",
            }
        )
    for taint in pool.taints:
        toleration: dict[str, Any] = {"key": taint.key, "effect": taint.kubernetes_effect}
        if taint.value:
            toleration.update(operator="Equal", value=taint.value)
        else:
            toleration["operator"] = "Exists"
        result.append(toleration)
    return result


def gpus_per_pod(pool: GpuPool, *, autopilot: bool) -> int:
    """`nvidia.com/gpu` one sample Pod requests on this pool.

    A MIG partition or a shared GPU is one `nvidia.com/gpu`, and GKE refuses more than one shared
    GPU per container. On Autopilot the request also picks the node shape, so it must be a count
    Autopilot offers for the accelerator (the profile's gpusPerNode).
    """
    if pool.sharing or pool.mig_partition_size:
        return 1
    if not autopilot:
        return 1
    assert pool.gpus_per_node is not None, "the pool rules resolve every pool's gpus_per_node"
    return pool.gpus_per_node
