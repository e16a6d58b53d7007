"""Scale-out guardrails: GPUDirect pools in one zone, and Kueue queues for GPU pools and JobSets.

The same conventions as `rules` (camelCase props, UNKNOWN never a violation, every message names its
resource and ends with the policy name in brackets, through `base._report`). This module imports
only `base`, `props` and `constants`; `rules` adds `SCALE_OUT_POLICIES` to the pack's `POLICIES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from .base import _report
from .constants import GPU_RESOURCE, NODE_POOL
from .props import UNKNOWN, entries, get, is_unknown, items

# Policy names (IDs in `pulumi preview` output and keys of the pack config).
GPUDIRECT_SINGLE_ZONE = "gpudirect-pool-single-zone"
KUEUE_POOL_QUEUE = "kueue-gpu-pool-queue"
JOBSET_QUEUE_LABEL = "jobset-gpu-queue-label"

# The node label GKE puts on every node: its pool's name (what a pool's ResourceFlavor selects).
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
# The label that puts a Job or JobSet in a Kueue LocalQueue.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"

# Any served version of the Kueue and JobSet APIs (the program declares kueue v1beta2, jobset v1alpha2).
_KUEUE_TYPE = re.compile(r"kubernetes:kueue\.x-k8s\.io/[^:]+:(ResourceFlavor|ClusterQueue)")
_JOBSET_TYPE = re.compile(r"kubernetes:jobset\.x-k8s\.io/[^:]+:JobSet")


def _is_gpu_pool(props: Any) -> Any:
    """True for a NodePool with guestAccelerators, False without, UNKNOWN when not known yet."""
    accelerators = items(get(props, "nodeConfig", "guestAccelerators"))
    return UNKNOWN if accelerators is UNKNOWN else bool(accelerators)


# --------------------------------------------------------------------------------------------------
# GPUDirect pools: one zone.


_ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")
# G4 machines' extra NIC (the stack's opt-in secondNetwork) is a plain gVNIC on a regional subnet, not
# a GPUDirect NIC: "As RDMA networking and the Google gIB plugin are not supported for G4 machines, the
# G4 instances use standard TCP/IP networking" (cluster-toolkit@1047080375 examples/gke-g4/README.md).
# Nothing Google documents keeps such a pool in one zone, so the stack accepts several and so does this.
_NO_GPUDIRECT_MACHINES = ("g4-",)


def validate_gpudirect_single_zone(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A node pool with additional node networks (GPUDirect NICs) lists exactly one nodeLocations zone."""
    if args.resource_type != NODE_POOL:
        return
    networks = items(get(args.props, "networkConfig", "additionalNodeNetworkConfigs"))
    if networks is UNKNOWN or not networks:
        return
    machine = get(args.props, "nodeConfig", "machineType")
    if isinstance(machine, str) and machine.startswith(_NO_GPUDIRECT_MACHINES):
        return
    locations = items(get(args.props, "nodeLocations"))
    if locations is UNKNOWN:
        return
    locations = locations or []
    if len(locations) == 1:
        return
    location = get(args.props, "location")
    if not locations and (location is UNKNOWN or is_unknown(location)):
        return
    if not locations and isinstance(location, str) and _ZONE.fullmatch(location):
        return  # a zonal cluster's pool without nodeLocations is in the cluster's one zone
    if locations:
        shown = ", ".join("?" if is_unknown(z) else str(z) for z in locations)
        found = f"spans {len(locations)} zones (nodeLocations: {shown})"
    else:
        found = "has no nodeLocations, so it spans every zone of its cluster"
    _report(
        report_violation,
        GPUDIRECT_SINGLE_ZONE,
        f"node pool {args.name!r}",
        f"attaches {len(networks)} GPUDirect NIC(s) (networkConfig.additionalNodeNetworkConfigs) but "
        f"{found}: set nodeLocations to exactly one zone. A multi-node NCCL job's nodes must be close "
        "together (one zone, compact placement): GPUDirect NICs and the RoCE VPC are zonal, and "
        "cross-zone traffic adds latency and egress cost",
    )


# --------------------------------------------------------------------------------------------------
# Kueue: every GPU pool has a ResourceFlavor that a ClusterQueue lists.


@dataclass
class _Kueue:
    """What a stack's Kueue objects say about pools; `*_unknown` when a value is not known yet."""

    present: bool = False
    # flavor name -> the pool names it selects (cloud.google.com/gke-nodepool).
    flavors: dict[str, set[str]] = field(default_factory=dict)
    # Flavors whose name or node labels are not known: they may select any pool.
    flavor_unknown: bool = False
    queued_flavors: set[str] = field(default_factory=set)
    # A ClusterQueue whose flavor list is not known: it may list any flavor.
    queue_unknown: bool = False


def _kueue_objects(resources: Iterable[PolicyResource]) -> _Kueue:
    kueue = _Kueue()
    for r in resources:
        match = _KUEUE_TYPE.fullmatch(r.resource_type)
        if match is None:
            continue
        kueue.present = True
        if match.group(1) == "ResourceFlavor":
            name = get(r.props, "metadata", "name")
            pool = get(r.props, "spec", "nodeLabels", NODEPOOL_LABEL)
            if pool is None:
                continue  # selects no pool by name
            if is_unknown(pool) or not isinstance(name, str):
                # It may select any pool, or its name (unknown, or auto-named) may be in any queue.
                kueue.flavor_unknown = True
                continue
            kueue.flavors.setdefault(name, set()).add(str(pool))
            continue
        groups = items(get(r.props, "spec", "resourceGroups"))
        if groups is UNKNOWN:
            kueue.queue_unknown = True
            continue
        for group in groups or []:
            flavors = items(get(group, "flavors"))
            if flavors is UNKNOWN:
                kueue.queue_unknown = True
                continue
            for flavor in flavors or []:
                name = get(flavor, "name")
                if isinstance(name, str):
                    kueue.queued_flavors.add(name)
                elif name is UNKNOWN:
                    kueue.queue_unknown = True
    return kueue


