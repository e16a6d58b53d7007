"""The fleet section (`gke-gpu:fleet`), loaded: each worker's own sections checked by a single-cluster
stack's rules (stack/sections.py `resolve`, keyed under the worker: a worker is a stack file's sections),
then the fleet's rules (fleet/rules.py, fleet/section.py) over what they resolved, then the fleet's plan
(fleet/plan.py). Nothing is declared here."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..core.catalog import Catalog, load_catalog
from ..core.common import NAMESPACE, ConfigError, Problems
from ..core.image_digests import DIGEST, check_digests
from ..fleet.model import FleetConfig, FleetWorkerConfig
from ..fleet.plan import plan_fleet
from ..fleet.rules import (
    ResolvedWorker,
    check_fleet_members,
    check_fleet_workers,
    check_peering,
    check_worker_clusters,
    fleet_queues,
    worker_sections,
)
from ..fleet.section import FLEET_KEY, check_manager, idle_worker_notes, token_note
from .first_pass import validate_shape
from .images_section import DIGESTS_KEY, pinnable_images
from .sections import Place, resolve
from .settings import FleetSettings, FleetWorker, Settings


def resolve_sections(
    sections: Mapping[str, Any], place: Place, catalog: Catalog | None
) -> tuple[Settings, list[str]]:
    """One set of a stack file's sections found elsewhere in it (a fleet worker's, under
    `gke-gpu:fleet.workers[i]`): the same shape pass and rules as a stack file's, every problem and note
    keyed where the user wrote it (`place.root_loc`); the region is the worker's own key."""
    shape = validate_shape(sections, place.root_loc)
    if shape.config is None:
        raise ConfigError(shape.problems)
    try:
        settings, notes = resolve(shape.config, shape.broken, place, catalog or load_catalog())
    except ConfigError as exc:
        raise ConfigError([*shape.problems, *exc.problems]) from None
    if shape.problems:
        raise ConfigError(shape.problems)
    return settings, notes


def fleet_settings(
    fleet: FleetConfig,
    manager: Settings | None,
    *,
    manager_name: str,
    project: str | None,
    catalog: Catalog | None = None,
) -> tuple[FleetSettings, list[str]]:
    """Check the fleet and resolve its workers; return them with the workers' notes, or raise one
    ConfigError with every problem. `manager`: the stack's own settings, None where they failed their
    checks (reported there)."""
    problems = Problems()
    notes: list[str] = []
    if manager is not None:
        check_manager(
            manager.cluster,
            manager.gpu_pools,
            manager.batch,
            problems,
            workloads=manager.workloads,
            serving=manager.serving,
        )
        manager_name = manager.cluster.name or manager_name
    skipped = check_fleet_workers(fleet, FLEET_KEY, project, problems)
    security = f"{NAMESPACE}:cluster.rbacSecurityGroup"
    check_fleet_members(fleet, FLEET_KEY, manager.cluster if manager else None, security, problems)
    loaded: list[FleetWorker] = []
    unresolved = False
    for i, worker in enumerate(fleet.workers):
        if i in skipped:
            continue
        key = f"{FLEET_KEY}.workers[{i}]"
        place = Place(
            project=worker.project or project,
            region=worker.region,
            stack=manager.stack if manager else manager_name,
            root_loc=("fleet", "workers", i),
            project_key=f"{key}.project" if worker.project else "gcp:project",
        )
        try:
            sections = worker_sections(worker, manager_name, manager.network if manager else None)
            settings, worker_notes = resolve_sections(sections, place, catalog)
        except ConfigError as exc:
            problems.items += [p for p in exc.problems if p not in problems.items]
            unresolved = True
            continue
        notes += worker_notes
        if (note := token_note(worker, key)) is not None:
            notes.append(note)
        if manager is not None:
            # gke-gpu:images pins the fleet's images: each component takes the digests of its own.
            settings = dataclasses.replace(settings, image_digests=dict(manager.image_digests))
        loaded.append(FleetWorker(settings, _resolved(worker, i, settings, project)))
    kept_names = {
        w.name
        for w in check_worker_clusters([w.resolved for w in loaded], _place(manager), FLEET_KEY, problems)
    }
    kept = [w for w in loaded if w.name in kept_names]
    for each in kept:
        if manager is not None:
            check_peering(manager.network, f"{NAMESPACE}:network", each.resolved, FLEET_KEY, problems)
    if manager is not None and manager.image_digests and not unresolved:
        _check_digests(manager, [w.settings for w in loaded], problems)
    # A worker without Kueue (reported) is checked as if it had it, but no queue reaches it.
    queued = {w.name: w.resolved for w in kept if fleet.workers[w.resolved.index].batch.get("kueue") is True}
    queues = fleet_queues(fleet, queued, [str(w.name) for w in fleet.workers], FLEET_KEY, problems)
    if problems.items:
        raise ConfigError(problems.items)
    plan = plan_fleet(fleet, [w.resolved for w in kept], queues)
    return FleetSettings(tuple(kept), plan), [*notes, *idle_worker_notes(plan)]


def _place(manager: Settings | None) -> tuple[str, str | None] | None:
    return (manager.cluster.name or "", manager.cluster.location) if manager is not None else None


def _resolved(
    worker: FleetWorkerConfig, index: int, settings: Settings, project: str | None
) -> ResolvedWorker:
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
    check_digests(DIGESTS_KEY, well_formed, rendered, problems)
