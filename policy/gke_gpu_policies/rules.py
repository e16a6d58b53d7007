"""GPU guardrails: plain validator functions and the pulumi-policy objects that wrap them.

Every validator has the pulumi-policy signature `(args, report_violation)`: resource validators take
`ResourceValidationArgs`, stack validators `StackValidationArgs` (a list of `PolicyResource`). Tests
call them directly; `policy/__main__.py` serves `POLICIES` (these, `scale_out.SCALE_OUT_POLICIES`,
`teams.TEAM_POLICIES` and `serving.SERVING_POLICIES`);
`tools/check_policies.py` runs them over an offline render.

Conventions:

* Props are camelCase wire names, as the engine sends them after the provider's `Check`, so a field
  the program left out carries the provider default there (pulumi-gcp: `deletionProtection` true,
  `enableSecureBoot` false, `enableIntegrityMonitoring` true, `enableShieldedNodes` true). The
  offline render has no `Check`; `_PROVIDER_DEFAULTS` applies the same defaults so both agree.
* A value that is not known yet (preview) is never a violation: the check is skipped. A value that
  is known to be missing is judged (an autoscaling block without a maximum is a violation).
* Every message names the resource and ends with the policy name in brackets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from .constants import (
    CLUSTER,
    GPU_RESOURCE,
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    NODE_POOL,
    SHARING_TRUSTED_LABEL,
    SHARING_TRUSTED_VALUE,
)
from .props import UNKNOWN, as_int, entries, get, is_unknown, items, stack_of
from .scale_out import SCALE_OUT_POLICIES
from .serving import SERVING_POLICIES
from .shared import (
    LEADER_WORKER_SET,
    LWS_TEMPLATES,
    gpu_accelerators,
    gpu_containers,
    gpu_taint,
    group_kind,
    tolerates,
    workload_subject,
)
from .teams import TEAM_POLICIES

PACK_NAME = "gke-gpu-guardrails"

# Policy names (IDs in `pulumi preview` output and keys of the pack config).
GPU_POOL_TAINT = "gpu-pool-taint"
GPU_POOL_AUTOSCALING = "gpu-pool-autoscaling-max"
GPU_BUDGET = "gpu-total-budget"
PROD_NOT_ALL_SPOT = "prod-gpu-not-all-spot"
PROD_DELETION_PROTECTION = "prod-cluster-deletion-protection"
NODE_SERVICE_ACCOUNT = "node-dedicated-service-account"
NODE_WORKLOAD_IDENTITY = "node-workload-identity"
NODE_SHIELDED = "node-shielded-vm"
WORKLOAD_GPU_LIMITS = "gpu-workload-limits"
WORKLOAD_GPU_TOLERATION = "gpu-workload-toleration"
GPU_SHARING_TRUSTED = "gpu-sharing-trusted-pool"

# Defaults pulumi-gcp fills in during `Check` (see the module docstring).
_PROVIDER_DEFAULTS: dict[tuple[str, ...], bool] = {
    ("deletionProtection",): True,
    ("enableShieldedNodes",): True,
    ("shieldedInstanceConfig", "enableSecureBoot"): False,
    ("shieldedInstanceConfig", "enableIntegrityMonitoring"): True,
    ("spot",): False,
    ("preemptible",): False,
}

# GKE spreads a regional cluster's nodes over three zones unless nodeLocations says otherwise.
GKE_DEFAULT_REGIONAL_ZONES = 3
_ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")
_DEFAULT_COMPUTE_SA = re.compile(r".+-compute@developer\.gserviceaccount\.com")

# Config schemas: JSON schema properties; "default" is what a validator uses when the key is unset.
PROD_PATTERN_PROPERTY: dict[str, Any] = {
    "type": "string",
    "default": "prod",
    "description": "Regular expression (re.search) for the names of production stacks.",
}
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
PROD_DELETION_SCHEMA = PolicyConfigSchema(properties={"prodStackPattern": PROD_PATTERN_PROPERTY})
TOLERATION_SCHEMA = PolicyConfigSchema(
    properties={
        "taintValue": {
            "type": "string",
            "default": GPU_TAINT_VALUE,
            "description": f"Value of the {GPU_TAINT_KEY} taint that an `Equal` toleration must match.",
        }
    }
)


# --------------------------------------------------------------------------------------------------
# Shared helpers.


def _report(
    report_violation: ReportViolation, policy: str, subject: str, text: str, urn: str | None = None
) -> None:
    message = f"{subject}: {text} [{policy}]"
    if urn is None:
        report_violation(message, None)
    else:
        report_violation(message, urn)


def _setting(config: Mapping[str, Any] | None, schema: PolicyConfigSchema, key: str) -> Any:
    """A policy's config value, or its schema default."""
    value = (config or {}).get(key)
    return schema.properties[key]["default"] if value is None else value


