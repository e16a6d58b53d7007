"""The fleet (`gke-gpu:fleet`): each worker a whole gke-gpu cluster with its GPU pools and Kueue, and on
the manager (the stack's own cluster) MultiKueue over them. Each cluster has its own Kubernetes
provider (its GkeCluster's)."""

from __future__ import annotations

from typing import Any

import pulumi

from ..core.catalog import load_catalog
from ..fleet.manager import (
    ManagerQueue,
    ManagerQuota,
    ManagerWorker,
    MultiKueueManager,
    MultiKueueManagerArgs,
)
from ..fleet.peering import FleetPeering
from ..fleet.worker_access import MultiKueueWorkerAccess
from ..network.vpc import GkeNetwork
from ..workloads.batch_teams import Quota
from ..workloads.team_namespaces import gpudirect_namespace
from .declare import declare
from .fleet_section import FleetSettings, FleetWorker, most_gpus
from .program_batch import pool_quota
from .program_cluster import gke_cluster
from .program_gpudirect import gpudirect_output
from .program_jobs import cluster_jobs, cluster_monitoring
from .program_pools import gpu_layer
from .settings import Settings


def fleet(
    settings: Settings, manager_provider: pulumi.ProviderResource, manager_vpc: GkeNetwork | None
) -> dict[str, Any]:
    """Declare the workers and the manager's MultiKueue objects; return the stack output `fleet`."""
    assert settings.fleet is not None
    fleet_settings = settings.fleet
    access: list[ManagerWorker] = []
    workers_out: list[dict[str, Any]] = []
    manager_network = _network(settings, manager_vpc)
    previous: list[pulumi.Resource] = []
    for worker in fleet_settings.workers:
        kubeconfig, summary, worker_vpc = _worker(worker)
        access.append({"name": worker.name, "kubeconfig": kubeconfig})
        workers_out.append(summary)
        worker_network = _network(worker.settings, worker_vpc)
        if manager_network is not None and worker_network is not None:
            peering = declare(
                FleetPeering,
                f"{worker.name}-peering",
                {"worker": worker.name, "manager_network": manager_network, "worker_network": worker_network},
                # GCP runs one peering operation at a time on the manager's VPC.
                opts=pulumi.ResourceOptions(depends_on=previous),
            )
            previous = [peering]
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


def _network(settings: Settings, vpc: GkeNetwork | None) -> pulumi.Input[str] | None:
    """A cluster's VPC: the one the stack creates, or the existing one it names."""
    if vpc is not None:
        return vpc.network_self_link
    existing = settings.network.existing if settings.network else None
    return existing.network if existing else None


def _worker(worker: FleetWorker) -> tuple[pulumi.Output[str], dict[str, Any], GkeNetwork | None]:
    """A worker, as a single-cluster stack of its settings declares it (stack/program.py), its resource
    names prefixed by its name, on its own Kubernetes provider: its VPC, cluster, GPU pools and what they
    need (GPUDirect, the DRA driver), Kueue with the teams' queues, their DRANET claim templates and
    training data; and what the manager may do there. Returns the manager's kubeconfig for it (a
    secret) and its summary."""
    settings = worker.settings
    prefix = f"{worker.name}-"
    cluster, vpc = gke_cluster(settings, prefix)
    layer = gpu_layer(settings, cluster, prefix)
    # Kueue's ClusterQueue resource metrics feed the fleet dashboard's GPU chart (monitoring/fleet.py).
    jobs = cluster_jobs(settings, cluster.provider, layer, prefix, cluster_queue_metrics=True)
    assert jobs.queues is not None, "the fleet rules give every worker Kueue"
    monitoring = cluster_monitoring(settings, cluster.provider, prefix)
    grant = declare(
        MultiKueueWorkerAccess,
        f"{prefix}multikueue",
        {
            "worker": worker.name,
            "endpoint": cluster.endpoint,
            "ca_certificate": cluster.ca_certificate,
        },
        # In kueue-system, which the worker's Kueue chart creates.
        opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=[jobs.queues]),
    )
    summary = {
        "name": worker.name,
        "region": settings.region,
        "cluster": settings.cluster.name,
        "location": settings.cluster.location,
        "gpuPools": [pool_row(p) for p in settings.gpu_pools],
        "batchQueues": jobs.batch,
        "monitoring": monitoring,
        **({"sampleWorkloads": jobs.samples} if jobs.samples else {}),
        **({"trainingData": jobs.data} if jobs.data else {}),
        **({"gpudirect": gpudirect_output(settings)} if layer.software else {}),
    }
    return grant.kubeconfig, summary, vpc


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


def _team_quotas(worker: FleetWorker, team: str, pool_name: str) -> tuple[Quota, Quota | None]:
    """The team's share of the worker's pool, and what it may borrow beyond it (None: any idle quota)."""
    pool = next(p for p in worker.settings.gpu_pools if p.name == pool_name)
    share = next(t for t in worker.settings.batch.teams if t.name == team).pools[pool_name]
    whole = pool_quota(pool, load_catalog())
    return whole.part(share.gpus), None if share.borrow is None else whole.part(share.borrow)


def _as_args(quota: Quota) -> ManagerQuota:
    return {
        "gpus": quota.gpus,
        "cpus": quota.cpus,
        "memory_gib": quota.memory_gib,
        "ephemeral_storage_gib": quota.ephemeral_storage_gib,
    }


def _sum(quotas: list[Quota]) -> Quota:
    return Quota(
        sum(q.gpus for q in quotas),
        sum(q.cpus for q in quotas),
        sum(q.memory_gib for q in quotas),
        sum(q.ephemeral_storage_gib for q in quotas),
    )


def manager_queues(fleet_settings: FleetSettings) -> list[ManagerQueue]:
    """Each team queue on the manager: the sum of the team's shares on its workers, and of what it may
    borrow there (Kueue's docs: the manager's quota should equal the workers' total), in a cohort per
    pool as on the workers."""
    by_name = {w.name: w for w in fleet_settings.workers}
    queues: list[ManagerQueue] = []
    for queue in fleet_settings.queues:
        parts = [_team_quotas(by_name[w], queue.team, queue.pool) for w in queue.workers]
        entry: ManagerQueue = {
            "team": queue.team,
            "namespace": queue.namespace,
            "pool": queue.pool,
            "workers": list(queue.workers),
            "quota": _as_args(_sum([nominal for nominal, _ in parts])),
        }
        limits = [limit for _, limit in parts]
        if all(limit is not None for limit in limits):
            entry["borrowing_limit"] = _as_args(_sum([limit for limit in limits if limit is not None]))
        if queue.gpudirect:
            entry["gpudirect"] = True
        queues.append(entry)
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
                    "teamGpus": _team_quotas(by_name[name], queue.team, queue.pool)[0].gpus,
                    "mayBorrowGpus": most_gpus(by_name[name], queue.team, queue.pool)
                    - _team_quotas(by_name[name], queue.team, queue.pool)[0].gpus,
                    "capacity": capacity(pool),
                }
            )
        rows.append(
            {
                "team": queue.team,
                "localQueue": f"{queue.namespace}/{queue.local_queue}",
                # Where its GPUDirect jobs are submitted (the workers run their Pods there).
                **(
                    {"gpudirectLocalQueue": f"{gpudirect_namespace(queue.team)}/{queue.local_queue}"}
                    if queue.gpudirect
                    else {}
                ),
                "clusterQueue": queue.cluster_queue,
                "admissionCheck": queue.check,
                "gpus": quota["quota"]["gpus"],
                "workers": workers,
            }
        )
    return rows
