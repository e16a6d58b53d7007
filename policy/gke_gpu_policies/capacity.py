"""Stack guardrails on GPU capacity: the GPUs a stack's node pools can scale to stay within a budget,
and a production stack keeps on-demand GPU capacity.

`pool_gpus` works out what one GPU node pool can scale to (its autoscaling maximum or fixed size,
times its zones and its GPUs per node), or why that is not known. The same conventions as `rules`
(camelCase props, UNKNOWN never a violation, every message names its resource and ends with the
policy name in brackets); `rules` adds these to `POLICIES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from pulumi_policy import PolicyConfigSchema, PolicyResource, ReportViolation, StackValidationArgs

from .base import PROD_PATTERN_PROPERTY, _effective, _prod_match, _report, _setting
from .constants import CLUSTER, NODE_POOL
from .props import UNKNOWN, as_int, get, items, stack_of
from .shared import gpu_accelerators

# Policy names (IDs in `pulumi preview` output and keys of the pack config).
GPU_BUDGET = "gpu-total-budget"
PROD_NOT_ALL_SPOT = "prod-gpu-not-all-spot"

# GKE spreads a regional cluster's nodes over three zones unless nodeLocations says otherwise.
GKE_DEFAULT_REGIONAL_ZONES = 3
_ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")

BUDGET_SCHEMA = PolicyConfigSchema(
    properties={
        "maxTotalGpus": {
            "type": "integer",
            "minimum": 0,
            "default": 64,
            "description": "Most physical GPUs a stack's GPU node pools may scale to, summed over pools.",
        }
    }
)
PROD_SPOT_SCHEMA = PolicyConfigSchema(
    properties={
        "prodStackPattern": PROD_PATTERN_PROPERTY,
        "allowAllSpot": {
            "type": "boolean",
            "default": False,
            "description": "Allow a production stack whose GPU node pools are all Spot/preemptible.",
        },
    }
)


class PoolGpus(NamedTuple):
    """What one GPU node pool can scale to: nodes x GPUs per node, or why that is not known."""

    name: str
    urn: str
    max_nodes: int | None
    gpus_per_node: int | None
    note: str = ""

    @property
    def total(self) -> int | None:
        if self.max_nodes is None or self.gpus_per_node is None:
            return None
        return self.max_nodes * self.gpus_per_node


def _zone_count(pool: Any, clusters: Mapping[str, Any]) -> int | None:
    """How many zones a node pool spans, None when that is not known."""
    locations = items(get(pool, "nodeLocations"))
    if locations is UNKNOWN:
        return None
    if locations:
        return len(locations)
    cluster = clusters.get(get(pool, "cluster")) if isinstance(get(pool, "cluster"), str) else None
    location = get(pool, "location")
    if location is None and cluster is not None:
        location = get(cluster, "location")
    if not isinstance(location, str):
        return None
    cluster_locations = items(get(cluster, "nodeLocations")) if cluster is not None else None
    if cluster_locations is UNKNOWN:
        return None
    zonal = _ZONE.fullmatch(location) is not None
    if cluster_locations:
        # A zonal cluster's nodeLocations lists its other zones; a regional one's lists them all.
        return len(cluster_locations) + (1 if zonal and location not in cluster_locations else 0)
    return 1 if zonal else GKE_DEFAULT_REGIONAL_ZONES


def pool_gpus(resource: PolicyResource, clusters: Mapping[str, Any]) -> PoolGpus:
    """The most GPUs a GPU node pool can hold (its autoscaling max, or its fixed size)."""
    props = resource.props
    accelerators = gpu_accelerators(props)
    per_node: int | None = None
    if accelerators is not UNKNOWN:
        per_node = 0
        for accelerator in accelerators or []:
            count = as_int(get(accelerator, "count"))
            if count is None or count is UNKNOWN:
                per_node = None
                break
            per_node += count
    autoscaling = get(props, "autoscaling")
    if autoscaling is UNKNOWN:
        return PoolGpus(resource.name, resource.urn, None, per_node, "autoscaling not known yet")
    if autoscaling is not None:
        # Inputs set one of the two maxima; the provider's state (a stack policy's props after an
        # update) carries both, the unused one as 0.
        total_max, per_zone = (
            as_int(get(autoscaling, "totalMaxNodeCount")),
            as_int(get(autoscaling, "maxNodeCount")),
        )
        zones = _zone_count(props, clusters)
        if isinstance(total_max, int) and (total_max > 0 or not isinstance(per_zone, int) or per_zone == 0):
            return PoolGpus(resource.name, resource.urn, total_max, per_node)
        if isinstance(per_zone, int) and zones is not None:
            return PoolGpus(
                resource.name, resource.urn, per_zone * zones, per_node, f"{per_zone}/zone x {zones}"
            )
        return PoolGpus(resource.name, resource.urn, None, per_node, "no known autoscaling maximum")
    # Fixed size: nodeCount (or initialNodeCount) nodes in each zone.
    per_zone = as_int(get(props, "nodeCount"))
    if per_zone is None:
        per_zone = as_int(get(props, "initialNodeCount"))
    zones = _zone_count(props, clusters)
    if isinstance(per_zone, int) and zones is not None:
        return PoolGpus(
            resource.name, resource.urn, per_zone * zones, per_node, f"fixed {per_zone}/zone x {zones}"
        )
    return PoolGpus(resource.name, resource.urn, None, per_node, "size not known")


def _gpu_pools(resources: Iterable[PolicyResource]) -> tuple[list[PolicyResource], list[PolicyResource]]:
    """(GPU node pools, node pools whose accelerators are not known yet and may be GPU pools)."""
    gpu, maybe = [], []
    for r in resources:
        if r.resource_type == NODE_POOL:
            accelerators = gpu_accelerators(r.props)
            if accelerators is UNKNOWN:
                maybe.append(r)
            elif accelerators is not None:
                gpu.append(r)
    return gpu, maybe


def _clusters_by_name(resources: Iterable[PolicyResource]) -> dict[str, Any]:
    clusters = {}
    for r in resources:
        name = get(r.props, "name")
        if r.resource_type == CLUSTER and isinstance(name, str):
            clusters[name] = r.props
    return clusters


def _stack_name(resources: Iterable[PolicyResource]) -> str | None:
    for r in resources:
        return stack_of(r.urn)
    return stack_of("")


def validate_gpu_budget(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """The GPUs a stack's GPU node pools can scale to (max nodes x GPUs per node) stay within budget."""
    budget = _setting(args.get_config(), BUDGET_SCHEMA, "maxTotalGpus")
    clusters = _clusters_by_name(args.resources)
    gpu_pools, maybe_gpu_pools = _gpu_pools(args.resources)
    pools = [pool_gpus(r, clusters) for r in gpu_pools]
    known = [p for p in pools if p.total is not None]
    total = sum(p.total or 0 for p in known)
    # A known lower bound over the budget is a violation; otherwise unknown pools mean "cannot check".
    if total <= budget:
        return
    breakdown = "; ".join(
        f"{p.name}: {p.max_nodes} nodes x {p.gpus_per_node} GPU = {p.total}"
        + (f" ({p.note})" if p.note else "")
        for p in known
    )
    unknown = [f"{p.name} ({p.note or 'GPUs per node not known'})" for p in pools if p.total is None]
    unknown += [f"{r.name} (accelerators not known)" for r in maybe_gpu_pools]
    tail = f"; not counted: {', '.join(unknown)}" if unknown else ""
    stack = _stack_name(args.resources) or "?"
    _report(
        report_violation,
        GPU_BUDGET,
        f"stack {stack!r}",
        f"GPU node pools can scale to {total} GPUs{' at least' if unknown else ''}, over the budget of "
        f"{budget:g} (config maxTotalGpus): {breakdown}{tail}",
    )


