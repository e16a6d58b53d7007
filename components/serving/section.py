"""The stack file's serving section (`gke-gpu:serving`): which pool serves each model, and what this
release builds of the serving contract (scale to zero is refused with the reason, not ignored). The
rules themselves are serving/pool_rules.py's and serving/fit.py's (the latter shared with
InferenceService); this loops over the entries and their pools, and checks what spans sections (names,
a cluster that can take a server)."""

from __future__ import annotations

from collections.abc import Sequence

from ..cluster.model import ClusterConfig
from ..core.common import NAMESPACE, KeyNames, cut
from ..core.section import SectionContext
from ..gpu.pool import GpuPool
from .fit import check_model
from .model import ServingConfig
from .pd_pool_rules import check_disaggregated_on_pool, role_entries
from .pd_rules import check_disaggregation
from .pool_rules import (
    Entry,
    check_availability,
    check_capacity,
    check_hyperdisk_ml,
    check_model_on_pool,
    check_pool,
    check_scaling,
    check_weights_cache,
    note_rollouts,
)
from .rules import check_model_server, weights_source

KEY = f"{NAMESPACE}:serving"


def check_serving(
    services: Sequence[tuple[int, ServingConfig]],
    cluster: ClusterConfig,
    pools: Sequence[GpuPool],
    ctx: SectionContext,
) -> tuple[ServingConfig, ...]:
    """The serving section (`services`: the shape-valid entries with their index), each on its pool."""
    if not services:
        return ()
    if cluster.mode == "existing":
        ctx.problems.add(
            KEY,
            "not allowed with cluster.mode existing: a service needs the Cloud Storage FUSE driver and "
            "Google Managed Prometheus of a cluster this program manages",
        )
        return ()
    autopilot = cluster.mode == "autopilot"
    by_name = {p.name: p for p in pools}
    seen: dict[str, int] = {}
    sized: list[Entry] = []  # GPUs the pool's nodes can hold: counted below
    for i, service in services:
        key = f"{KEY}[{i}]"
        names = KeyNames(key, camel=True)
        if service.name in seen:
            ctx.problems.add(
                f"{key}.name", f"{cut(service.name)} is also serving[{seen[service.name]}]'s name"
            )
        seen.setdefault(service.name, i)
        check_model_server(service, names, ctx.problems)
        if service.disaggregation is not None:
            sized += _disaggregated(service, names, by_name, ctx, autopilot=autopilot)
            continue
        check_scaling(service, names, ctx.problems)
        # Expert parallel without disaggregation is refused there (the roles it needs).
        check_disaggregation(service, names, ctx.problems, gpus_per_node=None, set_fields=set())
        if ctx.unknown_pool(f"{key}.pool", service.pool, by_name):
            if weights_source(service.model):
                check_model(service, None, names, ctx.problems, ctx.notes)
            continue
        pool = by_name[service.pool]
        if weights_source(service.model):
            check_model_on_pool(service, pool, names, ctx.problems, ctx.notes, autopilot=autopilot)
        if check_pool(service, pool, names, ctx.problems, ctx.notes, autopilot=autopilot):
            sized.append((names, service))
            check_weights_cache(service, pool, names, ctx.problems)
        if service.weights.via == "hyperdiskMl" and weights_source(service.model) == "gcs":
            check_hyperdisk_ml(pool, names, ctx.problems, ctx.notes, autopilot=autopilot)
        check_availability(service, pool, names, ctx.notes)
    for pool in by_name.values():
        check_capacity(sized, pool, ctx.problems)
        note_rollouts(sized, pool, ctx.notes)
    return tuple(service for _, service in services)


def _disaggregated(
    service: ServingConfig,
    names: KeyNames,
    by_name: dict[str, GpuPool],
    ctx: SectionContext,
    *,
    autopilot: bool,
) -> list[Entry]:
    """A disaggregated service's rules (serving/pd_pool_rules.py); its roles, for the pool's capacity."""
    key = names.prefix
    if ctx.unknown_pool(f"{key}.pool", service.pool, by_name):
        check_disaggregated_on_pool(service, None, names, ctx.problems, ctx.notes, autopilot=autopilot)
        return []
    pool = by_name[service.pool]
    layouts = check_disaggregated_on_pool(service, pool, names, ctx.problems, ctx.notes, autopilot=autopilot)
    if layouts is None:
        return []
    if service.weights.via == "hyperdiskMl" and weights_source(service.model) == "gcs":
        check_hyperdisk_ml(pool, names, ctx.problems, ctx.notes, autopilot=autopilot)
    entries = role_entries(service, layouts, names)
    for role_keys, view in entries:
        check_availability(view, pool, role_keys, ctx.notes)
    return entries
