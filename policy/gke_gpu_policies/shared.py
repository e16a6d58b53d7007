"""What the rule modules share about GPU containers, tolerations and GPU node pools.

`pools`, `capacity`, `workloads` (the GPU pool and workload rules) and `serving` (the model-server
rules) all read these. The same conventions as `rules`: camelCase props, UNKNOWN (`props`) for a value
not known yet, never a violation.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from .constants import GPU_RESOURCE, GPU_TAINT_EFFECT, GPU_TAINT_KEY
from .props import UNKNOWN, entries, get, is_unknown, items

_K8S_TYPE = re.compile(r"kubernetes:([^/:]+)/[^/:]+:([A-Za-z]+)")
LEADER_WORKER_SET = ("leaderworkerset.x-k8s.io", "LeaderWorkerSet")
# A LeaderWorkerSet's two Pod templates, as (where, path); its leader runs the worker template when it
# has none of its own (lws v0.10.0 api/leaderworkerset/v1/leaderworkerset_types.go).
LWS_TEMPLATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("leader template", ("spec", "leaderWorkerTemplate", "leaderTemplate")),
    ("worker template", ("spec", "leaderWorkerTemplate", "workerTemplate")),
)


def group_kind(resource_type: str) -> tuple[str, str] | None:
    """(API group, kind) of a Kubernetes resource type token (`core` for the core group); None for
    other types."""
    match = _K8S_TYPE.fullmatch(resource_type)
    return (match.group(1), match.group(2)) if match else None


def workload_subject(resource_type: str, name: str, props: Any, where: str = "") -> str:
    """How messages name a workload: `Deployment 'serve-chat-deployment' (serve-chat/chat)`, with
    `, <where>` for one of several Pod templates."""
    kind = resource_type.rsplit(":", 1)[-1]
    namespace, object_name = get(props, "metadata", "namespace"), get(props, "metadata", "name")
    place = (
        f" ({namespace}/{object_name})" if isinstance(namespace, str) and isinstance(object_name, str) else ""
    )
    return f"{kind} {name!r}{place}" + (f", {where}" if where else "")


class GpuContainer(NamedTuple):
    """One container's nvidia.com/gpu ask."""

    name: str  # how messages name it: `containers[0] 'vllm'`
    limit: Any  # the limit's value, None if absent, UNKNOWN
    request: Any
    asks: Any  # True, False or UNKNOWN


def gpu_ask(container: Any, label: str) -> GpuContainer:
    """A container's nvidia.com/gpu limit and request (UNKNOWN where not known yet)."""
    if is_unknown(container):
        return GpuContainer(label, UNKNOWN, UNKNOWN, UNKNOWN)
    limits = entries(get(container, "resources", "limits"))
    requests = entries(get(container, "resources", "requests"))
    present = [m if m is UNKNOWN else (m is not None and GPU_RESOURCE in m) for m in (limits, requests)]
    asks = True if True in present else (UNKNOWN if UNKNOWN in present else False)
    limit = UNKNOWN if limits is UNKNOWN else (limits or {}).get(GPU_RESOURCE)
    request = UNKNOWN if requests is UNKNOWN else (requests or {}).get(GPU_RESOURCE)
    return GpuContainer(label, limit, request, asks)


def container_label(field: str, index: int, container: Any) -> str:
    name = get(container, "name")
    return f"{field}[{index}]" + (f" {name!r}" if isinstance(name, str) else "")


def gpu_containers(pod: Any) -> list[GpuContainer] | Any:
    """Each container's nvidia.com/gpu limit and request; UNKNOWN when the containers are not known."""
    result: list[GpuContainer] = []
    for field in ("initContainers", "containers"):
        containers = items(get(pod, field))
        if containers is UNKNOWN:
            return UNKNOWN
        for index, container in enumerate(containers or []):
            result.append(gpu_ask(container, container_label(field, index, container)))
    return result


def tolerates(toleration: Any, taint_value: str) -> Any:
    """Whether a toleration tolerates nvidia.com/gpu=<taint_value>:NoSchedule (or UNKNOWN)."""
    if is_unknown(toleration):
        return UNKNOWN
    key, operator = get(toleration, "key"), get(toleration, "operator")
    effect, value = get(toleration, "effect"), get(toleration, "value")
    if any(is_unknown(v) for v in (key, operator, effect, value)):
        return UNKNOWN
    operator = operator or "Equal"
    if effect not in (None, "", "NoSchedule"):
        return False
    if key in (None, ""):
        return operator == "Exists"  # the wildcard toleration tolerates every taint
    if key != GPU_TAINT_KEY:
        return False
    return operator == "Exists" or (operator == "Equal" and (value or "") == taint_value)


def gpu_accelerators(props: Any) -> list[Any] | Any:
    """A NodePool's guestAccelerators: a non-empty list (a GPU pool), UNKNOWN, or None (no GPU)."""
    accelerators = items(get(props, "nodeConfig", "guestAccelerators"))
    if accelerators is UNKNOWN:
        return UNKNOWN
    return accelerators or None


def gpu_taint(props: Any) -> Any:
    """A NodePool's nvidia.com/gpu NO_SCHEDULE taint (its mapping), None when it has none, UNKNOWN
    when one of its taints is not known yet."""
    taints = items(get(props, "nodeConfig", "taints"))
    if taints is UNKNOWN:
        return UNKNOWN
    maybe = False
    for taint in taints or []:
        key, effect = get(taint, "key"), get(taint, "effect")
        if key == GPU_TAINT_KEY and effect == GPU_TAINT_EFFECT:
            return taint
        if is_unknown(taint) or is_unknown(key) or (key == GPU_TAINT_KEY and is_unknown(effect)):
            maybe = True
    return UNKNOWN if maybe else None
