"""The Compute Engine quota a stack's GPU pools can ask for: per region and quota metric, the most
GPUs the pools' autoscaling limits allow, by how the pool buys its VMs (docs/preflight.md).

Metric names are Compute Engine's (the `Quota.metric` enum of the Compute API and the Quotas page):
NVIDIA_<GPU>_GPUS for on-demand VMs, PREEMPTIBLE_NVIDIA_<GPU>_GPUS for Spot VMs, and GPUS_ALL_REGIONS
across the project. Which one Dynamic Workload Scheduler (flex-start, queued provisioning) draws on:
the preemptible one, as Google documents it for DWS Flex Start on Managed Service for Apache Spark
("DWS Flex Start consumes the preemptible version of the GPU quota pool rather than the standard
pool", docs.cloud.google.com/managed-spark/docs/guides/dws-serverless, read 2026-12-07); for GKE no
page read says so: UNVERIFIED. A SPECIFIC reservation's VMs were counted when the reservation was made.

Besides the GPUs, what a new project may lack (docs/preflight.md, "CPU and network quota"): the vCPUs
of the GPU machines, per region (`cpu_metric`: which vCPU quota a GPU machine series draws on is not
stated in the pages read, 2026-12: UNVERIFIED), and the VPC networks the stack creates, a project quota
that counts the default network too (cloud.google.com/vpc/docs/quota, "Networks ... This includes the
default network, which you can remove", read 2026-12; its default limit is not published there, only on
the project's Quotas page). No stack is refused for either: the render lists them, `tools/preflight.py`
compares them with the project's limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.catalog import load_catalog

# accelerator type -> the Compute Engine quota metric of its on-demand GPUs. T4 to H100: the Compute
# API's Quota.metric enum (its discovery document, as googleapis.deno.dev/v1/compute:v1 lists it, read
# 2026-12-07); the newer ones follow the same pattern and are seen in public field reports only:
# UNVERIFIED until a project's `gcloud compute regions describe` or Quotas page shows them.
GPU_QUOTA_METRICS: dict[str, str] = {
    "nvidia-tesla-t4": "NVIDIA_T4_GPUS",
    "nvidia-tesla-v100": "NVIDIA_V100_GPUS",
    "nvidia-tesla-p100": "NVIDIA_P100_GPUS",
    "nvidia-tesla-p4": "NVIDIA_P4_GPUS",
    "nvidia-l4": "NVIDIA_L4_GPUS",
    "nvidia-tesla-a100": "NVIDIA_A100_GPUS",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB_GPUS",
    "nvidia-h100-80gb": "NVIDIA_H100_GPUS",
    "nvidia-h100-mega-80gb": "NVIDIA_H100_MEGA_GPUS",
    "nvidia-h200-141gb": "NVIDIA_H200_GPUS",
    "nvidia-b200": "NVIDIA_B200_GPUS",
    "nvidia-gb200": "NVIDIA_GB200_GPUS",
    "nvidia-gb300": "NVIDIA_GB300_GPUS",
    "nvidia-rtx-pro-6000": "NVIDIA_RTX_PRO_6000_GPUS",
}
VERIFIED_METRICS = frozenset(
    GPU_QUOTA_METRICS[a]
    for a in (
        "nvidia-tesla-t4",
        "nvidia-tesla-v100",
        "nvidia-tesla-p100",
        "nvidia-tesla-p4",
        "nvidia-l4",
        "nvidia-tesla-a100",
        "nvidia-a100-80gb",
        "nvidia-h100-80gb",
    )
)
ALL_REGIONS = "GPUS_ALL_REGIONS"
PREEMPTIBLE = "PREEMPTIBLE_"
# A Local SSD partition is 375 GB (Compute Engine "About Local SSD disks").
LOCAL_SSD_GB = 375


# The Compute API's Quota.metric names for vCPUs (its enum, as Google's client libraries list it,
# read 2026-12: cloud.google.com/dotnet/docs/reference/Google.Cloud.Compute.V1/latest/
# Google.Cloud.Compute.V1.Quota.Types.Metric): CPUS ("Guest CPUs") and per-series ones such as
# A2_CPUS; no A3, A4, G2 or G4 metric is among them. Which one a GPU machine's vCPUs draw on:
# UNVERIFIED, every CPU line is marked so.
CPUS = "CPUS"
SERIES_CPU_METRICS = {"a2": "A2_CPUS"}
# The VPC networks of a project (the same enum's NETWORKS; the excerpt read stops before it: UNVERIFIED).
NETWORKS = "NETWORKS"


def preemptible(metric: str) -> str:
    return PREEMPTIBLE + metric


def cpu_metric(machine_type: str, kind: str) -> str:
    """The vCPU quota metric a machine type's VMs are counted against, as far as the names tell: the
    series' own where the enum has one, else CPUS; the preemptible one for Spot and DWS (as for GPUs)."""
    base = SERIES_CPU_METRICS.get(machine_type.split("-", 1)[0], CPUS)
    return preemptible(CPUS) if kind in ("spot", "dws") else base


def network_quota(project: str, networks: list[str]) -> list[QuotaLine]:
    """The VPC networks the stack creates in `project`, against the project's NETWORKS quota (which
    counts the default network and any other already there: the live check reads the usage)."""
    if not networks:
        return []
    return [QuotaLine(project, "global", NETWORKS, len(networks), "networks", list(networks), verified=False)]