def _effective(node_config: Any, *path: str) -> Any:
    """A field of nodeConfig (or of a Cluster), the provider default when missing, or UNKNOWN."""
    value = get(node_config, *path)
    if value is None:
        return _PROVIDER_DEFAULTS.get(path)
    return value


def _prod_match(
    stack: str | None, config: Mapping[str, Any] | None, schema: PolicyConfigSchema
) -> bool | str:
    """True/False, or an error text when prodStackPattern is not a valid regular expression."""
    pattern = _setting(config, schema, "prodStackPattern")
    try:
        return bool(stack) and re.search(pattern, stack or "") is not None
    except (re.error, TypeError) as exc:
        return f"config prodStackPattern {pattern!r} is not a valid regular expression ({exc})"


def _pool_subject(name: str) -> str:
    return f"GPU node pool {name!r}"


def _describe_taints(taints: list[Any]) -> str:
    parts = []
    for taint in taints:
        if is_unknown(taint):
            parts.append("?")
        else:
            parts.append(f"{get(taint, 'key')}={get(taint, 'value') or ''}:{get(taint, 'effect')}")
    return ", ".join(parts) or "none"


# --------------------------------------------------------------------------------------------------
# GPU node pools: taint, autoscaling, sharing.


def validate_gpu_pool_taint(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A GPU node pool carries the nvidia.com/gpu taint with effect NO_SCHEDULE."""
    if args.resource_type != NODE_POOL:
        return
    accelerators = gpu_accelerators(args.props)
    if accelerators is None or accelerators is UNKNOWN:
        return
    if gpu_taint(args.props) is not None:  # the taint, or one not known yet
        return
    taints = items(get(args.props, "nodeConfig", "taints")) or []
    _report(
        report_violation,
        GPU_POOL_TAINT,
        _pool_subject(args.name),
        f"no taint {GPU_TAINT_KEY}:{GPU_TAINT_EFFECT} (nodeConfig.taints: {_describe_taints(taints)}); "
        f"add {{key: {GPU_TAINT_KEY}, value: {GPU_TAINT_VALUE}, effect: {GPU_TAINT_EFFECT}}} so that "
        "only Pods that tolerate it land on GPU nodes (GKE adds it only if the cluster already has a "
        "non-GPU pool)",
    )


def validate_gpu_pool_autoscaling(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A GPU node pool autoscales, with a maximum (totalMaxNodeCount or maxNodeCount per zone)."""
    if args.resource_type != NODE_POOL:
        return
    accelerators = gpu_accelerators(args.props)
    if accelerators is None or accelerators is UNKNOWN:
        return
    autoscaling = get(args.props, "autoscaling")
    if autoscaling is UNKNOWN:
        return
    subject = _pool_subject(args.name)
    if autoscaling is None:
        _report(
            report_violation,
            GPU_POOL_AUTOSCALING,
            subject,
            "has no autoscaling block: set autoscaling.totalMinNodeCount/totalMaxNodeCount so the pool "
            "scales (to zero when idle) and its GPU count stays bounded",
        )
        return
    total_max, per_zone_max = get(autoscaling, "totalMaxNodeCount"), get(autoscaling, "maxNodeCount")
    if total_max is UNKNOWN or per_zone_max is UNKNOWN:
        return
    if as_int(total_max) is None and as_int(per_zone_max) is None:
        _report(
            report_violation,
            GPU_POOL_AUTOSCALING,
            subject,
            "autoscaling has no maximum (autoscaling.totalMaxNodeCount or maxNodeCount): the pool could "
            "grow until the GPU quota runs out",
        )


def validate_gpu_sharing_trusted(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """GPU sharing (time-sharing or MPS) only on pools labelled as trusted to share."""
    if args.resource_type != NODE_POOL:
        return
    accelerators = gpu_accelerators(args.props)
    if accelerators is None or accelerators is UNKNOWN:
        return
    strategies = []
    for accelerator in accelerators:
        sharing = get(accelerator, "gpuSharingConfig")
        if sharing is UNKNOWN:
            return
        if sharing is not None and (entries(sharing) or {}) != {}:
            strategy = get(sharing, "gpuSharingStrategy")
            strategies.append("?" if is_unknown(strategy) else str(strategy))
    if not strategies:
        return
    label = get(args.props, "nodeConfig", "labels", SHARING_TRUSTED_LABEL)
    if label is UNKNOWN or label == SHARING_TRUSTED_VALUE:
        return
    found = "missing" if label is None else f"{label!r}"
    _report(
        report_violation,
        GPU_SHARING_TRUSTED,
        _pool_subject(args.name),
        f"shares its GPUs ({', '.join(strategies)}) but node label {SHARING_TRUSTED_LABEL} is {found}: "
        "containers sharing a GPU are not isolated from each other (GPU memory, faults); set the label "
        f'to "{SHARING_TRUSTED_VALUE}" only for pools that run one trusted tenant',
    )


# --------------------------------------------------------------------------------------------------
# Stack: GPU budget, prod Spot.


@dataclass(frozen=True)
class PoolGpus:
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
    per_node: int | None = None if accelerators is UNKNOWN else 0
    for accelerator in [] if accelerators is UNKNOWN else accelerators or []:
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


# --------------------------------------------------------------------------------------------------
# Clusters and nodes: deletion protection, service account, Workload Identity, Shielded VMs.


def validate_prod_deletion_protection(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    """A production cluster has deletionProtection true (pulumi-gcp's default when unset)."""
    if args.resource_type != CLUSTER:
        return
    stack = stack_of(args.urn)
    prod = _prod_match(stack, args.get_config(), PROD_DELETION_SCHEMA)
    subject = f"cluster {args.name!r}"
    if isinstance(prod, str):
        _report(report_violation, PROD_DELETION_PROTECTION, subject, prod)
        return
    if not prod:
        return
    protection = _effective(args.props, "deletionProtection")
    if protection is UNKNOWN or protection is True:
        return
    _report(
        report_violation,
        PROD_DELETION_PROTECTION,
        subject,
        f"deletionProtection is {protection!r} in production stack {stack!r}: set it to true "
        "(a `pulumi destroy` or a replacement would delete the cluster and every workload on it)",
    )


def _is_autopilot(props: Any) -> Any:
    autopilot = get(props, "enableAutopilot")
    return UNKNOWN if autopilot is UNKNOWN else autopilot is True


def _service_account_problem(value: Any) -> str | None:
    if value is UNKNOWN:
        return None
    if value is None or value == "":
        return "is not set, so GKE uses the Compute Engine default service account"
    if value == "default":
        return "is 'default' (the Compute Engine default service account)"
    if isinstance(value, str) and _DEFAULT_COMPUTE_SA.fullmatch(value):
        return f"is {value!r}, the Compute Engine default service account"
    return None


def validate_node_service_account(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Nodes run as a dedicated service account, never the Compute Engine default one."""
    checks: list[tuple[str, Any]] = []
    if args.resource_type == NODE_POOL:
        subject = f"node pool {args.name!r}"
        checks.append(("nodeConfig.serviceAccount", get(args.props, "nodeConfig", "serviceAccount")))
    elif args.resource_type == CLUSTER:
        subject = f"cluster {args.name!r}"
        autopilot = _is_autopilot(args.props)
        if autopilot is UNKNOWN:
            return
        defaults = ("clusterAutoscaling", "autoProvisioningDefaults", "serviceAccount")
        if autopilot:
            checks.append((".".join(defaults), get(args.props, *defaults)))
        else:
            # The default pool (created, then removed when removeDefaultNodePool) runs as this account.
            checks.append(("nodeConfig.serviceAccount", get(args.props, "nodeConfig", "serviceAccount")))
            if get(args.props, "clusterAutoscaling", "enabled") is True:  # node auto-provisioning
                checks.append((".".join(defaults), get(args.props, *defaults)))
    else:
        return
    for path, value in checks:
        problem = _service_account_problem(value)
        if problem:
            _report(
                report_violation,
                NODE_SERVICE_ACCOUNT,
                subject,
                f"{path} {problem}, which has broad project roles; use a dedicated account with "
                "roles/container.defaultNodeServiceAccount",
            )


def validate_node_workload_identity(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Nodes serve Workload Identity metadata (GKE_METADATA), never the node's own credentials."""
    checks: list[tuple[str, Any]] = []
    if args.resource_type == NODE_POOL:
        subject = f"node pool {args.name!r}"
        checks.append(("nodeConfig", get(args.props, "nodeConfig")))
    elif args.resource_type == CLUSTER:
        subject = f"cluster {args.name!r}"
        autopilot = _is_autopilot(args.props)
        if autopilot is UNKNOWN or autopilot:
            return  # Autopilot always runs Workload Identity.
        pool = get(args.props, "workloadIdentityConfig", "workloadPool")
        if pool is None or pool == "":
            _report(
                report_violation,
                NODE_WORKLOAD_IDENTITY,
                subject,
                "workloadIdentityConfig.workloadPool is not set: Workload Identity is off, so Pods "
                "can only use the node's service account",
            )
        checks.append(("nodeConfig", get(args.props, "nodeConfig")))
    else:
        return
    for path, node_config in checks:
        mode = get(node_config, "workloadMetadataConfig", "mode")
        if mode is UNKNOWN or mode == "GKE_METADATA":
            continue
        found = "not set" if mode is None else f"{mode!r}"
        _report(
            report_violation,
            NODE_WORKLOAD_IDENTITY,
            subject,
            f"{path}.workloadMetadataConfig.mode is {found}: set GKE_METADATA so Pods get Workload "
            "Identity credentials and cannot read the node's metadata server",
        )


def validate_node_shielded(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Nodes are Shielded VMs: secure boot and integrity monitoring not off (secure boot defaults off)."""
    if args.resource_type == NODE_POOL:
        subject = f"node pool {args.name!r}"
    elif args.resource_type == CLUSTER:
        subject = f"cluster {args.name!r}"
        autopilot = _is_autopilot(args.props)
        if autopilot is UNKNOWN or autopilot:
            return  # Autopilot nodes are always Shielded, with secure boot.
        if _effective(args.props, "enableShieldedNodes") is False:
            _report(report_violation, NODE_SHIELDED, subject, "enableShieldedNodes is false")
    else:
        return
    node_config = get(args.props, "nodeConfig")
    if node_config is UNKNOWN:
        return
    for field in ("enableSecureBoot", "enableIntegrityMonitoring"):
        value = _effective(node_config, "shieldedInstanceConfig", field)
        if value is False:
            unset = get(node_config, "shieldedInstanceConfig", field) is None
            _report(
                report_violation,
                NODE_SHIELDED,
                subject,
                f"nodeConfig.shieldedInstanceConfig.{field} is "
                + ("not set (defaults to false)" if unset else "false")
                + ": set it to true",
            )


# --------------------------------------------------------------------------------------------------
# Kubernetes workloads that ask for GPUs.

# (API group, kind) -> path to the Pod spec in the object.
_POD_SPEC_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("core", "Pod"): ("spec",),
    ("batch", "Job"): ("spec", "template", "spec"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template", "spec"),
    **{
        (group, kind): ("spec", "template", "spec")
        for group in ("apps", "extensions")
        for kind in ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet")
    },
}


def pod_spec_path(resource_type: str) -> tuple[str, ...] | None:
    """Where a workload type keeps its Pod spec; None for types that are not workloads."""
    key = group_kind(resource_type)
    return _POD_SPEC_PATHS.get(key) if key else None


def _workloads(args: ResourceValidationArgs) -> list[tuple[str, Any]]:
    """(subject, Pod spec) of each known Pod template of a Kubernetes workload; none for other types or
    unknown Pod specs."""
    if group_kind(args.resource_type) == LEADER_WORKER_SET:
        paths = [(where, (*template, "spec")) for where, template in LWS_TEMPLATES]
    else:
        path = pod_spec_path(args.resource_type)
        paths = [("", path)] if path is not None else []
    found = []
    for where, path in paths:
        pod = get(args.props, *path)
        if pod is UNKNOWN or pod is None:
            continue
        found.append((workload_subject(args.resource_type, args.name, args.props, where), pod))
    return found


def validate_gpu_workload_limits(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Containers that ask for nvidia.com/gpu set a whole-number limit, and requests equal to it."""
    for subject, pod in _workloads(args):
        _check_gpu_limits(subject, pod, report_violation)


def _check_gpu_limits(subject: str, pod: Any, report_violation: ReportViolation) -> None:
    containers = gpu_containers(pod)
    if containers is UNKNOWN:
        return
    for c in containers:
        if c.asks is not True:
            continue
        if c.limit is None:
            _report(
                report_violation,
                WORKLOAD_GPU_LIMITS,
                subject,
                f"{c.name} requests {GPU_RESOURCE} without a limit: GPUs are set in "
                "resources.limits (requests, if given, must equal the limit)",
            )
            continue
        if c.limit is UNKNOWN:
            continue
        limit = as_int(c.limit)
        if limit is None or limit < 0:
            _report(
                report_violation,
                WORKLOAD_GPU_LIMITS,
                subject,
                f"{c.name} has {GPU_RESOURCE} limit {c.limit!r}: GPUs are whole devices, use an integer",
            )
            continue
        if c.request is None or c.request is UNKNOWN:
            continue
        if as_int(c.request) != limit:
            _report(
                report_violation,
                WORKLOAD_GPU_LIMITS,
                subject,
                f"{c.name} requests {c.request!r} {GPU_RESOURCE} but its limit is {c.limit!r}: "
                "extended resources cannot be overcommitted, requests must equal limits",
            )


def validate_gpu_workload_toleration(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A workload that asks for nvidia.com/gpu tolerates the nvidia.com/gpu NoSchedule taint."""
    taint_value = _setting(args.get_config(), TOLERATION_SCHEMA, "taintValue")
    for subject, pod in _workloads(args):
        _check_gpu_toleration(subject, pod, taint_value, report_violation)


def _check_gpu_toleration(
    subject: str, pod: Any, taint_value: Any, report_violation: ReportViolation
) -> None:
    containers = gpu_containers(pod)
    if containers is UNKNOWN:
        return
    asking = [c for c in containers if c.asks is True]
    if not asking:
        return
    tolerations = items(get(pod, "tolerations"))
    if tolerations is UNKNOWN:
        return
    verdicts = [tolerates(t, taint_value) for t in tolerations or []]
    if True in verdicts or UNKNOWN in verdicts:
        return
    _report(
        report_violation,
        WORKLOAD_GPU_TOLERATION,
        subject,
        f"{', '.join(c.name for c in asking)} ask(s) for {GPU_RESOURCE} but the Pod spec has no toleration "
        f"for the {GPU_TAINT_KEY} NoSchedule taint; add {{key: {GPU_TAINT_KEY}, operator: Exists, "
        "effect: NoSchedule}",
    )


# --------------------------------------------------------------------------------------------------
# The policies.

POLICIES: list[Policy] = [
    ResourceValidationPolicy(
        name=GPU_POOL_TAINT,
        description=f"GPU node pools carry the {GPU_TAINT_KEY} taint with effect {GPU_TAINT_EFFECT}.",
        validate=validate_gpu_pool_taint,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    ResourceValidationPolicy(
        name=GPU_POOL_AUTOSCALING,
        description="GPU node pools autoscale with a maximum node count.",
        validate=validate_gpu_pool_autoscaling,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    StackValidationPolicy(
        name=GPU_BUDGET,
        description="The GPUs a stack's node pools can scale to (max nodes x GPUs/node) stay within budget.",
        validate=validate_gpu_budget,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=BUDGET_SCHEMA,
        severity=Severity.HIGH,
    ),
    StackValidationPolicy(
        name=PROD_NOT_ALL_SPOT,
        description="Production stacks keep at least one on-demand GPU node pool.",
        validate=validate_prod_not_all_spot,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PROD_SPOT_SCHEMA,
        severity=Severity.MEDIUM,
    ),
    ResourceValidationPolicy(
        name=PROD_DELETION_PROTECTION,
        description="Production GKE clusters have deletion protection on.",
        validate=validate_prod_deletion_protection,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PROD_DELETION_SCHEMA,
        severity=Severity.HIGH,
    ),
    ResourceValidationPolicy(
        name=NODE_SERVICE_ACCOUNT,
        description="GKE nodes run as a dedicated service account, not the Compute Engine default one.",
        validate=validate_node_service_account,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    ResourceValidationPolicy(
        name=NODE_WORKLOAD_IDENTITY,
        description="GKE nodes serve Workload Identity metadata (GKE_METADATA).",
        validate=validate_node_workload_identity,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    ResourceValidationPolicy(
        name=NODE_SHIELDED,
        description="GKE nodes are Shielded VMs with secure boot and integrity monitoring.",
        validate=validate_node_shielded,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.MEDIUM,
    ),
    ResourceValidationPolicy(
        name=WORKLOAD_GPU_LIMITS,
        description=f"Containers that ask for {GPU_RESOURCE} set an integer limit, and requests equal to it.",
        validate=validate_gpu_workload_limits,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.MEDIUM,
    ),
    ResourceValidationPolicy(
        name=WORKLOAD_GPU_TOLERATION,
        description=f"Workloads that ask for {GPU_RESOURCE} tolerate the {GPU_TAINT_KEY} taint.",
        validate=validate_gpu_workload_toleration,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=TOLERATION_SCHEMA,
        severity=Severity.MEDIUM,
    ),
    ResourceValidationPolicy(
        name=GPU_SHARING_TRUSTED,
        description=f"GPU sharing (time-sharing, MPS) only on pools labelled {SHARING_TRUSTED_LABEL}=true.",
        validate=validate_gpu_sharing_trusted,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    # GPUDirect pools in one zone, Kueue queues for GPU pools and JobSets (scale_out.py).
    *SCALE_OUT_POLICIES,
    *TEAM_POLICIES,
    # Model servers: GPUs, a tainted GPU pool, read-only weights (serving.py).
    *SERVING_POLICIES,
]
