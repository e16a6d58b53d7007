"""The stack's batch layer (`gke-gpu:batch`): Kueue's queues sized from the stack's GPU pools."""

from typing import Any

import pulumi

from .catalog import load_catalog
from .declare import declare
from .gpu_batch_queues import GpuBatchQueues, GpuBatchQueuesArgs, queue_name
from .gpu_scheduling import node_selector, tolerations
from .settings import Settings

QUEUED_TOLERATION = {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}


def batch_queues(
    settings: Settings,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
    *,
    local_queue_namespace: str | None,
) -> list[dict[str, Any]]:
    """Declare Kueue, JobSet and a queue per Standard GPU pool; return the queues as a stack output.

    A pool's quota is what it can hold at most: maxNodes x the `nvidia.com/gpu` each node advertises
    (with sharing or MIG, the shares), x the machine's vCPUs, memory and boot disk. Kueue admits only
    Pods whose every request fits, so CPU, memory and ephemeral storage are covered too."""
    catalog = load_catalog()
    queues: list[Any] = []
    summary: list[dict[str, Any]] = []
    for pool in settings.gpu_pools:
        accelerator = catalog.accelerator(pool.accelerator)
        machine = accelerator.machine_type(pool.machine_type or "") if accelerator else None
        assert machine is not None and pool.max_nodes is not None, "a resolved Standard pool"
        queue = {
            "name": pool.name,
            "node_labels": node_selector(pool, autopilot=False),
            # GKE taints queued-provisioning nodes cloud.google.com/gke-queued=true:NoSchedule.
            "tolerations": [
                *tolerations(pool, autopilot=False),
                *([QUEUED_TOLERATION] if pool.queued_provisioning else []),
            ],
            "gpus": pool.max_nodes * pool.schedulable_gpus_per_node,
            "cpus": pool.max_nodes * machine.vcpus,
            "memory_gib": int(pool.max_nodes * machine.memory_gb),
            "ephemeral_storage_gib": pool.max_nodes * pool.disk_size_gb,
            "queued_provisioning": pool.queued_provisioning,
        }
        queues.append(queue)
        summary.append(
            {
                "pool": pool.name,
                "clusterQueue": queue_name(pool.name),
                "localQueue": f"{local_queue_namespace}/{queue_name(pool.name)}"
                if local_queue_namespace
                else None,
                "quota": {
                    "nvidia.com/gpu": queue["gpus"],
                    "cpu": queue["cpus"],
                    "memory": f"{queue['memory_gib']}Gi",
                    "ephemeral-storage": f"{queue['ephemeral_storage_gib']}Gi",
                },
                "admissionCheck": f"dws-{pool.name}" if pool.queued_provisioning else None,
            }
        )
    args: GpuBatchQueuesArgs = {"queues": queues}
    if local_queue_namespace:
        args["local_queue_namespace"] = local_queue_namespace
    declare(
        GpuBatchQueues,
        "batch",
        args,
        opts=pulumi.ResourceOptions(provider=provider, depends_on=depends_on),
    )
    return summary
