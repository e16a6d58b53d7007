"""The stack output `gpuPools`: what a workload author needs to target each pool."""

from typing import Any

from ..gpu.pool import GpuPool
from ..gpu.scheduling import gpus_per_pod, node_selector, tolerations
from ..gpudirect.g4_network import G4_NIC
from .program_gpudirect import pool_gpudirect_summary


def pool_summary(pool: GpuPool, *, autopilot: bool) -> dict[str, Any]:
    """What a workload author needs to target the pool, as a stack output."""
    assert pool.zones is not None, "the pool rules resolve every pool's zones"
    summary: dict[str, Any] = {
        "name": pool.name,
        "kind": "autopilot-profile"
        if autopilot
        else "capacity-ladder"
        if pool.capacity_ladder is not None
        else "node-pool",
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
    gpudirect = pool_gpudirect_summary(pool)
    if gpudirect:
        summary["gpudirect"] = gpudirect
    if pool.second_network:
        # The Kubernetes Network of G4's second NIC, for a Pod that names it (none of ours does).
        summary["secondNetwork"] = {"network": G4_NIC.network_name}
    return summary
