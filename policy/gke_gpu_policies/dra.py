"""DRA guardrails: a pool whose GPUs NVIDIA's DRA driver hands out is asked through claims, and a
multi-node job on a GB200/GB300 NVL72 rack asks for its ComputeDomain's IMEX channel.

* A DRA-GPU node pool is one whose nodes carry `gke-no-default-nvidia-gpu-device-plugin=true`: GKE's
  device plugin does not run there (GKE "Prepare GKE infrastructure for DRA workloads"), so no node
  advertises `nvidia.com/gpu` and a Pod asking for it never schedules.
* A rack pool is a node pool of `nvidia-gb200` or `nvidia-gb300`: its VMs reach each other's GPUs
  over NVLink only inside a ComputeDomain (NVIDIA's DRA driver; cluster-toolkit's examples/gke-a4x).
  A JobSet or Job with more than one Pod at once on such a pool claims the channel template of a
  ComputeDomain in its namespace.

A workload is tied to a pool by its Pod spec's nodeSelector `cloud.google.com/gke-nodepool`. The same
conventions as `rules` (camelCase props, UNKNOWN never a violation, messages end with the policy name);
`rules` adds `DRA_POLICIES` to `POLICIES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
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

from .base import _report
from .constants import GPU_RESOURCE, NODE_POOL
from .props import UNKNOWN, as_int, entries, get, items, known_items
from .shared import group_kind

DRA_POOL_CLAIMS = "dra-pool-gpu-claims"
RACK_COMPUTE_DOMAIN = "rack-workload-compute-domain"

NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
NO_DEVICE_PLUGIN_LABEL = "gke-no-default-nvidia-gpu-device-plugin"
RACK_ACCELERATORS = ("nvidia-gb200", "nvidia-gb300")
_COMPUTE_DOMAIN = re.compile(r"kubernetes:resource\.nvidia\.com/[^:]+:ComputeDomain")
_JOBSET = re.compile(r"kubernetes:jobset\.x-k8s\.io/[^:]+:JobSet")
_LWS = re.compile(r"kubernetes:leaderworkerset\.x-k8s\.io/[^:]+:LeaderWorkerSet")
_POD_SPEC = {
    ("core", "Pod"): ("spec",),
    ("batch", "Job"): ("spec", "template", "spec"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template", "spec"),
    **{
        (group, kind): ("spec", "template", "spec")
        for group in ("apps",)
        for kind in ("Deployment", "StatefulSet")
    },
}


def _pools(resources: Iterable[PolicyResource]) -> tuple[set[str], set[str]]:
    """The names of the DRA-GPU pools and of the rack pools."""
    dra, racks = set(), set()
    for r in resources:
        if r.resource_type != NODE_POOL:
            continue
        name = get(r.props, "name")
        if not isinstance(name, str):
            continue
        if get(r.props, "nodeConfig", "labels", NO_DEVICE_PLUGIN_LABEL) == "true":
            dra.add(name)
        for accelerator in known_items(get(r.props, "nodeConfig", "guestAccelerators")):
            if get(accelerator, "type") in RACK_ACCELERATORS:
                racks.add(name)
    return dra, racks


def _pod_specs(r: PolicyResource) -> Iterator[tuple[str, Any, int | None]]:
    """(where, Pod spec, Pods at once or None) of each Pod template of a workload."""
    if _JOBSET.fullmatch(r.resource_type):
        for index, job in enumerate(known_items(get(r.props, "spec", "replicatedJobs"))):
            spec = get(job, "template", "spec")
            replicas = as_int(get(job, "replicas"))
            parallelism = as_int(get(spec, "parallelism"))
            pods = None
            if isinstance(replicas, int) and isinstance(parallelism, int):
                pods = replicas * parallelism
            yield f" replicatedJobs[{index}]", get(spec, "template", "spec"), pods
        return
    if _LWS.fullmatch(r.resource_type):
        # A model server whose replica spans nodes: the leader's Pod and the workers' (lws v1).
        group = get(r.props, "spec", "leaderWorkerTemplate")
        for role in ("leaderTemplate", "workerTemplate"):
            yield f" {role}", get(group, role, "spec"), None
        return
    key = group_kind(r.resource_type)
    if key in _POD_SPEC:
        parallelism = as_int(get(r.props, "spec", "parallelism")) if key == ("batch", "Job") else 1
        yield "", get(r.props, *_POD_SPEC[key]), parallelism if isinstance(parallelism, int) else None


def _pool_of(pod: Any) -> Any:
    return get(pod, "nodeSelector", NODEPOOL_LABEL)


def _limit_askers(pod: Any) -> list[str]:
    asking = []
    for field in ("initContainers", "containers"):
        for index, container in enumerate(known_items(get(pod, field))):
            for section in ("limits", "requests"):
                resources = entries(get(container, "resources", section))
                if resources is not UNKNOWN and resources is not None and GPU_RESOURCE in resources:
                    name = get(container, "name")
                    asking.append(name if isinstance(name, str) else f"{field}[{index}]")
                    break
    return asking


def validate_dra_pool_claims(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Workloads on a DRA-GPU pool ask for GPUs through resourceClaims, never nvidia.com/gpu."""
    dra, _ = _pools(args.resources)
    if not dra:
        return
    for r in args.resources:
        for where, pod, _ in _pod_specs(r):
            pool = _pool_of(pod)
            if pod is UNKNOWN or not isinstance(pool, str) or pool not in dra:
                continue
            asking = _limit_askers(pod)
            if asking:
                _report(
                    report_violation,
                    DRA_POOL_CLAIMS,
                    f"{r.resource_type.rsplit(':', 1)[-1]} {r.name!r}{where}",
                    f"container(s) {', '.join(asking)} ask for {GPU_RESOURCE} on node pool {pool}, whose "
                    f"GPUs NVIDIA's DRA driver hands out ({NO_DEVICE_PLUGIN_LABEL}=true: no device plugin "
                    f"advertises {GPU_RESOURCE}), so the Pod does not schedule (unless the cluster runs "
                    "Kubernetes' alpha DRAExtendedResource, which the chart's DeviceClass names it for); "
                    "claim the GPUs through a ResourceClaimTemplate of the DeviceClass gpu.nvidia.com "
                    "instead",
                    r.urn,
                )


