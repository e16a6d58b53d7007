"""GPU monitoring: the DCGM exporter when self-managed, a Cloud Monitoring dashboard, alert policies."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pulumi
from pulumi_gcp import monitoring

from components.config import AlertSettings
from components.dashboard import gpu_dashboard
from components.dcgm_exporter import DcgmExporter, DcgmExporterArgs


@dataclass(frozen=True, kw_only=True)
class GpuMonitoringArgs:
    project: str | None
    cluster_name: str
    dcgm: Literal["managed", "exporter", "none"]
    # Where the self-managed exporter runs (dcgm: exporter).
    exporter: DcgmExporterArgs | None = None
    dashboard: bool = True
    alerts: AlertSettings | None = None


class GpuMonitoring(pulumi.ComponentResource):
    """DCGM collection (GKE-managed DCGM is switched on in the cluster itself; this component adds
    the self-managed exporter), the GPU dashboard, and alerts for idle GPUs and XID errors.

    Alerts: an idle GPU node (utilization under a threshold for a long window: money burning) and,
    where DCGM exports it (the exporter; GKE's managed set has no XID field), any XID error. Both
    notify the configured channels; without channels the config refuses alerts.
    """

    dashboard_url: pulumi.Output[str] | None
    alert_policies: list[monitoring.AlertPolicy]

    def __init__(
        self, name: str, args: GpuMonitoringArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gke-gpu:monitoring:GpuMonitoring", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        self.exporter: DcgmExporter | None = None
        if args.dcgm == "exporter":
            assert args.exporter is not None, "dcgm: exporter needs exporter args"
            self.exporter = DcgmExporter(f"{name}-dcgm", args.exporter, opts=child)

        self.dashboard: monitoring.Dashboard | None = None
        self.dashboard_url = None
        if args.dashboard:
            document = gpu_dashboard(
                cluster=args.cluster_name,
                display_name=f"GPUs: {args.cluster_name}",
                dcgm=args.dcgm != "none",
            )
            self.dashboard = monitoring.Dashboard(
                f"{name}-dashboard",
                project=args.project,
                dashboard_json=json.dumps(document, sort_keys=True),
                opts=child,
            )
            project = args.project
            self.dashboard_url = self.dashboard.id.apply(
                lambda dashboard_id: (
                    "https://console.cloud.google.com/monitoring/dashboards/builder/"
                    f"{dashboard_id.rsplit('/', 1)[-1]}?project={project}"
                )
            )

        self.alert_policies = []
        if args.alerts is not None:
            for key, policy in alert_policies(args.cluster_name, args.dcgm, args.alerts).items():
                self.alert_policies.append(
                    monitoring.AlertPolicy(f"{name}-{key}", project=args.project, **policy, opts=child)
                )
        self.register_outputs(
            {
                "dashboardUrl": self.dashboard_url,
                "alertPolicies": [p.name for p in self.alert_policies],
            }
        )


# The idle condition is measured over a short window and must hold for the whole configured time
# (the policy's duration): a node that just scaled up from zero and is still pulling an image has a
# few idle samples, which would otherwise already average under the threshold.
IDLE_WINDOW = "10m"


def alert_policies(cluster: str, dcgm: str, alerts: AlertSettings) -> dict[str, dict[str, Any]]:
    """Alert policy arguments keyed by a short name; PromQL over Managed Service for Prometheus."""
    minutes = alerts.idle_gpu_minutes
    threshold = f"{alerts.idle_gpu_utilization_percent:g}"
    if dcgm != "none":
        # DCGM reports 0 for an idle GPU. MIG partitions have no utilization field, so MIG pools
        # cannot raise this alert.
        idle_query = (
            "avg by (cluster, Hostname, gpu, modelName) "
            f'(avg_over_time(DCGM_FI_DEV_GPU_UTIL{{cluster="{cluster}"}}[{IDLE_WINDOW}])) < {threshold}'
        )
        source = "DCGM GPU utilization"
    else:
        # GKE's duty cycle may have no sample at all for an idle GPU, so start from the GPUs that
        # exist (their memory_total series) and drop those that were busy.
        selector = f'{{monitored_resource="k8s_node",cluster_name="{cluster}"}}'
        keys = "cluster_name, node_name, accelerator_id"
        busy = (
            f"avg by ({keys}) (avg_over_time("
            f"kubernetes_io:node_accelerator_duty_cycle{selector}[{IDLE_WINDOW}])) >= {threshold}"
        )
        idle_query = (
            f"max by ({keys}) (kubernetes_io:node_accelerator_memory_total{selector}) "
            f"unless on ({keys}) ({busy})"
        )
        source = "GKE accelerator duty cycle"
    policies = {
        "idle-gpu": _policy(
            display_name=f"GPU idle on {cluster}",
            condition=f"GPU under {threshold}% for {minutes} min ({source})",
            query=idle_query,
            duration=f"{minutes * 60}s",
            severity="WARNING",
            channels=alerts.notification_channels,
            documentation=(
                f"A GPU of cluster `{cluster}` has stayed under {threshold}% utilization for {minutes} "
                "minutes while its node is up: it is billed but idle. Check what holds it "
                "(`kubectl get pods -A -o wide` on that node), scale the workload down, or lower the "
                "pool's minNodes so the autoscaler can remove the node."
            ),
        )
    }
    if alerts.xid_errors and dcgm == "exporter":
        # DCGM_FI_DEV_XID_ERRORS holds the *last* XID code and never returns to 0 (NVIDIA/DCGM#277):
        # alert on a change, so the alert fires for a new error and then resolves.
        policies["xid-errors"] = _policy(
            display_name=f"GPU XID error on {cluster}",
            condition="DCGM reports a new XID error",
            query=(
                "max by (cluster, Hostname, gpu) "
                f'(changes(DCGM_FI_DEV_XID_ERRORS{{cluster="{cluster}"}}[5m])) > 0'
            ),
            duration="0s",
            severity="CRITICAL",
            channels=alerts.notification_channels,
            documentation=(
                f"A GPU of cluster `{cluster}` raised an NVIDIA XID error; the metric's value is the XID "
                "code (see NVIDIA's XID catalog). Codes such as 48, 63, 64, 74, 79, 94, 95 point at "
                "hardware or NVLink faults: cordon and drain the node and let GKE repair or replace it. "
                "Application errors (13, 31, 43, 45) fire it too."
            ),
        )
    return policies


def _policy(
    *,
    display_name: str,
    condition: str,
    query: str,
    duration: str,
    severity: str,
    channels: Sequence[str],
    documentation: str,
) -> dict[str, Any]:
    return {
        "display_name": display_name,
        "combiner": "OR",
        "severity": severity,
        "notification_channels": list(channels),
        "documentation": monitoring.AlertPolicyDocumentationArgs(
            content=documentation, mime_type="text/markdown"
        ),
        "user_labels": {"managed-by": "pulumi", "app": "gke-gpu"},
        "conditions": [
            monitoring.AlertPolicyConditionArgs(
                display_name=condition,
                condition_prometheus_query_language=monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
                    query=query,
                    duration=duration,
                    evaluation_interval="60s",
                    # The DCGM series only exist once a GPU node has run: create the policy anyway.
                    disable_metric_validation=True,
                ),
            )
        ],
    }
