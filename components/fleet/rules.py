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
from typing import Any, NamedTuple

from ..cluster.model import ClusterConfig
from ..core.common import Problems, cut, listing
from ..gpu.pool import GpuPool
from ..network.model import NetworkConfig
from ..workloads.batch_teams import check_members, queue_name, team_queue_name
from ..workloads.model import KUEUE_DEFAULT_PODS_READY_TIMEOUT_MINUTES, BatchConfig, TeamConfig
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
    # The worker's `podsReadyTimeoutMinutes`, None where unset.
    pods_ready_timeout_minutes: int | None

    @property
    def readiness_timeout_minutes(self) -> int:
        """How long the worker's Kueue waits for an admitted job's Pods before it evicts the copy: the
        key, else Kueue v0.19.2's default, which is on whether or not a Configuration sets the block
        (workloads/kueue_config.py). The fleet writes it into each worker's Configuration."""
        return self.pods_ready_timeout_minutes or KUEUE_DEFAULT_PODS_READY_TIMEOUT_MINUTES

    def pool(self, name: str) -> GpuPool | None:
        return next((p for p in self.pools if p.name == name), None)

    def pool_index(self, name: str) -> int:
        return next(i for i, p in enumerate(self.pools) if p.name == name)

    def team(self, name: str) -> TeamConfig | None:
        return next((t for t in self.batch.teams if t.name == name), None)


class FleetQueue(NamedTuple):
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


def check_fleet_workers(
    fleet: FleetConfig, key: str, fleet_project: str | None, problems: Problems
) -> set[int]:
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


def check_fleet_members(
    fleet: FleetConfig, key: str, manager_cluster: ClusterConfig | None, security_key: str, problems: Problems
) -> None:
    """The fleet's team members, bound on the manager as batch.teams[].members on a cluster: each once,
    and a Google group only where the manager's cluster has Google Groups for RBAC
    (`manager_cluster` None: its own checks failed, and say so)."""
    for i, team in enumerate(fleet.teams):
        mkey = f"{key}.teams[{i}].members"
        groups = [j for j, m in enumerate(team.members) if m.startswith("group:")]
        if groups and manager_cluster is not None and manager_cluster.rbac_security_group is None:
            problems.add(
                f"{mkey}[{groups[0]}]",
                f"{cut(team.members[groups[0]])} is a Google group, which the manager's RBAC sees only with "
                f"Google Groups for RBAC: set {security_key} to gke-security-groups@<your domain> (a group "
                "of that name, with the team's groups nested in it)",
            )
        check_members(team.members, mkey, problems)


def manager_clients(manager: NetworkConfig | None) -> list[dict[str, str]]:
    """The addresses the manager's Kueue reaches a token worker's control plane from, over VPC peering,
    as authorized networks: its Pod's own address, since GKE keeps a Pod's source address for RFC 1918
    destinations (the IP masquerade agent's default non-masquerade ranges, GKE "IP masquerade agent",
    cloud.google.com/kubernetes-engine/docs/concepts/ip-masquerade-agent, read 2026-12), so the
    manager's Pod range; and its node subnet (a node's own traffic). None for a VPC the program does not
    manage (its ranges are not known here)."""
    if manager is None or manager.existing is not None:
        return []
    return [
        {"cidrBlock": str(cidr), "displayName": f"fleet manager {what}"}
        for cidr, what in ((manager.subnet_cidr, "nodes"), (manager.pods_cidr, "pods"))
        if isinstance(cidr, str)
    ]


def worker_sections(
    worker: FleetWorkerConfig, manager_name: str, manager_network: NetworkConfig | None = None
) -> dict[str, Any]:
    """The worker's own sections as a single-cluster stack's rules read them: a Standard cluster named
    `<manager cluster>-<worker>` unless named, and, for a worker reached by token, its control plane's
    private endpoint reachable from the manager's region (control-plane global access) and from the
    manager's ranges (its authorized networks, `manager_clients`, after the worker's own)."""
    cluster: dict[str, Any] = {"mode": "standard", "name": f"{manager_name}-{worker.name}"[:40]}
    if worker.access == "token":
        cluster["controlPlaneGlobalAccess"] = True
    cluster.update(worker.cluster)
    own = worker.cluster.get("masterAuthorizedNetworks", [])
    if worker.access == "token" and isinstance(own, list):
        listed = {entry.get("cidrBlock") for entry in own if isinstance(entry, dict)}
        added = [c for c in manager_clients(manager_network) if c["cidrBlock"] not in listed]
        if added:
            cluster["masterAuthorizedNetworks"] = [*own, *added]
    sections: dict[str, Any] = {
        "cluster": cluster,
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


def check_worker_clusters(
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


def check_peering(
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
    team's LocalQueue, in the same namespace; Kueue could admit its jobs there; and the pool is alike
    on each. `workers`: the resolved workers (one that failed its own checks is missing, and no queue
    problem names it again)."""
    queues: list[FleetQueue] = []
    order = list(dict.fromkeys(declared))
    complete = len(workers) == len(order)
    seen_teams: set[str] = set()
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
            if (
                not missing
                and usable
                and len(usable) == len(chosen)
                and _check_queue_pool(usable, team.name, queue.pool, qkey, problems)
            ):
                continue
            found = [p for w in usable if (p := w.pool(queue.pool)) is not None]
            gpudirect = any(p.multi_network for p in found)
            queues.append(FleetQueue(team.name, team.namespace_name, queue.pool, tuple(chosen), gpudirect))
    return queues


def _check_queue_pool(
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
