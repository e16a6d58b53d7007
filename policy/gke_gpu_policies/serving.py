"""Serving guardrails: a model server has GPUs, runs on a tainted GPU pool, and reads its weights
read-only.

What a model server is: `servers.server_pods` (a Deployment, StatefulSet or LeaderWorkerSet labelled
`app.kubernetes.io/component: inference-server` or running a known model-server image).

The same conventions as `rules` (camelCase props, UNKNOWN never a violation, every message names its
resource and ends with the policy name in brackets); `rules` adds `SERVING_POLICIES` to `POLICIES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

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
    COMPONENT_LABEL,
    GPU_RESOURCE,
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    NODE_POOL,
    SERVER_COMPONENT,
)
from .props import UNKNOWN, as_int, entries, get, is_unknown, items, known_items
from .scale_out import NODEPOOL_LABEL, _report
from .servers import ServerPod, server_pods
from .shared import GpuContainer, container_label, gpu_accelerators, gpu_ask, gpu_taint, tolerates

# Policy names (IDs in `pulumi preview` output and keys of the pack config).
SERVING_GPU_LIMIT = "serving-gpu-limit"
SERVING_ON_GPU_POOL = "serving-on-gpu-pool"
SERVING_WEIGHTS_READ_ONLY = "serving-weights-read-only"

# Node labels that pick GPU nodes: GKE's accelerator and node pool labels, and a ComputeClass.
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
COMPUTE_CLASS_LABEL = "cloud.google.com/compute-class"
_GPU_NODE_LABELS = (ACCELERATOR_LABEL, NODEPOOL_LABEL, COMPUTE_CLASS_LABEL)
_COMPUTE_CLASS = re.compile(r"kubernetes:cloud\.google\.com/[^:]+:ComputeClass")

# Volume sources that cannot hold a model's weights beyond the Pod's life, or are read-only by design
# (an image volume is mounted ro, noexec). A volume without a source is an emptyDir (API defaulting).
SCRATCH_VOLUMES = frozenset({"emptyDir", "configMap", "secret", "projected", "downwardAPI", "image"})

TAINT_VALUE_SCHEMA = PolicyConfigSchema(
    properties={
        "taintValue": {
            "type": "string",
            "default": GPU_TAINT_VALUE,
            "description": (
                f"Value of the {GPU_TAINT_KEY} taint that an `Equal` toleration must match, where the "
                "server's node pool is not in the stack."
            ),
        }
    }
)


# --------------------------------------------------------------------------------------------------
# serving-gpu-limit: the server container has a whole number of GPUs, at least 1.


def _gpu_limit_problem(ask: GpuContainer) -> str | None:
    if ask.limit is UNKNOWN:
        return None
    if ask.limit is None:
        if ask.request is None or ask.request is UNKNOWN:
            return f"{ask.name} has no {GPU_RESOURCE} limit"
        return f"{ask.name} requests {ask.request!r} {GPU_RESOURCE} without a limit"
    limit = as_int(ask.limit)
    if limit is UNKNOWN:
        return None
    if limit is None or limit < 1:
        return f"{ask.name} has {GPU_RESOURCE} limit {ask.limit!r}, not a whole number of at least 1"
    if ask.request is None or ask.request is UNKNOWN or as_int(ask.request) == limit:
        return None
    return f"{ask.name} requests {ask.request!r} {GPU_RESOURCE} but its limit is {ask.limit!r}"


_GPU_LIMIT_FIX = (
    f"a model server needs whole GPUs of its own: set resources.limits[{GPU_RESOURCE}] to the GPUs it "
    "uses (1 or more; requests, if given, the same), or the device plugin gives it none and the "
    "scheduler may place it where no GPU is free; on a DRA-GPU pool, claim them instead (the Pod's "
    "resourceClaims, the container's resources.claims)"
)


def _claims_devices(container: Any, pod: Any) -> Any:
    """The container uses a claim the Pod makes (`resources.claims` naming a `resourceClaims` entry):
    on a DRA-GPU pool its GPUs come that way, not as a limit (the DRA policies check which pool)."""
    used = items(get(container, "resources", "claims"))
    made = items(get(pod, "resourceClaims"))
    if used is UNKNOWN or made is UNKNOWN:
        return UNKNOWN
    names = {get(c, "name") for c in made or []}
    return any(get(c, "name") in names for c in used or [])


def validate_serving_gpu_limit(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A model server's container has an integer nvidia.com/gpu limit of at least 1, and requests, if
    set, equal to it (with only the label to go by: at least one container does); or, asking for no
    nvidia.com/gpu, uses a device claim of its Pod (DRA)."""
    for server in server_pods(args.resource_type, args.name, args.props):
        if server.servers is UNKNOWN:
            continue
        if server.servers:
            problems = [
                None
                if gpu_ask(c, label).asks is False and _claims_devices(c, server.pod) is not False
                else _gpu_limit_problem(gpu_ask(c, label))
                for label, c in server.servers
            ]
        else:
            containers = known_items(get(server.pod, "containers"))
            asks = [gpu_ask(c, container_label("containers", i, c)) for i, c in enumerate(containers)]
            found = [_gpu_limit_problem(a) for a in asks]
            if not asks or None not in found:
                shaped = [p for a, p in zip(asks, found, strict=True) if a.asks is True]
                problems = shaped or [
                    f"no container of its Pod has a {GPU_RESOURCE} limit ({COMPONENT_LABEL}: "
                    f"{SERVER_COMPONENT} marks it a model server)"
                ]
            else:
                problems = []
        for problem in problems:
            if problem is not None:
                _report(report_violation, SERVING_GPU_LIMIT, server.subject, f"{problem}: {_GPU_LIMIT_FIX}")


