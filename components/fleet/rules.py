"""The fleet's rules (the stack file's `gke-gpu:fleet`): what spans the manager and its workers.

Each worker's own sections (cluster, network, GPU pools, batch, monitoring, workloads) are checked first
by a single-cluster stack's rules, keyed under the worker; these rules read what they resolved
(`ResolvedWorker`, typed on the domains' models) and the fleet section itself. Pure: they take values
and the key of the fleet section, and add problems. Kueue v0.19.2 is kubernetes-sigs/kueue@8eab6877.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..cluster.model import ClusterConfig
from ..core.common import Problems, cut, listing
from ..gpu.pool import GpuPool
from ..network.model import NetworkConfig
from ..workloads.batch_teams import queue_name, team_queue_name
from ..workloads.model import BatchConfig, TeamConfig
from .model import FleetConfig, FleetWorkerConfig


@dataclass(frozen=True)
class ResolvedWorker:
    """A worker whose own sections passed a single-cluster stack's rules, as the fleet reads it."""

    name: str
    # Its index in the fleet section's `workers` (for the keys).
    index: int
    region: str
    project: str | None
    access: str
    cluster: ClusterConfig
    network: NetworkConfig | None
    pools: tuple[GpuPool, ...]
    batch: BatchConfig
    pods_ready_timeout_minutes: int | None

    def pool(self, name: str) -> GpuPool | None:
        return next((p for p in self.pools if p.name == name), None)

    def pool_index(self, name: str) -> int:
        return next(i for i, p in enumerate(self.pools) if p.name == name)

    def team(self, name: str) -> TeamConfig | None:
        return next((t for t in self.batch.teams if t.name == name), None)


@dataclass(frozen=True)
class FleetQueue:
    """A team's queue on the manager and the workers it dispatches to, most preferred first."""

    team: str
    namespace: str
    pool: str
    workers: tuple[str, ...]
    # The pool is a multi-networking GPUDirect pool on its workers, whose GPUDirect Pods run in
    # `gpudirect-<team>`: the manager queues from that namespace too.
    gpudirect: bool = False

    @property
    def local_queue(self) -> str:
        return queue_name(self.pool)

    @property
    def cluster_queue(self) -> str:
        return team_queue_name(self.pool, self.team)

    @property
    def check(self) -> str:
        """The AdmissionCheck and MultiKueueConfig of the queue."""
        return f"multikueue-{self.cluster_queue}"


def config_problems(fleet: FleetConfig, key: str, fleet_project: str | None, problems: Problems) -> set[int]:
    """What the section alone says is wrong; returns the indexes of the workers not to resolve (a
    repeated name, a mode a worker cannot have): their own rules would only add follow-on problems."""
    skipped: set[int] = set()
    names: list[str] = []
    for i, worker in enumerate(fleet.workers):
        wkey = f"{key}.workers[{i}]"
        if worker.name in names:
            problems.add(
                f"{wkey}.name",
                f"{cut(worker.name)} names two workers; a worker's name is its MultiKueueCluster's",
            )
            skipped.add(i)
        names.append(worker.name)
        mode = worker.cluster.get("mode", "standard")
        if mode != "standard":
            problems.add(
                f"{wkey}.cluster.mode", f"{cut(str(mode))} is not allowed for a worker; allowed: standard"
            )
            skipped.add(i)
        if worker.batch.get("kueue") is not True:
            problems.add(
                f"{wkey}.batch.kueue",
                f"{_shown(worker.batch.get('kueue'))} is not allowed; a worker admits the manager's jobs "
                "through its own Kueue: set kueue: true",
            )
        if worker.project is not None and worker.project != fleet_project and worker.access == "fleet":
            problems.add(
                f"{wkey}.project",
                f"{cut(worker.project)} is not the fleet's project ({fleet_project or 'gcp:project'}): a "
                "worker of access: fleet is a member of the fleet, which the manager's Kueue reaches "
                "through Connect Gateway; put the worker in the fleet's project, or set access: token "
                "(a short-lived ServiceAccount token you create, docs/fleet.md)",
            )
    _check_plugin(fleet, key, problems)
    return skipped


