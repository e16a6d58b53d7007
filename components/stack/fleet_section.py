"""The fleet section (`gke-gpu:fleet`), loaded: each worker's own sections checked by a single-cluster
stack's rules (`resolve`, the stack file's entry point for a set of sections, keyed under the worker),
then the fleet's rules (fleet/rules.py) over what they resolved, then the fleet's plan (fleet/plan.py).
What the manager (the stack's own cluster) may hold, and the image digests the whole fleet shares, are
checked here. Nothing is declared here."""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from ..core.catalog import Catalog
from ..core.common import NAMESPACE, ConfigError, Problems
from ..core.image_digests import DIGEST, digest_problems
from ..fleet.model import FleetConfig
from ..fleet.plan import plan_fleet
from ..fleet.rules import (
    ResolvedWorker,
    cluster_problems,
    config_problems,
    fleet_queues,
    peering_problems,
    worker_sections,
)
from .images_section import DIGESTS_KEY, pinnable_images
from .settings import FleetSettings, FleetWorker, Settings

FLEET_KEY = f"{NAMESPACE}:fleet"


class WorkerResolver(Protocol):
    """The stack file's rules over one set of sections, keyed under `root_loc` (stack/config.py
    `resolve_sections`): the worker's settings and notes, or ConfigError."""

    def __call__(
        self,
        sections: dict[str, Any],
        *,
        root_loc: tuple[Any, ...],
        project: str | None,
        project_key: str,
        region: str,
        stack: str,
        catalog: Catalog | None,
    ) -> tuple[Settings, list[str]]: ...


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
    resolve: WorkerResolver,
    catalog: Catalog | None = None,
) -> tuple[FleetSettings, list[str]]:
    """Check the fleet and resolve its workers; return them with the workers' notes, or raise one
    ConfigError with every problem. `manager`: the stack's own settings, None where they failed their
    checks (reported there)."""
    problems = Problems()
    notes: list[str] = []
    if manager is not None:
        check_manager(manager, problems)
        manager_name = manager.cluster.name or manager_name
    skipped = config_problems(fleet, FLEET_KEY, project, problems)
    loaded: list[FleetWorker] = []
    unresolved = False
    for i, worker in enumerate(fleet.workers):
        if i in skipped:
            continue
        key = f"{FLEET_KEY}.workers[{i}]"
        try:
            settings, worker_notes = resolve(
                worker_sections(worker, manager_name),
                root_loc=("fleet", "workers", i),
                project=worker.project or project,
                project_key=f"{key}.project" if worker.project else "gcp:project",
                region=worker.region,
                stack=manager.stack if manager else manager_name,
                catalog=catalog,
            )
        except ConfigError as exc:
            problems.items += [p for p in exc.problems if p not in problems.items]
            unresolved = True
            continue
        notes += worker_notes
        if worker.access == "token":
            notes.append(
                f"note: {key}.access: token: the manager reaches worker {worker.name} with a ServiceAccount "
                "token you create (short-lived: `kubectl create token --duration`) and store in the "
                f"manager's Secret kueue-system/multikueue-{worker.name}; the program holds none, so the "
                "worker stays inactive until the Secret exists, and again once the token expires "
                "(outputs fleet.workers[].access has the commands; docs/fleet.md)"
            )
        if manager is not None:
            # gke-gpu:images pins the fleet's images: each component takes the digests of its own.
            settings = dataclasses.replace(settings, image_digests=dict(manager.image_digests))
        loaded.append(FleetWorker(settings, _resolved(worker, i, settings, project)))
    kept_names = {
        w.name for w in cluster_problems([w.resolved for w in loaded], _place(manager), FLEET_KEY, problems)
    }
    kept = [w for w in loaded if w.name in kept_names]
    for each in kept:
        if manager is not None:
            peering_problems(manager.network, f"{NAMESPACE}:network", each.resolved, FLEET_KEY, problems)
    if manager is not None and manager.image_digests and not unresolved:
        _check_digests(manager, [w.settings for w in loaded], problems)
    # A worker without Kueue (reported) is checked as if it had it, but no queue reaches it.
    queued = {w.name: w.resolved for w in kept if fleet.workers[w.resolved.index].batch.get("kueue") is True}
    queues = fleet_queues(fleet, queued, [str(w.name) for w in fleet.workers], FLEET_KEY, problems)
    if problems.items:
        raise ConfigError(problems.items)
    plan = plan_fleet(fleet, [w.resolved for w in kept], queues)
    for each in kept:
        if not plan.job_namespaces(each.name):
            notes.append(
                f"note: {FLEET_KEY}.workers[{each.resolved.index}]: no team queue of the fleet dispatches to "
                f"worker {each.name}: the manager sends it no job (its own queues still take jobs "
                "submitted there)"
            )
    return FleetSettings(tuple(kept), plan), notes


def _place(manager: Settings | None) -> tuple[str, str | None] | None:
    return (manager.cluster.name or "", manager.cluster.location) if manager is not None else None


def _resolved(worker: Any, index: int, settings: Settings, project: str | None) -> ResolvedWorker:
    return ResolvedWorker(
        name=worker.name,
        index=index,
        region=worker.region,
        project=worker.project or project,
        access=worker.access,
        cluster=settings.cluster,
        network=settings.network,
        pools=settings.gpu_pools,
        batch=settings.batch,
        pods_ready_timeout_minutes=worker.pods_ready_timeout_minutes,
    )


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
