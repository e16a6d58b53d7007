"""The fleet section's rules (`gke-gpu:fleet`): each worker checked as a stack file of its own (the same
rules, its keys under `gke-gpu:fleet.workers[i]`), then what spans the manager and its workers: one name
per worker, no worker that is the manager's cluster, Kueue on every worker, and each team queue of the
manager present, with the same namespace, on every worker it dispatches to. Nothing is declared here."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from ..core.common import NAMESPACE, ConfigError, Problem, Problems, cut, listing
from ..core.image_digests import DIGEST, digest_problems
from ..fleet.model import FleetConfig, FleetWorkerConfig
from ..workloads.batch_teams import queue_name, team_queue_name
from .images_section import DIGESTS_KEY, pinnable_images
from .settings import Settings

FLEET_KEY = f"{NAMESPACE}:fleet"
_SECTION = re.compile(rf"^{NAMESPACE}:(?=[a-zA-Z])")
# A key a worker's problem names in its reason (`gke-gpu:monitoring.dcgm`): the worker's own.
_KEY_IN_REASON = re.compile(rf"(?<![\w.:/-]){NAMESPACE}:(?=[a-zA-Z])")


@dataclass(frozen=True)
class FleetWorker:
    """A worker, resolved: its name and the settings of its cluster (a whole gke-gpu stack)."""

    name: str
    settings: Settings


@dataclass(frozen=True)
class FleetQueue:
    """A team's queue on the manager and the workers it dispatches to, most preferred first."""

    team: str
    namespace: str
    pool: str
    workers: tuple[str, ...]
    # The pool is a GPUDirect pool on a worker it dispatches to: the manager also queues from the
    # team's GPUDirect namespace, where those workers run its GPUDirect Pods.
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


@dataclass(frozen=True)
class FleetSettings:
    workers: tuple[FleetWorker, ...]
    queues: tuple[FleetQueue, ...]
    dispatcher: str

    @property
    def worker_names(self) -> list[str]:
        return [w.name for w in self.workers]


def _worker_raw(worker: FleetWorkerConfig, manager_name: str) -> dict[str, Any]:
    raw: dict[str, Any] = {
        # The manager's Kueue reaches the worker's private IP endpoint from its own region.
        "cluster": {
            "mode": "standard",
            "name": f"{manager_name}-{worker.name}"[:40],
            "controlPlaneGlobalAccess": True,
            **worker.cluster,
        },
        "gpuPools": worker.gpu_pools,
        "batch": worker.batch,
    }
    if worker.network is not None:
        raw["network"] = worker.network
    if worker.monitoring is not None:
        raw["monitoring"] = worker.monitoring
    if worker.workloads is not None:
        raw["workloads"] = worker.workloads
    return raw


def _moved(problem: str, key: str) -> str:
    """A worker's problem, keyed under its entry in the fleet section."""
    path = getattr(problem, "path", None)
    reason = getattr(problem, "reason", None)
    if path is None or reason is None:
        return _KEY_IN_REASON.sub(f"{key}.", problem).replace("gcp:region", f"{key}.region")
    path = f"{key}.region" if path == "gcp:region" else _SECTION.sub(f"{key}.", path)
    return Problem(path, _KEY_IN_REASON.sub(f"{key}.", reason))


def check_manager(settings: Settings, problems: Problems) -> None:
    """The manager holds the queues and runs no GPU job: its Kueue is the fleet's."""
    if settings.cluster.mode == "existing":
        problems.add(
            f"{NAMESPACE}:cluster.mode",
            "existing is not allowed with gke-gpu:fleet; allowed: standard, autopilot",
        )
    if settings.gpu_pools:
        problems.add(
            f"{NAMESPACE}:gpuPools",
            f"{len(settings.gpu_pools)} pool(s) on the fleet's manager; it runs no GPU jobs: put GPU pools "
            "in gke-gpu:fleet.workers[].gpuPools",
        )
    if settings.batch.kueue:
        problems.add(
            f"{NAMESPACE}:batch.kueue",
            "true is not allowed with gke-gpu:fleet: the fleet installs the manager's Kueue itself; teams "
            "go in gke-gpu:fleet.teams",
        )
    if settings.workloads:
        problems.add(
            f"{NAMESPACE}:workloads",
            "not allowed on the fleet's manager (it has no GPUs); samples and all-reduce tests go in "
            "gke-gpu:fleet.workers[].workloads, jobs reach the workers through the teams' queues",
        )
    if settings.serving:
        problems.add(
            f"{NAMESPACE}:serving",
            "not allowed on the fleet's manager (it has no GPUs) nor in a worker; serve from a "
            "single-cluster stack",
        )