def _check_plugin(fleet: FleetConfig, key: str, problems: Problems) -> None:
    """The credentials plugin runs in the manager's Kueue for the workers reached through the fleet."""
    through_fleet = [w.name for w in fleet.workers if w.access == "fleet"]
    if through_fleet and fleet.credentials_plugin_image is None:
        problems.add(
            f"{key}.credentialsPluginImage",
            f"required: the manager's Kueue reaches worker(s) {listing(through_fleet)} through GKE's "
            "fleet (ClusterProfile, Connect Gateway) with Google's gcp-auth-plugin, which Google publishes "
            "as source only (GoogleCloudPlatform/gke-fleet-management gcp-auth-plugin/); build its image "
            "(docs/fleet.md, 'Build the credentials plugin') and set it here, or set access: token on "
            "every worker",
        )
    elif not through_fleet and fleet.credentials_plugin_image is not None:
        problems.add(
            f"{key}.credentialsPluginImage",
            "only allowed with a worker of access: fleet (the plugin gets the credentials for those); every "
            "worker has access: token",
        )


def worker_sections(worker: FleetWorkerConfig, manager_name: str) -> dict[str, Any]:
    """The worker's own sections as a single-cluster stack's rules read them: a Standard cluster named
    `<manager cluster>-<worker>` unless named, and, for a worker reached by token, its control plane's
    private endpoint reachable from the manager's region (control-plane global access)."""
    cluster: dict[str, Any] = {"mode": "standard", "name": f"{manager_name}-{worker.name}"[:40]}
    if worker.access == "token":
        cluster["controlPlaneGlobalAccess"] = True
    sections: dict[str, Any] = {
        "cluster": {**cluster, **worker.cluster},
        "gpuPools": worker.gpu_pools,
        "batch": {**worker.batch, "kueue": True},
    }
    for name, value in (
        ("network", worker.network),
        ("monitoring", worker.monitoring),
        ("workloads", worker.workloads),
    ):
        if value is not None:
            sections[name] = value
    return sections


def cluster_problems(
    workers: Sequence[ResolvedWorker],
    manager: tuple[str, str | None] | None,
    key: str,
    problems: Problems,
) -> list[ResolvedWorker]:
    """No worker is the manager's cluster or another worker's, by name alone: Managed Prometheus labels
    each series with its cluster's name only, and the fleet's charts and alert tell the clusters apart
    by it. Returns the workers kept."""
    seen: dict[str, tuple[str, str | None]] = {}
    if manager is not None:
        seen[manager[0]] = ("the manager", manager[1])
    kept = []
    for worker in workers:
        name, location = worker.cluster.name or "", worker.cluster.location
        if name in seen:
            owner, at = seen[name]
            same = (
                f"is {owner}'s cluster" if at == location else f"is the name of {owner}'s cluster (in {at})"
            )
            problems.add(
                f"{key}.workers[{worker.index}].cluster.name",
                f"{cut(name)} in {location} {same}; a worker is a cluster of its own, named apart (Kueue "
                "does not run the manager as its own worker; the fleet's dashboard tells clusters apart "
                "by name)",
            )
            continue
        seen[name] = (f"worker {worker.name}", location)
        kept.append(worker)
    return kept


_RANGES = (
    ("subnet_cidr", "subnetCidr"),
    ("pods_cidr", "podsCidr"),
    ("services_cidr", "servicesCidr"),
    ("proxy_only_cidr", "proxyOnlyCidr"),
)


def _ranges(network: NetworkConfig | None) -> list[tuple[str, Any]]:
    if network is None or network.existing is not None:
        return []
    return [
        (key, ipaddress.ip_network(value, strict=False))
        for attribute, key in _RANGES
        if isinstance(value := getattr(network, attribute, None), str)
    ]


def peering_problems(
    manager: NetworkConfig | None, manager_key: str, worker: ResolvedWorker, key: str, problems: Problems
) -> None:
    """A worker reached by token is reached over VPC Network Peering, which refuses overlapping subnet
    ranges: none of its ranges may overlap the manager's."""
    if worker.access != "token":
        return
    theirs = _ranges(manager)
    for name, mine in _ranges(worker.network):
        clash = next((k for k, r in theirs if r.overlaps(mine)), None)
        if clash:
            problems.add(
                f"{key}.workers[{worker.index}].network.{name}",
                f"{mine} overlaps the manager's {manager_key}.{clash}; a worker of access: token is "
                "reached over VPC peering with the manager's VPC, which needs ranges apart",
            )


def most_gpus(worker: ResolvedWorker, team: str, pool_name: str) -> int:
    """The most GPUs of the worker's pool the team can hold at once: its share and what it may borrow
    (unset: every GPU of the pool)."""
    pool = worker.pool(pool_name)
    found = worker.team(team)
    assert pool is not None and found is not None, "a queue's worker has the team's pool"
    share = found.pools[pool_name]
    whole = (pool.max_nodes or 0) * pool.schedulable_gpus_per_node
    return whole if share.borrow is None else min(whole, share.gpus + share.borrow)


