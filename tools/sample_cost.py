"""Sample workloads in a render: the GPU pool each one scales up, and at most what one run costs.

`sample_runs(document)` reads a render document (`tools/plan.to_document`): the samples the program
declares (``outputs.sampleWorkloads``), their Jobs, JobSets and Deployments, and the GPU pools
(``outputs.gpuPools``). A sample is the object of its name, or the JobSet its commands select
(``jobset.sigs.k8s.io/jobset-name=<name>``, the label JobSet's controller gives its Pods: the
all-reduce tests are named ``nccl-allreduce-<pool>``, their JobSets ``nccl-<pool>``). A sample's
pool is the one whose node labels its Pods select; its Pods (a Job's parallelism, a Deployment's
replicas, a JobSet's replicated Jobs: replicas x parallelism each) times their ``nvidia.com/gpu``
give the nodes it scales up; at most one run costs those nodes at the pool's price
(`tools/cost.py`'s table and rules: Spot for a Spot pool, on-demand where Autopilot may fall back to
it, none for the on-demand column of Dynamic Workload Scheduler capacity, flex-start or queued) for
the Job's ``activeDeadlineSeconds``. A JobSet's Jobs start together (``startupPolicy`` AnyOrder, the
default; InOrder: one after another, so their deadlines add up), and on a failure it recreates them
all up to ``failurePolicy.maxRestarts`` times (default 0), each time for up to the deadline again:
kubernetes-sigs/jobset sdk/python/docs/JobsetV1alpha2FailurePolicy.md and
examples/simple/max-restarts.yaml. A failure-policy rule that can restart or recreate outside that
count (RestartJobSetAndIgnoreMaxRestarts, RecreateJob) leaves no bound. Where no bound exists (a
Deployment, a Job without a deadline, the Autopilot premium the table lacks, no price, nodes of an
existing cluster) the figure is ``n/a`` with the reason. Not included: the minutes the autoscaler
keeps an idle node after a run.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from gke_gpu.core.catalog import Catalog, load_catalog
from tools.cost import NA, ON_DEMAND, SPOT, PriceTable, load_prices, region_of
from tools.prices import pool_node_price

JOB, DEPLOYMENT = "kubernetes:batch/v1:Job", "kubernetes:apps/v1:Deployment"
JOBSET_GROUP = "kubernetes:jobset.x-k8s.io/"
JOBSET_NAME_LABEL = re.compile(r"jobset\.sigs\.k8s\.io/jobset-name=([a-z0-9]([-a-z0-9]*[a-z0-9])?)")
# Failure-policy actions that restart within maxRestarts, or end the JobSet.
_BOUNDED_ACTIONS = {"FailJobSet", "RestartJobSet"}
_LABELS = {ON_DEMAND: "on-demand", SPOT: "Spot"}
_WRAP = 110


def _dws(pool: Mapping[str, Any]) -> str | None:
    """How a pool takes Dynamic Workload Scheduler capacity, None where it does not."""
    if pool.get("queuedProvisioning"):
        return "queued provisioning, flex-start" if pool.get("flexStart") else "queued provisioning"
    return "flex-start" if pool.get("flexStart") else None


def _int(value: Any, default: int) -> int:
    if isinstance(value, bool) or value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


def _is_jobset(resource: Mapping[str, Any]) -> bool:
    kind = str(resource.get("type"))
    return kind.startswith(JOBSET_GROUP) and kind.endswith(":JobSet")


def _objects(document: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Jobs, JobSets and Deployments by metadata.name."""
    objects = {}
    for r in document.get("resources") or []:
        if (r.get("type") in (JOB, DEPLOYMENT) or _is_jobset(r)) and not r.get("component"):
            name = ((r.get("inputs") or {}).get("metadata") or {}).get("name")
            if isinstance(name, str):
                objects[name] = r
    return objects