def _channel_templates(resources: Iterable[PolicyResource]) -> dict[Any, set[str]]:
    """namespace -> the channel ResourceClaimTemplates of its ComputeDomains."""
    found: dict[Any, set[str]] = {}
    for r in resources:
        if _COMPUTE_DOMAIN.fullmatch(r.resource_type):
            template = get(r.props, "spec", "channel", "resourceClaimTemplate", "name")
            if isinstance(template, str):
                found.setdefault(get(r.props, "metadata", "namespace"), set()).add(template)
    return found


def validate_rack_compute_domain(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """A multi-node JobSet or Job on a rack pool claims the channel of a ComputeDomain in its namespace."""
    _, racks = _pools(args.resources)
    if not racks:
        return
    channels = _channel_templates(args.resources)
    for r in args.resources:
        namespace = get(r.props, "metadata", "namespace")
        for where, pod, pods in _pod_specs(r):
            pool = _pool_of(pod)
            if pod is UNKNOWN or not isinstance(pool, str) or pool not in racks or pods is None or pods < 2:
                continue
            claims = items(get(pod, "resourceClaims"))
            if claims is UNKNOWN:
                continue
            templates = {get(c, "resourceClaimTemplateName") for c in claims or []}
            if templates & channels.get(namespace, set()):
                continue
            _report(
                report_violation,
                RACK_COMPUTE_DOMAIN,
                f"{r.resource_type.rsplit(':', 1)[-1]} {r.name!r}{where}",
                f"{pods} Pods on rack node pool {pool} claim no ComputeDomain channel: without one the "
                "VMs reach each other's GPUs only over the network, not NVLink; declare a ComputeDomain "
                "(resource.nvidia.com) in the namespace and list its channel ResourceClaimTemplate in "
                "the Pods' resourceClaims",
                r.urn,
            )


DRA_POLICIES: list[Policy] = [
    StackValidationPolicy(
        name=DRA_POOL_CLAIMS,
        description=f"Workloads on a DRA-GPU pool claim GPUs through resourceClaims, not {GPU_RESOURCE}.",
        validate=validate_dra_pool_claims,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    StackValidationPolicy(
        name=RACK_COMPUTE_DOMAIN,
        description="Multi-node jobs on a GB200/GB300 rack pool claim a ComputeDomain's IMEX channel.",
        validate=validate_rack_compute_domain,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.MEDIUM,
    ),
]