def fleet_queues(
    fleet: FleetConfig,
    workers: dict[str, ResolvedWorker],
    declared: Sequence[str],
    key: str,
    problems: Problems,
) -> list[FleetQueue]:
    """Each team queue of the manager and the workers it dispatches to: every one of them has the
    team's LocalQueue, in the same namespace; Kueue could admit its jobs there; the pool is alike on
    each; and each gives a capacity guarantee (`admission_problems`). `workers`: the resolved workers
    (one that failed its own checks is missing, and no queue problem names it again)."""
    queues: list[FleetQueue] = []
    order = list(dict.fromkeys(declared))
    complete = len(workers) == len(order)
    seen_teams: set[str] = set()
    guaranteed: set[tuple[str, str]] = set()
    for i, team in enumerate(fleet.teams):
        tkey = f"{key}.teams[{i}]"
        if team.name in seen_teams:
            problems.add(f"{tkey}.name", f"{cut(team.name)} names two teams")
            continue
        seen_teams.add(team.name)
        pools: set[str] = set()
        for j, queue in enumerate(team.queues):
            qkey = f"{tkey}.queues[{j}]"
            if queue.pool in pools:
                problems.add(f"{qkey}.pool", f"{cut(queue.pool)} is two queues of team {team.name}")
                continue
            pools.add(queue.pool)
            sharing = [n for n in order if n in workers and _share(workers[n], team.name, queue.pool)]
            if queue.workers is None and not sharing:
                if complete:
                    problems.add(
                        f"{qkey}.pool",
                        f"no worker gives team {team.name} a share of a pool {cut(queue.pool)}; workers: "
                        f"{listing(order)}",
                    )
                continue
            chosen: list[str] = []
            missing = False
            for k, name in enumerate(queue.workers if queue.workers is not None else sharing):
                wkey = f"{qkey}.workers[{k}]"
                if name not in order:
                    problems.add(wkey, f"{cut(name)} is not a worker; workers: {listing(order)}")
                elif name in chosen:
                    problems.add(wkey, f"{cut(name)} is listed twice")
                elif name not in workers:
                    missing = True
                else:
                    problem = _queue_problem(workers[name], team.name, team.namespace_name, queue.pool)
                    if problem:
                        problems.add(wkey, problem)
                        missing = True
                    chosen.append(name)
            usable = [workers[n] for n in chosen if _share(workers[n], team.name, queue.pool)]
            if not missing and usable and len(usable) == len(chosen):
                if _queue_pool_problems(usable, team.name, queue.pool, qkey, problems):
                    continue
                for worker in usable:
                    if (worker.name, queue.pool) not in guaranteed:
                        guaranteed.add((worker.name, queue.pool))
                        admission_problem(worker, queue.pool, key, problems)
            found = [p for w in usable if (p := w.pool(queue.pool)) is not None]
            gpudirect = any(p.multi_network for p in found)
            queues.append(FleetQueue(team.name, team.namespace_name, queue.pool, tuple(chosen), gpudirect))
    return queues


def _queue_pool_problems(
    workers: Sequence[ResolvedWorker], team: str, pool_name: str, qkey: str, problems: Problems
) -> bool:
    """What Kueue on the manager could never admit, or admit where the job cannot run; True when the
    queue is refused."""
    pools = {w.name: w.pool(pool_name) for w in workers}
    claiming = {name: why for name, pool in pools.items() if pool and (why := _claims(pool))}
    if claiming:
        problems.add(
            f"{qkey}.pool",
            f"{cut(pool_name)} is a {' / '.join(sorted(set(claiming.values())))} pool on worker(s) "
            f"{listing(claiming)}; a fleet queue cannot use it: its jobs claim devices through DRA "
            "(ResourceClaimTemplates, a ComputeDomain), which Kueue on the manager reads in the "
            "submission namespace and counts only through deviceClassMappings and quota the manager has "
            "none of (Kueue v0.19.2 pkg/dra/claims.go), and MultiKueue copies the job, not its claim "
            "templates: the manager never admits them; queue on a pool without DRA, or submit to the "
            "worker's own queue",
        )
        return True
    shapes = {name: _shape(pool) for name, pool in pools.items() if pool}
    if len(set(shapes.values())) > 1:
        problems.add(
            f"{qkey}.pool",
            f"{cut(pool_name)} differs between the workers of team {team}'s queue ("
            + "; ".join(f"{name}: {shape}" for name, shape in shapes.items())
            + "): the manager counts them as one flavor, so a job sized for one worker's nodes is "
            "dispatched to another's where it never schedules; give pools alike one name, or list only "
            "the workers whose pools are alike",
        )
        return True
    if not any(most_gpus(w, team, pool_name) for w in workers):
        problems.add(
            f"{qkey}.pool",
            f"team {team} can hold no GPU of pool {cut(pool_name)} on any of its workers (a share of 0 and "
            "borrow: 0 on each): the queue could never admit a job",
        )
        return True
    return False