def _sample_object(
    name: str, sample: Any, objects: Mapping[str, Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The object named like the sample, else the one JobSet its commands select by name."""
    if name in objects:
        return objects[name]
    commands = sample.values() if isinstance(sample, Mapping) else ()
    selected = {
        match.group(1)
        for command in commands
        if isinstance(command, str)
        for match in JOBSET_NAME_LABEL.finditer(command)
    }
    found = [objects[n] for n in sorted(selected) if n in objects and _is_jobset(objects[n])]
    return found[0] if len(found) == 1 else None


def _gpus_per_pod(pod: Mapping[str, Any]) -> int:
    return sum(
        _int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu"), 0)
        for c in pod.get("containers") or []
    )


def _job_pods(job_spec: Mapping[str, Any]) -> int:
    parallelism = _int(job_spec.get("parallelism"), 1)
    return min(parallelism, _int(job_spec.get("completions"), parallelism))


def _jobset_run(spec: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], int, Any, str | None]:
    """A JobSet's Pod templates, its Pods, the longest one run may last (its Jobs' deadlines, times
    the restarts), and why there is no such bound (None when there is)."""
    templates: list[Mapping[str, Any]] = []
    pods = 0
    deadlines: list[Any] = []
    for replicated in spec.get("replicatedJobs") or []:
        job_spec = (replicated.get("template") or {}).get("spec") or {}
        templates.append((job_spec.get("template") or {}).get("spec") or {})
        pods += _int(replicated.get("replicas"), 1) * _job_pods(job_spec)
        deadlines.append(job_spec.get("activeDeadlineSeconds"))
    if not deadlines or any(isinstance(d, bool) or not isinstance(d, int) for d in deadlines):
        return templates, pods, None, "a Job of the JobSet has no activeDeadlineSeconds, so no upper bound"
    policy = spec.get("failurePolicy") or {}
    unbounded = sorted({str(rule.get("action")) for rule in policy.get("rules") or []} - _BOUNDED_ACTIONS)
    if unbounded:
        why = f"the JobSet's failure policy may restart it beyond maxRestarts ({', '.join(unbounded)})"
        return templates, pods, None, why
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    one_run = sum(deadlines) if in_order else max(deadlines)
    return templates, pods, one_run * (_int(policy.get("maxRestarts"), 0) + 1), None


def _pool_of(selector: Mapping[str, Any], pools: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The GPU pool whose node labels the Pod selects (the most specific match)."""
    matches = [
        p
        for p in pools
        if isinstance(p.get("nodeSelector"), Mapping)
        and p["nodeSelector"]
        and all(selector.get(k) == v for k, v in p["nodeSelector"].items())
    ]
    return max(matches, key=lambda p: len(p["nodeSelector"]), default=None)


def _nodes(pool: Mapping[str, Any], pods: int, gpus_per_pod: int, notes: list[str]) -> int:
    if pool.get("kind") == "autopilot-profile":
        return pods  # Autopilot sizes a node for each GPU Pod
    per_node = max(_int(pool.get("schedulableGpusPerNode"), _int(pool.get("gpusPerNode"), 1)), 1)
    nodes = max(1, -(-pods * gpus_per_pod // per_node))
    max_nodes = pool.get("maxNodes")
    if isinstance(max_nodes, int) and not isinstance(max_nodes, bool) and nodes > max_nodes:
        notes.append(f"needs {nodes} nodes but the pool's maxNodes is {max_nodes}: some Pods wait")
        nodes = max_nodes
    if _int(pool.get("minNodes"), 0) > 0:
        notes.append(
            f"the pool keeps {pool['minNodes']} node(s) anyway: a run that fits on them costs nothing more"
        )
    return nodes


def _sample(
    name: str,
    obj: Mapping[str, Any] | None,
    pools: list[Mapping[str, Any]],
    *,
    table: PriceTable,
    catalog: Catalog,
    region: str | None,
    existing: bool,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "kind": None, "pool": None, "maxPerRun": NA, "notes": []}
    if obj is None:
        return {**entry, "reason": f"no Job, JobSet or Deployment named {name} in the render"}
    spec = (obj.get("inputs") or {}).get("spec") or {}
    no_bound = None
    if _is_jobset(obj):
        kind = "JobSet"
        templates, pods, deadline, no_bound = _jobset_run(spec)
        restarts = _int((spec.get("failurePolicy") or {}).get("maxRestarts"), 0)
        if restarts > 0 and no_bound is None:
            entry["notes"].append(
                f"the deadline counts {restarts} restart(s) of every Job, as failurePolicy allows"
            )
    else:
        kind = "Job" if obj.get("type") == JOB else "Deployment"
        templates = [(spec.get("template") or {}).get("spec") or {}]
        if kind == "Job":
            pods, deadline = _job_pods(spec), spec.get("activeDeadlineSeconds")
        else:
            pods, deadline = _int(spec.get("replicas"), 1), None
    gpus_per_pod = max((_gpus_per_pod(pod) for pod in templates), default=0)
    entry.update(kind=kind, pods=pods, gpusPerPod=gpus_per_pod, deadlineSeconds=deadline)
    selectors = [pod.get("nodeSelector") or {} for pod in templates] or [{}]
    pool = _pool_of(selectors[0], pools)
    if any(_pool_of(selector, pools) is not pool for selector in selectors[1:]):
        return {**entry, "reason": "its replicated Jobs select different pools"}
    if pool is None:
        why = (
            "it runs on the GPU nodes of an existing cluster, which this stack does not create or price"
            if existing
            else "its nodeSelector matches no GPU pool of the stack"
        )
        return {**entry, "reason": why}

    autopilot = pool.get("kind") == "autopilot-profile"
    gpus_per_node = _int(pool.get("gpusPerNode"), 1)
    accelerator = str(pool.get("accelerator"))
    machine = pool.get("machineType")
    if autopilot:
        accelerator_spec = catalog.accelerator(accelerator)
        machine = accelerator_spec.default_machine_types.get(gpus_per_node) if accelerator_spec else None
    spot = bool(pool.get("spot"))
    fallback = autopilot and spot and bool(pool.get("onDemandFallback"))
    column = ON_DEMAND if (fallback or not spot) else SPOT
    nodes = _nodes(pool, pods, gpus_per_pod, entry["notes"])
    entry.update(
        pool=pool.get("name"),
        machineType=machine,
        accelerator=accelerator,
        gpusPerNode=gpus_per_node,
        spot=spot,
        **({"dws": _dws(pool)} if _dws(pool) else {}),
        pricing=column,
        nodes=nodes,
        nodeHourly=NA,
        hourly=NA,
    )
    if region is None:
        return {**entry, "reason": "the render names no region, so no price"}
    price = pool_node_price(table, region, pool, machine)
    node_hourly = price.hourly[column]
    if node_hourly is None:
        return {**entry, "reason": price.reasons.get(column, "no price")}
    hourly = round(nodes * node_hourly, 5)
    entry.update(nodeHourly=node_hourly, hourly=hourly)
    if kind == "Deployment":
        return {
            **entry,
            "reason": f"a Deployment runs until it is deleted: ${hourly:,.2f} per hour while it runs",
        }
    if no_bound is not None:
        return {**entry, "reason": no_bound}
    if isinstance(deadline, bool) or not isinstance(deadline, int):
        return {**entry, "reason": "the Job has no activeDeadlineSeconds, so no upper bound"}
    per_run = round(hourly * deadline / 3600, 5)
    if autopilot:
        reason = f"Autopilot adds a GPU premium the price table does not have; the VMs alone: ${per_run:,.2f}"
        return {**entry, "atLeastPerRun": per_run, "reason": reason}
    return {**entry, "maxPerRun": per_run}


def sample_runs(
    document: Mapping[str, Any], *, prices: PriceTable | None = None, catalog: Catalog | None = None
) -> list[dict[str, Any]]:
    """One entry per sample of ``outputs.sampleWorkloads`` (sorted by name): its ``pool``,
    ``machineType``, ``gpusPerNode``, ``pricing`` (onDemand or spot), ``nodes``, ``nodeHourly``,
    ``hourly`` and ``maxPerRun`` (USD), or ``maxPerRun: "n/a"`` with ``reason``."""
    outputs = document.get("outputs") or {}
    samples = outputs.get("sampleWorkloads")
    if not isinstance(samples, Mapping) or not samples:
        return []
    table = prices or load_prices()
    catalog = catalog or load_catalog()
    objects = _objects(document)
    pools = [p for p in outputs.get("gpuPools") or [] if isinstance(p, Mapping)]
    region = region_of(document)
    existing = outputs.get("clusterMode") == "existing"
    return [
        _sample(
            name,
            _sample_object(name, samples[name], objects),
            pools,
            table=table,
            catalog=catalog,
            region=region,
            existing=existing,
        )
        for name in sorted(samples)
    ]


def format_samples(samples: Sequence[Mapping[str, Any]]) -> list[str]:
    """The samples as text lines for the tree (none without samples)."""
    if not samples:
        return []
    lines = [
        "Sample workloads: the GPU pool each one scales up, and at most what one run costs "
        "(nodes x $/node-hour x the Jobs' activeDeadlineSeconds)"
    ]
    for s in samples:
        replicas = f", {s['pods']} replicas" if s.get("kind") == DEPLOYMENT.rsplit(":", 1)[1] else ""
        text = f"{s['name']} ({s.get('kind') or 'not found'}{replicas}): "
        if s.get("pool") is not None:
            node = s.get("nodeHourly", NA)
            price = node if isinstance(node, str) else f"${node:,.2f}/h"
            machine = f"{s.get('machineType') or NA} with {s['gpusPerNode']} x {s['accelerator']}"
            pricing = _LABELS[s["pricing"]]
            if s.get("dws"):
                pricing = f"Dynamic Workload Scheduler ({s['dws']})"
            elif s.get("spot") and s["pricing"] == ON_DEMAND:
                pricing = "Spot, falling back to on-demand (priced on-demand, the most it pays)"
            text += f"pool {s['pool']}, {machine}, {pricing}: {s['nodes']} node(s) at {price}; "
        if isinstance(s.get("maxPerRun"), str):
            text += f"per run {NA}: {s.get('reason')}"
        else:
            text += (
                f"at most ${s['maxPerRun']:,.2f} per run (deadline {_duration(int(s['deadlineSeconds']))})"
            )
        text += "".join(f"; {note}" for note in s.get("notes") or [])
        lines.extend(textwrap.wrap(text, width=_WRAP, initial_indent="  ", subsequent_indent="      "))
    if any(s.get("pool") is not None for s in samples):
        lines.append("  not included: the minutes the autoscaler keeps an idle node after a run")
    return lines