# --------------------------------------------------------------------------------------------------
# serving-on-gpu-pool: tolerates the GPU taint, selects GPU nodes, and a pool it names is a tainted
# GPU pool.


@dataclass
class _Selection:
    """What a Pod's nodeSelector and required node affinity say about GPU nodes."""

    selects: Any = False  # True, False or UNKNOWN
    pools: set[str] = field(default_factory=set)  # cloud.google.com/gke-nodepool values
    classes: set[str] = field(default_factory=set)  # cloud.google.com/compute-class values


def _note(selection: _Selection, key: str, value: str) -> None:
    if key == NODEPOOL_LABEL:
        selection.pools.add(value)
    elif key == COMPUTE_CLASS_LABEL:
        selection.classes.add(value)


def _term_selects(term: Any, selection: _Selection) -> Any:
    """Whether one required nodeSelectorTerm keeps the Pod on GPU nodes (its expressions are ANDed)."""
    expressions = items(get(term, "matchExpressions"))
    if expressions is UNKNOWN:
        return UNKNOWN
    verdict: Any = False
    for expression in expressions or []:
        key, operator, values = get(expression, "key"), get(expression, "operator"), get(expression, "values")
        if any(is_unknown(v) for v in (expression, key, operator, values)):
            verdict = UNKNOWN if verdict is False else verdict
            continue
        if key not in _GPU_NODE_LABELS:
            continue
        if operator == "Exists" and key == ACCELERATOR_LABEL:
            verdict = True
        elif operator == "In":
            names = known_items(values)
            if names and all(isinstance(n, str) and n for n in names):
                verdict = True
                for value in names:
                    _note(selection, key, value)
            elif UNKNOWN in names:
                verdict = UNKNOWN if verdict is False else verdict
    return verdict