def validate_prod_not_all_spot(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """A production stack keeps at least one on-demand GPU node pool, unless allowAllSpot."""
    config = args.get_config()
    stack = _stack_name(args.resources)
    prod = _prod_match(stack, config, PROD_SPOT_SCHEMA)
    if isinstance(prod, str):
        _report(report_violation, PROD_NOT_ALL_SPOT, f"stack {stack!r}", prod)
        return
    if not prod or _setting(config, PROD_SPOT_SCHEMA, "allowAllSpot") is True:
        return
    pools, maybe_gpu_pools = _gpu_pools(args.resources)
    if not pools or maybe_gpu_pools:
        return  # no GPU pool, or one that may be an on-demand GPU pool
    for pool in pools:
        spot = _effective(get(pool.props, "nodeConfig"), "spot")
        preemptible = _effective(get(pool.props, "nodeConfig"), "preemptible")
        if spot is UNKNOWN or preemptible is UNKNOWN:
            return
        if spot is not True and preemptible is not True:
            return
    _report(
        report_violation,
        PROD_NOT_ALL_SPOT,
        f"stack {stack!r}",
        f"every GPU node pool is Spot/preemptible ({', '.join(p.name for p in pools)}): a production stack "
        "needs on-demand (or reserved) GPU capacity that preemption cannot take away; add one, or set "
        "allowAllSpot: true for this policy",
    )