@dataclass
class QuotaLine:
    project: str
    region: str
    metric: str
    amount: int | None
    """The most the pools can ask for; None where no limit is declared (an Autopilot GPU profile
    takes what its Pods ask)."""
    kind: str
    """on-demand, spot, dws (flex-start or queued provisioning), reserved, or all (GPUS_ALL_REGIONS)."""
    pools: list[str] = field(default_factory=list)
    verified: bool = True

    def key(self) -> tuple[str, str, str]:
        return (self.project, self.region, self.metric)


def region_of(location: str) -> str:
    """A zone's region (`us-central1-a` -> `us-central1`); a region as it is."""
    parts = location.split("-")
    return "-".join(parts[:2]) if len(parts) == 3 and len(parts[2]) == 1 else location


def _get(data: Any, *path: str) -> Any:
    for part in path:
        if isinstance(data, list) and part.isdigit():
            data = data[int(part)] if int(part) < len(data) else None
        elif isinstance(data, Mapping):
            data = data.get(part)
        else:
            return None
    return data


def _kind(node_config: Mapping[str, Any], queued: bool) -> str:
    if str(_get(node_config, "reservationAffinity", "consumeReservationType")) == "SPECIFIC_RESERVATION":
        return "reserved"
    if node_config.get("flexStart") is True or queued:
        return "dws"
    return "spot" if node_config.get("spot") is True else "on-demand"


def _metric(accelerator: str, kind: str) -> str:
    base = GPU_QUOTA_METRICS.get(accelerator, f"(no metric known for {accelerator})")
    return preemptible(base) if kind in ("spot", "dws") else base


def node_pool_quota(project: str, inputs: Mapping[str, Any], name: str) -> list[QuotaLine]:
    """The quota lines one rendered NodePool can use up: its GPUs (and the Local SSDs its machine
    type comes with, which count against the region's Local SSD quota)."""
    node_config = inputs.get("nodeConfig") or {}
    accelerator = _get(node_config, "guestAccelerators", "0", "type")
    nodes = _get(inputs, "autoscaling", "totalMaxNodeCount")
    location = inputs.get("location")
    if not isinstance(accelerator, str) or not isinstance(location, str) or not isinstance(nodes, int):
        return []
    count = _get(node_config, "guestAccelerators", "0", "count")
    gpus = nodes * count if isinstance(count, int) else None
    kind = _kind(node_config, _get(inputs, "queuedProvisioning", "enabled") is True)
    region = region_of(location)
    if kind == "reserved":
        # The reservation holds the VMs (and was counted against quota when it was made).
        names = _get(node_config, "reservationAffinity", "values") or []
        metric = "reservation " + ",".join(str(n) for n in names)
        return [QuotaLine(project, region, metric, gpus, kind, [name])]
    metric = _metric(accelerator, kind)
    base = metric.removeprefix(PREEMPTIBLE)
    lines = [
        QuotaLine(project, region, metric, gpus, kind, [name], verified=base in VERIFIED_METRICS),
        QuotaLine(project, "global", ALL_REGIONS, gpus, "all", [name]),
    ]
    machine = _get(node_config, "machineType")
    gpu = load_catalog().accelerator(accelerator)
    found = gpu.machine_type(machine) if gpu is not None and isinstance(machine, str) else None
    if found is not None and isinstance(machine, str):
        lines.append(
            QuotaLine(
                project, region, cpu_metric(machine, kind), nodes * found.vcpus, kind, [name], verified=False
            )
        )
    ssds = _get(node_config, "ephemeralStorageLocalSsdConfig", "localSsdCount")
    if isinstance(ssds, int) and ssds:
        # Whether a machine type's bundled Local SSDs count against these is UNVERIFIED.
        ssd_metric = "PREEMPTIBLE_LOCAL_SSD_GB" if kind in ("spot", "dws") else "LOCAL_SSD_TOTAL_GB"
        lines.append(
            QuotaLine(project, region, ssd_metric, nodes * ssds * LOCAL_SSD_GB, kind, [name], verified=False)
        )
    return lines


def compute_class_quota(project: str, region: str, inputs: Mapping[str, Any], name: str) -> list[QuotaLine]:
    """An Autopilot GPU profile (a ComputeClass): the metric of each of its priorities, without a
    ceiling (its nodes come and go with the Pods that ask for them)."""
    lines = []
    for priority in _get(inputs, "spec", "priorities") or []:
        accelerator = _get(priority, "gpu", "type")
        if not isinstance(accelerator, str):
            continue
        kind = (
            "reserved" if priority.get("reservations") else ("spot" if priority.get("spot") else "on-demand")
        )
        metric = _metric(accelerator, kind)
        verified = metric.removeprefix(PREEMPTIBLE) in VERIFIED_METRICS
        lines.append(QuotaLine(project, region, metric, None, kind, [name], verified=verified))
    if lines:
        lines.append(QuotaLine(project, "global", ALL_REGIONS, None, "all", [name]))
    return lines


def merge(lines: list[QuotaLine]) -> list[QuotaLine]:
    """One line per (project, region, metric), amounts added (None when any is unbounded)."""
    merged: dict[tuple[str, str, str], QuotaLine] = {}
    for line in lines:
        seen = merged.get(line.key())
        if seen is None:
            merged[line.key()] = QuotaLine(**{**line.__dict__, "pools": list(line.pools)})
            continue
        seen.amount = None if seen.amount is None or line.amount is None else seen.amount + line.amount
        seen.pools += [p for p in line.pools if p not in seen.pools]
        seen.verified = seen.verified and line.verified
    return sorted(merged.values(), key=lambda q: (q.project, q.region != "global", q.region, q.metric))


def gpu_metrics_of_catalog() -> set[str]:
    """Every accelerator the catalog sells, for the test that each has a metric."""
    return set(load_catalog().accelerators)
