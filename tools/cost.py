"""GPU cost estimate for a render document: what the stack's GPU pools cost, idle and at full scale.

`estimate(document)` reads a render document (`tools/plan.to_document`) and the price table in
``components/data/prices.yaml`` (`tools/prices.py`) and returns plain data plus `table`, the lines the
tree view prints (`tools/cost_table.py`).
Per GPU pool (``outputs.gpuPools``, the one input used for every pool): GPUs at min and max nodes, and
the hourly and monthly (730 h) cost at min and at max, both on-demand and Spot; ``expected`` names the
column the pool really pays (Spot for Spot pools). Then the GKE management fee and the totals.

Prices are list prices for the VM with its GPUs (N1: the VM plus one price per attached GPU); disks,
Local SSD, network and discounts are not in them. Nothing is ever guessed: a price the table does not
have, or has as null, makes that figure ``"n/a"`` with the reason; a region the table does not have
makes the whole estimate an error that names the region and the regions it has, with no figures.

Autopilot profiles have no node pool: GPU nodes exist only while a Pod asks for a GPU, so they cost
nothing at min, and have no upper bound. Their per Pod-hour figure is the VM price of the machine the
catalog picks for the accelerator and GPU count (``defaultMachineTypes``), plus an Autopilot premium that
the price table does not have: a lower bound.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gke_gpu.core.catalog import Catalog, load_catalog
from tools.cost_table import format_table
from tools.prices import (
    COLUMNS,
    HOURS_PER_MONTH,
    NA,
    ON_DEMAND,
    SPOT,
    Figure,
    PriceTable,
    _count,
    _hourly,
    _monthly,
    _sum,
    _times,
    _unique,
    load_prices,
    pool_node_price,
)

FORMAT = "gke-gpu-cost/v1"
_ZONE = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")


# --------------------------------------------------------------------------------------------------
# One pool.


def _pool_estimate(
    pool: Mapping[str, Any], *, table: PriceTable, catalog: Catalog, region: str
) -> dict[str, Any]:
    name = str(pool.get("name"))
    accelerator = str(pool.get("accelerator"))
    gpus_per_node = int(pool.get("gpusPerNode") or 0)
    autopilot = pool.get("kind") == "autopilot-profile"
    spot = bool(pool.get("spot"))
    expected = SPOT if spot else ON_DEMAND
    notes: list[str] = []
    reasons: dict[str, str] = {}

    if autopilot:
        spec = catalog.accelerator(accelerator)
        machine = spec.default_machine_types.get(gpus_per_node) if spec else None
        nodes_min: int | str = 0
        nodes_max: int | str = NA
        reasons["atMax"] = "no upper bound: Autopilot creates a GPU node for each GPU Pod, up to your quota"
        if machine:
            notes.append(
                f"Autopilot: no GPU node while no Pod asks for one; a Pod with {gpus_per_node} x "
                f"{accelerator} pays for its node: the VM price of {machine} (the catalog's default; "
                "Autopilot may pick another size for the Pod's CPU and memory requests) plus an "
                "Autopilot premium that the price table does not have"
            )
        if pool.get("onDemandFallback") and spot:
            notes.append(
                "falls back to on-demand when Spot capacity is out: then the on-demand column applies"
            )
    else:
        machine = pool.get("machineType")
        nodes_min = int(pool.get("minNodes") or 0)
        max_nodes = pool.get("maxNodes")
        nodes_max = int(max_nodes) if max_nodes is not None else NA
        if max_nodes is None:
            reasons["atMax"] = "the pool has no maxNodes"

    price = pool_node_price(table, region, pool, machine)
    ladder = pool.get("capacityLadder")
    if ladder:
        expected = SPOT if ladder[0] == SPOT else ON_DEMAND
        notes.append(
            f"capacity ladder {' -> '.join(ladder)}: GKE tries the steps in order, so a node costs what "
            "its step costs (a reservation is billed whether used or not, flex-start at Dynamic Workload "
            "Scheduler prices, Spot less); maxNodes is not enforced by the ComputeClass"
        )
    reasons.update(price.reasons)
    notes.extend(price.notes)
    if pool.get("migPartitionSize") or pool.get("sharing"):
        notes.append(
            f"{pool.get('schedulableGpusPerNode', gpus_per_node)} schedulable nvidia.com/gpu per node "
            f"({pool.get('migPartitionSize') or 'shared'}); the bill counts physical GPUs"
        )

    def gpus(nodes: int | str) -> int | str:
        return nodes * gpus_per_node if isinstance(nodes, int) else NA

    hourly = {
        at: {c: _times(nodes, price.hourly[c]) for c in COLUMNS}
        for at, nodes in (("atMin", nodes_min), ("atMax", nodes_max))
    }
    for figures in hourly.values():
        figures["expected"] = figures[expected]
    monthly = {at: {c: _monthly(v) for c, v in figures.items()} for at, figures in hourly.items()}
    entry: dict[str, Any] = {
        "name": name,
        "kind": "autopilot-profile" if autopilot else str(pool.get("kind") or "node-pool"),
        "accelerator": accelerator,
        "machineType": machine,
        "gpusPerNode": gpus_per_node,
        "spot": spot,
        "expected": expected,
        "nodesAtMin": nodes_min,
        "nodesAtMax": nodes_max,
        "gpusAtMin": gpus(nodes_min),
        "gpusAtMax": gpus(nodes_max),
        "nodeHourly": {c: NA if price.hourly[c] is None else price.hourly[c] for c in COLUMNS},
        "hourly": hourly,
        "monthly": monthly,
        "reasons": reasons,
        "notes": notes,
    }
    if autopilot:
        entry["perPodHourAtLeast"] = dict(entry["nodeHourly"])
    return entry


# --------------------------------------------------------------------------------------------------
# The stack: region, management fee, totals.


def _resources(document: Mapping[str, Any], type_token: str) -> list[Mapping[str, Any]]:
    return [
        r for r in document.get("resources") or [] if r.get("type") == type_token and not r.get("component")
    ]


def _cluster_location(document: Mapping[str, Any]) -> str | None:
    location = (document.get("outputs") or {}).get("location")
    if isinstance(location, str) and location and not location.startswith("("):
        return location
    for cluster in _resources(document, "gcp:container/cluster:Cluster"):
        location = (cluster.get("inputs") or {}).get("location")
        if isinstance(location, str) and location:
            return location
    return None


def region_of(document: Mapping[str, Any]) -> str | None:
    """The render's region: ``outputs.region``, else the cluster's location (a zone's region)."""
    region = (document.get("outputs") or {}).get("region")
    if isinstance(region, str) and region:
        return region
    location = _cluster_location(document)
    if location:
        zone = _ZONE.fullmatch(location)
        return zone.group(1) if zone else location
    return None


def _management_fee(document: Mapping[str, Any], table: PriceTable) -> dict[str, Any]:
    outputs = document.get("outputs") or {}
    mode = outputs.get("clusterMode")
    if mode is None:
        clusters = _resources(document, "gcp:container/cluster:Cluster")
        if clusters:
            mode = "autopilot" if (clusters[0].get("inputs") or {}).get("enableAutopilot") else "standard"
    return _cluster_fee(mode, _cluster_location(document) or "", table)


def _cluster_fee(mode: str | None, location: str, table: PriceTable) -> dict[str, Any]:
    fee = {
        "hourly": table.fee_per_cluster_hour,
        "monthly": round(table.fee_per_cluster_hour * HOURS_PER_MONTH, 2),
        "freeTierCreditPerMonth": table.free_tier_credit_per_month,
    }
    if mode == "existing":
        return {
            **fee,
            "hourly": 0.0,
            "monthly": 0.0,
            "clusterType": "existing",
            "freeTierEligible": None,
            "note": "existing cluster: its management fee is not added by this stack",
        }
    if mode == "autopilot":
        cluster_type, eligible = "Autopilot", True
    elif _ZONE.fullmatch(location):
        cluster_type, eligible = "zonal Standard", True
    else:
        cluster_type, eligible = "regional Standard", False
    credit = f"${table.free_tier_credit_per_month:.2f}"
    note = (
        f"{cluster_type} cluster: ${table.fee_per_cluster_hour:.2f}/h; the free tier credit ({credit}/month "
        "per billing account) covers it if it is the account's only zonal or Autopilot cluster"
        if eligible
        else f"{cluster_type} cluster: ${table.fee_per_cluster_hour:.2f}/h; the free tier credit ({credit}"
        "/month per billing account) covers only zonal and Autopilot clusters, not this one"
    )
    return {**fee, "clusterType": cluster_type, "freeTierEligible": eligible, "note": note}


def _fleet_estimates(
    outputs: Mapping[str, Any], table: PriceTable, catalog: Catalog
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """A MultiKueue fleet's workers (`outputs.fleet.workers`): each one's GPU pools priced in its own
    region (named `<worker>/<pool>`), its cluster's management fee, and why a worker is not priced."""
    pools: list[dict[str, Any]] = []
    fees: list[dict[str, Any]] = []
    notes: list[str] = []
    workers = (outputs.get("fleet") or {}).get("workers") or []
    if workers:
        where = ", ".join(f"{w.get('name')} in {w.get('region')}" for w in workers)
        notes.append(f"the fleet's workers' pools, each priced in its worker's region: {where}")
    for worker in workers:
        name, region = worker.get("name"), worker.get("region")
        if region not in table.regions:
            notes.append(
                f"not in the estimate: worker {name}: region {region!r} is not in the price table "
                "(components/data/prices.yaml)"
            )
            continue
        for pool in worker.get("gpuPools") or []:
            entry = _pool_estimate(pool, table=table, catalog=catalog, region=region)
            pools.append({**entry, "name": f"{name}/{entry['name']}"})
        fees.append(_cluster_fee("standard", str(worker.get("location") or ""), table))
    return pools, fees, notes


def _with_workers(fee: dict[str, Any], fees: list[dict[str, Any]]) -> dict[str, Any]:
    """The manager's fee plus each worker's: one row for the fleet's clusters."""
    if not fees:
        return fee
    clusters = [fee, *fees]
    return {
        **fee,
        "hourly": round(sum(f["hourly"] for f in clusters), 2),
        "monthly": round(sum(f["monthly"] for f in clusters), 2),
        "clusterType": f"{len(clusters)} clusters: the manager and {len(fees)} worker(s)",
        "freeTierEligible": False,
        "note": (
            f"the fleet's manager ({fee['note']}) and {len(fees)} worker cluster(s) at "
            f"${fees[0]['hourly']:.2f}/h each; the free tier credit covers at most one zonal or Autopilot "
            "cluster per billing account"
        ),
    }


def _totals(pools: list[dict[str, Any]], fee: Mapping[str, Any]) -> dict[str, Any]:
    keys = (*COLUMNS, "expected")

    def gpu_sum(period: str, at: str, column: str) -> Figure:
        return _sum(p[period][at][column] for p in pools)

    gpu_hourly = {at: {c: gpu_sum("hourly", at, c) for c in keys} for at in ("atMin", "atMax")}
    hourly = {at: {c: _sum((v, fee["hourly"])) for c, v in fig.items()} for at, fig in gpu_hourly.items()}
    reasons = [f"{p['name']}: {why}" for p in pools for why in _unique(p["reasons"].values())]
    return {
        "gpusAtMin": _count(p["gpusAtMin"] for p in pools),
        "gpusAtMax": _count(p["gpusAtMax"] for p in pools),
        "gpuHourly": gpu_hourly,
        "gpuMonthly": {at: {c: _monthly(v) for c, v in fig.items()} for at, fig in gpu_hourly.items()},
        "hourly": hourly,
        "monthly": {at: {c: _monthly(v) for c, v in fig.items()} for at, fig in hourly.items()},
        "reasons": reasons,
    }


def _non_gpu_pools(document: Mapping[str, Any]) -> list[str]:
    notes = []
    for r in _resources(document, "gcp:container/nodePool:NodePool"):
        inputs = r.get("inputs") or {}
        config = inputs.get("nodeConfig") or {}
        if config.get("guestAccelerators"):
            continue
        auto = inputs.get("autoscaling") or {}
        notes.append(
            f"not in the estimate: non-GPU node pool {r.get('name')} ({config.get('machineType')}, "
            f"{auto.get('totalMinNodeCount', inputs.get('nodeCount'))}.."
            f"{auto.get('totalMaxNodeCount', inputs.get('nodeCount'))} nodes): the price table has GPU "
            "machines only"
        )
    return notes


def _gateway_notes(document: Mapping[str, Any]) -> list[str]:
    """Each Inference Gateway's load balancer, which the estimate does not price."""
    notes = []
    for r in _resources(document, "kubernetes:gateway.networking.k8s.io/v1:Gateway"):
        inputs = r.get("inputs") or {}
        meta, spec = inputs.get("metadata") or {}, inputs.get("spec") or {}
        notes.append(
            f"not in the estimate: Gateway {meta.get('namespace')}/{meta.get('name')} "
            f"({spec.get('gatewayClassName')}), a regional internal Application Load Balancer, billed "
            "while it exists and per GB it processes (cloud.google.com/load-balancing/pricing, "
            "'Internal Application Load Balancer')"
        )
    return notes


def estimate(
    document: Mapping[str, Any],
    *,
    prices: PriceTable | None = None,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """The cost estimate of a render document's GPU pools, as data plus `table` (lines to print).

    Returns ``{format, source, sourceUrl, captured, capturedIsLowerBound, currency, hoursPerMonth,
    region, regions, clusterMode, error, pools, managementFee, totals, notes, table}``. With ``error``
    set (region unknown or not in the table), ``pools`` is empty and ``managementFee`` and ``totals``
    are None: no figure at all.
    """
    table = prices or load_prices()
    catalog = catalog or load_catalog()
    outputs = document.get("outputs") or {}
    region = region_of(document)
    result: dict[str, Any] = {
        "format": FORMAT,
        "source": table.source,
        "sourceUrl": table.source_url,
        "captured": table.captured,
        "capturedIsLowerBound": table.captured_is_lower_bound,
        "currency": table.currency,
        "hoursPerMonth": HOURS_PER_MONTH,
        "region": region,
        "clusterMode": outputs.get("clusterMode"),
        "error": None,
        "pools": [],
        "managementFee": None,
        "totals": None,
        "notes": [],
    }
    known = sorted(table.regions)
    result["regions"] = known
    if region is None:
        result["error"] = (
            "the render document names no region (outputs.region); regions with prices: " + ", ".join(known)
        )
    elif region not in table.regions:
        result["error"] = (
            f"region {region!r} is not in the price table (components/data/prices.yaml); "
            f"regions with prices: {', '.join(known)}"
        )
    if result["error"]:
        result["table"] = format_table(result)
        return result

    assert region is not None
    pools = [
        _pool_estimate(p, table=table, catalog=catalog, region=region)
        for p in outputs.get("gpuPools") or []
        if isinstance(p, Mapping)
    ]
    worker_pools, worker_fees, worker_notes = _fleet_estimates(outputs, table, catalog)
    pools += worker_pools
    fee = _with_workers(_management_fee(document, table), worker_fees)
    notes = [
        *worker_notes,
        "list prices for the VM with its GPUs (N1: VM + attached GPUs); not included: boot disks, "
        "Local SSD, network, discounts (sustained/committed use), taxes",
        f"Spot prices change up to once a day; these are from {table.captured}"
        + (" or later" if table.captured_is_lower_bound else ""),
        *_non_gpu_pools(document),
        *_gateway_notes(document),
    ]
    result.update(pools=pools, managementFee=fee, totals=_totals(pools, fee), notes=notes)
    result["services"] = _service_estimates(outputs.get("serving") or {}, pools)
    result["table"] = format_table(result, stack=document.get("stack"))
    return result


def _service_estimates(serving: Mapping[str, Any], pools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each model server: what one replica costs an hour (its GPUs' share of a node, at its pool's own
    pricing) and what its replicas cost at most, an hour and a month. A replica holds its GPUs while it
    runs, whether it serves or not."""
    by_name = {p["name"]: p for p in pools}
    services = []
    for name, service in serving.items():
        pool = by_name.get(service.get("pool")) if isinstance(service, Mapping) else None
        if pool is None:
            continue
        node = pool["nodeHourly"].get(pool["expected"])
        gpus, per_node = int(service.get("gpusPerReplica") or 1), int(pool["gpusPerNode"] or 1)
        # A fixed count, or an autoscaled {min, max}: the most it costs is at max.
        count = service.get("replicas") or 1
        replicas = int(count.get("max", 1)) if isinstance(count, Mapping) else int(count)
        roles = (service.get("disaggregation") or {}).get("roles")
        if isinstance(roles, Mapping):
            # A disaggregated service: one "replica" is every role's replicas together (fixed counts).
            gpus = sum(int(r["replicas"]) * int(r["gpusPerReplica"]) for r in roles.values())
            replicas = 1
        replica_hour: Figure = NA if not isinstance(node, float | int) else _hourly(node * gpus / per_node)
        at_max: Figure = replica_hour if isinstance(replica_hour, str) else _hourly(replica_hour * replicas)
        estimate = {
            "name": name,
            "pool": pool["name"],
            "pricing": pool["expected"],
            "gpusPerReplica": gpus,
            "gpusPerNode": per_node,
            "replicas": replicas,
            "replicaHourly": replica_hour,
            "hourlyAtMax": at_max,
            "monthlyAtMax": _monthly(at_max),
        }
        if isinstance(roles, Mapping):
            estimate["disaggregated"] = True
        volume = service.get("hyperdiskMl")
        if isinstance(volume, Mapping):
            # Hyperdisk ML is billed per GiB and per provisioned MiB/s; the price data has neither.
            estimate["weightsVolume"] = (
                f"{volume.get('disks')} Hyperdisk ML disk(s) of {volume.get('sizeGib')} GiB at "
                f"{volume.get('throughputMiBps')} MiB/s: {NA} (no Hyperdisk price in the price data)"
            )
        services.append(estimate)
    return services
