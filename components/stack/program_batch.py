"""The stack's batch layer (`gke-gpu:batch`): Kueue's queues sized from the stack's GPU pools."""

from typing import Any

import pulumi

from ..core.catalog import load_catalog
from ..gpu.scheduling import QUEUED_TOLERATION, node_selector, tolerations
from ..workloads.batch_queues import GpuBatchQueues, GpuBatchQueuesArgs, queue_name
from ..workloads.nccl_allreduce import NcclAllReduce
from ..workloads.nccl_allreduce_args import NcclAllReduceArgs
from .declare import declare
from .settings import Settings


def batch_queues(
    settings: Settings,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
    *,
    local_queue_namespace: str | None,
) -> tuple[list[dict[str, Any]], GpuBatchQueues]:
    """Declare Kueue, JobSet and a queue per Standard GPU pool; return the queues as a stack output,
    and the component (what a queued workload waits for).

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
    component = declare(
        GpuBatchQueues,
        "batch",
        args,
        opts=pulumi.ResourceOptions(provider=provider, depends_on=depends_on),
    )
    return summary, component


def nccl_allreduce_tests(
    settings: Settings,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
) -> dict[str, Any]:
    """The `nccl-allreduce` workloads, each a NcclAllReduce on its pool, queued in the pool's
    ClusterQueue; returns, per test, how to wait for it and read its result (stack output
    `sampleWorkloads`)."""
    commands: dict[str, Any] = {}
    pools = {pool.name: pool for pool in settings.gpu_pools}
    for workload in settings.workloads:
        if workload.name != "nccl-allreduce":
            continue
        pool = pools[workload.pool or settings.gpu_pools[0].name]
        flavor = pool.gpudirect_flavor
        assert pool.machine_type and pool.gpus_per_node, "a resolved Standard pool"
        args: NcclAllReduceArgs = {
            "pool": pool.name,
            "node_selector": node_selector(pool, autopilot=False),
            "tolerations": tolerations(pool, autopilot=False),  # type: ignore[typeddict-item]
            "machine_type": pool.machine_type,
            "accelerator": pool.accelerator,
            "gpus_per_node": pool.gpus_per_node,
            "nodes": workload.nodes or 2,
            "cluster_queue": queue_name(pool.name),
            # One namespace per test: each NcclAllReduce creates its own.
            "namespace": f"gpu-nccl-{pool.name}",
            "queued": pool.queued_provisioning,
        }
        if pool.max_nodes is not None:
            args["max_nodes"] = pool.max_nodes
        if flavor is not None:
            args["gpudirect"] = flavor
        test = declare(
            NcclAllReduce,
            f"nccl-{pool.name}",
            args,
            # After Kueue, JobSet and the pool's ClusterQueue (the CRDs and the webhook) and, with
            # GPUDirect, the flavour's Networks and NCCL plugin.
            opts=pulumi.ResourceOptions(provider=provider, depends_on=depends_on),
        )
        commands[f"nccl-allreduce-{pool.name}"] = test.commands
    return commands
