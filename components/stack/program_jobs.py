"""What a cluster runs on its GPU pools, declared for the stack's own cluster (`program.build`) and for
each fleet worker (`program_fleet`): the samples, Kueue with the teams' queues, the all-reduce tests, the
DRANET claim templates, the teams' training data, and GPU monitoring."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pulumi

from ..core import images
from ..core.image_digests import digests_for
from ..core.k8s import Toleration
from ..gpu.scheduling import GPU_TOLERATION, gpus_per_pod, node_selector, tolerations, union_tolerations
from ..monitoring.dcgm_exporter_args import DcgmExporterSettings, DcgmFlavor, ScrapeMode
from ..monitoring.gpu_monitoring import AlertPolicies, DcgmSource, GpuMonitoring, GpuMonitoringArgs
from ..workloads.samples import SampleWorkloads
from ..workloads.samples_args import GpuTarget, SampleKind, SampleWorkload, TargetSharing
from .config import GpuPool, Settings
from .declare import declare
from .program_batch import batch_queues, nccl_allreduce_tests, training_data
from .program_gpudirect import dranet_claim_templates
from .program_pools import GpuLayer

SAMPLES_NAMESPACE = "gpu-samples"


@dataclass(frozen=True)
class ClusterJobs:
    """What a cluster runs on its GPU pools, as stack outputs (`sampleWorkloads`, `batchQueues`,
    `trainingData`), and its Kueue component (None without `batch.kueue`)."""

    samples: dict[str, Any]
    batch: list[dict[str, Any]]
    data: dict[str, Any]
    queues: pulumi.Resource | None


def cluster_jobs(
    settings: Settings,
    provider: pulumi.ProviderResource,
    layer: GpuLayer,
    prefix: str = "",
    *,
    pods_ready_timeout_minutes: int | None = None,
) -> ClusterJobs:
    """Declare the samples, Kueue with the teams' queues, the all-reduce tests, the DRANET claim
    templates and the teams' training data of a cluster (a fleet worker's: `prefix`, and its Kueue's
    `waitForPodsReady` timeout)."""
    pools, software, driver = layer.pools, layer.software, layer.driver
    # The namespaces the admission policies confine are made only once the policies exist.
    guards = layer.guards
    autopilot = settings.cluster.autopilot
    targets = {pool.name: gpu_target(pool, autopilot=autopilot) for pool in settings.gpu_pools}
    samples, samples_component = declare_samples(
        settings, targets, provider, [*pools.values(), *([driver] if driver else [])], prefix
    )
    if not settings.batch.kueue:
        return ClusterJobs(samples, [], {}, None)
    batch, queues = batch_queues(
        settings,
        provider,
        [*pools.values(), *([samples_component] if samples_component else []), *guards],
        local_queue_namespace=SAMPLES_NAMESPACE if samples_component else None,
        prefix=prefix,
        pods_ready_timeout_minutes=pods_ready_timeout_minutes,
    )
    samples.update(
        nccl_allreduce_tests(
            settings, provider, [queues, *software, *guards, *([driver] if driver else [])], prefix
        )
    )
    dranet_claim_templates(settings, provider, [queues], prefix)
    data = training_data(settings, provider, [queues], prefix)
    return ClusterJobs(samples, batch, data, queues)


def cluster_monitoring(settings: Settings, provider: pulumi.ProviderResource, prefix: str) -> dict[str, Any]:
    """A fleet worker's GPU monitoring, as `build` declares a cluster's (its resource names prefixed);
    returns its summary."""
    kubernetes = pulumi.ResourceOptions(providers={"kubernetes": provider})
    return monitoring_summary(settings, declare_monitoring(settings, kubernetes, prefix=prefix))


def declare_monitoring(
    settings: Settings,
    kubernetes: pulumi.ResourceOptions,
    exporter: DcgmExporterSettings | None = None,
    prefix: str = "",
) -> GpuMonitoring | None:
    """The monitoring component; `exporter` says where the exporter runs (default: the GKE pools)."""
    m = settings.monitoring
    if m.dcgm != "exporter" and not m.dashboard and not m.alerts.enabled:
        return None
    assert m.dcgm is not None and m.dashboard is not None, "the settings resolve both"
    args: GpuMonitoringArgs = {"dcgm": DcgmSource(m.dcgm), "dashboard": m.dashboard}
    if settings.project:
        args["project"] = settings.project
    if settings.cluster.name:
        args["cluster_name"] = settings.cluster.name
    if settings.serving and (m.dashboard or m.alerts.enabled):
        # The dashboard's model-server section and the backlog alert.
        args["serving"] = True
    if settings.fleet is not None and (m.dashboard or m.alerts.enabled):
        # The fleet's dashboard and worker-unreachable alert, on the manager (this cluster).
        args["fleet_workers"] = [
            {"name": w.name, "cluster_name": w.settings.cluster.name or w.name}
            for w in settings.fleet.workers
        ]
    if m.dcgm == "exporter":
        assert m.scraper_namespace is not None, "the settings name the scraper's namespace"
        if not exporter:
            exporter = {
                "flavor": DcgmFlavor.GKE,
                "tolerations": _union(
                    tolerations(pool, autopilot=settings.cluster.autopilot) for pool in settings.gpu_pools
                ),
                "scrape": ScrapeMode(m.scrape or "podMonitoring"),
                "scraper_namespace": m.scraper_namespace,
            }
        digests = digests_for(settings.image_digests, [images.DCGM_EXPORTER])
        if digests:
            exporter = {**exporter, "image_digests": digests}
        args["exporter"] = exporter
    if m.alerts.enabled:
        alerts: AlertPolicies = {
            "notification_channels": list(m.alerts.notification_channels),
            "idle_gpu_minutes": m.alerts.idle_gpu_minutes,
            "idle_gpu_utilization_percent": m.alerts.idle_gpu_utilization_percent,
            "xid_errors": m.alerts.xid_errors,
        }
        if settings.serving:
            alerts["serving_queue_backlog"] = m.alerts.serving_queue_backlog
        args["alerts"] = alerts
    return declare(GpuMonitoring, f"{prefix}monitoring", args, opts=kubernetes)


def _union(groups: Any) -> list[Toleration]:
    """Tolerations of several pools without repeats (the GPU taint once)."""
    # The enums' plain values ("Exists"), which the args' check takes as well as the members.
    return cast("list[Toleration]", union_tolerations(groups) or [dict(GPU_TOLERATION)])


def declare_samples(
    settings: Settings,
    targets: dict[str, GpuTarget],
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
    prefix: str = "",
) -> tuple[dict[str, dict[str, str]], pulumi.Resource | None]:
    """Declare the opted-in samples; return, per sample, how to wait for it and read its log (and
    the component, whose namespace the batch queues' LocalQueues use)."""
    # nccl-allreduce is a NcclAllReduce of its own, queued by Kueue (stack/program_batch.py);
    # serving-load a ServingLoadTest beside its service (stack/program_serving.py).
    samples_listed = [w for w in settings.workloads if w.name not in ("nccl-allreduce", "serving-load")]
    if not samples_listed:
        return {}, None
    default = next(iter(targets))
    workloads: list[SampleWorkload] = []
    for w in samples_listed:
        target = targets[w.pool or default].copy()
        workload: SampleWorkload = {"kind": SampleKind(w.name), "target": target}
        if w.replicas is not None:
            workload["replicas"] = w.replicas
        workloads.append(workload)
    samples = declare(
        SampleWorkloads,
        f"{prefix}samples",
        {"workloads": workloads, "namespace": SAMPLES_NAMESPACE},
        # The GPU pools, ComputeClasses or device plugin first, so no sample waits on nothing.
        opts=pulumi.ResourceOptions(provider=provider, depends_on=depends_on),
    )
    return samples.commands, samples


def gpu_target(pool: GpuPool, *, autopilot: bool) -> GpuTarget:
    """Where a sample runs on a GKE pool or profile (optional keys left out, never None)."""
    target = GpuTarget(
        name=pool.name,
        accelerator=pool.accelerator,
        node_selector=node_selector(pool, autopilot=autopilot),
        # The enums' plain values ("Exists"), which the args' check takes as well as the members.
        tolerations=cast("list[Toleration]", tolerations(pool, autopilot=autopilot)),
        gpus_per_pod=gpus_per_pod(pool, autopilot=autopilot),
    )
    if pool.sharing:
        target["sharing"] = TargetSharing(pool.sharing.strategy)
        target["shared_clients"] = pool.sharing.max_clients_per_gpu
    if pool.dra_gpus:
        # The DRA driver's kubelet plugin injects the driver (CDI), not GKE's device plugin.
        target["dra_gpus"] = True
        target["gke_driver"] = False
    else:
        target["gke_driver"] = True
    return target


def monitoring_summary(settings: Settings, monitoring: GpuMonitoring | None) -> dict[str, Any]:
    m = settings.monitoring
    return {
        "dcgm": m.dcgm,
        "dashboardUrl": monitoring.dashboard_url if monitoring and monitoring.dashboard_url else None,
        **(
            {"fleetDashboardUrl": monitoring.fleet_dashboard_url}
            if monitoring and monitoring.fleet_dashboard_url
            else {}
        ),
        "alerts": [p.display_name for p in monitoring.alert_policies] if monitoring else [],
    }