def _selection(pod: Any) -> _Selection:
    selection = _Selection()
    unknown = False
    selector = entries(get(pod, "nodeSelector"))
    if selector is UNKNOWN:
        unknown = True
    for key in _GPU_NODE_LABELS:
        value = (selector or {}).get(key) if selector is not UNKNOWN else None
        if value is UNKNOWN or (isinstance(value, str) and value):
            selection.selects = True
            if isinstance(value, str):
                _note(selection, key, value)
    path = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    terms = items(get(pod, *path))
    if terms is UNKNOWN:
        unknown = True
    elif terms:
        # The terms are ORed: all of them must keep the Pod on GPU nodes.
        verdicts = [_term_selects(term, selection) for term in terms]
        if all(v is True for v in verdicts):
            selection.selects = True
        elif False not in verdicts:
            unknown = True
    if selection.selects is not True and unknown:
        selection.selects = UNKNOWN
    return selection


def _pool_problem(declared: list[Any]) -> str | None:
    """Why the node pool(s) of one name are not a tainted GPU pool (None: it is one, or not known)."""
    problems = []
    for props in declared:
        accelerators = gpu_accelerators(props)
        taint = gpu_taint(props)
        if accelerators is UNKNOWN or taint is UNKNOWN or (accelerators and taint is not None):
            return None
        if not accelerators:
            problems.append("has no GPUs (nodeConfig.guestAccelerators is empty)")
        else:
            problems.append(
                f"has no {GPU_TAINT_KEY}:{GPU_TAINT_EFFECT} taint (nodeConfig.taints), so any Pod may "
                "take its GPU nodes"
            )
    return problems[0] if problems else None


def _class_pools(props: Any) -> tuple[list[str], set[str]] | None:
    """A declared ComputeClass's priorities without a GPU, and the node pools its priorities name;
    None when they are not known yet."""
    priorities = items(get(props, "spec", "priorities"))
    if priorities is UNKNOWN:
        return None
    without: list[str] = []
    pools: set[str] = set()
    for index, priority in enumerate(priorities or []):
        gpu, named = get(priority, "gpu"), items(get(priority, "nodepools"))
        if priority is UNKNOWN or gpu is UNKNOWN or named is UNKNOWN:
            return None
        if named:
            pools.update(n for n in named if isinstance(n, str))
        elif gpu is None:
            without.append(f"spec.priorities[{index}]")
    return without, pools