def _claims(pool: GpuPool) -> str | None:
    """Why the pool's jobs claim DRA devices the manager cannot count, if they do."""
    if pool.dra_gpus:
        return "draGpus"
    if pool.dranet:
        return "DRANET"
    if pool.workload_policy:
        return "NVL72 rack"
    return None


def _shape(pool: GpuPool) -> str:
    """What a job sized for the pool's nodes depends on."""
    flavor = f", {pool.gpudirect_flavor}" if pool.gpudirect_flavor else ""
    return f"{pool.accelerator}, {pool.schedulable_gpus_per_node} GPUs a node{flavor}"


def admission_problem(worker: ResolvedWorker, pool_name: str, key: str, problems: Problems) -> None:
    """A worker admits a fleet job only when it can run it: through the ProvisioningRequest check on a
    queued-provisioning pool (its nodes are coming), else its Kueue evicts a job whose Pods are not
    ready in time, and the manager dispatches it again (docs/fleet.md, "Admission means capacity")."""
    pool = worker.pool(pool_name)
    assert pool is not None
    if pool.queued_provisioning or worker.pods_ready_timeout_minutes is not None:
        return
    wkey = f"{key}.workers[{worker.index}]"
    if pool.flex_start:
        problems.add(
            f"{wkey}.gpuPools[{worker.pool_index(pool_name)}].queuedProvisioning",
            f"pool {cut(pool_name)} (flex-start) backs a fleet queue without a capacity guarantee: set "
            "queuedProvisioning: true, so that worker "
            f"{worker.name} admits a job only once Dynamic Workload Scheduler has its nodes "
            "(ProvisioningRequest admission check); as it is, its Kueue admits on quota alone, MultiKueue "
            "keeps that copy and the job waits for nodes in this region while another may have them "
            "(or set podsReadyTimeoutMinutes on the worker)",
        )
        return
    problems.add(
        f"{wkey}.podsReadyTimeoutMinutes",
        f"required: pool {cut(pool_name)} ({capacity(pool)}) backs a fleet queue and has no capacity "
        "admission check, so worker "
        f"{worker.name}'s Kueue admits on quota alone; set how long it waits for an admitted job's Pods "
        "before it evicts the copy and the manager dispatches it again (Kueue's waitForPodsReady), or "
        "give the pool queuedProvisioning",
    )


def capacity(pool: GpuPool) -> str:
    """How a pool gets its nodes."""
    if pool.queued_provisioning:
        return "flex-start, queued provisioning" if pool.flex_start else "queued provisioning"
    if pool.flex_start:
        return "flex-start"
    if pool.reservation.type != "NONE":
        return "reservation"
    return "spot" if pool.spot else "on-demand"


def _shown(value: Any) -> str:
    return "unset" if value is None else cut(str(value))


def _share(worker: ResolvedWorker, team: str, pool: str) -> bool:
    found = worker.team(team)
    return found is not None and pool in found.pools


def _queue_problem(worker: ResolvedWorker, team: str, namespace: str, pool: str) -> str | None:
    """Why the worker has no LocalQueue the manager's queue could dispatch to, if it has none."""
    found = worker.team(team)
    local = queue_name(pool)
    if found is None or pool not in found.pools:
        return (
            f"worker {worker.name} has no queue {local} for team {team}: give the team a share of its "
            f"pool {cut(pool)} in workers[].batch.teams (its pools: {listing(p.name for p in worker.pools)})"
        )
    if found.namespace_name != namespace:
        return (
            f"worker {worker.name} puts team {team}'s queue in namespace {found.namespace_name}, the "
            f"manager in {namespace}; MultiKueue creates the job in the same namespace on the worker"
        )
    return None
