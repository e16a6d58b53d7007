"""GPU node pool guardrails: the nvidia.com/gpu taint, bounded autoscaling, and GPU sharing only on
pools labelled as trusted to share.

The same conventions as `rules` (camelCase props, UNKNOWN never a violation, every message names its
resource and ends with the policy name in brackets); `rules` adds these to `POLICIES`.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from .base import _report
from .constants import (
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    NODE_POOL,
    SHARING_TRUSTED_LABEL,
    SHARING_TRUSTED_VALUE,
)
from .props import UNKNOWN, as_int, entries, get, is_unknown, known_items
from .shared import gpu_accelerators, gpu_taint

# Policy names (IDs in `pulumi preview` output and keys of the pack config).
GPU_POOL_TAINT = "gpu-pool-taint"
GPU_POOL_AUTOSCALING = "gpu-pool-autoscaling-max"
GPU_SHARING_TRUSTED = "gpu-sharing-trusted-pool"


def _pool_subject(name: str) -> str:
    return f"GPU node pool {name!r}"


def _known_gpu_accelerators(args: ResourceValidationArgs) -> list[Any] | None:
    """A GPU node pool's guestAccelerators, once known; None for anything else (no violation then)."""
    if args.resource_type != NODE_POOL:
        return None
    accelerators = gpu_accelerators(args.props)
    return None if accelerators is UNKNOWN else accelerators


def _describe_taints(taints: list[Any]) -> str:
    parts = []
    for taint in taints:
        if is_unknown(taint):
            parts.append("?")
        else:
            parts.append(f"{get(taint, 'key')}={get(taint, 'value') or ''}:{get(taint, 'effect')}")
    return ", ".join(parts) or "none"


def validate_gpu_pool_taint(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A GPU node pool carries the nvidia.com/gpu taint with effect NO_SCHEDULE."""
    accelerators = _known_gpu_accelerators(args)
    if accelerators is None:
        return
    if gpu_taint(args.props) is not None:  # the taint, or one not known yet
        return
    taints = known_items(get(args.props, "nodeConfig", "taints"))
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
    accelerators = _known_gpu_accelerators(args)
    if accelerators is None:
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
    accelerators = _known_gpu_accelerators(args)
    if accelerators is None:
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
