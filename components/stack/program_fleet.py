"""The fleet (`gke-gpu:fleet`): each worker a whole gke-gpu cluster with its GPU pools and Kueue, and on
the manager (the stack's own cluster) MultiKueue over them, wired from the fleet's plan (fleet/plan.py).
Each cluster has its own Kubernetes provider (its GkeCluster's)."""

from __future__ import annotations

from typing import Any, NamedTuple

import pulumi

from ..cluster.gke_cluster import GkeCluster
from ..fleet.manager import MultiKueueManager
from ..fleet.manager_access import HUB_LABELS
from ..fleet.manager_args import ManagerWorker, MultiKueueManagerArgs
from ..fleet.peering import FleetPeering
from ..fleet.plan import (
    MANAGER_RESOURCE,
    access_summary,
    follow_commands,
    manager_queues,
    manager_teams,
    needs_peering,
    team_rows,
)
from ..fleet.worker_access import MultiKueueWorkerAccess, MultiKueueWorkerAccessArgs
from ..gpu.plan import pool_summary
from ..monitoring.kube_state_metrics import MultiKueueStateMetrics
from ..network.vpc import GkeNetwork
from .declare import declare
from .program_cluster import gke_cluster
from .program_jobs import cluster_jobs, cluster_monitoring
from .program_pools import gpu_layer
from .settings import FleetWorker, Settings


class _DeclaredWorker(NamedTuple):
    """A worker's cluster as declared, before the manager's access to it."""

    worker: FleetWorker
    cluster: GkeCluster
    vpc: GkeNetwork | None
    queues: pulumi.Resource
    summary: dict[str, Any]


def manager_membership(settings: Settings) -> dict[str, Any]:
    """The manager cluster's place in the fleet (gke_cluster's keyword args): a member of the fleet and
    its hub, whose labels have GKE keep a ClusterProfile per member in kueue-system, when a worker is
    reached through the fleet."""
    if settings.fleet is None or not settings.fleet.plan.through_fleet():
        return {}
    return {"fleet_project": settings.project, "labels": dict(HUB_LABELS)}


def fleet(
    settings: Settings, manager_provider: pulumi.ProviderResource, manager_vpc: GkeNetwork | None
) -> dict[str, Any]:
    """Declare the workers and the manager's MultiKueue objects; return the stack output `fleet`."""
    assert settings.fleet is not None
    plan = settings.fleet.plan
    declared = [_worker(worker, settings.project) for worker in settings.fleet.workers]
    workers: list[ManagerWorker] = []
    for each in declared:
        entry: ManagerWorker = {"name": each.worker.name}
        if each.worker.resolved.access == "fleet":
            entry["fleet_membership"] = each.cluster.fleet_membership
        workers.append(entry)
    args: MultiKueueManagerArgs = {
        "workers": workers,
        "queues": manager_queues(plan),
        "dispatcher": plan.dispatcher,  # type: ignore[typeddict-item]
    }
    if teams := manager_teams(plan):
        args["teams"] = teams
    if plan.through_fleet():
        assert plan.credentials_plugin_image is not None, "the fleet's rules require it"
        args["fleet_access"] = {
            "project": settings.project or "",
            "cluster_name": settings.cluster.name or "",
            "plugin_image": plan.credentials_plugin_image,
        }
    manager = declare(
        MultiKueueManager,
        MANAGER_RESOURCE,
        args,
        opts=pulumi.ResourceOptions(provider=manager_provider),
        section="fleet",
    )
    manager_network = _network(settings, manager_vpc)
    previous: list[pulumi.Resource] = []
    summaries = []
    for each in declared:
        worker, cluster = each.worker, each.cluster
        access: MultiKueueWorkerAccessArgs = {
            "worker": worker.name,
            "namespaces": plan.job_namespaces(worker.name),
        }
        if worker.resolved.access == "fleet":
            access["manager_identity"] = manager.kueue_identity
        declare(
            MultiKueueWorkerAccess,
            f"{worker.name}-multikueue",
            access,
            # In the namespaces the worker's Kueue component creates.
            opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=[each.queues]),
            section="fleet",
        )
        worker_network = _network(worker.settings, each.vpc)
        if needs_peering(worker.resolved) and manager_network is not None and worker_network is not None:
            peering = declare(
                FleetPeering,
                f"{worker.name}-peering",
                {"worker": worker.name, "manager_network": manager_network, "worker_network": worker_network},
                # GCP runs one peering operation at a time on the manager's VPC.
                opts=pulumi.ResourceOptions(depends_on=previous),
                section="fleet",
            )
            previous = [peering]
        summaries.append(
            {
                **each.summary,
                "access": access_summary(
                    worker.resolved, membership=cluster.fleet_membership, endpoint=cluster.endpoint
                ),
                "follow": follow_commands(plan, worker.resolved),
            }
        )
    return {
        "manager": settings.cluster.name,
        "dispatcher": plan.dispatcher,
        "workerNames": manager.worker_names,
        # Each worker reached through the fleet: the ClusterProfile its MultiKueueCluster points at.
        "clusterProfiles": manager.cluster_profiles,
        "workers": summaries,
        "teams": team_rows(plan),
    }


def _network(settings: Settings, vpc: GkeNetwork | None) -> pulumi.Input[str] | None:
    """A cluster's VPC: the one the stack creates, or the existing one it names."""
    if vpc is not None:
        return vpc.network_self_link
    existing = settings.network.existing if settings.network else None
    return existing.network if existing else None


def _worker(worker: FleetWorker, fleet_project: str | None) -> _DeclaredWorker:
    """A worker, as a single-cluster stack of its settings declares it (stack/program.py), its resource
    names prefixed by its name, on its own Kubernetes provider: its VPC, cluster, GPU pools and what they
    need (GPUDirect, the DRA driver), Kueue with the teams' queues, their DRANET claim templates and
    training data."""
    settings = worker.settings
    prefix = f"{worker.name}-"
    member = worker.resolved.access == "fleet"
    cluster, vpc = gke_cluster(settings, prefix, fleet_project=fleet_project if member else None)
    layer = gpu_layer(settings, cluster, prefix)
    # Kueue's readiness timeout, written out on every worker (fleet/rules.py readiness_timeout_minutes).
    jobs = cluster_jobs(
        settings,
        cluster.provider,
        layer,
        prefix,
        pods_ready_timeout_minutes=worker.resolved.readiness_timeout_minutes,
    )
    assert jobs.queues is not None, "the fleet rules give every worker Kueue"
    monitoring = cluster_monitoring(settings, cluster.provider, prefix)
    # What the fleet's dashboard reads of the worker: its ClusterQueues' state (monitoring/fleet.py).
    declare(
        MultiKueueStateMetrics,
        f"{prefix}kueue-state-metrics",
        {"role": "worker"},
        opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=[jobs.queues]),
        section="fleet",
    )
    summary = {
        "name": worker.name,
        "region": settings.region,
        "project": settings.project,
        "cluster": settings.cluster.name,
        "location": settings.cluster.location,
        "gpuPools": [pool_summary(p, autopilot=False) for p in settings.gpu_pools],
        "batchQueues": jobs.batch,
        "monitoring": monitoring,
        **({"sampleWorkloads": jobs.samples} if jobs.samples else {}),
        **({"trainingData": jobs.data} if jobs.data else {}),
        **({"gpudirect": layer.gpudirect.output()} if layer.software else {}),
    }
    return _DeclaredWorker(worker, cluster, vpc, jobs.queues, summary)