def validate_kueue_pool_queue(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """With Kueue in the stack, every GPU node pool is selected by a ResourceFlavor that a ClusterQueue
    lists (the flavor's nodeLabels has cloud.google.com/gke-nodepool: <pool name>)."""
    kueue = _kueue_objects(args.resources)
    if not kueue.present:
        return
    for r in args.resources:
        if r.resource_type != NODE_POOL or _is_gpu_pool(r.props) is not True:
            continue
        pool = get(r.props, "name")
        if not isinstance(pool, str):
            continue  # not known yet (auto-named): cannot match a flavor's node label
        selecting = sorted(name for name, pools in kueue.flavors.items() if pool in pools)
        if any(name in kueue.queued_flavors for name in selecting):
            continue
        if kueue.flavor_unknown or (selecting and kueue.queue_unknown):
            continue
        if selecting:
            found = (
                f"ResourceFlavor(s) {', '.join(selecting)} select it, but no ClusterQueue lists them in "
                "spec.resourceGroups[].flavors"
            )
        else:
            found = f"no ResourceFlavor has spec.nodeLabels {NODEPOOL_LABEL}: {pool}"
        _report(
            report_violation,
            KUEUE_POOL_QUEUE,
            f"GPU node pool {r.name!r} ({pool})",
            f"the stack runs Kueue but the pool has no queue: {found}. Jobs queued through Kueue never "
            "land on it, and Pods that reach it bypass the quota; add a ResourceFlavor with that node "
            "label and list it in a ClusterQueue (GpuBatchQueues declares both per pool)",
            r.urn,
        )


# --------------------------------------------------------------------------------------------------
# JobSets that ask for GPUs carry a queue label.


def _pod_asks_for_gpu(pod: Any) -> Any:
    """True if a container or init container of a Pod spec asks for nvidia.com/gpu, else False or
    UNKNOWN."""
    verdict: Any = False
    for kind in ("initContainers", "containers"):
        containers = items(get(pod, kind))
        if containers is UNKNOWN:
            verdict = UNKNOWN
            continue
        for container in containers or []:
            for section in ("limits", "requests"):
                resources = entries(get(container, "resources", section))
                if resources is UNKNOWN:
                    verdict = UNKNOWN
                elif resources is not None and GPU_RESOURCE in resources:
                    return True
    return verdict


def _jobset_gpu_jobs(props: Any) -> list[str]:
    """The replicatedJobs whose Pods are known to ask for nvidia.com/gpu."""
    jobs = items(get(props, "spec", "replicatedJobs"))
    if jobs is UNKNOWN:
        return []
    asking = []
    for index, job in enumerate(jobs or []):
        if _pod_asks_for_gpu(get(job, "template", "spec", "template", "spec")) is True:
            name = get(job, "name")
            asking.append(name if isinstance(name, str) else f"replicatedJobs[{index}]")
    return asking


def validate_jobset_queue_label(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """A JobSet whose Pods ask for nvidia.com/gpu has a non-empty kueue.x-k8s.io/queue-name label."""
    if _JOBSET_TYPE.fullmatch(args.resource_type) is None:
        return
    label = get(args.props, "metadata", "labels", QUEUE_NAME_LABEL)
    if label is UNKNOWN or (isinstance(label, str) and label.strip()):
        return
    asking = _jobset_gpu_jobs(args.props)
    if not asking:
        return
    namespace, name = get(args.props, "metadata", "namespace"), get(args.props, "metadata", "name")
    where = f" ({namespace}/{name})" if isinstance(namespace, str) and isinstance(name, str) else ""
    found = "is missing" if label is None else f"is {label!r}"
    _report(
        report_violation,
        JOBSET_QUEUE_LABEL,
        f"JobSet {args.name!r}{where}",
        f"replicated job(s) {', '.join(asking)} ask for {GPU_RESOURCE} but metadata.labels"
        f"[{QUEUE_NAME_LABEL}] {found}: Kueue never admits it, so it runs outside the GPU quota (or, "
        "with manageJobsWithoutQueueName, never starts); set the label to the namespace's LocalQueue",
    )


# --------------------------------------------------------------------------------------------------
# The policies (appended to rules.POLICIES).

SCALE_OUT_POLICIES: list[Policy] = [
    ResourceValidationPolicy(
        name=GPUDIRECT_SINGLE_ZONE,
        description="Node pools with GPUDirect NICs (additionalNodeNetworkConfigs) are in exactly one zone.",
        validate=validate_gpudirect_single_zone,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.HIGH,
    ),
    StackValidationPolicy(
        name=KUEUE_POOL_QUEUE,
        description="With Kueue, every GPU node pool has a ResourceFlavor that a ClusterQueue lists.",
        validate=validate_kueue_pool_queue,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.MEDIUM,
    ),
    ResourceValidationPolicy(
        name=JOBSET_QUEUE_LABEL,
        description=f"JobSets whose Pods ask for {GPU_RESOURCE} carry the {QUEUE_NAME_LABEL} label.",
        validate=validate_jobset_queue_label,
        enforcement_level=EnforcementLevel.MANDATORY,
        severity=Severity.MEDIUM,
    ),
]
