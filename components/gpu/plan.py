"""The GPU pools' plan: what each pool is in the cluster (a node pool, a capacity ladder, or on Autopilot
a ComputeClass), the images a ladder's pools preload, the stack output `gpuPools` (what a workload
author needs to target each pool) and the commands that show the GPUs are there, as data. Pure: the
pools' args are built by their components' modules (`node_pool_args`, `capacity_ladder_args`,
`compute_class_args`) once the cluster's Outputs exist; stack/program_pools.py declares them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..core.nodes import ACCELERATOR_LABEL
from ..gpudirect.plan import pool_summary as gpudirect_summary
from ..gpudirect.plan import second_network_name
from .existing_plan import GKE_DEVICE_PLUGIN_PODS
from .pool import GpuPool
from .scheduling import gpus_per_pod, node_selector, tolerations

PoolKind = Literal["node-pool", "capacity-ladder", "autopilot-profile"]
ALLOCATABLE_GPUS_COLUMNS = (
    "NODE:.metadata.name,"
    r"POOL:.metadata.labels.cloud\.google\.com/gke-nodepool,"
    r"ACCELERATOR:.metadata.labels.cloud\.google\.com/gke-accelerator,"
    r"GPUS:.status.allocatable.nvidia\.com/gpu"
)
# The cluster autoscaler's events on the Pods it scaled up for, or could not: one selector each, as a
# field selector's comma-separated requirements must all hold (kubernetes.io "Field Selectors", "Chained
# selectors").
GPU_NODE_EVENTS = (
    "kubectl get events -A --field-selector reason=TriggeredScaleUp; "
    "kubectl get events -A --field-selector reason=NotTriggerScaleUp"
)


def pool_kind(pool: GpuPool, *, autopilot: bool) -> PoolKind:
    """What the pool is in the cluster: an Autopilot profile (a ComputeClass where it has an on-demand
    fallback, else nothing: GKE makes its nodes), a capacity ladder, or a node pool."""
    if autopilot:
        return "autopilot-profile"
    return "capacity-ladder" if pool.capacity_ladder is not None else "node-pool"


def declares_compute_class(pool: GpuPool, *, autopilot: bool) -> bool:
    """An Autopilot profile with an on-demand fallback is a ComputeClass; one without is nothing the
    program declares (GKE makes its nodes from the Pods' node selectors)."""
    return autopilot and bool(pool.on_demand_fallback)


def attached_networks(pool: GpuPool) -> Literal["gpudirect", "second"] | None:
    """Which additional node networks a pool attaches: its GPUDirect flavour's VPCs (where the stack
    makes them), G4's second network, or none."""
    if pool.gpudirect_flavor is not None and pool.stack_networks:
        return "gpudirect"
    return "second" if pool.second_network else None


def ladder_images(pools: Sequence[GpuPool], *, autopilot: bool) -> list[str]:
    """GKE creates a ladder's node pools itself: it attaches their preloaded disk only for an image the
    cluster's one allowlist (ImageCacheAllowlist) names."""
    if autopilot:
        return []
    return sorted({p.image_cache.disk_image for p in pools if p.capacity_ladder and p.image_cache})


def pool_summary(pool: GpuPool, *, autopilot: bool) -> dict[str, Any]:
    """What a workload author needs to target the pool, as a stack output (`gpuPools[]`)."""
    assert pool.zones is not None, "the pool rules resolve every pool's zones"
    summary: dict[str, Any] = {
        "name": pool.name,
        "kind": pool_kind(pool, autopilot=autopilot),
        "accelerator": pool.accelerator,
        "gpusPerNode": pool.gpus_per_node,
        "spot": pool.spot,
        "zones": list(pool.zones),
        "nodeSelector": node_selector(pool, autopilot=autopilot),
        "tolerations": tolerations(pool, autopilot=autopilot),
        "gpusPerPod": gpus_per_pod(pool, autopilot=autopilot),
    }
    if not autopilot:
        summary.update(
            machineType=pool.machine_type,
            minNodes=pool.min_nodes,
            maxNodes=pool.max_nodes,
            schedulableGpusPerNode=pool.schedulable_gpus_per_node,
        )
    else:
        summary["onDemandFallback"] = pool.on_demand_fallback
    if pool.sharing:
        summary["sharing"] = {
            "strategy": pool.sharing.strategy,
            "maxClientsPerGpu": pool.sharing.max_clients_per_gpu,
        }
    if pool.mig_partition_size:
        summary["migPartitionSize"] = pool.mig_partition_size
    if pool.flex_start:
        summary["flexStart"] = True
    if pool.queued_provisioning:
        summary["queuedProvisioning"] = True
    if pool.capacity_ladder is not None:
        summary["capacityLadder"] = list(pool.capacity_ladder)
    if pool.image_cache is not None:
        summary["imageCache"] = {"diskImage": pool.image_cache.disk_image}
    gpudirect = gpudirect_summary(pool)
    if gpudirect:
        summary["gpudirect"] = gpudirect
    if pool.second_network:
        # The Kubernetes Network of G4's second NIC, for a Pod that names it (none of ours does).
        summary["secondNetwork"] = {"network": second_network_name()}
    return summary


def gpu_checks(pools: Sequence[GpuPool], dra: Mapping[str, str]) -> dict[str, str]:
    """Copy-paste commands that prove the GPUs are there after `pulumi up`, for the pools the stack
    has: GKE's device plugin advertises `nvidia.com/gpu` on its pools; a `draGpus` pool has none, its
    GPUs are the DRA driver's ResourceSlices (`dra`: the DRA driver's commands, dra/plan.py). None for
    a cluster without GPU pools (a fleet's manager: its workers' commands are in the output `fleet`)."""
    checks: dict[str, str] = {}
    if not pools:
        return checks
    dra_pools = sorted(p.name for p in pools if p.dra_gpus)
    if not dra_pools or len(dra_pools) < len(pools):
        selector = ACCELERATOR_LABEL
        if dra_pools:
            selector = f"'{selector},cloud.google.com/gke-nodepool notin ({','.join(dra_pools)})'"
        # Quoted: unquoted, the shell drops the backslashes that keep a label's dots in one key.
        checks["allocatableGpus"] = (
            f"kubectl get nodes -l {selector} -o custom-columns='{ALLOCATABLE_GPUS_COLUMNS}'"
        )
        checks["devicePluginPods"] = GKE_DEVICE_PLUGIN_PODS
    checks.update(dra)
    checks["gpuNodeEvents"] = GPU_NODE_EVENTS
    return checks