def fleet_settings(
    fleet: FleetConfig,
    manager: Settings | None,
    *,
    manager_name: str,
    project: str | None,
    catalog: Any = None,
) -> FleetSettings:
    """Check the fleet and resolve its workers; raise one ConfigError with every problem. `manager`:
    the stack's own settings, None where they failed their checks (reported there)."""
    from .config import parse_settings  # a worker is a stack file of its own: the same entry point

    problems = Problems()
    if manager is not None:
        check_manager(manager, problems)
        manager_name = manager.cluster.name or manager_name
    workers: dict[str, FleetWorker] = {}
    clusters: list[Settings] = []
    unresolved = False
    seen_clusters: dict[str, tuple[str, str | None]] = (
        {manager.cluster.name or "": ("the manager", manager.cluster.location)} if manager else {}
    )
    for i, worker in enumerate(fleet.workers):
        key = f"{FLEET_KEY}.workers[{i}]"
        if worker.name in workers or worker.name in [str(w.name) for w in fleet.workers[:i]]:
            problems.add(
                f"{key}.name",
                f"{cut(worker.name)} names two workers; a worker's name is its MultiKueueCluster's",
            )
            continue
        raw = _worker_raw(worker, manager_name)
        if worker.batch.get("kueue") is not True:
            problems.add(
                f"{key}.batch.kueue",
                f"{_shown(worker.batch.get('kueue'))} is not allowed; a worker admits the manager's jobs "
                "through its own Kueue: set kueue: true",
            )
            # The worker's other rules, as they would read it with Kueue on: independent problems.
            raw["batch"] = {**worker.batch, "kueue": True}
        try:
            resolved, _ = parse_settings(
                raw,
                project=project,
                region=worker.region,
                stack=manager.stack if manager else manager_name,
                catalog=catalog,
            )
        except ConfigError as exc:
            problems.items += [_moved(p, key) for p in exc.problems]
            unresolved = True
            continue
        if manager is not None:
            # gke-gpu:images pins the fleet's images: each component takes the digests of its own.
            resolved = dataclasses.replace(resolved, image_digests=dict(manager.image_digests))
        clusters.append(resolved)
        # By name alone: Managed Prometheus labels each series with its cluster's name only, and the
        # fleet's charts and alert tell the clusters apart by it (monitoring/fleet.py).
        name, location = resolved.cluster.name or "", resolved.cluster.location
        if name in seen_clusters:
            owner, at = seen_clusters[name]
            same = (
                f"is {owner}'s cluster" if at == location else f"is the name of {owner}'s cluster (in {at})"
            )
            problems.add(
                f"{key}.cluster.name",
                f"{cut(name)} in {location} {same}; a worker is a cluster of its own, named apart (Kueue "
                "does not run the manager as its own worker; the fleet's dashboard tells clusters apart "
                "by name)",
            )
            continue
        seen_clusters[name] = (f"worker {worker.name}", location)
        if manager is not None:
            _check_peerable(manager, resolved, key, problems)
        if resolved.cluster.mode != "standard":
            problems.add(
                f"{key}.cluster.mode",
                f"{resolved.cluster.mode} is not allowed for a worker; allowed: standard",
            )
            continue
        if worker.batch.get("kueue") is not True:
            continue
        workers[worker.name] = FleetWorker(worker.name, resolved)
    if manager is not None and manager.image_digests and not unresolved:
        _check_digests(manager, clusters, problems)
    queues = _team_queues(fleet, workers, {w.name for w in fleet.workers}, problems)
    if problems.items:
        raise ConfigError(problems.items)
    return FleetSettings(tuple(workers.values()), tuple(queues), fleet.dispatcher)


def _team_queues(
    fleet: FleetConfig, workers: dict[str, FleetWorker], declared: set[str], problems: Problems
) -> list[FleetQueue]:
    queues: list[FleetQueue] = []
    order = list(dict.fromkeys(str(w.name) for w in fleet.workers))
    seen_teams: set[str] = set()
    for i, team in enumerate(fleet.teams):
        key = f"{FLEET_KEY}.teams[{i}]"
        if team.name in seen_teams:
            problems.add(f"{key}.name", f"{cut(team.name)} names two teams")
            continue
        seen_teams.add(team.name)
        pools: set[str] = set()
        for j, queue in enumerate(team.queues):
            qkey = f"{key}.queues[{j}]"
            if queue.pool in pools:
                problems.add(f"{qkey}.pool", f"{cut(queue.pool)} is two queues of team {team.name}")
                continue
            pools.add(queue.pool)
            sharing = [
                name for name in order if name in workers and _share(workers[name], team.name, queue.pool)
            ]
            listed = queue.workers if queue.workers is not None else sharing
            if queue.workers is None and not sharing and len(workers) == len(declared):
                problems.add(
                    f"{qkey}.pool",
                    f"no worker gives team {team.name} a share of a pool {cut(queue.pool)}; workers: "
                    f"{listing(order)}",
                )
                continue
            chosen: list[str] = []
            for k, name in enumerate(listed):
                wkey = f"{qkey}.workers[{k}]"
                if name not in declared:
                    problems.add(wkey, f"{cut(name)} is not a worker; workers: {listing(order)}")
                elif name in chosen:
                    problems.add(wkey, f"{cut(name)} is listed twice")
                elif name in workers:
                    problem = _queue_problem(workers[name], team.name, team.namespace_name, queue.pool)
                    if problem:
                        problems.add(wkey, problem)
                    chosen.append(name)
            found = {w: p for w in chosen if (p := _pool_of(workers[w], queue.pool)) is not None}
            claiming = [w for w, p in found.items() if p.dra_gpus]
            if claiming:
                problems.add(
                    f"{qkey}.pool",
                    f"{cut(queue.pool)} is a draGpus pool on worker(s) {listing(claiming)}; a fleet team "
                    "queue cannot use it: MultiKueue dispatches the Job, not its ResourceClaimTemplate, "
                    "and the manager's Kueue maps no DeviceClass to nvidia.com/gpu, so a job claiming "
                    "gpu.nvidia.com is never admitted there; queue on a pool without draGpus, or submit "
                    "to the worker's own queue",
                )
            reachable = [
                w
                for w in chosen
                if _queue_problem(workers[w], team.name, team.namespace_name, queue.pool) is None
            ]
            if (
                reachable
                and len(reachable) == len(chosen)
                and not any(most_gpus(workers[w], team.name, queue.pool) for w in reachable)
            ):
                problems.add(
                    f"{qkey}.pool",
                    f"team {team.name} can hold no GPU of pool {cut(queue.pool)} on any of its workers (a "
                    "share of 0 and borrow: 0 on each): the queue could never admit a job",
                )
            gpudirect = any(p.gpudirect_flavor is not None for p in found.values())
            queues.append(FleetQueue(team.name, team.namespace_name, queue.pool, tuple(chosen), gpudirect))
    return queues