def _stack_objects(resources: Iterable[PolicyResource]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """(node pool name -> the NodePools of that name, ComputeClass name -> its props)."""
    pools: dict[str, list[Any]] = {}
    classes: dict[str, Any] = {}
    for r in resources:
        if r.resource_type == NODE_POOL and isinstance(get(r.props, "name"), str):
            pools.setdefault(get(r.props, "name"), []).append(r.props)
        elif _COMPUTE_CLASS.fullmatch(r.resource_type) and isinstance(get(r.props, "metadata", "name"), str):
            classes[get(r.props, "metadata", "name")] = r.props
    return pools, classes


def _placement_problems(
    pod: Any, pools: dict[str, list[Any]], classes: dict[str, Any], default_value: str
) -> list[str]:
    problems = []
    selection = _selection(pod)
    named = set(selection.pools)
    for name in sorted(selection.classes):
        found = _class_pools(classes[name]) if name in classes else None
        if found is None:
            continue
        without, class_pools = found
        named |= class_pools
        if without:
            problems.append(
                f"selects ComputeClass {name!r} ({COMPUTE_CLASS_LABEL}), whose {', '.join(without)} "
                "name(s) no GPU (gpu) or node pool (nodepools): GKE may give the Pod a node without GPUs"
            )
    values = set()
    for name in sorted(named):
        problem = _pool_problem(pools[name]) if name in pools else None
        if problem:
            problems.append(f"runs on node pool {name!r} ({NODEPOOL_LABEL}), which {problem}")
        for props in pools.get(name, []):
            taint = gpu_taint(props)
            value = None if taint is None or taint is UNKNOWN else get(taint, "value")
            if taint is not None and taint is not UNKNOWN and (value is None or isinstance(value, str)):
                values.add(value or "")  # a taint without a value matches an Equal toleration of ""
    tolerations = get(pod, "tolerations")
    # An `Equal` toleration must match the value of the named pools' taint, else the configured one.
    for value in [] if is_unknown(tolerations) else sorted(values or {default_value}):
        verdicts = [tolerates(t, value) for t in known_items(tolerations)]
        if True not in verdicts and UNKNOWN not in verdicts:
            shown = f"{GPU_TAINT_KEY}={value}" if value else GPU_TAINT_KEY
            problems.append(
                f"its Pod spec does not tolerate the {shown}:NoSchedule taint of GPU nodes (only an "
                "admission controller that adds the toleration, such as GKE's ExtendedResourceToleration, "
                "lets it onto a GPU pool); add "
                f"{{key: {GPU_TAINT_KEY}, operator: Exists, effect: NoSchedule}}"
            )
            break
    if selection.selects is False:
        problems.append(
            f"its Pod selects no GPU nodes: neither its nodeSelector nor its required node affinity "
            f"names {', '.join(_GPU_NODE_LABELS)}, so the toleration lets it onto any GPU pool (another "
            f"GPU type, a training or Spot pool) without keeping it on its own; select the pool with "
            f"{NODEPOOL_LABEL} (Standard) or the GPU with {ACCELERATOR_LABEL}"
        )
    return problems


def validate_serving_on_gpu_pool(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """A model server's Pods tolerate the nvidia.com/gpu taint and select GPU nodes; a node pool (or
    ComputeClass) they name that the stack declares is a GPU pool with the nvidia.com/gpu taint."""
    value = (args.get_config() or {}).get("taintValue")
    default_value = TAINT_VALUE_SCHEMA.properties["taintValue"]["default"] if value is None else value
    pools, classes = _stack_objects(args.resources)
    for r in args.resources:
        for server in server_pods(r.resource_type, r.name, r.props):
            for problem in _placement_problems(server.pod, pools, classes, default_value):
                _report(report_violation, SERVING_ON_GPU_POOL, server.subject, problem, r.urn)


# --------------------------------------------------------------------------------------------------
# serving-weights-read-only: every volume that can hold weights is mounted read-only.


def _shown(value: Any) -> str:
    """A field's value as a stack file or manifest spells it."""
    if value is None:
        return "unset"
    return str(value).lower() if isinstance(value, bool) else repr(value)


def _volume_kind(volume: Any) -> Any:
    """A volume's source (`csi`, `persistentVolumeClaim`, ...), or UNKNOWN."""
    if is_unknown(volume):
        return UNKNOWN
    sources = entries(volume)
    if sources is UNKNOWN:
        return UNKNOWN
    sources = sources or {}
    kinds = [k for k, v in sources.items() if k != "name" and v is not None]
    if any(sources[k] is UNKNOWN for k in kinds):
        return UNKNOWN
    return kinds[0] if kinds else "emptyDir"


def _describe(kind: str, volume: Any) -> str:
    if kind == "csi":
        driver = get(volume, "csi", "driver")
        return f"csi, driver {driver}" if isinstance(driver, str) else "csi"
    if kind == "persistentVolumeClaim":
        claim = get(volume, "persistentVolumeClaim", "claimName")
        return f"persistentVolumeClaim {claim!r}" if isinstance(claim, str) else kind
    if kind == "hostPath":
        path = get(volume, "hostPath", "path")
        return f"hostPath {path}" if isinstance(path, str) else kind
    return kind


class _WeightVolume(NamedTuple):
    kind: str  # the volume source: csi, persistentVolumeClaim, ...; `volumeClaimTemplates` for a claim
    described: str  # `csi, driver gcsfuse.csi.storage.gke.io`
    volume: Any
    # persistentVolumeClaim.readOnly "will force the ReadOnly setting in VolumeMounts".
    forced: bool = False


def _weight_volumes(server: ServerPod) -> dict[str, _WeightVolume] | None:
    """The volumes that can hold weights, by name; None when the volumes are not known yet."""
    volumes = items(get(server.pod, "volumes"))
    if volumes is UNKNOWN:
        return None
    judged = {}
    for volume in volumes or []:
        name, kind = get(volume, "name"), _volume_kind(volume)
        if isinstance(name, str) and kind is not UNKNOWN and kind not in SCRATCH_VOLUMES:
            forced = kind == "persistentVolumeClaim" and get(volume, kind, "readOnly") is True
            judged[name] = _WeightVolume(kind, _describe(kind, volume), volume, forced)
    for name in server.claims if server.claims is not UNKNOWN else ():
        # A claim takes precedence over a volume of the same name.
        judged[name] = _WeightVolume("volumeClaimTemplates", "a volumeClaimTemplates claim", None)
    return judged


def _weights_problems(server: ServerPod) -> list[str]:
    judged = _weight_volumes(server)
    if judged is None:
        return []
    problems = []
    for name, weights in judged.items():
        read_only = get(weights.volume, "csi", "readOnly") if weights.kind == "csi" else True
        if read_only is not True and read_only is not UNKNOWN:
            problems.append(
                f"volume {name!r} ({weights.described}) has csi.readOnly {_shown(read_only)}: set it "
                "to true, so the CSI driver itself mounts the volume read-only (the Cloud Storage FUSE "
                "driver then mounts the bucket `ro`) and no container can change the weights"
            )
    for kind in ("initContainers", "containers"):
        containers = items(get(server.pod, kind))
        for index, container in enumerate([] if containers is UNKNOWN else containers or []):
            label = container_label(kind, index, container)
            mounts = items(get(container, "volumeMounts"))
            for mount in [] if mounts is UNKNOWN else mounts or []:
                name, read_only = get(mount, "name"), get(mount, "readOnly")
                if name not in judged or judged[name].forced or read_only is True or read_only is UNKNOWN:
                    continue
                at = get(mount, "mountPath")
                problems.append(
                    f"{label} mounts volume {name!r} ({judged[name].described})"
                    + (f" at {at}" if isinstance(at, str) else "")
                    + f" read-write (readOnly {_shown(read_only)}): set readOnly: "
                    "true, so a compromised or faulty container cannot change the weights every replica "
                    "loads (fill the volume from a separate Job)"
                )
            devices = items(get(container, "volumeDevices"))
            for device in [] if devices is UNKNOWN else devices or []:
                name = get(device, "name")
                if name in judged:
                    problems.append(
                        f"{label} attaches volume {name!r} ({judged[name].described}) as a raw block device "
                        "(volumeDevices), which has no read-only setting: mount it as a filesystem with "
                        "readOnly: true"
                    )
    return problems


def validate_serving_weights_read_only(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    """Every volume of a model server that can hold weights (anything but emptyDir, configMap, secret,
    projected, downwardAPI and image volumes) is mounted readOnly in every container that mounts it,
    and a CSI volume sets csi.readOnly."""
    for server in server_pods(args.resource_type, args.name, args.props):
        for problem in _weights_problems(server):
            _report(report_violation, SERVING_WEIGHTS_READ_ONLY, server.subject, problem)


# --------------------------------------------------------------------------------------------------
# The policies (appended to rules.POLICIES).

SERVING_POLICIES: list[Policy] = [
    ResourceValidationPolicy(
        name=SERVING_GPU_LIMIT,
        description=f"Model servers have an integer {GPU_RESOURCE} limit of at least 1, requests equal.",
        validate=validate_serving_gpu_limit,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.MEDIUM,
    ),
    StackValidationPolicy(
        name=SERVING_ON_GPU_POOL,
        description=(
            f"Model servers tolerate the {GPU_TAINT_KEY} taint and select GPU nodes; a node pool they "
            "name is a GPU pool with that taint."
        ),
        validate=validate_serving_on_gpu_pool,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=TAINT_VALUE_SCHEMA,
        severity=Severity.MEDIUM,
    ),
    ResourceValidationPolicy(
        name=SERVING_WEIGHTS_READ_ONLY,
        description="Model servers mount every volume that can hold weights read-only.",
        validate=validate_serving_weights_read_only,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
]
