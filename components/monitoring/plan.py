"""Monitoring's plan: the cluster's monitoring section, resolved, turned into GpuMonitoring's args (the
DCGM source, the dashboard, the alerts, the exporter and where it runs) and the stack output
`monitoring`, as data. Pure: the stack layer declares what this plans (stack/program_jobs.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NotRequired, TypedDict, cast

from ..core import images
from ..core.arg_types import DcgmFlavor
from ..core.image_digests import digests_for
from ..gpu.existing_plan import ExistingGpuPlan
from ..gpu.pool import GpuPool
from ..gpu.scheduling import GPU_TOLERATION, tolerations, union_tolerations
from .model import DcgmSource, MonitoringConfig, ScrapeMode

if TYPE_CHECKING:
    from ..core.k8s import Toleration
    from .dcgm_exporter_args import DcgmExporterSettings
    from .gpu_monitoring import AlertPolicies, GpuMonitoring, GpuMonitoringArgs


class MonitoringSummary(TypedDict):
    """The stack output `monitoring`: the DCGM source, the dashboards' URLs, the alert policies."""

    dcgm: str | None
    dashboardUrl: Any
    fleetDashboardUrl: NotRequired[Any]
    alerts: list[Any]


class MonitoredCluster(NamedTuple):
    """What GpuMonitoring reads of its cluster besides the monitoring section: where it is, whether it
    serves models (the dashboard's model-server section, the backlog alert), the fleet workers it
    manages (name, GKE cluster name), and the digests that pin the exporter's image."""

    project: str | None
    cluster_name: str | None
    serving: bool = False
    fleet_workers: Sequence[tuple[str, str]] = ()
    image_digests: Mapping[str, str] | None = None


def gke_exporter(m: MonitoringConfig, pools: Sequence[GpuPool], *, autopilot: bool) -> DcgmExporterSettings:
    """Where the self-managed exporter runs on GKE: every GPU pool (their tolerations, the GPU taint
    once)."""
    assert m.scraper_namespace is not None, "the settings name the scraper's namespace"
    # The enums' plain values ("Exists"), which the args' check takes as well as the members.
    tolerated = union_tolerations(tolerations(pool, autopilot=autopilot) for pool in pools)
    return {
        "flavor": DcgmFlavor.GKE,
        "tolerations": cast("list[Toleration]", tolerated or [dict(GPU_TOLERATION)]),
        "scrape": ScrapeMode(m.scrape or "podMonitoring"),
        "scraper_namespace": m.scraper_namespace,
    }


def existing_exporter(m: MonitoringConfig, gpu: ExistingGpuPlan) -> DcgmExporterSettings:
    """Where the self-managed exporter runs on a cluster the program does not manage: the GPU nodes by
    their label (a generic cluster, scraped by a ServiceMonitor by default), or GKE's GPU nodes."""
    gpu_taint = cast("list[Toleration]", [dict(GPU_TOLERATION)])
    scraper_namespace = m.scraper_namespace or ""
    if not gpu.generic:
        return {
            "flavor": DcgmFlavor.GKE,
            "tolerations": gpu_taint,
            "scrape": ScrapeMode(m.scrape or "podMonitoring"),
            "scraper_namespace": scraper_namespace,
        }
    exporter: DcgmExporterSettings = {
        "flavor": DcgmFlavor.GENERIC,
        "node_selector": dict(gpu.node_selector),
        "required_node_labels": [],
        "tolerations": gpu_taint,
        "scrape": ScrapeMode(m.scrape or "serviceMonitor"),
        "scraper_namespace": scraper_namespace,
    }
    if gpu.runtime_class_name is not None:
        exporter["runtime_class_name"] = gpu.runtime_class_name
    return exporter


def monitoring_args(
    m: MonitoringConfig, cluster: MonitoredCluster, exporter: DcgmExporterSettings | None
) -> GpuMonitoringArgs | None:
    """GpuMonitoring's args, or None where the cluster has nothing of it (`exporter`: where the
    self-managed exporter runs, for `dcgm: exporter`)."""
    if m.dcgm != "exporter" and not m.dashboard and not m.alerts.enabled:
        return None
    assert m.dcgm is not None and m.dashboard is not None, "the settings resolve both"
    args: GpuMonitoringArgs = {"dcgm": DcgmSource(m.dcgm), "dashboard": m.dashboard}
    if cluster.project:
        args["project"] = cluster.project
    if cluster.cluster_name:
        args["cluster_name"] = cluster.cluster_name
    if cluster.serving and (m.dashboard or m.alerts.enabled):
        # The dashboard's model-server section and the backlog alert.
        args["serving"] = True
    if cluster.fleet_workers and (m.dashboard or m.alerts.enabled):
        # The fleet's dashboard and worker-unreachable alert, on the manager (this cluster).
        args["fleet_workers"] = [{"name": name, "cluster_name": gke} for name, gke in cluster.fleet_workers]
    if m.dcgm == "exporter":
        assert exporter is not None, "dcgm: exporter runs somewhere"
        digests = digests_for(dict(cluster.image_digests or {}), [images.DCGM_EXPORTER])
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
        if cluster.serving:
            alerts["serving_queue_backlog"] = m.alerts.serving_queue_backlog
        args["alerts"] = alerts
    return args


def monitoring_summary(m: MonitoringConfig, monitoring: GpuMonitoring | None) -> MonitoringSummary:
    """The stack output `monitoring`: the DCGM source, the dashboards' URLs, the alert policies."""
    summary: MonitoringSummary = {
        "dcgm": m.dcgm,
        "dashboardUrl": monitoring.dashboard_url if monitoring and monitoring.dashboard_url else None,
        "alerts": [],
    }
    if monitoring and monitoring.fleet_dashboard_url:
        summary["fleetDashboardUrl"] = monitoring.fleet_dashboard_url
    summary["alerts"] = [p.display_name for p in monitoring.alert_policies] if monitoring else []
    return summary
