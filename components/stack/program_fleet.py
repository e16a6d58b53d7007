"""The fleet (`gke-gpu:fleet`): each worker a whole gke-gpu cluster with its GPU pools and Kueue, and on
the manager (the stack's own cluster) MultiKueue over them. Each cluster has its own Kubernetes
provider (its GkeCluster's)."""

from __future__ import annotations

from typing import Any

import pulumi

from ..core.catalog import load_catalog
from ..fleet.manager import ManagerQueue, ManagerWorker, MultiKueueManager, MultiKueueManagerArgs
from ..fleet.worker_access import MultiKueueWorkerAccess
from ..workloads.batch_teams import Quota
from .declare import declare
from .fleet_section import FleetSettings, FleetWorker
from .program_batch import batch_queues, pool_quota
from .program_cluster import gke_cluster
from .program_pools import gpu_pools
from .settings import Settings


def fleet(settings: Settings, manager_provider: pulumi.ProviderResource) -> dict[str, Any]:
    """Declare the workers and the manager's MultiKueue objects; return the stack output `fleet`."""
    assert settings.fleet is not None
    fleet_settings = settings.fleet
    access: list[ManagerWorker] = []
    workers_out: list[dict[str, Any]] = []
    for worker in fleet_settings.workers:
        kubeconfig, summary = _worker(worker)
        access.append({"name": worker.name, "kubeconfig": kubeconfig})
        workers_out.append(summary)
    args: MultiKueueManagerArgs = {
        "workers": access,
        "queues": manager_queues(fleet_settings),
        "dispatcher": fleet_settings.dispatcher,  # type: ignore[typeddict-item]
    }
    manager = declare(
        MultiKueueManager, "fleet", args, opts=pulumi.ResourceOptions(provider=manager_provider)
    )
    return {
        "manager": settings.cluster.name,
        "dispatcher": fleet_settings.dispatcher,
        "workerNames": manager.worker_names,
        "workers": workers_out,
        "teams": fleet_summary(settings),
    }


def _worker(worker: FleetWorker) -> tuple[pulumi.Output[str], dict[str, Any]]:
    """A worker: its VPC, cluster, GPU pools, Kueue with the teams' queues, and what the manager may do
    there; returns the manager's kubeconfig for it (a secret) and its summary."""
    settings = worker.settings
    prefix = f"{worker.name}-"
    cluster, _ = gke_cluster(settings, prefix)
    pools = gpu_pools(settings, cluster, {}, prefix)
    queues, component = batch_queues(
        settings, cluster.provider, list(pools.values()), local_queue_namespace=None, prefix=prefix
    )
    grant = declare(
        MultiKueueWorkerAccess,
        f"{prefix}multikueue",
        {
            "worker": worker.name,
            "endpoint": cluster.endpoint,
            "ca_certificate": cluster.ca_certificate,
        },
        # In kueue-system, which the worker's Kueue chart creates.
        opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=[component]),
    )
    summary = {
        "name": worker.name,
        "region": settings.region,
        "cluster": settings.cluster.name,
        "location": settings.cluster.location,
        "gpuPools": [pool_row(p) for p in settings.gpu_pools],
        "batchQueues": queues,
    }
    return grant.kubeconfig, summary


def capacity(pool: Any) -> str:
    """How a pool gets its nodes."""
    if pool.queued_provisioning:
        return "flex-start, queued provisioning" if pool.flex_start else "queued provisioning"
    if pool.flex_start:
        return "flex-start"
    if pool.reservation.type != "NONE":
        return "reservation"
    return "spot" if pool.spot else "on-demand"


def pool_row(pool: Any) -> dict[str, Any]:
    return {
        "pool": pool.name,
        "accelerator": pool.accelerator,
        "gpus": (pool.max_nodes or 0) * pool.schedulable_gpus_per_node,
        "capacity": capacity(pool),
    }


def _team_quota(worker: FleetWorker, team: str, pool_name: str) -> Quota:
    pool = next(p for p in worker.settings.gpu_pools if p.name == pool_name)
    found = next(t for t in worker.settings.batch.teams if t.name == team)
    return pool_quota(pool, load_catalog()).part(found.pools[pool_name].gpus)


def manager_queues(fleet_settings: FleetSettings) -> list[ManagerQueue]:
    """Each team queue on the manager, with the sum of its workers' quota (Kueue's docs: the manager's
    quota should equal the workers' total)."""
    by_name = {w.name: w for w in fleet_settings.workers}
    queues: list[ManagerQueue] = []
    for queue in fleet_settings.queues:
        parts = [_team_quota(by_name[w], queue.team, queue.pool) for w in queue.workers]
        queues.append(
            {
                "team": queue.team,
                "namespace": queue.namespace,
                "pool": queue.pool,
                "workers": list(queue.workers),
                "gpus": sum(p.gpus for p in parts),
                "cpus": sum(p.cpus for p in parts),
                "memory_gib": sum(p.memory_gib for p in parts),
                "ephemeral_storage_gib": sum(p.ephemeral_storage_gib for p in parts),
            }
        )
    return queues


def fleet_summary(settings: Settings) -> list[dict[str, Any]]:
    """Per team queue: the queue on the manager and the workers it can run on, each with its GPUs and
    capacity type (the stack output and the render's summary)."""
    assert settings.fleet is not None
    by_name = {w.name: w for w in settings.fleet.workers}
    rows = []
    for queue, quota in zip(settings.fleet.queues, manager_queues(settings.fleet), strict=True):
        workers = []
        for name in queue.workers:
            worker = by_name[name].settings
            pool = next(p for p in worker.gpu_pools if p.name == queue.pool)
            workers.append(
                {
                    "worker": name,
                    "region": worker.region,
                    "accelerator": pool.accelerator,
                    "teamGpus": _team_quota(by_name[name], queue.team, queue.pool).gpus,
                    "capacity": capacity(pool),
                }
            )
        rows.append(
            {
                "team": queue.team,
                "localQueue": f"{queue.namespace}/{queue.local_queue}",
                "clusterQueue": queue.cluster_queue,
                "admissionCheck": queue.check,
                "gpus": quota["gpus"],
                "workers": workers,
            }
        )
    return rows
