"""Guardrails on Kubernetes workloads that ask for GPUs: a whole-number nvidia.com/gpu limit with
requests equal to it, and a toleration of the GPU nodes' taint.

A workload is a Pod, Job, CronJob, Deployment, DaemonSet, StatefulSet or ReplicaSet (`pod_spec_path`),
or a LeaderWorkerSet, each of its two Pod templates judged on its own. The same conventions as `rules`
(camelCase props, UNKNOWN never a violation, every message names its resource and ends with the
policy name in brackets); `rules` adds these to `POLICIES`.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import PolicyConfigSchema, ReportViolation, ResourceValidationArgs

from .base import _report, _setting
from .constants import GPU_RESOURCE, GPU_TAINT_KEY, GPU_TAINT_VALUE
from .props import UNKNOWN, as_int, get, items
from .shared import LEADER_WORKER_SET, LWS_TEMPLATES, gpu_containers, group_kind, tolerates, workload_subject

# Policy names (IDs in `pulumi preview` output and keys of the pack config).
WORKLOAD_GPU_LIMITS = "gpu-workload-limits"
WORKLOAD_GPU_TOLERATION = "gpu-workload-toleration"

TOLERATION_SCHEMA = PolicyConfigSchema(
    properties={
        "taintValue": {
            "type": "string",
            "default": GPU_TAINT_VALUE,
            "description": f"Value of the {GPU_TAINT_KEY} taint that an `Equal` toleration must match.",
        }
    }
)

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
        limit = as_int(c.limit)
        if limit is UNKNOWN:
            continue
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
