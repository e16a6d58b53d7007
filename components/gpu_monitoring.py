"""GPU monitoring: the DCGM exporter when self-managed, a Cloud Monitoring dashboard, alert policies."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import pulumi
from pulumi_gcp import monitoring

from .alert_rules import EVALUATION_INTERVAL, RULE_GROUP, AlertRule, alert_rules
from .config import AlertSettings
from .dashboard import gpu_dashboard
from .dcgm_exporter import DcgmExporter, DcgmExporterArgs
from .package import component_options, component_type


@dataclass(frozen=True, kw_only=True)
class GpuMonitoringArgs:
    project: str | None
    cluster_name: str
    dcgm: Literal["managed", "exporter", "none"]
    # Where the self-managed exporter runs (dcgm: exporter).
    exporter: DcgmExporterArgs | None = None
    dashboard: bool = True
    alerts: AlertSettings | None = None
    # The namespace whose Pods may scrape the exporter (settings.monitoring.scraper_namespace);
    # overrides the exporter args' own when set.
    scraper_namespace: str | None = None


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
        super().__init__(
            component_type("GpuMonitoring"), name, None, component_options("GpuMonitoring", opts)
        )
        child = pulumi.ResourceOptions(parent=self)

        self.exporter: DcgmExporter | None = None
        if args.dcgm == "exporter":
            assert args.exporter is not None, "dcgm: exporter needs exporter args"
            exporter = args.exporter
            if args.scraper_namespace is not None:
                exporter = replace(exporter, scraper_namespace=args.scraper_namespace)
            self.exporter = DcgmExporter(f"{name}-dcgm", exporter, opts=child)

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


def alert_policies(cluster: str, dcgm: str, alerts: AlertSettings) -> dict[str, dict[str, Any]]:
    """Alert policy arguments keyed by a short name; PromQL over Managed Service for Prometheus.

    The rules themselves (query, duration, words) live in components.alert_rules, which the tests
    also turn into a Prometheus rules file and run through promtool.
    """
    return {
        rule.key: _policy(rule, channels=alerts.notification_channels)
        for rule in alert_rules(cluster, dcgm, alerts)
    }


def _policy(rule: AlertRule, *, channels: Sequence[str]) -> dict[str, Any]:
    return {
        "display_name": rule.display_name,
        "combiner": "OR",
        "severity": rule.severity,
        "notification_channels": list(channels),
        "documentation": monitoring.AlertPolicyDocumentationArgs(
            content=rule.documentation, mime_type="text/markdown"
        ),
        "user_labels": {"managed-by": "pulumi", "app": "gke-gpu"},
        "conditions": [
            monitoring.AlertPolicyConditionArgs(
                display_name=rule.condition,
                condition_prometheus_query_language=monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
                    query=rule.query,
                    duration=rule.duration,
                    evaluation_interval=EVALUATION_INTERVAL,
                    # Name the rule as a Prometheus rules file would: the tests rebuild that file
                    # from these conditions.
                    rule_group=RULE_GROUP,
                    alert_rule=rule.alert,
                    # The DCGM series only exist once a GPU node has run: create the policy anyway.
                    disable_metric_validation=True,
                ),
            )
        ],
    }
