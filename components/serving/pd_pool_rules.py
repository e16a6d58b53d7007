"""A disaggregated service on its GPU pool (the stack file's `serving[i]` with `disaggregation`): its
roles' shape (pd_rules.py), what the pool must offer each role's Pods (pool_rules.check_pool, on a
view of the service as one role's Pod), the KV cache's path over the pool's GPU NICs, the model's fit
on each role (pd_fit.py), and the roles as the pool's capacity and rollout rules count them. The
serving section (serving/section.py) and InferenceService's checks call this; every message names the
key to change.

The gateway is required: decode's routing sidecar learns which prefill Pod to use from the endpoint
picker's `x-prefiller-host-port` header, and nothing else sets it (llm-d v0.9.0
docs/architecture/advanced/disaggregation/README.md, "Routing Proxy Sidecar")."""

from __future__ import annotations

from ..core.common import KeyNames, Problems, cut
from ..gpu.pool import GpuPool
from .fit import check_model, note_unchecked
from .gpu_nics import NODE_GPUS, GpuNicsSpec
from .model import ServingConfig
from .pd_fit import check_roles_fit, role_names
from .pd_rules import RoleLayout, check_disaggregation, check_kv_transport, role_key
from .pool_rules import (
    Entry,
    check_pool,
    check_stranded,
    check_weights_cache,
    nodes_per_replica,
    pool_replica,
)
from .role_views import role_view


def pool_gpu_nics(pool: GpuPool) -> GpuNicsSpec | None:
    """The pool's GPUDirect RDMA NICs, as InferenceService's `gpu_nics` takes them; None without."""
    flavor = pool.gpudirect_flavor
    if flavor is None or flavor not in NODE_GPUS:
        return None
    return GpuNicsSpec.model_validate(
        {"flavor": str(flavor), "networking": "dranet" if pool.dranet else "multiNetwork"}
    )


def uses_pool_nics(service: ServingConfig, pool: GpuPool) -> bool:
    """Whether the service's Pods get the pool's GPU NICs (InferenceService's `gpu_nics`, used): a
    disaggregated service's whose KV cache travels over RDMA, a replica's over several nodes; the
    admission policies admit its namespace to them (workloads/batch_plan.py)."""
    if pool_gpu_nics(pool) is None:
        return False
    disaggregation = service.disaggregation
    if disaggregation is not None:
        return disaggregation.kv_transport == "rdma"
    return nodes_per_replica(service, pool) > 1


def role_entries(service: ServingConfig, layouts: list[RoleLayout], names: KeyNames) -> list[Entry]:
    """The roles (as check_disaggregated_on_pool laid them out) as the pool's capacity and rollout
    rules count them (whole replicas), each keyed to its role."""
    return [(role_names(names, layout.role), role_view(service, layout, whole=True)) for layout in layouts]


def _nics_why(pool: GpuPool) -> str:
    flavor = pool.gpudirect_flavor
    if not pool.gpudirect:
        return f"pool {pool.name} has no gpudirect"
    return f"pool {pool.name}'s GPUDirect is {flavor}, whose NICs NCCL's plugin uses, not NIXL's UCX"


def check_disaggregated_on_pool(
    service: ServingConfig,
    pool: GpuPool | None,
    names: KeyNames,
    problems: Problems,
    notes: list[str],
    *,
    autopilot: bool,
) -> list[RoleLayout] | None:
    """Every rule of a disaggregated service (`pool`: None where the pool is not known, then only what
    needs no pool); its roles' layouts when they are sound enough for the pool's capacity rules to
    count them (role_entries), else None."""
    if "replicas" in service.model_fields_set:
        problems.add(
            names.at("replicas"),
            "not allowed with disaggregation: each role's replicas are fixed "
            f"({names.key(role_key('prefill', 'replicas'))}, {names.key(role_key('decode', 'replicas'))})",
        )
    if not service.gateway:
        problems.add(
            names.at("gateway"),
            "required with disaggregation: the Inference Gateway's endpoint picker chooses the prefill Pod "
            "and tells decode's routing sidecar (x-prefiller-host-port); without it no request is "
            "disaggregated",
        )
    layouts = check_disaggregation(
        service,
        names,
        problems,
        gpus_per_node=pool.gpus_per_node if pool else None,
        set_fields=service.model_fields_set,
    )
    if pool is None:
        if layouts:
            facts = check_model(service, None, names, problems, notes)
            if facts is not None:
                check_roles_fit(service, facts, layouts, None, names, problems, notes, gpus_per_node=None)
        return None
    if not layouts:
        return None
    sound = True
    found, noted = Problems(), list[str]()
    for layout in layouts:
        view = role_view(service, layout, whole=False)
        if autopilot and layout.nodes > 1:
            problems.add(
                names.at(role_key(layout.role)),
                f"{layout.gpus} spans nodes: an expert-parallel replica over several nodes (a "
                "LeaderWorkerSet) is built on Standard pools only",
            )
            sound = False
        # What the pool offers a Pod, once for the two roles where it is about the pool.
        sound &= check_pool(view, pool, role_names(names, layout.role), found, noted, autopilot=autopilot)
    problems.items += list(dict.fromkeys(found.items))
    notes += list(dict.fromkeys(noted))
    smallest = min(layouts, key=lambda layout: layout.gpus_per_pod)
    check_weights_cache(role_view(service, smallest, whole=False), pool, names, problems)
    check_kv_transport(
        service,
        layouts,
        pool_gpu_nics(pool),
        names,
        problems,
        notes,
        no_nics=f"{_nics_why(pool)}; serve from a pool with gpudirect on A3 Ultra, A4, A4X or A4X Max "
        f"({cut(pool.name)} is {pool.machine_type or pool.accelerator}), or set "
        f"{names.key('disaggregation.kv_transport')}: tcp",
        whole_node_fix=f"gpudirectNetworking: dranet on pool {pool.name}",
    )
    replica = pool_replica(role_view(service, smallest, whole=False), pool)
    facts = check_model(
        service,
        None,
        names,
        problems,
        notes,
        download_gib=replica.download_gib,
        download_fix=replica.download_fix,
    )
    for layout in layouts:
        # A replica of fewer GPUs than a node strands the rest (pool_rules.check_stranded).
        check_stranded(
            role_view(service, layout, whole=False),
            pool,
            facts,
            role_names(names, layout.role),
            problems,
            autopilot=autopilot,
        )
    if facts is not None:
        accelerator = None if replica.tensor_parallel is None else replica.accelerator
        check_roles_fit(
            service, facts, layouts, accelerator, names, problems, notes, gpus_per_node=pool.gpus_per_node
        )
        note_unchecked(facts, service, replica, names, notes)
    return layouts if sound else None
