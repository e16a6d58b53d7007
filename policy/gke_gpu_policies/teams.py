"""Team guardrail: in a team's namespace, every workload that asks for GPUs is queued by Kueue.

A team namespace is one the program made for a team (a Namespace labelled `gke-gpu/team`) or one that
holds a team's LocalQueue (labelled the same): its GPUs are shared through those queues, so a GPU Pod
outside them takes GPUs from the other teams' shares unseen. The same conventions as `rules` (camelCase
props, UNKNOWN never a violation, every message names its resource and ends with the policy name).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyResource,
    ReportViolation,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from .props import UNKNOWN, entries, get, items
from .scale_out import QUEUE_NAME_LABEL, _pod_asks_for_gpu, _report
from .shared import LEADER_WORKER_SET, LWS_TEMPLATES, group_kind

TEAM_QUEUE_LABEL = "team-gpu-workload-queue"
TEAM_LABEL = "gke-gpu/team"

_LOCAL_QUEUE = re.compile(r"kubernetes:kueue\.x-k8s\.io/[^:]+:LocalQueue")
# (API group, kind) -> the paths to its Pod specs; a JobSet has one per replicated job.
_TEMPLATE = ("spec", "template", "spec")
_POD_SPECS: dict[tuple[str, str], tuple[str, ...]] = {
    ("core", "Pod"): ("spec",),
    ("batch", "Job"): _TEMPLATE,
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template", "spec"),
    ("apps", "Deployment"): _TEMPLATE,
    ("apps", "StatefulSet"): _TEMPLATE,
    ("apps", "ReplicaSet"): _TEMPLATE,
}


def _pods(resource_type: str, props: Any) -> list[Any] | None:
    """The Pod specs of a workload (None for a type that is not one; UNKNOWN entries kept)."""
    key = group_kind(resource_type)
    if key is None:
        return None
    if key == ("jobset.x-k8s.io", "JobSet"):
        jobs = items(get(props, "spec", "replicatedJobs"))
        if jobs is UNKNOWN:
            return [UNKNOWN]
        return [get(job, "template", "spec", "template", "spec") for job in jobs or []]
    if key == LEADER_WORKER_SET:
        return [pod for _, t in LWS_TEMPLATES if (pod := get(props, *t, "spec")) is not None]
    path = _POD_SPECS.get(key)
    return None if path is None else [get(props, *path)]


def _team_namespaces(resources: Iterable[PolicyResource]) -> dict[str, set[str] | None]:
    """Team namespace -> the names of its LocalQueues (None when one of them is not known yet)."""
    teams: dict[str, set[str] | None] = {}
    for r in resources:
        labels = entries(get(r.props, "metadata", "labels"))
        if not isinstance(labels, dict) or TEAM_LABEL not in labels:
            continue
        if r.resource_type == "kubernetes:core/v1:Namespace":
            name = get(r.props, "metadata", "name")
            if isinstance(name, str):
                teams.setdefault(name, set())
        elif _LOCAL_QUEUE.fullmatch(r.resource_type):
            namespace, name = get(r.props, "metadata", "namespace"), get(r.props, "metadata", "name")
            if not isinstance(namespace, str):
                continue
            known = teams.setdefault(namespace, set())
            if isinstance(name, str) and known is not None:
                known.add(name)
            else:
                teams[namespace] = None
    return teams


def validate_team_gpu_workload_queue(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """In a team namespace, a workload whose Pods ask for nvidia.com/gpu carries the
    kueue.x-k8s.io/queue-name label, naming one of the namespace's LocalQueues."""
    teams = _team_namespaces(args.resources)
    if not teams:
        return
    for r in args.resources:
        namespace = get(r.props, "metadata", "namespace")
        if not isinstance(namespace, str) or namespace not in teams:
            continue
        pods = _pods(r.resource_type, r.props)
        if not pods or not any(_pod_asks_for_gpu(pod) is True for pod in pods):
            continue
        # Kueue reads a CronJob's queue from the Jobs it makes: its jobTemplate's labels.
        where = ("spec", "jobTemplate", "metadata") if r.resource_type.endswith(":CronJob") else ("metadata",)
        label = get(r.props, *where, "labels", QUEUE_NAME_LABEL)
        if label is UNKNOWN:
            continue
        queues = teams[namespace]
        if isinstance(label, str) and label.strip() and (queues is None or label in queues):
            continue
        allowed = ", ".join(sorted(queues)) if queues else "(none declared here)"
        found = "is missing" if label is None else f"is {label!r}, not a LocalQueue of the namespace"
        field = ".".join((*where, "labels"))
        kind = r.resource_type.rsplit(":", 1)[-1]
        _report(
            report_violation,
            TEAM_QUEUE_LABEL,
            f"{kind} {r.name!r} ({namespace})",
            f"its Pods ask for nvidia.com/gpu in team namespace {namespace}, but {field}"
            f"[{QUEUE_NAME_LABEL}] {found}: it would take GPUs outside the team's Kueue quota. Set the "
            f"label to one of the namespace's LocalQueues: {allowed}",
            r.urn,
        )


TEAM_POLICIES: list[Policy] = [
    StackValidationPolicy(
        name=TEAM_QUEUE_LABEL,
        description=(
            f"In a team namespace, workloads whose Pods ask for nvidia.com/gpu carry {QUEUE_NAME_LABEL} "
            "naming one of its LocalQueues."
        ),
        validate=validate_team_gpu_workload_queue,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.MEDIUM,
    ),
]