def most_gpus(worker: FleetWorker, team: str, pool_name: str) -> int:
    """The most GPUs of the worker's pool the team can hold at once: its share and what it may borrow
    (unset: every GPU of the pool)."""
    pool = next(p for p in worker.settings.gpu_pools if p.name == pool_name)
    share = next(t for t in worker.settings.batch.teams if t.name == team).pools[pool_name]
    whole = (pool.max_nodes or 0) * pool.schedulable_gpus_per_node
    return whole if share.borrow is None else min(whole, share.gpus + share.borrow)


def _check_digests(manager: Settings, workers: list[Settings], problems: Problems) -> None:
    """Each name in `gke-gpu:images.digests` is an image the manager or a worker runs privileged or as
    root by tag (the stack's own rule, over the whole fleet; its digests' form was checked there)."""
    rendered = [
        image
        for cluster in (manager, *workers)
        for image in pinnable_images(cluster.gpu_pools, cluster.monitoring, cluster.device_plugin is not None)
    ]
    well_formed = {name: digest for name, digest in manager.image_digests.items() if DIGEST.fullmatch(digest)}
    for problem in digest_problems(DIGESTS_KEY, well_formed, rendered):
        problems.add(problem.path, problem.reason)


_RANGES = (("subnet_cidr", "subnetCidr"), ("pods_cidr", "podsCidr"), ("services_cidr", "servicesCidr"))


def _ranges(settings: Settings) -> list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    network = settings.network
    if network is None or network.existing is not None:
        return []
    found = []
    for attribute, key in (*_RANGES, ("proxy_only_cidr", "proxyOnlyCidr")):
        value = getattr(network, attribute, None)
        if isinstance(value, str):
            found.append((key, ipaddress.ip_network(value, strict=False)))
    return found


def _check_peerable(manager: Settings, worker: Settings, key: str, problems: Problems) -> None:
    """The worker's VPC is peered with the manager's: no range of one may overlap one of the other
    (VPC Network Peering refuses overlapping subnet ranges)."""
    theirs = _ranges(manager)
    for name, mine in _ranges(worker):
        clash = next((k for k, r in theirs if r.overlaps(mine)), None)
        if clash:
            problems.add(
                f"{key}.network.{name}",
                f"{mine} overlaps the manager's {NAMESPACE}:network.{clash}; the fleet peers each worker's "
                "VPC with the manager's, which needs ranges apart",
            )


def _shown(value: Any) -> str:
    return "unset" if value is None else cut(str(value))


def _pool_of(worker: FleetWorker, pool: str) -> Any:
    """The worker's pool of that name, None where it has none."""
    return next((p for p in worker.settings.gpu_pools if p.name == pool), None)


def _share(worker: FleetWorker, team: str, pool: str) -> bool:
    return any(t.name == team and pool in t.pools for t in worker.settings.batch.teams)


def _queue_problem(worker: FleetWorker, team: str, namespace: str, pool: str) -> str | None:
    """Why the worker has no LocalQueue the manager's queue could dispatch to, if it has none."""
    found = next((t for t in worker.settings.batch.teams if t.name == team), None)
    local = queue_name(pool)
    if found is None or pool not in found.pools:
        return (
            f"worker {worker.name} has no queue {local} for team {team}: give the team a share of its "
            f"pool {cut(pool)} in workers[].batch.teams (its pools: "
            f"{listing(p.name for p in worker.settings.gpu_pools)})"
        )
    if found.namespace_name != namespace:
        return (
            f"worker {worker.name} puts team {team}'s queue in namespace {found.namespace_name}, the "
            f"manager in {namespace}; MultiKueue creates the job in the same namespace on the worker"
        )
    return None
